#!/usr/bin/env bats
# 090-mcp.bats: `sage-sandbox mcp` at the protocol level (raw bytes, bad
# input), its options, and how it ends: EOF, SIGTERM, SIGKILL. The SDK-driven
# tests are in mcp-sdk.test.mjs.

load helpers

# A call's line for the raw protocol.
call_line() {
	python3 -c 'import json, sys; print(json.dumps({"jsonrpc": "2.0", "id": int(sys.argv[1]),
		"method": "tools/call", "params": {"name": "run_sagemath",
		"arguments": {"code": sys.argv[2]}}}))' "$1" "$2"
}

@test "mcp: every bad message is answered as JSON-RPC says, and the server goes on" {
	run python3 "$BATS_TEST_DIRNAME/mcp-raw.py" "$SAGE_SANDBOX"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = ok ]
}

@test "mcp: the protocol does not depend on podman: bad messages answered without it" {
	run python3 "$BATS_TEST_DIRNAME/mcp-raw.py" "$SAGE_SANDBOX" --podman /nonexistent/podman
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "mcp: without podman, a call is refused with the reason, as a tool error" {
	{
		echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}'
		call_line 2 'print(1)'
	} >"$BATS_TEST_TMPDIR/in"
	input_file=$BATS_TEST_TMPDIR/in run_ss 0 mcp --podman /nonexistent/podman
	answer=$(printf '%s\n' "$output" | sed -n 2p)
	output=$answer
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_equal "$(json_get 'j["result"]["structuredContent"]["exit_code"]')" 125
	json_get 'j["result"]["content"][0]["text"]' | grep -q "podman executable '/nonexistent/podman' not found"
}

@test "mcp: its options are checked, and are its own" {
	run_ss 125 mcp --warm 9
	[[ $errors == *"--warm"*"from 0 to 8"* ]]
	run_ss 125 mcp --concurrency 0
	[[ $errors == *"--concurrency"* ]]
	run_ss 125 mcp --json
	[[ $errors == *"--json is not for mcp"* ]]
	run_ss 125 run --warm 2
	[[ $errors == *"option --warm is for sage-sandbox mcp only"* ]]
	run_ss 0 mcp --help
	[[ $output == *"--warm N"* && $output == *"--concurrency N"* ]]
	run_ss 0 help mcp
	[[ $output == *"Usage: sage-sandbox mcp"* ]]
	run_ss 0 run --help
	[[ $output != *"--warm"* ]]
}

@test "mcp: SIGTERM stops a running call and the pool, removes every container, exits 0" {
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp --warm 2 <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/log" &
	local pid=$!
	local writer
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	call_line 1 'import time
print("started", flush=True)
time.sleep(100)' >&"$writer"
	# Wait until the call runs and both warm sandboxes are there.
	for ((i = 0; i < 240; i++)); do
		[ "$(our_containers | wc -l)" -ge 3 ] && break
		sleep 0.25
	done
	[ "$(our_containers | wc -l)" -ge 3 ]
	sleep 2
	local started=$SECONDS
	kill -TERM "$pid"
	wait "$pid" || { echo "exit status $?"; false; }
	exec {writer}>&-
	[ $((SECONDS - started)) -le 15 ]
	answer=$(cat "$BATS_TEST_TMPDIR/out")
	[[ $answer == *'"id":1'* ]]
	[[ $answer == *"interrupted by SIGTERM"* ]]
	expect_no_containers
	grep -q "signal 15; stopping" "$BATS_TEST_TMPDIR/log"
}

@test "mcp: a killed server leaves nothing that cleanup does not remove" {
	"$SAGE_SANDBOX" mcp --warm 2 </dev/zero >/dev/null 2>&1 &
	local pid=$!
	# /dev/zero is one endless line: discarded as it streams, never answered
	# until it ends, while the pool starts.
	for ((i = 0; i < 240; i++)); do
		[ "$(our_containers | wc -l)" -ge 2 ] && break
		sleep 0.25
	done
	[ "$(our_containers | wc -l)" -ge 2 ]
	kill -KILL "$pid"
	wait "$pid" || true
	run_ss 0 cleanup
	[[ $output == *"removed"* ]]
	wait_no_containers 20
}

