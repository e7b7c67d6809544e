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
	expect_equal "$errors" "sage-sandbox: option --warm is for sage-sandbox mcp and serve only; see sage-sandbox --help"
	run_ss 125 batch --concurrency 2
	expect_equal "$errors" "sage-sandbox: option --concurrency is for sage-sandbox mcp only; see sage-sandbox --help"
	run_ss 0 mcp --help
	[[ $output == *"--warm N"* && $output == *"--concurrency N"* ]]
	run_ss 0 help mcp
	[[ $output == *"Usage: sage-sandbox mcp"* ]]
	run_ss 0 run --help
	[[ $output != *"--warm"* ]]
}

# bats test_tags=any-sage
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
	# A call and the end of input at once: the pool's sandboxes that fail
	# after it say so, but no next try: none comes once the server stops
	# (it said "next try in 1 s" after "end of input", 4 times in 5).
	call_line 2 'print(2)' | "$SAGE_SANDBOX" mcp --seccomp-profile "$BATS_TEST_TMPDIR/nofork.json" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log"
	cat "$BATS_TEST_TMPDIR/log"
	expect_match "$(cat "$BATS_TEST_TMPDIR/log")" "end of input; answering the 1 call already read"
	expect_no_match "$(sed -n '/end of input/,$p' "$BATS_TEST_TMPDIR/log")" "next try"
	output=$(cat "$BATS_TEST_TMPDIR/out")
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
	podman tag "$IMAGE" "$image"
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

# bats test_tags=any-sage
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
	# Call 66 found 64 waiting; 2..65 were cancelled before their turn; 1,
	# read before the end of input, ran to its end and was answered. The
	# host check's answer comes on the loop's turn after the burst was
	# read (never inside the call that asked): call 1 may still be waiting
	# then, and call 65 the one that found 64 waiting (1..64) as well.
	all=$output
	expect_equal "$(printf '%s\n' "$all" | grep -vc -e '"id":1,' -e '"id":66,' -e '"id":65,')" 0
	if printf '%s\n' "$all" | grep -q '"id":65,'; then
		output=$(printf '%s\n' "$all" | grep '"id":65,')
		expect_match "$(json_get 'j["error"]["message"]')" "64 calls are already waiting"
	fi
	output=$(printf '%s\n' "$all" | grep '"id":66,')
	expect_equal "$(json_get 'j["error"]["code"]')" -32603
	expect_match "$(json_get 'j["error"]["message"]')" "64 calls are already waiting"
	output=$(printf '%s\n' "$all" | grep '"id":1,')
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" first
}

