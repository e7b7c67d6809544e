#!/usr/bin/env bats
# sage-sandbox serve: a run through the account's server gives what a cold
# run gives, byte for byte (stdout, stderr, the exit status, the --json
# object less its duration), from warm sandboxes; its clients' signals and
# deaths, its own death, idling out, another build, garbage on the socket,
# a directory that is not private, socket activation and a racing start
# each end as the man page says; so do a request whose deadline has passed
# before it comes, empty code, and a client that goes at every stage of its
# run, after which the same server serves on. A connection from root is
# refused in 000-root.bats (only root can make one).

load helpers

# The account has no XDG_RUNTIME_DIR (runuser -l, no logind).
RUNDIR=/tmp/sage-sandbox-$(id -u)

setup() {
	unset SAGE_SANDBOX_SERVER XDG_RUNTIME_DIR
	server_pid=
	log=$BATS_TEST_TMPDIR/serve.log
	mkdir -p "$RUNDIR" && chmod 0700 "$RUNDIR"
	rm -f "$RUNDIR/server.log"
}

teardown() {
	"$SAGE_SANDBOX" serve --stop >/dev/null 2>&1 || true
	[ -z "$server_pid" ] || wait "$server_pid" || true
	wait_no_containers 30
	# A sanitizer's finding in a server (tests/sanitize.sh) is in its log.
	if grep -s -E "AddressSanitizer|LeakSanitizer|runtime error" "$log" "$RUNDIR/server.log"; then
		return 1
	fi
	if [ -e "$RUNDIR/server.sock" ]; then
		printf '# a socket was left: %s\n' "$(ls -la "$RUNDIR")" >&2
		rm -f "$RUNDIR/server.sock"
		return 1
	fi
}

# wait_for_line FILE REGEX SECONDS
wait_for_line() {
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	printf '# no line matching %s in %s:\n%s\n' "$2" "$1" "$(cat "$1" 2>/dev/null)" >&2
	return 1
}

# start_server [OPTIONS]: a server in the background, logging to $log,
# once its first warm sandbox is ready.
start_server() {
	"$SAGE_SANDBOX" serve "$@" 2>"$log" &
	server_pid=$!
	wait_for_line "$log" "first warm sandbox ready" 120
}

served_runs() {
	grep -c "^sage-sandbox serve: run [0-9]* for pid" "$log" || true
}

# serve_client.py, written where the test can run it: a stand-in for the
# client's side of the socket, on a request the real client made.
#   capture SOCKET OUT: listens at SOCKET (no server is there yet), takes
#     one request from a real `sage-sandbox run` into OUT, answers "ok"
#     and closes (that client then ends 125; nothing of it runs);
#   send SOCKET REQUEST STAGE CODE LOG: sends the request with its start
#     time made now (stale: a minute ago; future: the largest there is) and
#     pipes of its own as stdin (CODE, then its end; /dev/null without
#     CODE), stdout and stderr;
#     then goes at STAGE: none (before the request), host (a second into
#     the host check), code (once the code printed "started"), output (its
#     stdout pipe full, unread), flush (the code over, its output still
#     queued), or not at all (stale, future: to the run's end). Prints the
#     server's answers and what came on stdout and stderr, then waits for
#     the server's log line on its run (not for none) and prints it.
write_serve_client() {
	cat >"$BATS_TEST_TMPDIR/serve_client.py" <<-'EOF'
	import fcntl, os, re, select, socket, struct, sys, termios, time

	def with_start(msg, start):
	    # "SSR1" and the kind, then fields: a tag, a 32-bit length, bytes.
	    out, p = [msg[:5]], 5
	    while p < len(msg):
	        tag, n = msg[p], struct.unpack_from("<I", msg, p + 1)[0]
	        data = struct.pack("<q", start) if tag == 4 else msg[p + 5:p + 5 + n]
	        out.append(bytes([tag]) + struct.pack("<I", len(data)) + data)
	        p += 5 + n
	    return b"".join(out)

	def read_until(fd, word, seconds):
	    got, end = b"", time.monotonic() + seconds
	    while word not in got and time.monotonic() < end:
	        if select.select([fd], [], [], 0.1)[0]:
	            chunk = os.read(fd, 65536)
	            if not chunk:
	                break
	            got += chunk
	    return got

	def unread(fd):
	    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]

	def log_line(log, pid, seconds=60):
	    pattern = re.compile(r"^sage-sandbox serve: run [0-9]+ for pid %d: .*$" % pid, re.M)
	    end = time.monotonic() + seconds
	    while time.monotonic() < end:
	        m = pattern.search(open(log).read())
	        if m:
	            return m.group(0)
	        time.sleep(0.1)
	    return "no line for pid %d" % pid

	def capture(path, out):
	    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	    listener.bind(path)
	    listener.listen(1)
	    open(out + ".ready", "w").close()
	    conn, _ = listener.accept()
	    msg, fds, _, _ = socket.recv_fds(conn, 1 << 17, 16)
	    for fd in fds:
	        os.close(fd)
	    open(out, "wb").write(msg)
	    conn.send(b"ok 0")
	    conn.close()
	    listener.close()
	    os.unlink(path)

	def send(path, request, stage, code, log):
	    now = int(time.monotonic() * 1000)
	    start = {"stale": now - 60000, "future": 2**63 - 1}.get(stage, now)
	    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	    s.connect(path)
	    if stage == "none":
	        s.close()
	        return
	    # No code: stdin is /dev/null, as `run </dev/null`'s.
	    i_r, i_w = os.pipe() if code else (os.open("/dev/null", os.O_RDONLY), -1)
	    o_r, o_w = os.pipe()
	    e_r, e_w = os.pipe()
	    socket.send_fds(s, [with_start(open(request, "rb").read(), start)], [i_r, o_w, e_w])
	    for fd in (i_r, o_w, e_w):
	        os.close(fd)
	    if code:
	        os.write(i_w, code.encode())
	        os.close(i_w)
	    s.settimeout(60)
	    print("answer:", s.recv(512).decode().split()[0])
	    if stage == "host":
	        time.sleep(1)
	    elif stage == "code":
	        read_until(o_r, b"started", 60)
	    elif stage == "output":
	        end = time.monotonic() + 60
	        while unread(o_r) < 65536 and time.monotonic() < end:
	            time.sleep(0.1)
	        time.sleep(0.5)
	    elif stage == "flush":
	        read_until(e_r, b"done", 60)
	        time.sleep(3)
	    else:
	        print("server:", s.recv(512).decode())
	        out, err = read_until(o_r, b"\0", 30), read_until(e_r, b"\0", 30)
	        print("stdout:", out.decode().strip())
	        print("stderr:", err.decode().strip())
	    # Gone at STAGE; the pipes stay open until the server has said
	    # how the run ended, so that it hears of the client first.
	    s.close()
	    print(log_line(log, os.getpid()))

	if sys.argv[1] == "capture":
	    capture(*sys.argv[2:])
	else:
	    send(*sys.argv[2:])
	EOF
}