@test "mcp: a pool whose sandboxes cannot start backs off, and a call gets the refusal" {
	# A profile without clone: Sage cannot start in any sandbox.
	python3 -c '
import json, sys
profile = json.load(open(sys.argv[1]))
profile["syscalls"] = [r for r in profile["syscalls"] if "clone" not in r["names"]]
json.dump(profile, sys.stdout)' "$BATS_TEST_DIRNAME/../seccomp.json" >"$BATS_TEST_TMPDIR/nofork.json"
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp --seccomp-profile "$BATS_TEST_TMPDIR/nofork.json" <"$BATS_TEST_TMPDIR/in" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log" &
	local pid=$! writer
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	sleep 8
	call_line 1 'print(1)' >&"$writer"
	sleep 5
	exec {writer}>&-
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/log"
	# Tries 1 s apart, then 2 s, 4 s: not a tight loop.
	tries=$(grep -c "a warm sandbox did not start" "$BATS_TEST_TMPDIR/log")
	[ "$tries" -ge 2 ] && [ "$tries" -le 5 ]
	grep -q "next try in 1 s" "$BATS_TEST_TMPDIR/log"
	grep -q "next try in 2 s" "$BATS_TEST_TMPDIR/log"
	output=$(cat "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_match "$(json_get 'j["result"]["structuredContent"]["error"]')" "^Sage did not start in the sandbox"
}

@test "mcp: without the image a call gets podman's refusal with the fix; an image that appears later is found" {
	local image=localhost/sage-sandbox-test:appears-later
	podman untag "$image" "$image" 2>/dev/null || true
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp --image "$image" <"$BATS_TEST_TMPDIR/in" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log" &
	local pid=$! writer i
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	call_line 1 'print(1)' >&"$writer"
	for ((i = 0; i < 120; i++)); do
		grep -q '"id":1' "$BATS_TEST_TMPDIR/out" && break
		sleep 0.5
	done
	output=$(grep '"id":1' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_match "$(json_get 'j["result"]["structuredContent"]["error"]')" "image '$image' is not present locally"
	expect_match "$(json_get 'j["result"]["structuredContent"]["hint"]')" "setup.sh image"
	# The image arrives while the server runs: the next call asks again.
	podman tag localhost/sagemath-debian:bookworm "$image"
	call_line 2 'print(6*7)' >&"$writer"
	for ((i = 0; i < 120; i++)); do
		grep -q '"id":2' "$BATS_TEST_TMPDIR/out" && break
		sleep 0.5
	done
	exec {writer}>&-
	wait "$pid"
	podman untag "$image" "$image"
	output=$(grep '"id":2' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" 42
}

@test "mcp: past 64 calls waiting their turn a call is refused at once, and cancelled ones never run" {
	python3 - "$BATS_TEST_TMPDIR/in" <<'PY'
import json, sys
def call(i, code):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "run_sagemath", "arguments": {"code": code}}})
lines = [call(1, "import time\ntime.sleep(8)\nprint('first')")]
lines += [call(i, "print(%d)" % i) for i in range(2, 67)]
lines += [json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": i}}) for i in range(2, 66)]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
	# Call 1 starts as it arrives only if the rootless check and the image
	# probe are answered from their caches: a run first makes sure they are.
	sage 'pass' 0 run
	input_file=$BATS_TEST_TMPDIR/in run_ss 0 mcp --concurrency 1 --warm 0
	# Call 66 found 64 waiting; 2..65 were cancelled before their turn; 1
	# was stopped by the end of input.
	expect_equal "$(printf '%s\n' "$output" | wc -l)" 2
	output=$(printf '%s\n' "$output" | grep '"id":66')
	expect_equal "$(json_get 'j["error"]["code"]')" -32603
	expect_match "$(json_get 'j["error"]["message"]')" "64 calls are already waiting"
}