@test "mcp: U+2028 and U+2029 the code prints are written escaped, never raw, in text and structuredContent; a NUL comes through" {
	# (A NUL lost the whole answer: attack helper 146.)
	mcp_answer 'print("a\u2028b\u2029c\x00d")' --warm 0
	python3 -c '
import sys
raw = open(sys.argv[1], "rb").read()
assert b"\xe2\x80\xa8" not in raw and b"\xe2\x80\xa9" not in raw, "raw U+2028 or U+2029: %r" % raw
assert raw.count(b"a\\u2028b\\u2029c\\u0000d") == 2, "not escaped in both: %r" % raw' "$BATS_TEST_TMPDIR/answer"
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"] == "a\u2028b\u2029c\x00d\n" and j["result"]["content"][0]["text"] == "a\u2028b\u2029c\x00d\n" and j["result"]["structuredContent"]["exit_code"] == 0')" true
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

# readme_example: the README's "By hand" command, exactly as written there
# (the first line that starts with printf after "By hand:").
readme_example() {
	awk '/^By hand:/ { found = 1 } found && /^printf / { print; exit }' \
		"$BATS_TEST_DIRNAME/../README.md"
}

@test "mcp: the README's By hand example, as written, prints the factorization and exits 0" {
	local example bin
	example=$(readme_example)
	[[ $example == "printf "*"| sage-sandbox mcp" ]] || { echo "# no example found: $example" >&2; false; }
	# `sage-sandbox` on PATH is the one under test.
	bin=$BATS_TEST_TMPDIR/bin
	mkdir -p "$bin"
	ln -s "$SAGE_SANDBOX" "$bin/sage-sandbox"
	set +e
	output=$(PATH=$bin:$PATH timeout 300 bash -c "$example" 2>"$BATS_TEST_TMPDIR/log")
	status=$?
	set -e
	cat "$BATS_TEST_TMPDIR/log"
	expect_equal "$status" 0 "the example's exit status"
	expect_equal "$(json_get 'j["id"]')" 1
	expect_equal "$(json_get 'j["result"]["isError"]')" false
	expect_equal "$(json_get 'j["result"]["content"][0]["text"]')" "274177 * 67280421310721"
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" "274177 * 67280421310721"
	# Nothing was stopped, and nothing was started or said to start once
	# the server was stopping.
	log=$(cat "$BATS_TEST_TMPDIR/log")
	expect_no_match "$log" "interrupted|next try|did not start|cannot start"
	expect_match "$log" "end of input; answering the 1 call already read"
	expect_no_match "$(sed -n '/end of input/,$p' <<<"$log")" "warm sandbox ready"
	expect_no_containers
}

# bats test_tags=any-sage
@test "mcp: every request written before the end of input is answered, sessions included, then exit 0" {
	python3 - "$BATS_TEST_TMPDIR/in" <<'PY'
import json, sys
def call(i, arguments):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "run_sagemath", "arguments": arguments}})
lines = [call(1, {"code": "import time\ntime.sleep(3)\nprint('one')"}),
         call(2, {"code": "print(6*7)"}),
         call(3, {"code": "x = 5\nprint(x^2)", "session": "s"}),
         call(4, {"code": "print(factor(91))", "timeout_seconds": 60}),
         json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"})]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
	# One at a time: three of them wait their turn after the end of input.
	input_file=$BATS_TEST_TMPDIR/in run_ss 0 mcp --concurrency 1
	echo "$output"
	echo "$errors"
	expect_equal "$(printf '%s\n' "$output" | wc -l)" 5
	all=$output
	for want in "1 one" "2 42" "3 25" "4 7 * 13"; do
		output=$(printf '%s\n' "$all" | grep "\"id\":${want%% *},")
		expect_equal "$(json_get 'j["result"]["isError"]')" false "call ${want%% *}"
		expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" "${want#* }" "call ${want%% *}"
	done
	output=$(printf '%s\n' "$all" | grep '"id":3,')
	expect_equal "$(json_get 'j["result"]["structuredContent"]["session"]["name"]')" s
	expect_no_match "$errors" "interrupted|next try|did not start|shutting down"
	expect_match "$errors" "end of input; answering the 4 calls already read, then stopping"
	# The session's container went with the server.
	expect_no_containers
}

@test "mcp: a session ended while its first call waits for its turn: the call is refused, nothing run, no session starts after" {
	python3 - "$BATS_TEST_TMPDIR/in" <<'PY'
import json, sys
def call(i, name, arguments):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})
lines = [call(1, "run_sagemath", {"code": "import time\ntime.sleep(3)\nprint('one')"}),
         call(2, "run_sagemath", {"code": "print('in A')", "session": "A"}),
         call(3, "sage_sandbox_end_session", {"session": "A"})]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
	input_file=$BATS_TEST_TMPDIR/in run_ss 0 mcp --concurrency 1
	echo "$errors"
	all=$output
	output=$(printf '%s\n' "$all" | grep '"id":1,')
	expect_equal "$(json_get '[j["result"]["isError"], j["result"]["structuredContent"]["stdout"]]')" '[false, "one\n"]'
	output=$(printf '%s\n' "$all" | grep '"id":2,')
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_match "$(json_get 'j["result"]["content"][0]["text"]')" "session A was ended \(sage_sandbox_end_session\) before this call began; nothing was run"
	expect_no_match "$output" "in A"
	output=$(printf '%s\n' "$all" | grep '"id":3,')
	expect_equal "$(json_get 'j["result"]["structuredContent"]')" '{"session": "A", "ended": true, "calls": 0}'
	expect_match "$errors" "session A ended by sage_sandbox_end_session"
	expect_no_containers
}

@test "mcp: a signal while the calls read before the end of input finish stops them at once, exit 143" {
	call_line 1 'import time
print("started", flush=True)
time.sleep(100)
print("not reached")' progress-1 >"$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log" &
	local pid=$! code=0 started
	wait_until 120 "the call's progress to show 'started'" \
		grep -qF 'output so far ends with:\nstarted' "$BATS_TEST_TMPDIR/out"
	grep -q "end of input; answering the 1 call already read" "$BATS_TEST_TMPDIR/log"
	started=$SECONDS
	kill -TERM "$pid"
	wait "$pid" || code=$?
	cat "$BATS_TEST_TMPDIR/log"
	expect_equal "$code" 143 "mcp's exit status after SIGTERM"
	[ $((SECONDS - started)) -le 15 ]
	output=$(grep '"id":1' "$BATS_TEST_TMPDIR/out")
	expect_match "$(json_get 'j["result"]["content"][0]["text"]')" "interrupted by SIGTERM"
	expect_no_match "$output" "not reached"
	grep -q "signal 15; stopping" "$BATS_TEST_TMPDIR/log"
	expect_no_containers
}