# capture_request OUT ARGS...: the request `sage-sandbox run ARGS` makes,
# stdin /dev/null, into OUT; before any server is started.
capture_request() {
	local out=$1 i
	shift
	python3 "$BATS_TEST_TMPDIR/serve_client.py" capture "$RUNDIR/server.sock" "$out" &
	local py=$!
	for ((i = 0; i < 100; i++)); do
		[ ! -e "$out.ready" ] || break
		sleep 0.05
	done
	timeout 30 "$SAGE_SANDBOX" run "$@" </dev/null >/dev/null 2>&1 || true
	wait "$py"
	[ -s "$out" ]
}

# send_request REQUEST STAGE [CODE]: serve_client.py's send; its output in
# $output.
send_request() {
	output=$(timeout 120 python3 "$BATS_TEST_TMPDIR/serve_client.py" send "$RUNDIR/server.sock" \
		"$1" "$2" "${3:-}" "$log")
}

# measured_left_out FILE...: each JSON result line's measured fields made
# the same in every run: how long, and whether the cpu group held a job
# back at all (a spinning job at --cpus 1 is, in a period where the
# launcher's own work in its group tips it over: a CI run saw "spin"
# throttled through the server, not on its own). Each left JSON: batch's
# --resume reads these lines.
measured_left_out() {
	sed -i -E 's/"duration_ms":[0-9]+/"duration_ms":0/; s/"throttled":true/"throttled":false/' "$@"
}

# both ARGS...: sage-sandbox ARGS cold and through the server, stdin from
# $input_file (or /dev/null); their stdout, stderr and status must be the
# same, less run --json's duration_ms. Leaves $output, $errors, $status.
both() {
	local out=$BATS_TEST_TMPDIR/both before
	before=$(served_runs)
	set +e
	SAGE_SANDBOX_SERVER=off timeout 300 "$SAGE_SANDBOX" "$@" <"${input_file:-/dev/null}" \
		>"$out.cold.1" 2>"$out.cold.2"
	local cold=$?
	timeout 300 "$SAGE_SANDBOX" "$@" <"${input_file:-/dev/null}" >"$out.warm.1" 2>"$out.warm.2"
	status=$?
	set -e
	measured_left_out "$out".*.1
	expect_equal "$status" "$cold" "status through the server, and cold ($*)"
	expect_equal "$(cat "$out.warm.1")" "$(cat "$out.cold.1")" "stdout ($*)"
	expect_equal "$(cat "$out.warm.2")" "$(cat "$out.cold.2")" "stderr ($*)"
	cmp -s "$out.warm.1" "$out.cold.1" || { echo "# stdout differs in bytes ($*)" >&2; return 1; }
	cmp -s "$out.warm.2" "$out.cold.2" || { echo "# stderr differs in bytes ($*)" >&2; return 1; }
	expect_equal "$(served_runs)" "$((before + 1))" "runs the server served ($*)"
	output=$(cat "$out.warm.1")
	errors=$(cat "$out.warm.2")
}

@test "serve - the corpus through the server and cold: the same stdout, stderr, status and --json" {
	start_server --warm 2
	local dir=$BATS_TEST_TMPDIR/corpus
	mkdir -p "$dir"
	printf '%s\n' 'print(factor(2^64 + 1))' >"$dir/factor.sage"
	printf '%s\n' 'import sys' 'print("out"); print("err", file=sys.stderr)' 'sys.exit(3r)' >"$dir/exit.sage"
	printf '%s\n' 'sys.exit(3)' >"$dir/integer.sage"
	printf '%s\n' 'def f(x):' '    return 1 / x' 'f(0)' >"$dir/traceback.sage"
	printf '%s\n' 'print("é ∑ 😀 \x1b[31mred\x07 \x9b")' >"$dir/bytes.sage"
	printf '%s\n' 'import sys; print(sys.argv); print(input()); print(sys.stdin.read())' >"$dir/args.sage"
	printf '%s\n' 'print("x" * 300000)' >"$dir/flood.sage"
	printf '%s\n' 'while True: pass' >"$dir/spin.sage"
	printf '%s\n' 'import os, signal; print("bye", flush=True); os.kill(os.getpid(), signal.SIGKILL)' >"$dir/kill.sage"
	printf '%s\n' 'x = bytearray(3 * 2^30)' >"$dir/alloc.sage"
	# Sage 10 makes a directory of a random name in /tmp at its import
	# (sage_XXXXXXXX, sage.misc.temporary_file): a name of its own in
	# each cold run, and the template's in each served one.
	printf '%s\n' 'import os, re' 'print(sorted(re.sub("^sage_[a-z0-9_]{8}$", "sage_XXXXXXXX", n) for n in os.listdir(".")), os.getcwd(), os.umask(0))' >"$dir/look.sage"
	printf '\xff\xfe not utf-8\n' >"$dir/bad.sage"
	cd "$dir"
	for f in factor exit integer traceback bytes flood kill look bad; do
		both run "$f.sage"
		both run --json "$f.sage"
	done
	both run --timeout 3 spin.sage
	expect_equal "$status" 124
	both run --json --memory 512m alloc.sage
	printf 'line one\nrest\n' >"$dir/stdin"
	input_file=$dir/stdin both run args.sage a 'b c'
	expect_equal "$output" "['args.sage', 'a', 'b c']
line one
rest"
	input_file=$dir/factor.sage both run --json -
	input_file=$dir/flood.sage both run --output-limit 16 --show-control-chars
	expect_equal "$status" 123
	# Refused before anything runs, in the server as cold.
	both run --image localhost/no-such-image:1 factor.sage
	expect_equal "$status" 125
}

