#!/usr/bin/env bats
# sage-sandbox run: Sage's output, exit status and JSON, for real.

load helpers

seed=$BATS_TEST_DIRNAME/../examples/seed.sage
seed_output='x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4
181118435328'

@test "run - the seed example prints its factorisation and discriminant exactly" {
	input_file=$seed
	run_ss 0 run
	expect_equal "$output" "$seed_output"
	expect_equal "$errors" "" "stderr"
}

@test "run FILE and run - read the same code from a file and from stdin" {
	run_ss 0 run "$seed"
	expect_equal "$output" "$seed_output"
	input_file=$seed
	run_ss 0 run -
	expect_equal "$output" "$seed_output"
}

@test "run - Sage's stdout goes to stdout and its stderr to stderr" {
	sage 'import sys
print("to out")
sys.stderr.write("to err\n")' 0 run
	expect_equal "$output" "to out"
	expect_equal "$errors" "to err"
}

@test "run - an uncaught exception exits 1 with the traceback on stderr" {
	sage 'raise ValueError("boom")' 1 run
	expect_equal "$output" ""
	expect_match "$errors" "Traceback"
	expect_match "$errors" "ValueError: boom"
}

@test "run - Sage's own exit status passes through" {
	sage 'import os; os._exit(7)' 7 run
	sage 'import os; os._exit(0)' 0 run
}

@test "run - Sage killed by a signal exits 128+N and --json names the signal" {
	sage 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)' 137 run --json
	expect_equal "$(json_get 'j["signal"]')" SIGKILL
	expect_equal "$(json_get 'j["exit_code"]')" 137
	expect_equal "$(json_get 'j["ok"]')" false
}

@test "run --json - the result object has every field, and ok true on success" {
	input_file=$seed
	run_ss 0 run --json
	expect_equal "$(json_get 'sorted(j)')" '["cpu_limit_exceeded", "duration_ms", "error", "exit_code", "file", "files", "files_not_saved", "files_not_saved_count", "memory_limit_exceeded", "ok", "output_limit_exceeded", "sandbox", "schema_version", "signal", "stderr", "stdin_truncated", "stdout", "stopped_by", "throttled", "timed_out", "truncated"]'
	expect_equal "$(json_get 'j["schema_version"], j["error"], j["stopped_by"], j["file"]')" '[1, null, null, null]'
	# Without --output-dir nothing comes back, and the object says so.
	expect_equal "$(json_get 'j["files"], j["files_not_saved"], j["files_not_saved_count"]')" '[null, null, 0]'
	expect_equal "$(json_get 'j["ok"]')" true
	expect_equal "$(json_get 'j["exit_code"]')" 0
	expect_equal "$(json_get 'j["signal"]')" null
	expect_equal "$(json_get 'j["timed_out"]')" false
	expect_equal "$(json_get 'j["output_limit_exceeded"]')" false
	expect_equal "$(json_get 'j["memory_limit_exceeded"]')" false
	expect_equal "$(json_get 'j["stdout"]')" "$seed_output"
	expect_equal "$(json_get 'j["stderr"]')" ""
	expect_equal "$(json_get 'j["truncated"]')" '{"stdout": false, "stderr": false, "max_bytes_per_stream": 262144}'
	expect_match "$(json_get 'j["duration_ms"]')" '^[0-9]+$'
	# The image the suite runs on (SAGE_SANDBOX_IMAGE), else the default.
	expect_equal "$(json_get 'j["sandbox"]["image"]')" "$IMAGE"
	expect_equal "$(json_get 'j["sandbox"]["network"]')" none
	expect_equal "$(json_get 'j["sandbox"]["user"]')" "a uid of its own, 10000-59999, not root"
	expect_equal "$errors" "" "stderr"
}

@test "run --json - an exception gives ok false, exit_code 1 and the traceback in stderr" {
	sage '1/0' 1 run --json
	expect_equal "$(json_get 'j["ok"]')" false
	expect_equal "$(json_get 'j["exit_code"]')" 1
	expect_match "$(json_get 'j["stderr"]')" "ZeroDivisionError"
}

