#!/usr/bin/env bats
# 090-mcp.bats: `sage-sandbox mcp` at the protocol level (raw bytes, bad
# input), its options, and how it ends: EOF, SIGTERM, SIGKILL. The SDK-driven
# tests are in mcp-sdk.test.mjs.

load helpers

# call_line ID CODE [PROGRESS_TOKEN]: a call's line for the raw protocol;
# with a progress token, the server tells the call's output so far each
# second (notifications/progress).
call_line() {
	python3 -c 'import json, sys
params = {"name": "run_sagemath", "arguments": {"code": sys.argv[2]}}
if len(sys.argv) > 3:
    params["_meta"] = {"progressToken": sys.argv[3]}
print(json.dumps({"jsonrpc": "2.0", "id": int(sys.argv[1]), "method": "tools/call",
                  "params": params}))' "$@"
}

# wait_until SECONDS WHAT COMMAND...: until COMMAND succeeds, looking every
# 0.1 s; fails, saying WHAT it waited for, after SECONDS.
wait_until() {
	local seconds=$1 what=$2 i
	shift 2
	for ((i = 0; i < seconds * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	echo "# waited $seconds s for $what" >&2
	return 1
}

# The time in ms, to tell how far apart two events came (EPOCHREALTIME's
# decimal point is the locale's: every non-digit goes).
now_ms() {
	echo $((${EPOCHREALTIME//[!0-9]/} / 1000))
}

containers_at_least() {
	[ "$(our_containers | wc -l)" -ge "$1" ]
}

# mcp_answer CODE [OPTIONS...]: one run_sagemath call of CODE to a server
# started with OPTIONS, waited for; its answer line, the bytes as sent, in
# $BATS_TEST_TMPDIR/answer and $output.
mcp_answer() {
	local code=$1 i server writer
	shift
	rm -f "$BATS_TEST_TMPDIR/in"
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp "$@" <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/log" &
	server=$!
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}' >&"$writer"
	call_line 2 "$code" >&"$writer"
	for ((i = 0; i < 240; i++)); do
		grep -q '"id":2' "$BATS_TEST_TMPDIR/out" && break
		sleep 0.5
	done
	exec {writer}>&-
	wait "$server"
	grep '"id":2' "$BATS_TEST_TMPDIR/out" >"$BATS_TEST_TMPDIR/answer"
	output=$(cat "$BATS_TEST_TMPDIR/answer")
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

@test "mcp: SIGTERM stops a running call and the pool, removes every container, exits 143" {
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp --warm 2 <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/log" &
	local pid=$! writer code=0
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	call_line 1 'import time
print("started", flush=True)
time.sleep(100)' progress-1 >&"$writer"
	# The call's code runs: its progress shows what it printed (the JSON
	# line holds the newline as \n).
	wait_until 120 "the call's progress to show 'started'" \
		grep -qF 'output so far ends with:\nstarted' "$BATS_TEST_TMPDIR/out"
	# And the pool is there: its two warm sandboxes beside the call's, one
	# of them ready at least.
	wait_until 60 "3 containers" containers_at_least 3
	wait_until 60 "a warm sandbox ready" grep -q "first warm sandbox ready" "$BATS_TEST_TMPDIR/log"
	local started=$SECONDS
	kill -TERM "$pid"
	wait "$pid" || code=$?
	# Stopped by a signal: 128 + 15, as every command of sage-sandbox.
	expect_equal "$code" 143 "mcp's exit status after SIGTERM"
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
	local pid=$! writer first second
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	# The pool's first two failures, the second at least the first's
	# backoff (1 s) after it: not a tight loop.
	wait_until 60 "the first failed start" grep -q "next try in 1 s" "$BATS_TEST_TMPDIR/log"
	first=$(now_ms)
	wait_until 60 "the second failed start" grep -q "next try in 2 s" "$BATS_TEST_TMPDIR/log"
	second=$(now_ms)
	[ $((second - first)) -ge 900 ] || { echo "# failures $((second - first)) ms apart" >&2; false; }
	call_line 1 'print(1)' >&"$writer"
	wait_until 60 "the call's answer" grep -q '"id":1' "$BATS_TEST_TMPDIR/out"
	exec {writer}>&-
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/log"
	# Tries 1 s apart, then 2 s, 4 s: a few, not a tight loop.
	tries=$(grep -c "a warm sandbox did not start" "$BATS_TEST_TMPDIR/log")
	[ "$tries" -ge 2 ] && [ "$tries" -le 5 ]
	output=$(grep '"id":1' "$BATS_TEST_TMPDIR/out")
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

@test "mcp: U+2028 and U+2029 the code prints are written escaped, never raw, in text and structuredContent" {
	mcp_answer 'print("a\u2028b\u2029c")' --warm 0
	python3 -c '
import sys
raw = open(sys.argv[1], "rb").read()
assert b"\xe2\x80\xa8" not in raw and b"\xe2\x80\xa9" not in raw, "raw U+2028 or U+2029: %r" % raw
assert raw.count(b"a\\u2028b\\u2029c") == 2, "not escaped in both: %r" % raw' "$BATS_TEST_TMPDIR/answer"
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"] == "a\u2028b\u2029c\n" and j["result"]["content"][0]["text"] == "a\u2028b\u2029c\n"')" true
}

@test "mcp: an image declaring more than 16 megapixels is named as not shown, never sent; a plot still is" {
	# A valid PNG of 40000x40000 one-bit pixels, some 200 KB: far below the
	# 2 MiB cap, 1.6 billion pixels once decoded.
	mcp_answer 'import os, struct, zlib
out = os.environ["SAGE_SANDBOX_OUT"]
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
z = zlib.compressobj(9)
row = bytes(int(1 + 40000 / 8))
idat = b"".join(z.compress(row) for _ in range(40000)) + z.flush()
header = struct.pack(">IIBBBBB", int(40000), int(40000), int(1), int(0), int(0), int(0), int(0))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
open(out + "/huge.png", "wb").write(png)
plot(sin(x), (x, 0, 2*pi)).save(out + "/sin.png")
print(len(png))' --warm 0
	expect_equal "$(json_get 'j["result"]["isError"]')" false
	size=$(json_get 'j["result"]["structuredContent"]["stdout"].strip()')
	[ "$size" -gt 100000 ] && [ "$size" -lt $((2 << 20)) ]
	listing=$(json_get 'j["result"]["content"][1]["text"]')
	expect_match "$listing" "- huge\.png \([0-9.]+ KiB, image/png, 40000x40000 pixels\); not shown: 40000x40000 pixels, more than the 16 megapixels an answer shows; save it smaller to see it"
	expect_match "$listing" "- sin\.png \([0-9.]+ KiB, image/png, [0-9]+x[0-9]+ pixels\); the image follows"
	# One image item: the plot's bytes, not the huge one's.
	expect_equal "$(json_get '[c["mimeType"] for c in j["result"]["content"] if c["type"] == "image"]')" '["image/png"]'
	expect_equal "$(json_get 'len(__import__("base64").b64decode([c for c in j["result"]["content"] if c["type"] == "image"][0]["data"])) == [f["size"] for f in j["result"]["structuredContent"]["files"] if f["name"] == "sin.png"][0]')" true
	expect_equal "$(json_get '[f["width"] for f in j["result"]["structuredContent"]["files"] if f["name"] == "huge.png"]')" '[40000]'
}