served_batches() {
	grep -c "^sage-sandbox serve: batch [0-9]* for pid" "$log" || true
}

# batch_both NAME ARGS...: `batch ARGS` on its own (SAGE_SANDBOX_SERVER=off)
# and through the server, stdin from $input_file (or /dev/null): the same
# status and lines (their durations aside), the same summary counts; the
# server's log has one more batch. Sets status.
batch_both() {
	local name=$1 out before
	shift
	out=$BATS_TEST_TMPDIR/$name
	before=$(served_batches)
	set +e
	SAGE_SANDBOX_SERVER=off timeout 300 "$SAGE_SANDBOX" batch "$@" <"${input_file:-/dev/null}" \
		>"$out.cold.1" 2>"$out.cold.2"
	local cold=$?
	timeout 300 "$SAGE_SANDBOX" batch "$@" <"${input_file:-/dev/null}" >"$out.warm.1" 2>"$out.warm.2"
	status=$?
	set -e
	measured_left_out "$out".*.1
	# What became of the container after a job's timeout depends on where
	# and when it ran: the launcher ends the job and the container serves
	# on, but where the launcher could not within the grace after the
	# deadline (its container still starting, or busy in a warm-up step on
	# a loaded machine), the container is stopped. And a job of a batch on
	# its own can wait for a warm-up step past its timeout: its code never
	# began, and it says so. The verdict, status and output must still be
	# the same.
	sed -i -e 's/ before its code began ([^)]*)//' \
		-e 's/\(its processes were killed\|nothing was run\) and the container serves the next call/the container was stopped/' \
		"$out".*.1
	expect_equal "$status" "$cold" "status through the server, and on its own ($name)"
	# Lines end in any order but the input's with --order input.
	expect_equal "$(sort "$out.warm.1")" "$(sort "$out.cold.1")" "lines ($name)"
	expect_equal "$(grep -o '[0-9]* jobs in' "$out.warm.2")" "$(grep -o '[0-9]* jobs in' "$out.cold.2")" \
		"jobs in the summary ($name)"
	expect_equal "$(grep -o 'jobs/s): .*(--resume)' "$out.warm.2")" \
		"$(grep -o 'jobs/s): .*(--resume)' "$out.cold.2")" "the summary's counts ($name)"
	grep -q "the server's (pid [0-9]*) CPU" "$out.warm.2"
	expect_equal "$(served_batches)" "$((before + 1))" "batches the server served ($name)"
}

