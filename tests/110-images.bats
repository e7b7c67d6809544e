#!/usr/bin/env bats
# 110-images.bats: images laid out as the official sagemath/sagemath ones
# (no python3 on PATH; a python3 without Sage, uid 1001, a 0750 home; the
# official entrypoint and workdir), built from the Debian image by
# official-images.sh, run through the core of what sage-sandbox does; and an
# image whose Sage cannot start, which is a refusal, never a result.

load helpers

setup_file() {
	# Their base is Sage 9.5's image whatever the suite runs on: ./setup.sh
	# check builds it as root; an ordinary user's check may lack it.
	local base
	base=$("$BATS_TEST_DIRNAME/official-images.sh" base)
	podman image exists "$base" ||
		skip "$base, which the official layouts are made of, is not here (./setup.sh check as root builds it)"
	"$BATS_TEST_DIRNAME/official-images.sh" build
}

IMAGE_104=localhost/sage-sandbox-test:official-10.4
IMAGE_109=localhost/sage-sandbox-test:official-10.9
IMAGE_BROKEN=localhost/sage-sandbox-test:broken
IMAGE_GAP_CRASH=localhost/sage-sandbox-test:gap-crash
VENV_PYTHON=/home/sage/sage/local/var/lib/sage/venv-python3.11/bin/python3

SEED_OUTPUT='x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4
181118435328'

# The cache file that holds what the image probe found for IMAGE.
image_cache_file() {
	local dir
	for dir in ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR/sage-sandbox"} "${XDG_CACHE_HOME:-$HOME/.cache}/sage-sandbox"; do
		grep -lx -- "$1" "$dir"/image-* 2>/dev/null && return 0
	done
	return 1
}

@test "images - the seed example runs on both official layouts" {
	for image in "$IMAGE_104" "$IMAGE_109"; do
		run_ss 0 run --image "$image" "$BATS_TEST_DIRNAME/../examples/seed.sage"
		expect_equal "$output" "$SEED_OUTPUT" "$image"
	done
}

@test "images - self-test passes on both official layouts" {
	for image in "$IMAGE_104" "$IMAGE_109"; do
		run_ss 0 self-test --image "$image"
		# 40 checks; where the host has no memory and pids cgroups two
		# skip, and cpu_unreaped too where the kernel does not count.
		expect_match "$output" "self-test passed: (38 passed, 0 failed, 2|37 passed, 0 failed, 3|40 passed, 0 failed, 0) skipped"
		expect_match "$output" "PASS  writable +writable: /dev/shm, /tmp, /tmp/sage-home"
	done
}

@test "images - status shows Sage's version, its Python in the venv and the image's user" {
	run_ss 0 status --image "$IMAGE_109"
	expect_match "$output" $'\nsage: +9\\.[0-9]+\n'
	expect_match "$output" "python: +$VENV_PYTHON \\(Python 3\\.[0-9]+\\.[0-9]+\\)"
	expect_match "$output" "user: +sage, uid 1001, gid 1001 in the image; runs get gid 1001 as a supplementary group"
	expect_match "$output" $'\nready: +yes'
	run_ss 0 status --json --image "$IMAGE_104"
	expect_equal "$(json_get '[j["sage"][k] for k in ("python", "image_user", "image_uid", "starts")]')" \
		"[\"$VENV_PYTHON\", \"sage\", 1000, true]"
}

@test "images - a traceback names the user's file and line on the 10.9 layout" {
	printf 'x = 1\ny = 1/0\n' >"$BATS_TEST_TMPDIR/prog.sage"
	run_ss 1 run --image "$IMAGE_109" "$BATS_TEST_TMPDIR/prog.sage"
	expect_match "$errors" "File \"$BATS_TEST_TMPDIR/prog.sage\", line 2"
	expect_match "$errors" "ZeroDivisionError"
	expect_no_match "$errors" "launcher|<string>"
}

@test "images - files in and out on the 10.9 layout" {
	mkdir -p "$BATS_TEST_TMPDIR/out"
	printf '3\n4\n' >"$BATS_TEST_TMPDIR/numbers.txt"
	printf 'import os\nn = [int(l) for l in open("numbers.txt")]\nopen(os.environ["SAGE_SANDBOX_OUT"] + "/sum.txt", "w").write(str(sum(n)))\nprint(os.getcwd())\n' \
		>"$BATS_TEST_TMPDIR/sum.sage"
	run_ss 0 run --image "$IMAGE_109" --input "$BATS_TEST_TMPDIR/numbers.txt" \
		--output-dir "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/sum.sage"
	# The image's WORKDIR (/home/sage) plays no part.
	expect_equal "$output" /tmp
	expect_equal "$(cat "$BATS_TEST_TMPDIR/out/sum.txt")" 7
}

