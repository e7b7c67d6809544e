#!/usr/bin/env bats
# sage-sandbox as a filter, the way `sage FILE` is used: data on stdin,
# arguments after FILE, tracebacks that name the user's file, exit codes,
# and JSON whose every field has the type sage-sandbox(5) gives it.

load helpers

# write NAME CONTENT: a file in the test's directory; prints its path.
write() {
	printf '%s\n' "$2" >"$BATS_TEST_TMPDIR/$1"
	printf '%s' "$BATS_TEST_TMPDIR/$1"
}

@test "run FILE - stdin is the program's: input() and sys.stdin.read() see the caller's data" {
	local prog
	prog=$(write prog.sage 'name = input()
rest = sys.stdin.read()
print("hello", name, "rest", repr(rest))')
	input_file=$(write data.txt 'alice
3 4')
	run_ss 0 run "$prog"
	expect_equal "$output" "hello alice rest '3 4\\n'"
	# Streamed, not read whole first: a line comes back before stdin ends.
	prog=$(write echo.sage 'for line in sys.stdin:
    print(line.strip().upper(), flush=True)')
	coproc SS { "$SAGE_SANDBOX" run "$prog"; }
	echo first >&"${SS[1]}"
	local reply
	read -r -t 60 reply <&"${SS[0]}"
	expect_equal "$reply" FIRST
	exec {SS[1]}>&-
	wait "$SS_PID"
}

@test "run FILE ARG... - arguments reach sys.argv[1:], argv[0] the file's name; options after FILE are the program's" {
	local prog
	prog=$(write args.sage 'print(sys.argv)')
	run_ss 0 run --timeout 60 "$prog" a 'b c' --json -x --
	expect_equal "$output" "['$prog', 'a', 'b c', '--json', '-x', '--']"
	run_ss 0 run -- "$prog" --timeout 5
	expect_equal "$output" "['$prog', '--timeout', '5']"
	# Code from stdin: argv[0] is "-", and the program's stdin is empty.
	sage 'print(sys.argv, repr(sys.stdin.read()))' 0 run - x y
	expect_equal "$output" "['-', 'x', 'y'] ''"
	# A file whose name starts with a dash, after --.
	cp "$prog" "$BATS_TEST_TMPDIR/-odd.sage"
	cd "$BATS_TEST_TMPDIR"
	run_ss 0 run -- -odd.sage 1
	expect_equal "$output" "['-odd.sage', '1']"
}

@test "run FILE - a program that never reads an endless stdin ends normally" {
	local prog start=$SECONDS
	prog=$(write quiet.sage 'print(factor(2^32+1))')
	output=$(yes | timeout 120 "$SAGE_SANDBOX" run "$prog")
	expect_equal "$output" "641 * 6700417"
	[ $((SECONDS - start)) -lt 60 ]
}

@test "run FILE - 40 MB of stdin arrive intact; past 256 MiB the program reads end of file, and is told" {
	local prog
	prog=$(write sum.sage 'import hashlib
h = hashlib.sha256()
n = 0
while True:
    chunk = sys.stdin.buffer.read(1 << 20)
    if not chunk:
        break
    n += len(chunk)
    h.update(chunk)
print(n, h.hexdigest())')
	head -c 40000000 /dev/urandom >"$BATS_TEST_TMPDIR/data.bin"
	input_file=$BATS_TEST_TMPDIR/data.bin
	run_ss 0 run --timeout 300 "$prog"
	expect_equal "$output" "40000000 $(sha256sum <"$BATS_TEST_TMPDIR/data.bin" | cut -d' ' -f1)"
	input_file=
	output=$(head -c 300000000 /dev/zero | "$SAGE_SANDBOX" run --timeout 300 "$prog" 2>"$BATS_TEST_TMPDIR/err")
	expect_match "$output" "^268435456 "
	expect_equal "$(cat "$BATS_TEST_TMPDIR/err")" "sage-sandbox: the code's standard input was cut at 256 MiB; it read end of file there"
	output=$(head -c 300000000 /dev/zero | "$SAGE_SANDBOX" run --json --timeout 300 "$prog")
	expect_equal "$(json_get 'j["stdin_truncated"], j["exit_code"]')" '[true, 0]'
}

@test "run FILE - tracebacks name the user's file with the user's line numbers and lines, no launcher frame" {
	local prog
	prog=$(write "my prog.sage" 'x = 2^10
def f(n):
    return n / 0
print(f(x))')
	run_ss 1 run "$prog"
	expect_match "$errors" "File \"$prog\", line 4, in <module>"$'\n'"    print\\(f\\(x\\)\\)"
	expect_match "$errors" "File \"$prog\", line 3, in f"$'\n'"    return n / 0"
	expect_match "$errors" "ZeroDivisionError: rational division by zero"
	expect_no_match "$errors" "<string>|code\\.sage|_sage_const_"
	sage 'print(1)
raise ValueError("two")' 1 run
	expect_match "$errors" "File \"<stdin>\", line 2, in <module>"$'\n'"    raise ValueError\\(\"two\"\\)"
	prog=$(write syntax.sage 'print(1)
print(2 +)')
	run_ss 1 run "$prog"
	expect_match "$errors" "File \"$prog\", line 2"
	expect_match "$errors" "SyntaxError"
}

@test "run - sys.exit: an int is the status; a Sage Integer or a string is printed and gives 1, as in a fresh Sage; None gives 0" {
	# sys.exit(3) is preparsed to sys.exit(Integer(3)): no int to Python,
	# which prints it and exits 1 (it exited 3 here, where a fresh Sage
	# prints 3 and exits 1: probe helper).
	sage 'sys.exit(3)' 1 run
	expect_equal "$output|$errors" "|3"
	sage 'import sys; sys.exit(int(4))' 4 run
	sage 'sys.exit(int(256 + 5))' 5 run
	sage 'sys.exit("bye")' 1 run
	expect_equal "$errors" "bye"
	sage 'sys.exit(None)' 0 run
	sage 'sys.exit()' 0 run
	sage 'raise SystemExit(2r)' 2 run
	sage 'exit(0)' 1 run
	expect_equal "$errors" "0"
}

@test "run - standard output and error that meet (2>&1, a file) keep the order the code wrote them in" {
	# The host drained the two streams from two queues, in the order epoll
	# reported them writable: "3" came before "main" one time in two
	# (attack helper 154). A fresh Sage at a terminal prints main first.
	local code=$BATS_TEST_TMPDIR/order.sage both=$BATS_TEST_TMPDIR/both.txt
	printf '%s\n' 'print("main")' 'sys.exit(3)' >"$code"
	for try in 1 2 3; do
		run "$SAGE_SANDBOX" run --no-server "$code" # bats: 2>&1 into one pipe
		expect_equal "$status|$output" "1|main"$'\n'"3" "try $try, a pipe"
	done
	"$SAGE_SANDBOX" run --no-server "$code" >"$both" 2>&1 || true
	expect_equal "$(cat "$both")" "main"$'\n'"3" "a file"
	# One file opened twice, both appending: one queue too.
	: >"$both"
	for try in 1 2; do
		"$SAGE_SANDBOX" run --no-server "$code" >>"$both" 2>>"$both" || true
	done
	expect_equal "$(cat "$both")" "main"$'\n'"3"$'\n'"main"$'\n'"3" ">>f 2>>f"
}

@test "run - load() of a file that is only on the host fails with a hint" {
	sage 'load("other.sage")' 1 run
	expect_match "$errors" "OSError: did not find file 'other.sage' to load or attach"
	expect_match "$errors" "note: the sandbox holds only this code, the image's packages and the files"
	sage 'import mylocalmodule' 1 run
	expect_match "$errors" "ModuleNotFoundError"
	expect_match "$errors" "given with --input"
	sage 'open("data.csv")' 1 run
	expect_match "$errors" "FileNotFoundError"
	expect_match "$errors" "note: the sandbox holds only"
}

# check_header: the fields every object begins with, with their types.
check_header() {
	expect_equal "$(json_get 'list(j)[:4]')" '["schema_version", "ok", "exit_code", "error"]'
	expect_equal "$(json_get 'j["schema_version"]')" 1
	expect_equal "$(json_get 'type(j["ok"]).__name__, type(j["exit_code"]).__name__')" '["bool", "int"]'
	expect_equal "$(json_get 'j["error"] is None or (isinstance(j["error"], str) and " " in j["error"])')" true
}

# Each field of a run object and its type (None: null allowed).
run_types='{"file": (str, None), "signal": (str, None), "stopped_by": (str, None),
	"timed_out": bool, "output_limit_exceeded": bool, "memory_limit_exceeded": bool,
	"cpu_limit_exceeded": bool, "stdout": str, "stderr": str, "truncated": dict,
	"stdin_truncated": bool, "duration_ms": int}'
check_run_fields() {
	expect_equal "$(json_get '[k for k, t in ('"$run_types"').items() if not isinstance('"$1"'.get(k, KeyError), tuple(x if x else type(None) for x in (t if isinstance(t, tuple) else (t,))))]')" '[]'
}

@test "JSON - every command's object: header fields and types as sage-sandbox(5) gives them" {
	local prog
	prog=$(write ok.sage 'print(1)')
	run_ss 0 run --json "$prog"
	check_header
	check_run_fields j
	expect_equal "$(json_get 'j["file"], j["error"], j["stopped_by"]')" "[\"$prog\", null, null]"
	sage 'sleep(30)' 124 run --json --timeout 2
	check_header
	check_run_fields j
	expect_equal "$(json_get 'j["stopped_by"], j["file"]')" '["timeout", null]'
	run_ss 125 run --json --bogus
	check_header
	run_ss 0 self-test --json
	check_header
	check_run_fields 'j["run"]'
	expect_equal "$(json_get 'list(j["run"])[:4]')" '["schema_version", "ok", "exit_code", "error"]'
	run_ss 0 status --json
	check_header
	expect_equal "$(json_get 'type(j["rootless"]).__name__, type(j["image_available"]).__name__')" '["bool", "bool"]'
	run_ss 0 cleanup --json
	check_header
	expect_equal "$(json_get 'j["removed"]')" '[]'
}