# bats test_tags=any-sage
@test "serve - batch through the server: the lines of a batch on its own, from FILEs, .sage files and stdin, in order, sharded, resumed; --fresh, --no-server and --jobs past --warm go on their own" {
	start_server --warm 2
	local d=$BATS_TEST_TMPDIR/b
	mkdir -p "$d"
	cd "$d"
	cat >jobs.jsonl <<-'EOF'
	{"id": 1, "code": "print(factor(2^64 + 1))"}
	{"id": "exit", "code": "import sys\nprint('out'); print('err', file=sys.stderr)\nsys.exit(3r)"}
	{"id": "stdin", "code": "import sys\nprint(sys.argv, sys.stdin.read())", "stdin": "a\nb\n", "args": ["x", "y z"]}
	{"id": "spin", "code": "while True: pass", "timeout": 2}
	{"id": 1, "code": "print(1)"}
	{"id": "files", "code": "print(open('data.txt').read())", "files": {"data.txt": "hello"}}
	not json
	{"id": "tb", "code": "def f(x):\n    return 1/x\nf(0)"}
	{"id": "solve", "code": "print(solve(x^2 - 2 == 0, x))"}
	EOF
	printf '%s\n' 'print(integrate(sin(x)^2, x))' >a.sage
	printf '%s\n' '{"id": "more", "code": "print(2^100)"}' >more.jsonl
	batch_both file jobs.jsonl
	expect_equal "$status" 1
	# ok: 1, stdin, files, solve; exit, spin and tb ran and failed; two bad lines.
	expect_equal "$(grep -c '"ok":true' "$BATS_TEST_TMPDIR/file.warm.1")" 4
	grep -q '"id":"stdin",.*"stdout":"\[.*, .x., .y z.\] a\\nb\\n\\n"' "$BATS_TEST_TMPDIR/file.warm.1"
	batch_both files --order input jobs.jsonl a.sage - more.jsonl
	input_file=$d/more.jsonl batch_both stdin --jobs 1
	expect_equal "$status" 0
	batch_both shard --shard 1/2 jobs.jsonl
	# --resume from a results file with some of the jobs done, and a torn
	# last line: both finish the rest alike.
	grep -E '"id":("exit"|"stdin"|"solve")' "$BATS_TEST_TMPDIR/file.cold.1" >done.jsonl
	printf '{"id": "tb", "ok"' >>done.jsonl
	batch_both resume --resume done.jsonl jobs.jsonl
	expect_equal "$(grep -o '[0-9]* skipped' "$BATS_TEST_TMPDIR/resume.warm.2")" "3 skipped"

	# Each of these goes on its own, with containers of its own: the
	# server's log has no batch more.
	local before
	before=$(served_batches)
	local how
	for how in --fresh --no-server "--jobs 3"; do
		# shellcheck disable=SC2086 # --jobs 3 is two words
		run_ss 0 batch $how more.jsonl
		expect_match "$errors" "sage-sandbox's own CPU" "batch $how"
	done
	SAGE_SANDBOX_SERVER=off run_ss 0 batch more.jsonl
	expect_match "$errors" "sage-sandbox's own CPU"
	SLURM_JOB_ID=7 run_ss 0 batch more.jsonl
	expect_match "$errors" "sage-sandbox's own CPU" "in a Slurm job"
	# A .sage FIFO is read by the batch itself, never by the server (whose
	# one loop would wait on it): the job waits for its writer.
	mkfifo f.sage
	(sleep 2; printf '%s\n' 'print(7)' >f.sage) &
	local writer=$!
	run_ss 0 batch f.sage
	expect_match "$errors" "sage-sandbox's own CPU" "a .sage FIFO"
	expect_match "$output" '"stdout":"7\\n"'
	wait "$writer"
	expect_equal "$(served_batches)" "$before" "batches the server served"
	# An input that cannot be opened: refused as on its own, 125.
	run_ss 125 batch no-such.jsonl
	expect_match "$errors" "cannot read jobs from no-such.jsonl"
	run_ss 125 batch --resume no-such.jsonl jobs.jsonl
	expect_match "$errors" "cannot read --resume no-such.jsonl"
	expect_equal "$(served_batches)" "$before" "batches the server served"
}

# bats test_tags=any-sage
@test "serve - SIGTERM to a batch's client: 143, the running job has no line; --resume runs the rest; kill -9 of a client stops its batch; a default --jobs past --warm goes on its own" {
	start_server --warm 1
	local d=$BATS_TEST_TMPDIR
	cat >"$d/jobs.jsonl" <<-'EOF'
	{"id": "a", "code": "print('a')"}
	{"id": "slow", "code": "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('late')"}
	{"id": "c", "code": "print('c')"}
	EOF
	# Its default --jobs (the cores) is more than the server keeps: on its own.
	head -n 1 "$d/jobs.jsonl" >"$d/one.jsonl"
	run_ss 0 batch "$d/one.jsonl"
	expect_match "$errors" "sage-sandbox's own CPU" "default --jobs past --warm 1"
	expect_equal "$(served_batches)" 0
	"$SAGE_SANDBOX" batch --jobs 1 --order input "$d/jobs.jsonl" >"$d/out" 2>"$d/err" &
	local pid=$!
	wait_for_line "$d/out" '"id":"a"' 60
	sleep 2
	kill -TERM "$pid"
	local status=0
	wait "$pid" || status=$?
	expect_equal "$status" 143
	expect_equal "$(wc -l <"$d/out")" 1 "lines: only a's"
	[[ $(cat "$d/err") == *"stopped by SIGTERM; jobs still running have no line"* ]]
	wait_for_line "$log" "batch [0-9]* for pid $pid: exit 143" 30
	# The same ids, the slow one quick now.
	sed 's/time.sleep(60)/time.sleep(1)/' "$d/jobs.jsonl" >"$d/again.jsonl"
	run_ss 0 batch --jobs 1 --order input --resume "$d/out" "$d/again.jsonl"
	expect_equal "$(printf '%s\n' "$output" | python3 -c '
import json, sys
print(" ".join("%s:%s" % (j["id"], j["stdout"].replace("\n", "/")) for j in map(json.loads, sys.stdin)))')" \
		"slow:started/late/ c:c/"
	expect_equal "$(served_batches)" 2
	# kill -9 of a batch's client stops its running job as by SIGHUP; the
	# server serves on.
	"$SAGE_SANDBOX" batch --jobs 1 "$d/jobs.jsonl" >"$d/out9" 2>/dev/null &
	pid=$!
	wait_for_line "$d/out9" '"id":"a"' 60
	sleep 2
	kill -KILL "$pid"
	wait_for_line "$log" "batch [0-9]* for pid $pid: exit 129 after [0-9]* ms \\(its client was gone\\)" 30
	run_ss 0 batch --jobs 1 --resume "$d/out" "$d/again.jsonl"
	expect_equal "$(served_batches)" 4
}

@test "serve - a pipeline reads its data through the server: seq 5 | run f.sage" {
	start_server --warm 1
	printf '%s\n' 'import sys' 'print(sum(int(l) for l in sys.stdin))' >"$BATS_TEST_TMPDIR/f.sage"
	local out
	out=$(seq 5 | "$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/f.sage" | tr -d '\n')
	expect_equal "$out" 15
	out=$(seq 100000 | "$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/f.sage" | head -c 20)
	expect_equal "$out" 5000050000
	expect_equal "$(served_runs)" 2
}