# mcp_call CODE ARGS...: one run_sagemath call to `sage-sandbox mcp ARGS`,
# whose stdin stays open until the answer came (the end of stdin stops
# every call); sets $output to the answer's line. $mcp_after: a pattern
# of the server's log to wait for before the call.
mcp_call() {
	local code=$1 i
	shift
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp "$@" <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/err" &
	local server=$!
	exec 4>"$BATS_TEST_TMPDIR/in"
	echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' >&4
	# With a warm pool, the call is made once its sandbox is up.
	if [[ " $* " == *" --warm 1 "* ]]; then
		for ((i = 0; i < 120; i++)); do
			[ -n "$(our_containers)" ] && break
			sleep 0.5
		done
		sleep 3
	fi
	if [ -n "${mcp_after:-}" ]; then
		for ((i = 0; i < 240; i++)); do
			grep -q "$mcp_after" "$BATS_TEST_TMPDIR/err" && break
			sleep 0.5
		done
	fi
	python3 -c 'import json, sys; print(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": {"name": "run_sagemath", "arguments": {"code": sys.argv[1]}}}))' "$code" >&4
	for ((i = 0; i < 240; i++)); do
		grep -q '"id":2' "$BATS_TEST_TMPDIR/out" && break
		sleep 0.5
	done
	exec 4>&-
	wait "$server"
	output=$(grep '"id":2' "$BATS_TEST_TMPDIR/out")
}

@test "images - an MCP call is served from the warm pool on the 10.9 layout" {
	mcp_call 'print(factor(2^64+1))' --image "$IMAGE_109" --warm 1
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" "274177 * 67280421310721"
	expect_equal "$(json_get 'j["result"]["isError"]')" false
}

# one_line_jobs N: batch jobs j1..jN, each printing its number.
one_line_jobs() {
	local i
	for ((i = 1; i <= $1; i++)); do
		printf '{"id": "j%d", "code": "print(%d)"}\n' "$i" "$i"
	done
}

@test "images - one container serves a batch's jobs on the 10.9 layout, warmed between them, GAP's and Maxima's too" {
	# Before, GAP could not find its library in this layout and its first
	# use, the warm-up's, crashed the launcher: every second job was
	# retried in a new container.
	local jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	one_line_jobs 6 >"$jobs"
	printf '{"id": "gap", "code": "print(SymmetricGroup(5).order())"}\n' >>"$jobs"
	printf '{"id": "maxima", "code": "print(integrate(x^2, x))"}\n' >>"$jobs"
	run_ss 0 batch --image "$IMAGE_109" --jobs 1 --order input "$jobs"
	expect_equal "$(printf '%s\n' "$output" | python3 -c 'import json, sys
print(" ".join(json.loads(l)["stdout"].strip() + "/%d" % json.loads(l)["attempts"] for l in sys.stdin))')" \
		"1/1 2/1 3/1 4/1 5/1 6/1 120/1 1/3*x^3/1"
	expect_match "$errors" "8 ok, 0 failed, 0 bad lines, 0 not run; 0 retried, .* 0 containers replaced after a job"
}

@test "images - a warm-up that kills the launcher (GAP that crashes as it starts) costs one retry, then the sandboxes serve without one" {
	local jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	one_line_jobs 6 >"$jobs"
	run_ss 0 batch --image "$IMAGE_GAP_CRASH" --jobs 1 --order input "$jobs"
	expect_equal "$(printf '%s\n' "$output" | python3 -c 'import json, sys
print(" ".join(json.loads(l)["stdout"].strip() for l in sys.stdin))')" "1 2 3 4 5 6"
	# The job that waited as the warm-up's GAP step crashed the first
	# container (SIGSEGV) ran again in a container with no warm-up; the
	# rest were served without one. Without the runner going cold, every
	# second job was retried.
	expect_match "$errors" "6 ok, 0 failed, 0 bad lines, 0 not run; 1 retried"
	# The server says so, once. The call is made once it did: a call that
	# came during the steps before GAP's would be served, and the
	# container end, before GAP's step began.
	mcp_after="launcher died" mcp_call 'print(7*6)' --image "$IMAGE_GAP_CRASH" --warm 1
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" "42"
	expect_equal "$(grep -c "launcher died" "$BATS_TEST_TMPDIR/err")" 1
	expect_match "$(cat "$BATS_TEST_TMPDIR/err")" "sage-sandbox mcp: a sandbox's launcher died by SIGSEGV during its warm-up \\(a library of the image that crashes as it starts: GAP, Maxima, matplotlib, Singular or scipy; a call that uses it crashes too\\); the sandboxes started from now on serve their calls without a warm-up"
}