@test "run --json - all 256 byte values on stdout and stderr still give valid JSON" {
	sage 'import sys
sys.stdout.buffer.write(bytes(range(256)))
sys.stderr.buffer.write(b"\xff\xfe\xc3\x28 \xed\xa0\x80 ok \xe2\x82\xac")' 0 run --json
	# json_get decodes strict UTF-8: invalid bytes in the output would fail it.
	expect_equal "$(json_get 'j["stdout"] == "".join(map(chr, range(128))) + "\ufffd" * 128')" true
	expect_equal "$(json_get 'j["stderr"]')" "$(printf '\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd( \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd ok \xe2\x82\xac')"
}

@test "run --json - U+2028 and U+2029 in the output are written escaped, never raw" {
	# Valid raw in JSON, but line ends to JavaScript before ES2019.
	sage 'import sys
print("a\u2028b\u2029c")
print("\u2029", file=sys.stderr)' 0 run --json
	printf '%s' "$output" | python3 -c '
import sys
raw = sys.stdin.buffer.read()
assert b"\xe2\x80\xa8" not in raw and b"\xe2\x80\xa9" not in raw, "raw U+2028 or U+2029: %r" % raw
assert b"a\\u2028b\\u2029c" in raw, "no escapes: %r" % raw'
	expect_equal "$(json_get 'j["stdout"] == "a\u2028b\u2029c\n" and j["stderr"] == "\u2029\n"')" true
}

@test "run - a text-mode run passes bytes through unchanged" {
	sage 'import sys; sys.stdout.buffer.write(bytes(range(256)))' 0 run
	# $output drops NUL and the trailing newline; compare through a file instead.
	printf 'import sys; sys.stdout.buffer.write(bytes(range(256)))\n' |
		"$SAGE_SANDBOX" run >"$BATS_TEST_TMPDIR/bytes"
	python3 -c 'import sys; assert open(sys.argv[1], "rb").read() == bytes(range(256))' \
		"$BATS_TEST_TMPDIR/bytes"
}

@test "run - code that never reads stdin and a program that ignores it do not hang" {
	sage 'print(factor(2^32 + 1))' 0 run --timeout 60
	expect_equal "$output" "641 * 6700417"
	sage 'import sys; print(repr(sys.stdin.read()))' 0 run
	expect_equal "$output" "''"
}

@test "run - empty code runs and prints nothing" {
	input_file=/dev/null
	run_ss 0 run
	expect_equal "$output" ""
}

@test "run - the caller's environment does not reach the code" {
	SECRET_API_KEY=hunter2 sage 'import os
print(sorted(k for k in os.environ if "SECRET" in k or "hunter2" in os.environ[k]))
print(os.environ["HOME"], os.environ["DOT_SAGE"], os.environ["PYTHONNOUSERSITE"])' 0 run
	expect_equal "$output" "[]
/tmp/sage-home /tmp/dot-sage 1"
}

@test "run - 4 concurrent runs each get their own answer" {
	local i
	for i in 1 2 3 4; do
		printf 'print(factorial(%d))\n' "$((i + 10))" | "$SAGE_SANDBOX" run \
			>"$BATS_TEST_TMPDIR/out$i" 2>"$BATS_TEST_TMPDIR/err$i" &
		eval "pid$i=$!"
	done
	for i in 1 2 3 4; do
		eval "wait \$pid$i"
	done
	expect_equal "$(cat "$BATS_TEST_TMPDIR"/out{1,2,3,4})" "39916800
479001600
6227020800
87178291200"
	expect_equal "$(cat "$BATS_TEST_TMPDIR"/err{1,2,3,4})" "" "stderr"
}

@test "run - on a terminal the code's escape sequences are shown, not obeyed; --show-control-chars passes them" {
	command -v script >/dev/null || skip "needs script(1) from util-linux"
	printf '%s\n' 'import sys' \
		'sys.stdout.write("\x1b]52;c;aGk=\x07clip\x1b[2J\x9b\n")' \
		'sys.stderr.write("\x1b]0;title\x07\n")' >"$BATS_TEST_TMPDIR/esc.sage"
	# script(1) runs sage-sandbox on a pseudo-terminal and prints what reached it.
	output=$(script -qec "$SAGE_SANDBOX run $BATS_TEST_TMPDIR/esc.sage" /dev/null </dev/null)
	[[ $output != *$'\e'* ]] || { echo "# an ESC byte reached the terminal: $output" >&2; return 1; }
	expect_match "$output" '\^\[\]52;c;aGk=\^Gclip\^\[\[2J\\u009b' "stdout as shown"
	expect_match "$output" '\^\[\]0;title\^G' "stderr as shown"
	output=$(script -qec "$SAGE_SANDBOX run --show-control-chars $BATS_TEST_TMPDIR/esc.sage" /dev/null </dev/null)
	[[ $output == *$'\e]52;c;aGk=\a'* ]] || { echo "# raw bytes did not pass: $output" >&2; return 1; }
}