# bats test_tags=any-sage
@test "serve - a Makefile of eight rules under make -j4: every rule's output, all through the server" {
	start_server --warm 2
	local dir=$BATS_TEST_TMPDIR/make
	mkdir -p "$dir"
	for n in 1 2 3 4 5 6 7 8; do
		printf 'print(%d, factorial(%d) %% 1000003)\n' "$n" "$((n * 100))" >"$dir/n$n.sage"
	done
	printf 'SAGE_SANDBOX = %s\nall: %s\n%%.out: %%.sage\n\t$(SAGE_SANDBOX) run $< > $@\n' \
		"$SAGE_SANDBOX" "$(printf 'n%d.out ' 1 2 3 4 5 6 7 8)" >"$dir/Makefile"
	make -s -j4 -C "$dir"
	for n in 1 2 3 4 5 6 7 8; do
		expect_equal "$(cat "$dir/n$n.out")" \
			"$(SAGE_SANDBOX_SERVER=off "$SAGE_SANDBOX" run "$dir/n$n.sage")" "n$n.out"
	done
	expect_equal "$(served_runs)" 8
}

@test "serve - --input and --output-dir named relative to the client's directory" {
	start_server --warm 1
	local dir=$BATS_TEST_TMPDIR/rel
	mkdir -p "$dir/work/out-cold" "$dir/work/out-warm" "$dir/data/tree"
	printf 'a,b\n1,2\n' >"$dir/data/table.csv"
	printf 'deep\n' >"$dir/data/tree/leaf.txt"
	printf '%s\n' 'import os' 'print(open("table.csv").read(), open("tree/leaf.txt").read())' \
		'out = os.environ["SAGE_SANDBOX_OUT"]' 'os.makedirs(out + "/sub")' \
		'open(out + "/sub/r.txt", "w").write("result")' >"$dir/work/f.sage"
	cd "$dir/work"
	umask 027
	SAGE_SANDBOX_SERVER=off run_ss 0 run --input ../data/table.csv --input ../data/tree \
		--output-dir out-cold f.sage
	local cold=$output cold_errors=$errors
	run_ss 0 run --input ../data/table.csv --input ../data/tree --output-dir out-warm f.sage
	expect_equal "$output" "$cold"
	expect_equal "$errors" "${cold_errors//out-cold/out-warm}"
	expect_equal "$(cat out-warm/sub/r.txt)" result
	# The modes the client's umask gives, as cold.
	expect_equal "$(stat -c %a out-warm/sub out-warm/sub/r.txt)" \
		"$(stat -c %a out-cold/sub out-cold/sub/r.txt)"
	expect_equal "$(served_runs)" 1
}

@test "serve - SIGINT or SIGTERM to a client stops its run as cold: 130 or 143, the line, the next run clean" {
	start_server --warm 1
	printf '%s\n' 'import time' 'print("started", flush=True)' 'time.sleep(60)' >"$BATS_TEST_TMPDIR/s.sage"
	for sig in INT TERM; do
		# A shell's background job ignores SIGINT: the client gets it back.
		python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/s.sage" \
			>"$BATS_TEST_TMPDIR/$sig.out" 2>"$BATS_TEST_TMPDIR/$sig.err" &
		local pid=$!
		wait_for_line "$BATS_TEST_TMPDIR/$sig.out" started 60
		kill -"$sig" "$pid"
		local status=0
		wait "$pid" || status=$?
		expect_equal "$status" "$((128 + $(kill -l "$sig")))"
		expect_equal "$(cat "$BATS_TEST_TMPDIR/$sig.err")" \
			"sage-sandbox: interrupted by SIG$sig; the container was stopped"
	done
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage both run
	expect_equal "$(served_runs)" 3
}

# held_run NAME FD: sage-sandbox run of code that prints "started NAME",
# then waits for a line on its stdin, a FIFO the test holds open on FD
# (bats has 3; 7 and up are free) until release NAME FD; $NAME.out,
# $NAME.err, its pid in $NAME.pid.
held_run() {
	mkfifo "$BATS_TEST_TMPDIR/$1.in"
	eval "exec $2<>\"\$BATS_TEST_TMPDIR/$1.in\""
	printf '%s\n' 'import sys' "print('started $1', flush=True)" \
		"print('read', sys.stdin.readline().strip())" >"$BATS_TEST_TMPDIR/$1.sage"
	"$SAGE_SANDBOX" run --timeout 60 "$BATS_TEST_TMPDIR/$1.sage" <"$BATS_TEST_TMPDIR/$1.in" \
		>"$BATS_TEST_TMPDIR/$1.out" 2>"$BATS_TEST_TMPDIR/$1.err" &
	echo $! >"$BATS_TEST_TMPDIR/$1.pid"
}

# release NAME FD: its line, and its end: 0, "started NAME", "read go".
release() {
	local status=0
	echo go >&"$2"
	eval "exec $2>&-"
	wait "$(cat "$BATS_TEST_TMPDIR/$1.pid")" || status=$?
	expect_equal "$status" 0 "$1's status"
	expect_equal "$(cat "$BATS_TEST_TMPDIR/$1.out")" "$(printf 'started %s\nread go' "$1")" "$1's stdout"
	expect_equal "$(cat "$BATS_TEST_TMPDIR/$1.err")" "" "$1's stderr"
}

# bats test_tags=any-sage
@test "serve - a run behind another client's held run waits as long as a container's start, then runs in one of its own: its output and status, the held run untouched; three at once, each its own" {
	# Every run at the server's --timeout: one kind of settings, one
	# fleet, one warm sandbox.
	start_server --warm 1 --timeout 60
	held_run long 7
	wait_for_line "$BATS_TEST_TMPDIR/long.out" '^started long$' 60
	# The server's one sandbox is busy until the test says: this run gets
	# a container of its own (before overflow it waited for that one, and
	# timed out, nothing run).
	sage 'print(factor(2^64+1))' 0 run --timeout 60
	expect_equal "$output" "274177 * 67280421310721"
	expect_equal "$errors" ""
	expect_equal "$(grep -c 'a call waited [0-9]* ms behind busy sandboxes; it gets a container of its own' "$log")" 1
	release long 7

	# Three at once, one warm sandbox: all three running at the same time,
	# so two in containers of their own.
	held_run one 7
	held_run two 8
	held_run three 9
	local name
	for name in one two three; do
		wait_for_line "$BATS_TEST_TMPDIR/$name.out" "^started $name\$" 60
	done
	expect_equal "$(grep -c 'a call waited [0-9]* ms behind busy sandboxes' "$log")" 3
	release one 7
	release two 8
	release three 9
}