# answered_all FILE ID...: FILE holds an answer to each ID.
answered_all() {
	local file=$1 id
	shift
	for id; do
		grep -q "\"id\":$id," "$file" || return 1
	done
}

@test "mcp: a fifth session past --sessions 4 is refused with the reason, and the server goes on" {
	mkfifo "$BATS_TEST_TMPDIR/in"
	"$SAGE_SANDBOX" mcp --warm 0 <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out" \
		2>"$BATS_TEST_TMPDIR/log" &
	local pid=$! writer i
	exec {writer}>"$BATS_TEST_TMPDIR/in"
	for i in 1 2 3 4; do
		printf '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_sagemath","arguments":{"code":"print(%d)","session":"s%d"}}}\n' \
			"$i" "$i" "$i" >&"$writer"
	done
	wait_until 240 "the four sessions' answers" answered_all "$BATS_TEST_TMPDIR/out" 1 2 3 4
	# Four sessions open, none running: the fifth is refused as it is
	# handed to the runner.
	printf '%s\n' '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_sagemath","arguments":{"code":"print(5)","session":"s5"}}}' >&"$writer"
	wait_until 60 "the fifth session's answer" grep -q '"id":5,' "$BATS_TEST_TMPDIR/out"
	call_line 6 'print(6*7)' >&"$writer"
	wait_until 120 "the next call's answer" grep -q '"id":6,' "$BATS_TEST_TMPDIR/out"
	exec {writer}>&-
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/log"
	output=$(grep '"id":5,' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_match "$(json_get 'j["result"]["structuredContent"]["error"]')" "4 sessions are open, this server's most \(--sessions 4\); session s5 was not started"
	output=$(grep '"id":6,' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" 42
	expect_no_containers
}

@test "mcp: a podman that cannot be started is a refused call, and the server goes on" {
	# A podman that fails at everything: the host check says so.
	printf '#!/bin/sh\nexit 1\n' >"$BATS_TEST_TMPDIR/failing-podman"
	chmod +x "$BATS_TEST_TMPDIR/failing-podman"
	{
		call_line 1 'print(1)'
		echo '{"jsonrpc":"2.0","id":2,"method":"ping"}'
		call_line 3 'print(3)'
	} >"$BATS_TEST_TMPDIR/in"
	SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/failing-podman input_file=$BATS_TEST_TMPDIR/in run_ss 0 mcp
	expect_equal "$(printf '%s\n' "$output" | wc -l)" 3
	all=$output
	for i in 1 3; do
		output=$(printf '%s\n' "$all" | grep "\"id\":$i,")
		expect_equal "$(json_get 'j["result"]["isError"]')" true "call $i"
		expect_equal "$(json_get 'j["result"]["structuredContent"]["exit_code"]')" 125 "call $i"
	done

	# A podman that goes away once the server runs: the runner cannot
	# start it for the next call, which is refused as it is submitted.
	local real wrapper=$BATS_TEST_TMPDIR/podman writer pid
	real=$(command -v podman)
	printf '#!/bin/sh\nexec %s "$@"\n' "$real" >"$wrapper"
	chmod +x "$wrapper"
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	SAGE_SANDBOX_PODMAN=$wrapper "$SAGE_SANDBOX" mcp --warm 0 <"$BATS_TEST_TMPDIR/fifo" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/log" &
	pid=$!
	exec {writer}>"$BATS_TEST_TMPDIR/fifo"
	call_line 1 'print(1)' >&"$writer"
	wait_until 120 "the first answer" grep -q '"id":1,' "$BATS_TEST_TMPDIR/out"
	wait_no_containers 20
	chmod -x "$wrapper"
	call_line 2 'print(2)' >&"$writer"
	wait_until 60 "the refusal" grep -q '"id":2,' "$BATS_TEST_TMPDIR/out"
	chmod +x "$wrapper"
	call_line 3 'print(6*7)' >&"$writer"
	wait_until 120 "the answer after it" grep -q '"id":3,' "$BATS_TEST_TMPDIR/out"
	exec {writer}>&-
	wait "$pid"
	cat "$BATS_TEST_TMPDIR/log"
	output=$(grep '"id":2,' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["isError"]')" true
	expect_match "$(json_get 'j["result"]["structuredContent"]["error"]')" "cannot execute podman"
	output=$(grep '"id":3,' "$BATS_TEST_TMPDIR/out")
	expect_equal "$(json_get 'j["result"]["structuredContent"]["stdout"]')" 42
	expect_no_containers
}