@test "run - code starting with a UTF-8 byte order mark runs; code that is not UTF-8 is refused" {
	printf '\xef\xbb\xbfprint("bom ok")\n' >"$BATS_TEST_TMPDIR/bom.sage"
	run_ss 0 run "$BATS_TEST_TMPDIR/bom.sage"
	expect_equal "$output" "bom ok"
	printf 'print("caf\xe9")\n' >"$BATS_TEST_TMPDIR/latin1.sage"
	run_ss 125 run "$BATS_TEST_TMPDIR/latin1.sage"
	expect_equal "$errors" "sage-sandbox: code from $BATS_TEST_TMPDIR/latin1.sage is not UTF-8: invalid byte at offset 10; save the file as UTF-8 (iconv -t UTF-8)"
}

# podman_wrapper ACTION: $BATS_TEST_TMPDIR/podman, the real podman but for
# run, create and start, which do the shell's ACTION instead.
podman_wrapper() {
	local real
	real=$(command -v podman)
	cat >"$BATS_TEST_TMPDIR/podman" <<-EOF
	#!/bin/sh
	for arg; do
	    case \$arg in run|create|start) $1 ;; -*) ;; *) break ;; esac
	done
	exec $real "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/podman"
}

@test "run - a podman that fails without a word is named as podman's failure, not the image's" {
	# A wrapper that answers every question but exits 1, silently, for
	# run, create and start: before issue 33 the image was blamed and
	# --python suggested.
	podman_wrapper "exit 1"
	# A fresh cache: the probe must run (the image's answer is cached).
	XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/podman \
		sage 'print(1)' 125 run
	expect_equal "$output" ""
	expect_no_match "$errors" "python"
	expect_match "$errors" "^sage-sandbox: podman failed to start a container \(status 1\) and said nothing; run '$BATS_TEST_TMPDIR/podman run --rm --pull=never $IMAGE true' as this user to see why$"
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1
	# One that exits 0 for the probe and runs nothing (attack helper 138):
	# the image was blamed, --python the fix.
	sed -i 's/exit 1 ;;/exit 0 ;;/' "$BATS_TEST_TMPDIR/podman"
	XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/podman \
		sage 'print(1)' 125 run
	expect_equal "$output" ""
	expect_equal "$errors" "sage-sandbox: podman exited 0 without running the image's /bin/sh (the image probe's first line is missing); run '$BATS_TEST_TMPDIR/podman run --rm --pull=never $IMAGE /bin/sh -c id' as this user to see what it does"
}

# Tagged any-podman: what it proves is ours, whichever podman the wrapper
# wraps, so podman 5's pass does not spend its 30 s wait again.
# bats test_tags=any-podman
@test "run - a podman that hangs is named as podman's, not the image's" {
	# The image was blamed, --python the fix, and batch's wait was told as
	# 70 s where it was 30 (attack helper 157).
	podman_wrapper "exec sleep 200"
	XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/podman \
		sage 'print(1)' 124 run --timeout 2
	expect_equal "$errors" "sage-sandbox: timed out after 2 s checking podman; nothing was run; see what podman answers with 'sage-sandbox status', or raise --timeout"
	input_file=$BATS_TEST_TMPDIR/jobs.jsonl
	printf '%s\n' '{"id": "a", "code": "print(1)"}' >"$input_file"
	XDG_CACHE_HOME=$BATS_TEST_TMPDIR/cache SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/podman \
		run_ss 125 batch --no-server
	input_file=
	expect_no_match "$errors" "python"
	expect_match "$errors" "podman did not start a container of image '$IMAGE' within 30 s; run '$BATS_TEST_TMPDIR/podman run --rm --pull=never $IMAGE true' as this user to see why"
	expect_equal "$(pgrep -u "$(id -u)" -f 'sleep 200' || true)" "" "the hanging podmans left"
}