# bats test_tags=any-sage
@test "serve - a run still waiting at its --timeout, where a container takes longer to start than that, ends 124, nothing run; the server serves on" {
	# A podman whose sandboxes take 6 s to start: longer than the runs'
	# --timeout 4, so no run gets a container of its own, and the runs
	# past the one warm sandbox wait for it.
	cat >"$BATS_TEST_TMPDIR/podman" <<-EOF
	#!/bin/sh
	case " \$* " in *" run "*" serial "|*" run "*" once ") sleep 6 ;; esac
	exec $(command -v podman) "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/podman"
	start_server --warm 1 --timeout 4 --podman "$BATS_TEST_TMPDIR/podman"
	printf '%s\n' 'import time' 'print("started", flush=True)' 'time.sleep(30)' >"$BATS_TEST_TMPDIR/s.sage"
	# Three runs, one sandbox: the first holds it to its deadline, the
	# third waits to its own. The second is handed the sandbox that
	# replaces the first's, still starting, and times out in it, or
	# waits: either is right.
	local n pids=() ran=0 waited=0 status before out
	before=$(served_runs)
	for n in 1 2 3; do
		"$SAGE_SANDBOX" run --timeout 4 --podman "$BATS_TEST_TMPDIR/podman" "$BATS_TEST_TMPDIR/s.sage" \
			>"$BATS_TEST_TMPDIR/$n.out" 2>"$BATS_TEST_TMPDIR/$n.err" &
		pids+=($!)
	done
	for n in 1 2 3; do
		status=0
		wait "${pids[n - 1]}" || status=$?
		expect_equal "$status" 124 "run $n's status"
		out=$(cat "$BATS_TEST_TMPDIR/$n.out")
		case $(cat "$BATS_TEST_TMPDIR/$n.err") in
		"sage-sandbox: timed out after 4 s waiting for a warm sandbox; nothing was run; raise --timeout, or give the server more sandboxes (serve --warm N)")
			waited=$((waited + 1))
			expect_equal "$out" "" "run $n's stdout" ;;
		"sage-sandbox: timed out after 4 s; the container was stopped; raise --timeout (at most 600)")
			expect_equal "$out" started "run $n's stdout"
			ran=$((ran + 1)) ;;
		"sage-sandbox: timed out after 4 s before its code began (the sandbox's start, Sage's import or a warm-up step took that long); the container was stopped; raise --timeout (at most 600)")
			expect_equal "$out" "" "run $n's stdout" ;;
		*)
			expect_equal "$(cat "$BATS_TEST_TMPDIR/$n.err")" "one of the three timeout lines" "run $n's stderr" ;;
		esac
	done
	[ "$ran" -ge 1 ] && [ "$waited" -ge 1 ] || { echo "# $ran ran, $waited timed out waiting" >&2; return 1; }
	expect_no_match "$(cat "$log")" "behind busy sandboxes"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage run_ss 0 run --timeout 30
	expect_equal "$errors" ""
	[ "$(served_runs)" -gt "$before" ]
}

# bats test_tags=any-sage
@test "serve - kill -9 of a client stops its run within a second; kill -9 of the server: its client says so, 125, and cleanup removes what it left" {
	start_server --warm 1
	printf '%s\n' 'import time' 'print("started", flush=True)' 'time.sleep(60)' >"$BATS_TEST_TMPDIR/s.sage"
	"$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/s.sage" >"$BATS_TEST_TMPDIR/s.out" 2>"$BATS_TEST_TMPDIR/s.err" &
	local pid=$!
	wait_for_line "$BATS_TEST_TMPDIR/s.out" started 60
	kill -9 "$pid"
	wait "$pid" || true
	wait_for_line "$log" "exit 129 after [0-9]+ ms \(its client was gone\)" 1
	expect_equal "$(cat "$BATS_TEST_TMPDIR/s.err")" "" "nothing written after the client died"
	# Now the server dies under a run.
	"$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/s.sage" >"$BATS_TEST_TMPDIR/t.out" 2>"$BATS_TEST_TMPDIR/t.err" &
	pid=$!
	wait_for_line "$BATS_TEST_TMPDIR/t.out" started 60
	kill -9 "$server_pid"
	local status=0
	wait "$pid" || status=$?
	expect_equal "$status" 125
	expect_match "$(cat "$BATS_TEST_TMPDIR/t.err")" "^sage-sandbox: the server \(pid $server_pid\) ended during the run, whose output may be cut short; see $RUNDIR/server.log, and run again$"
	server_pid=
	# A stale socket: the next run goes cold, and works.
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage run_ss 0 run
	expect_equal "$errors" ""
	run_ss 0 cleanup
	expect_no_containers
	rm -f "$RUNDIR/server.sock"
}