@test "images - an image whose Sage cannot start is a refusal (125) naming the image, for run, self-test, status and MCP" {
	sage 'print("never")' 125 run --image "$IMAGE_BROKEN"
	expect_equal "$output" ""
	expect_equal "$errors" "sage-sandbox: image '$IMAGE_BROKEN' cannot run Sage: /usr/bin/python3 cannot import Sage: ImportError: broken on purpose by the test image; name Sage's Python in the image with --python PATH (SAGE_SANDBOX_PYTHON), or use an image whose 'sage -python' imports Sage (see IMAGES in sage-sandbox(1))"
	sage 'print("never")' 125 run --json --image "$IMAGE_BROKEN"
	# A refusal's object: nothing ran, so no output fields at all.
	expect_equal "$(json_get 'j["ok"], j["exit_code"], "stdout" in j')" '[false, 125, false]'
	expect_match "$(json_get 'j["error"]')" "cannot run Sage: .*broken on purpose"
	run_ss 125 self-test --image "$IMAGE_BROKEN"
	expect_match "$errors" "image '$IMAGE_BROKEN' cannot run Sage"
	run_ss 1 status --image "$IMAGE_BROKEN"
	expect_match "$output" $'\nsage: +9\\.5 \\(DOES NOT START in the sandbox\\)\n'
	expect_match "$output" "ready: +no: image '$IMAGE_BROKEN' cannot run Sage: .*broken on purpose"
	mcp_call 'print(1)' --warm 0 --image "$IMAGE_BROKEN"
	expect_equal "$(json_get 'j["result"]["isError"], j["result"]["structuredContent"]["exit_code"]')" '[true, 125]'
	expect_match "$(json_get 'j["result"]["content"][0]["text"]')" "cannot run Sage: .*broken on purpose"
}

@test "images - without --python, a python3 that cannot import Sage is never used; with it, a refusal" {
	# The 10.9 layout's python3 on PATH is the system's, without Sage.
	sage 'import sys; print(sys.executable)' 0 run --image "$IMAGE_109"
	expect_equal "$output" "$VENV_PYTHON"
	sage 'print(1)' 125 run --image "$IMAGE_109" --python /usr/local/bin/python3
	expect_match "$errors" "^sage-sandbox: image '$IMAGE_109' cannot run Sage: .* cannot import Sage: ModuleNotFoundError: No module named 'sage'; name Sage's Python"
	SAGE_SANDBOX_PYTHON=/nowhere/python3 sage 'print(1)' 125 run --image "$IMAGE_109"
	expect_match "$errors" "cannot run Sage: /nowhere/python3 is not an executable file in the image"
	SAGE_SANDBOX_PYTHON="$VENV_PYTHON" sage 'print(2)' 0 run --image "$IMAGE_109"
	expect_equal "$output" 2
	sage 'print(1)' 125 run --python python3
	expect_equal "$errors" "sage-sandbox: invalid --python 'python3': allowed is auto, or an absolute path inside the image, printable, no white space; see sage-sandbox --help"
}

@test "images - the probe's answer is cached; a cached interpreter that is gone is forgotten after one refusal" {
	sage 'print(1)' 0 run --image "$IMAGE_104"
	local cache
	cache=$(image_cache_file "$IMAGE_104")
	grep -qx "python $VENV_PYTHON" "$cache"
	# The image changed behind the cache's key: the next run says so,
	# and the run after it asks the image again.
	sed -i "s|^python $VENV_PYTHON\$|python /gone/python3|" "$cache"
	sage 'print(1)' 125 run --image "$IMAGE_104"
	expect_match "$errors" "^sage-sandbox: image '$IMAGE_104' cannot run Sage: cannot execute Sage's Python /gone/python3 as the run's user: "
	[ ! -e "$cache" ]
	sage 'print(3)' 0 run --image "$IMAGE_104"
	expect_equal "$output" 3
}

@test "images - the sandbox's uid reaches Sage under a 0750 home only through the image user's group" {
	# What a run without --group-add would meet: the image's user alone can
	# enter its home.
	run podman run --rm --network=none --user 12345:12345 --entrypoint "$VENV_PYTHON" "$IMAGE_109" -c 'print(1)'
	expect_match "$output" "permission denied"
	sage 'import os; print(sorted(set(os.getgroups()) - {os.getgid()}))' 0 run --image "$IMAGE_109"
	expect_equal "$output" "[1001]"
}