# bats test_tags=any-sage
@test "serve - a request whose deadline passed before it came (three clients delayed before connecting): 124, nothing run, and the server serves on" {
	command -v strace >/dev/null || skip "strace is not installed (the delay is injected into connect)"
	strace -o /dev/null true 2>/dev/null || skip "strace cannot trace here (ptrace not allowed)"
	start_server --warm 1
	local n status before
	before=$(served_runs)
	for n in 1 2 3; do
		# issue 32's repro. Leak checking cannot run under ptrace; the
		# server's own checks (its log) still do.
		set +e
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout 60 strace -o /dev/null \
			-e trace=connect -e inject=connect:delay_enter=1500000 \
			"$SAGE_SANDBOX" run --timeout 1 </dev/null >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err"
		status=$?
		set -e
		expect_equal "$status" 124 "run $n's status"
		expect_match "$(cat "$BATS_TEST_TMPDIR/err")" "^sage-sandbox: timed out after 1 s (reading the code; nothing was run; close standard input, name a FILE, or raise --timeout|checking podman; nothing was run; see what podman answers with 'sage-sandbox status', or raise --timeout)$"
		expect_equal "$(cat "$BATS_TEST_TMPDIR/out")" ""
		kill -0 "$server_pid"
	done
	expect_equal "$(served_runs)" "$((before + 3))" "runs the server answered"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage both run
}

# bats test_tags=any-sage
@test "serve - stage by stage: a start time past its deadline or in the future, empty code, a client gone before its request, in the host check, in the code, in its output; the same server serves on" {
	write_serve_client
	# Made by the real client before the server starts: its build, its
	# environment, its settings. The host check's podman takes 3 s.
	printf '#!/bin/sh\nsleep 3\nexec podman "$@"\n' >"$BATS_TEST_TMPDIR/slow-podman"
	chmod +x "$BATS_TEST_TMPDIR/slow-podman"
	capture_request "$BATS_TEST_TMPDIR/req-1s" --timeout 1
	capture_request "$BATS_TEST_TMPDIR/req" --timeout 60
	capture_request "$BATS_TEST_TMPDIR/req-2m" --timeout 60 --output-limit 2048
	capture_request "$BATS_TEST_TMPDIR/req-slow" --timeout 20 --podman "$BATS_TEST_TMPDIR/slow-podman"
	start_server --warm 1
	local before
	before=$(served_runs)

	# Its start a minute ago, its --timeout 1 s, no code: nothing runs
	# (issue 32: three of them, and the server died).
	local n
	for n in 1 2 3; do
		send_request "$BATS_TEST_TMPDIR/req-1s" stale
		expect_match "$output" "server: exit 124"
		# Once: the old server said it twice, then used freed memory.
		expect_match "$output" "stderr: sage-sandbox: timed out after 1 s (reading the code; nothing was run; close standard input, name a FILE, or raise --timeout|checking podman; nothing was run; see what podman answers with 'sage-sandbox status', or raise --timeout)"$'\n'"sage-sandbox serve: run [0-9]+ for pid [0-9]+: exit 124 after [0-9]+ ms$"
		kill -0 "$server_pid"
	done
	# A start from the future gains no time; it runs as from now.
	send_request "$BATS_TEST_TMPDIR/req" future 'print(6 * 7)'
	expect_match "$output" "server: exit 0"$'\n'"stdout: 42"$'\n'"stderr: "$'\n'
	# Empty code, cold and through the server alike.
	input_file=/dev/null both run
	input_file=/dev/null both run --json

	# Gone before its request: nothing is logged, nothing breaks.
	send_request "$BATS_TEST_TMPDIR/req" none
	# Gone while podman is asked: the check's answer is waited for, then
	# the run ends as by SIGHUP.
	send_request "$BATS_TEST_TMPDIR/req-slow" host
	expect_match "$output" "answer: ok"
	expect_match "$output" "exit 129 after [0-9]+ ms \(its client was gone\)$"
	# Gone while the code runs.
	send_request "$BATS_TEST_TMPDIR/req" code $'import time\nprint("started", flush=True)\ntime.sleep(60)'
	expect_match "$output" "exit 129 after [0-9]+ ms \(its client was gone\)$"
	# Gone while the code's output waits for a reader that does not read
	# (the run paused, under its output limit).
	send_request "$BATS_TEST_TMPDIR/req-2m" output $'import sys, time\nsys.stdout.write("x" * 2000000)\nsys.stdout.flush()\ntime.sleep(60)'
	expect_match "$output" "exit 129 after [0-9]+ ms \(its client was gone\)$"
	# Gone once the code is over, its output still queued: the run closes
	# now, not at its deadline a minute on.
	send_request "$BATS_TEST_TMPDIR/req" flush $'import sys\nsys.stdout.write("x" * 200000)\nsys.stdout.flush()\nprint("done", file=sys.stderr, flush=True)'
	expect_match "$output" "exit 0 after ([0-9]{1,4}|1[0-9]{4}) ms \(its client was gone\)$"

	kill -0 "$server_pid"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage both run
	expect_equal "$(served_runs)" "$((before + 11))" "runs the server served"
}

@test "serve - a socket directory that is not 0700 is refused: a one-line warning, the run cold; serve will not start" {
	chmod 0755 "$RUNDIR"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage run_ss 0 run
	expect_equal "$errors" "sage-sandbox: warning: the server's directory $RUNDIR is not mode 0700 (mode 0755, uid $(id -u)): nobody else may reach a server's socket; chmod 0700 it, or remove it; running without the server"
	run_ss 125 serve
	expect_match "$errors" "not mode 0700"
	chmod 0700 "$RUNDIR"
}

# bats test_tags=any-sage
@test "serve - garbage, a cut request, a huge one and a silent client each get the connection closed; the server serves on" {
	start_server --warm 1
	local out
	out=$(python3 - "$RUNDIR/server.sock" <<-'EOF'
	import socket, sys
	def talk(payload, wait=2.0):
	    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	    s.connect(sys.argv[1])
	    if payload is not None:
	        s.send(payload)
	    s.settimeout(wait)
	    try:
	        got = s.recv(100)
	    except socket.timeout:
	        got = "no answer"
	    s.close()
	    return got
	print(talk(b"GET / HTTP/1.0\r\n\r\n"))
	print(talk(b"SSR1R\x01\x10\x00"))
	print(talk(b"SSR1R" + b"\x07" + (150000).to_bytes(4, "little") + b"a" * 150000))
	print(talk(None, wait=8))
	EOF
	)
	expect_equal "$out" "b''
b''
b''
b''"
	expect_match "$(cat "$log")" "closed the connection of pid [0-9]+: not a sage-sandbox request"
	expect_match "$(cat "$log")" "closed the connection of pid [0-9]+: a field cut short"
	expect_match "$(cat "$log")" "closed the connection of pid [0-9]+: a request longer than 131072 bytes"
	expect_match "$(cat "$log")" "closed the connection of pid [0-9]+: no request within 5 s"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage both run
}

# bats test_tags=any-sage
@test "serve - --idle: no client for that long, and it exits 0 with no socket and no container left" {
	start_server --warm 1 --idle 10
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage both run
	local status=0
	timeout 30 tail --pid="$server_pid" -f /dev/null
	wait "$server_pid" || status=$?
	server_pid=
	expect_equal "$status" 0
	expect_match "$(cat "$log")" "stopping: no client for 10 s"
	[ ! -e "$RUNDIR/server.sock" ]
	expect_no_containers
}

@test "serve - a server of another build declines the run, which runs cold with a note, and exits" {
	# The same program with another build id: another build.
	local other=$BATS_TEST_TMPDIR/other-sage-sandbox
	python3 - "$SAGE_SANDBOX" "$other" <<-'EOF'
	import re, subprocess, sys
	notes = subprocess.run(["readelf", "-n", sys.argv[1]], capture_output=True, text=True).stdout
	build = bytes.fromhex(re.search(r"Build ID: ([0-9a-f]+)", notes).group(1))
	data = open(sys.argv[1], "rb").read()
	assert data.count(build) == 1
	open(sys.argv[2], "wb").write(data.replace(build, bytes(b ^ 0xff for b in build)))
	EOF
	chmod +x "$other"
	"$other" serve --warm 1 2>"$log" &
	server_pid=$!
	wait_for_line "$log" "first warm sandbox ready" 120
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	SAGE_SANDBOX_SERVER=off run_ss 0 run
	local cold=$output
	run_ss 0 run
	expect_equal "$output" "$cold"
	expect_match "$errors" "^sage-sandbox: note: the server \(pid $server_pid\) is another build of sage-sandbox \(the server's [0-9a-f]{12}, the run's [0-9a-f]{12}\); it was asked to exit, and this run goes without it$"
	wait "$server_pid"
	server_pid=
	expect_match "$(cat "$log")" "a client of another build"
}

@test "serve - socket activation: systemd-socket-activate hands it the socket (LISTEN_FDS), and a run goes through it" {
	command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate is not installed"
	# It hands the server no environment but what -E names: the image the
	# suite runs on, where one is named.
	systemd-socket-activate --seqpacket -l "$RUNDIR/server.sock" \
		${SAGE_SANDBOX_IMAGE:+-E SAGE_SANDBOX_IMAGE} "$SAGE_SANDBOX" serve --warm 1 --idle 60 2>"$log" &
	server_pid=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[ ! -S "$RUNDIR/server.sock" ] || break
		sleep 0.1
	done
	# The first connection starts the server.
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	SAGE_SANDBOX_SERVER=off run_ss 0 run
	local cold=$output
	run_ss 0 run
	expect_equal "$output" "$cold"
	expect_match "$(cat "$log")" "serves at $RUNDIR/server.sock \(socket activated\)"
	expect_equal "$(served_runs)" 1
	"$SAGE_SANDBOX" serve --stop
	wait "$server_pid"
	server_pid=
	# The socket is the service manager's: the server leaves it.
	rm -f "$RUNDIR/server.sock"
}

@test "serve - SAGE_SANDBOX_SERVER=start from two shells at once: both runs right, one server left, and it serves the next" {
	rm -f "$RUNDIR/server.log"
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	SAGE_SANDBOX_SERVER=off run_ss 0 run
	local cold=$output
	SAGE_SANDBOX_SERVER=start "$SAGE_SANDBOX" run <"$input_file" >"$BATS_TEST_TMPDIR/a" &
	local a=$!
	SAGE_SANDBOX_SERVER=start "$SAGE_SANDBOX" run <"$input_file" >"$BATS_TEST_TMPDIR/b" &
	wait "$a"
	wait $!
	expect_equal "$(cat "$BATS_TEST_TMPDIR/a")" "$cold"
	expect_equal "$(cat "$BATS_TEST_TMPDIR/b")" "$cold"
	wait_for_line "$RUNDIR/server.log" "first warm sandbox ready" 120
	expect_equal "$(pgrep -u "$(id -u)" -fc 'sage-sandbox serve$')" 1 "servers"
	# The run that started the server went cold; the other went cold too,
	# or, where the server answered by the time it asked, through it (the
	# server takes runs before its first sandbox is warm): either is right.
	local before
	before=$(grep -c '^sage-sandbox serve: run [0-9]* for pid' "$RUNDIR/server.log" || true)
	[ "$before" -le 1 ] || { echo "# $before runs served before the next" >&2; return 1; }
	# The next run goes through it.
	SAGE_SANDBOX_SERVER=start run_ss 0 run
	expect_equal "$output" "$cold"
	expect_equal "$(grep -c '^sage-sandbox serve: run [0-9]* for pid' "$RUNDIR/server.log")" \
		"$((before + 1))" "runs served"
}
