#!/usr/bin/env bats
# Containers that serve several calls (batch's, an MCP session's) are as
# good as fresh ones: a hostile call first, its victims after it in the same
# container, and each victim's result compared with a fresh `run` of the
# same code. batch --jobs 1 makes one container serve every job.

load helpers

teardown() {
	restore_cpu_group
	wait_no_containers 30
}

# jobs_file NAME CODE [NAME CODE]...: JSON Lines of those jobs in $jobs.
jobs_file() {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	python3 -c '
import json, sys
args = sys.argv[1:]
for name, code in zip(args[::2], args[1::2]):
    print(json.dumps({"id": name, "code": code, "timeout": 60}))' "$@" >"$jobs"
}

# field ID EXPR: Python EXPR over the result line of job ID in $output.
field() {
	printf '%s\n' "$output" | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    if j["id"] == sys.argv[1]:
        print(eval(sys.argv[2]))' "$1" "$2"
}

# expect_as_fresh ID CODE [RUN OPTIONS...]: job ID's stdout, stderr and
# exit code are what a fresh `run` of CODE gives. The fresh run of the
# same code and options is made once a file (several tests' victim is
# one): a cold run is the suite's slowest step.
expect_as_fresh() {
	local batch=$output id=$1 code=$2
	shift 2
	local cached
	cached=$BATS_FILE_TMPDIR/fresh-$(printf '%s\0' "$code" "$@" | sha256sum | cut -c1-16)
	if [ ! -e "$cached" ]; then
		sage "$code" "$(field "$id" 'j["exit_code"]' <<<"$batch")" run --json "$@"
		printf '%s' "$output" >"$cached.tmp" && mv "$cached.tmp" "$cached"
	fi
	local fresh
	fresh=$(cat "$cached")
	output=$batch
	expect_equal "$(field "$id" '[j["stdout"], j["stderr"], j["exit_code"]]')" \
		"$(printf '%s' "$fresh" | python3 -c 'import json, sys; j = json.load(sys.stdin); print([j["stdout"], j["stderr"], j["exit_code"]])')" \
		"job $id against a fresh run"
	output=$batch
}

VICTIM='import signal, time
print(factor(2^64 + 1))
print(factor(next_prime(10^30) * next_prime(10^31)))
print(sum(gp("prime(%d)" % k) for k in range(1, 30)))
alarm(3)
try:
    time.sleep(1)
    print("no alarm yet")
finally:
    cancel_alarm()
print(len(str(factorial(2000))))'

# bats test_tags=slow
@test "reuse - signals sent to pid 1 by a job reach nothing: the next jobs' results are a fresh run's" {
	jobs_file attacker 'import os, signal
sent = []
for s in sorted(signal.valid_signals()):
    if s in (signal.SIGKILL, signal.SIGSTOP):
        continue
    try:
        os.kill(1, s)
        sent.append(int(s))
    except OSError as e:
        print("signal", int(s), e)
print("sent", len(sent))' victim "$VICTIM" victim2 "$VICTIM"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	expect_match "$errors" "3 ok, 0 failed, 0 bad lines, 0 not run; 0 retried, 0 skipped \(--resume\); 0 containers replaced after a job"
	expect_match "$(field attacker 'j["stdout"]')" "^sent [0-9]+$"
	expect_equal "$(field victim 'j["attempts"]')" 1
	expect_as_fresh victim "$VICTIM"
	expect_as_fresh victim2 "$VICTIM"
}

@test "reuse - a job that replaces os's functions ends as a fresh sage FILE does, cold and warm; the next job's result is a fresh run's" {
	# The launcher told a job's end with the os.write the code shares:
	# os.write = None made a script that printed its line exit 70, cold
	# and warm, where a fresh `sage FILE` prints it and exits 0.
	local writes='import os
os.write = os.read = None
print(1)'
	jobs_file writes "$writes" victim "$VICTIM"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	expect_match "$errors" "2 ok, 0 failed, 0 bad lines, 0 not run; 0 retried"
	expect_equal "$(field writes '[j["stdout"], j["stderr"], j["exit_code"]]')" "['1\\n', '', 0]"
	expect_as_fresh writes "$writes"
	expect_as_fresh victim "$VICTIM"
}

@test "reuse - each job draws its own random numbers, as fresh runs do: Sage's random(), ZZ's, Python's random module's" {
	# (PARI's own random() starts from the same seed in every fresh run:
	# it is the same in each job too.)
	local code='import random as stdlib_random
print(random(), ZZ.random_element(10^30), stdlib_random.random())'
	jobs_file one "$code" two "$code" three "$code"
	run_ss 0 batch --jobs 1 "$jobs"
	local draws
	draws=$({ field one 'j["stdout"]'; field two 'j["stdout"]'; field three 'j["stdout"]'; } | grep .)
	expect_equal "$(wc -l <<<"$draws")" 3
	# Each number differs from the same number of every other job.
	expect_equal "$(python3 -c 'import sys; rows = [l.split() for l in sys.stdin]; print(all(len({r[k] for r in rows}) == 3 for k in range(3)))' <<<"$draws")" True "$draws"
}

@test "reuse - files planted under directories chmod'ed 000 or 0300 are gone: no matplotlibrc, maxima init, GAP workspace; a later job's input stays unseen" {
	local victim='import matplotlib, os
print(open("secret.txt").read())
print(maxima("1 + 1"), libgap.Factorial(5), matplotlib.rcParams["lines.linewidth"])
print(sorted(os.listdir(os.environ["HOME"])))'
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	VICTIM=$victim python3 - >"$jobs" <<-'EOF'
	import json, os
	plant = r'''import os
	home, dot = os.environ["HOME"], os.environ["DOT_SAGE"]
	os.makedirs(os.environ["MPLCONFIGDIR"], exist_ok=True)
	open(os.environ["MPLCONFIGDIR"] + "/matplotlibrc", "w").write("lines.linewidth: 42\n")
	maxima_dir = os.environ["MAXIMA_USERDIR"]
	os.makedirs(maxima_dir, exist_ok=True)
	steal = 'system("cp /tmp/secret.txt %s/.stolen; cp /tmp/secret.txt %s/.stolen")$' % (dot, home)
	open(maxima_dir + "/maxima-init.mac", "w").write(steal + "\n")
	from sage.libs.gap.saved_workspace import workspace
	libgap.eval('MakeReadWriteGlobal("Factorial")')
	libgap.eval("Factorial := function(n) return 42; end")
	# Where the image keeps one, Sage's path is a link to it (gapspace.py):
	# the plant replaces it with a file of its own.
	path = workspace()[0]
	os.path.islink(path) and os.unlink(path)
	libgap.SaveWorkspace(path)
	os.chmod(home, 0o300)
	os.chmod(dot, 0)
	print("planted")'''
	look = r'''import os
	found = [os.path.join(r, f) for r, ds, fs in os.walk("/tmp") for f in fs
	         if "s3cr3t" in open(os.path.join(r, f), errors="replace").read()]
	print("stolen" if found else "nothing", found)'''
	print(json.dumps({"id": "plant", "code": plant, "timeout": 120}))
	print(json.dumps({"id": "victim", "code": os.environ["VICTIM"], "files": {"secret.txt": "s3cr3t"},
	                  "timeout": 120}))
	print(json.dumps({"id": "look", "code": look, "timeout": 60}))
	EOF
	run_ss 0 batch --order input --jobs 1 --timeout 120 "$jobs"
	expect_equal "$(field plant 'j["stdout"]')" "planted"
	expect_match "$(field victim 'j["stdout"]')" "^s3cr3t
 +2 120 1.5
"
	expect_equal "$(field look 'j["stdout"]')" "nothing []"
	expect_equal "$(field victim 'j["attempts"]')" 1
	printf 's3cr3t' >"$BATS_TEST_TMPDIR/secret.txt"
	expect_as_fresh victim "$victim" --timeout 120 --input "$BATS_TEST_TMPDIR/secret.txt"
}

@test "reuse - /dev/shm is a fresh container's in every job: multiprocessing's pools, queues and locks work, and what a job left there is gone" {
	# The first job runs multiprocessing as a fresh Sage does (its locks
	# are POSIX semaphores in /dev/shm); the second fills it to its bytes
	# and its inodes, then leaves a file, a held mapping of another, and a
	# directory chmod'ed 000 there; the third finds /dev/shm empty and
	# multiprocessing working again.
	local pool='import multiprocessing, os
st = os.statvfs("/dev/shm")
print(sorted(os.listdir("/dev/shm")), st.f_bfree == st.f_blocks, oct(os.stat("/dev/shm").st_mode))
def square(n):
    return n * n
with multiprocessing.Pool(2) as pool:
    print(pool.map(square, range(8)))
queue, lock = multiprocessing.Queue(), multiprocessing.Lock()
worker = multiprocessing.Process(target=queue.put, args=("through a queue",))
worker.start(); print(queue.get()); worker.join()
with lock:
    print("locked", worker.exitcode)'
	local plant='import errno, mmap, os
try:
    with open("/dev/shm/planted", "wb") as f:
        f.write(b"x" * (80 << 20))
except OSError as e:
    print("full at", os.path.getsize("/dev/shm/planted") >> 20, "MiB:", errno.errorcode[e.errno])
os.unlink("/dev/shm/planted")
made = 0
try:
    while True:
        open("/dev/shm/f%d" % made, "w").close()
        made += 1
except OSError as e:
    print("inodes:", made, errno.errorcode[e.errno])
for i in range(made):
    os.unlink("/dev/shm/f%d" % i)
open("/dev/shm/planted", "wb").write(b"x" * (32 << 20))
fd = os.open("/dev/shm/mapped", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 1 << 20)
held = mmap.mmap(fd, 1 << 20)
os.unlink("/dev/shm/mapped")
os.makedirs("/dev/shm/d/e")
open("/dev/shm/d/e/f", "w").write("left")
os.chmod("/dev/shm/d", 0)
if os.fork() == 0:
    os.setsid(); import time; time.sleep(100)
print("planted", sorted(os.listdir("/dev/shm")))'
	jobs_file pool "$pool" plant "$plant" again "$pool"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	# At most 64 MiB and 1024 inodes (the root's own is one).
	expect_equal "$(field plant 'j["stdout"]')" "full at 64 MiB: ENOSPC
inodes: 1023 ENOSPC
planted ['d', 'planted']"
	local want="[] True 0o41777
[0, 1, 4, 9, 16, 25, 36, 49]
through a queue
locked 0"
	expect_equal "$(field pool 'j["stdout"]')" "$want"
	expect_equal "$(field again 'j["stdout"]')" "$want"
	expect_equal "$(field again 'j["attempts"]')" 1
	expect_as_fresh pool "$pool"
	expect_as_fresh again "$pool"
}

@test "reuse - prlimit, setpriority and sched_* on pid 1 are refused; the next job's limits, nice and scheduling are a fresh run's" {
	# RLIMIT_DATA and RLIMIT_AS are a warm call's own: the memory limit
	# plus what the warm-up took (sage-sandbox(1), Warm templates).
	local probe='import os, resource
print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), sorted(os.sched_getaffinity(0)) == list(range(os.cpu_count())))
print([resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_") and n not in ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_AS")])
print(oct(os.umask(0o022)), os.getcwd(), sorted(k for k in os.environ if not k.startswith("_")))'
	jobs_file attacker 'import os, resource
for name, call in (("prlimit", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 64))),
                   ("prlimit fsize", lambda: resource.prlimit(1, resource.RLIMIT_FSIZE, (4096, 4096))),
                   ("prlimit stack", lambda: resource.prlimit(1, resource.RLIMIT_STACK, (1 << 20, 1 << 20))),
                   ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19)),
                   ("setpriority user", lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19)),
                   ("setpriority group", lambda: os.setpriority(os.PRIO_PGRP, 0, 19)),
                   ("sched_setscheduler", lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))),
                   ("sched_setaffinity", lambda: os.sched_setaffinity(1, {int(0)}))):
    try:
        call()
        print(name, "ALLOWED")
    except OSError as e:
        print(name, e.strerror)
os.nice(10)
os.umask(0)' victim "$probe"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	expect_equal "$(field attacker 'j["stdout"]')" "prlimit Operation not permitted
prlimit fsize Operation not permitted
prlimit stack Operation not permitted
setpriority Operation not permitted
setpriority user Operation not permitted
setpriority group Operation not permitted
sched_setscheduler Operation not permitted
sched_setaffinity Operation not permitted"
	expect_as_fresh victim "$probe"
}

@test "reuse - a session's cell leaves a thread spinning, a helper allocating and one whose leader exited: nothing of it runs between cells" {
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	start = r'''import os, threading, time, resource, ctypes
	# A process whose main thread exits by itself is a zombie to /proc while
	# its other thread writes on: so it is by the cell's end.
	if os.fork() == 0:
	    def write():
	        while True:
	            with open("/tmp/leak", "a") as f:
	                f.write("x")
	            time.sleep(float(0.05))
	    threading.Thread(target=write).start()
	    time.sleep(float(0.2))
	    ctypes.CDLL(None).syscall(int(60), int(0))
	time.sleep(float(0.6))
	def spin():
	    while True:
	        pass
	threading.Thread(target=spin, daemon=True).start()
	if os.fork() == 0:
	    os.setsid()
	    held = []
	    while True:
	        held.append(bytearray(64 << 20))
	        time.sleep(float(0.05))
	kept = 7
	u = resource.getrusage(resource.RUSAGE_SELF)
	print("started", int(u.ru_utime + u.ru_stime))'''
	look = r'''import os, resource, time
	u = resource.getrusage(resource.RUSAGE_SELF)
	def alive(p):
	    fields = open("/proc/%s/stat" % p).read().rpartition(")")[2].split()
	    return fields[0] != "Z" or int(fields[17]) > 1
	others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())
	          and alive(p)]
	size = os.path.getsize("/tmp/leak")
	time.sleep(float(0.5))
	print("kept", kept, "cpu", int(u.ru_utime + u.ru_stime), "others", others,
	      "grew", os.path.getsize("/tmp/leak") - size)'''
	run = lambda code: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": 20}}
	print(json.dumps([run(start), 4, run(look)]))
	EOF
	local out
	out=$(timeout 200 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" --memory 512m 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	# The first cell ran for a moment; 4 s between cells added no CPU
	# time (a spinning thread would have added 4 s), its helpers are gone
	# (zombies at most, their parent the session's stopped Sage), and
	# nothing writes to /tmp/leak any more.
	expect_match "$(sed -n 1p <<<"$out")" '"started [0-1]\\n"'
	expect_match "$(sed -n 2p <<<"$out")" '"kept 7 cpu [0-2] others \[\] grew 0\\n"'
	expect_equal "$(sed -n 3p <<<"$out")" '{"exit": 0}'
}

@test "reuse - a SIGINT a session's thread sends between cells does nothing, as in an idle notebook; each cell keeps its own handlers" {
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	# The thread's SIGINTs come as the next cell arrives (it slept while
	# the session was stopped): before issue 33 one raised
	# KeyboardInterrupt in the launcher's frames, or lost the session.
	# Where they come once the cell began, they are its own interrupt, as
	# they may as it begins, before its first line. So each "two" cell
	# waits for the thread to have sent all three: one that ends, ends
	# with none of them left to come; one interrupted took at least one.
	# Of four, one ends, and the cells after it see none (CI of 17f1a43:
	# the third, interrupted as it began, never set its handler). The
	# wait polls a flag: an Event's lock, interrupted inside wait(), may
	# be left held (review helper).
	one = r'''import os, signal, threading, time
	kept = 7
	sent = False
	def interrupt():
	    global sent
	    time.sleep(float(0.3))
	    for i in range(int(3)):
	        os.kill(os.getpid(), signal.SIGINT)
	    sent = True
	threading.Thread(target=interrupt, daemon=True).start()
	print("one", signal.getsignal(signal.SIGINT))'''
	two = "while not sent:\n    time.sleep(float(0.01))\nprint('two', signal.getsignal(signal.SIGINT))"
	# The code's own handler runs in its cells, and is its own again in
	# the next one.
	three = r'''signal.signal(signal.SIGINT, lambda s, f: print("mine"))
	os.kill(os.getpid(), signal.SIGINT)
	time.sleep(float(0.1))'''
	four = r'''os.kill(os.getpid(), signal.SIGINT)
	time.sleep(float(0.1))
	print("four", kept)'''
	run = lambda code: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": 20}}
	print(json.dumps([run(one), 1, run(two), run(two), run(two), run(two), run(three), run(four)]))
	EOF
	local out handler
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	handler=$(sed -n 1p <<<"$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["structuredContent"]["stdout"].split(" ", 1)[1], end="")')
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"stdout": "one '
	local two line ended=
	for line in 2 3 4 5; do
		two=$(sed -n ${line}p <<<"$out" | python3 -c 'import json, sys; r = json.load(sys.stdin)["structuredContent"]; print(r["exit_code"], r["stdout"], r["stderr"], r["session"]["state_kept"])')
		if [[ $two == "1 "* && -z $ended ]]; then
			expect_match "$two" $'KeyboardInterrupt\n True$'
		else
			expect_equal "$two" "0 two $handler"$'\n'"  True"
			ended=1
		fi
		expect_no_match "$two" "launcher"
	done
	expect_equal "$ended" 1  # one of the four ended
	expect_match "$(sed -n 6p <<<"$out")" '"exit_code": 0, .*"stdout": "mine\\n"'
	expect_match "$(sed -n 7p <<<"$out")" '"exit_code": 0, .*"stdout": "mine\\nfour 7\\n"'
	expect_equal "$(sed -n 8p <<<"$out")" '{"exit": 0}'
}

@test "reuse - a session keeps Sage's interfaces between its cells (gap, maxima, singular objects), stopped until the next; a background process does not outlive its cell" {
	# The launcher killed every process of the container but the session's
	# Sage as each cell ended: the next cell found "Gap crashed or quit",
	# "Maxima crashed -- automatically restarting", its objects gone
	# (attack helper 136); a fresh Sage running both cells prints 6, 5, 7.
	# What the Sage runs under a terminal (pexpect's pty) is kept, stopped
	# between cells; what it starts without one is still killed.
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	# A process under a pty of its own writes the time every 10 ms: the
	# longest gap between its lines, once the next cell runs, is the 2 s
	# between the calls, where it was stopped.
	first = "\n".join(["g = gap('SymmetricGroup(3)')", "print(g.Size())", "m = maxima('a1: 5')",
	                   "print(maxima.eval('a1'))", "print(singular.eval('int k = 7; k'))",
	                   "import subprocess, pty, time", "p = subprocess.Popen(['sleep', '100'])",
	                   "if pty.fork()[0] == 0:",
	                   "    while True: print(time.time(), file=open('stamps', 'a')); time.sleep(0.01r)",
	                   "time.sleep(0.2r)"])
	then = "print(g.Size())\nprint(maxima.eval('a1'))\nprint(singular.eval('k'))\nprint(p.poll())\n" \
	       "time.sleep(0.2r)\nt = [float(l) for l in open('stamps')]\nprint(max(b - a for a, b in zip(t, t[1:])) > 1.5r)"
	run = lambda code: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": 60}}
	print(json.dumps([run(first), 2, run(then)]))
	EOF
	local out
	out=$(timeout 200 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"stdout": "6\\n5\\n7\\n"'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 0, .*"stdout": "6\\n5\\n7\\n-9\\nTrue\\n", "stderr": ""'
	expect_equal "$(sed -n 3p <<<"$out")" '{"exit": 0}'
}

@test "reuse - a session's cell whose processes send its Sage SIGCONT every millisecond ends when its code does, its state kept" {
	# The launcher's wait for the Sage's stop at the cell's end waited for
	# ever: a SIGCONT cancelled the stop still pending. The cell, its code
	# done, was told timed out at twice its deadline and the session lost
	# (attack helper 138). One continuer forked plainly (killed at the
	# cell's end), one under a pty (kept, stopped, and at work again in
	# the next cell), and a thread of the Sage's that forks 25 that spin
	# sending it SIGCONT, 20 ms apart, on past the cell's end (the Sage,
	# running on, forked more as they were killed: attack helper 139),
	# and into the next cell. Each later cell answers within 8 s (its
	# code 0.3 s; a late one was told timed out at 20 s).
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	first = "\n".join(["x = 5", "import os, time, signal, pty", "def continuer():",
	                   "    signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getppid(), signal.SIGCONT))",
	                   "    signal.setitimer(signal.ITIMER_REAL, 0.001r, 0.001r)",
	                   "    while True: time.sleep(1r)",
	                   "if os.fork() == 0: continuer()", "kept = pty.fork()[0]",
	                   "if kept == 0: continuer()", "import threading", "sage = os.getpid()",
	                   "def spin():",
	                   "    while True: os.kill(sage, signal.SIGCONT)",
	                   "def forker():",
	                   "    for i in range(25r):",
	                   "        time.sleep(0.02r)",
	                   "        if os.fork() == 0: spin()",
	                   "threading.Thread(target=forker, daemon=True).start()",
	                   "time.sleep(0.3r)", "print('ok')"])
	# The one under a pty is there still, and running (S or R, not T).
	state = "print(open('/proc/%d/stat' % kept).read().rpartition(')')[2].split()[0])"
	run = lambda code: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": 15}}
	print(json.dumps([run(first), run("time.sleep(0.3r)\nprint(x)"), run("print(x + 1)\n" + state)]))
	EOF
	local out
	out=$(timeout 200 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"stdout": "ok\\n", "stderr": "".*"state_kept": true'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 0, .*"stdout": "5\\n", "stderr": "".*"state_kept": true'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 0, .*"stdout": "6\\n[SR]\\n", "stderr": "".*"state_kept": true'
	expect_equal "$(sed -n 4p <<<"$out")" '{"exit": 0}'
	local within
	within=$(sed -n 2,3p <<<"$out" | python3 -c 'import json, sys; print(all(json.loads(l)["structuredContent"]["duration_ms"] < 8000 for l in sys.stdin))')
	expect_equal "$within" True
}

# bats test_tags=any-sage
@test "reuse - a session's cell with a syntax error leaves the next cells interruptible: a timed-out one keeps the session's state" {
	# Told before the code began, the error left the launcher's SIGINT
	# block taken for the code's: every later cell held SIGINT, a timeout
	# could not interrupt it, and the session was lost (8e2bb6e).
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	mask = "import signal\nprint(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
	run = lambda code, timeout=20: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": timeout}}
	print(json.dumps([run("x = ("), run(mask), run("y = 5\nwhile True: pass", 3), run("print(y)")]))
	EOF
	local out
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 1, .*SyntaxError'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 0, .*"stdout": "\[\]\\n"'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 124, .*KeyboardInterrupt.*"state_kept": true, "interrupted": true'
	expect_match "$(sed -n 4p <<<"$out")" '"exit_code": 0, .*"stdout": "5\\n"'
	expect_equal "$(sed -n 5p <<<"$out")" '{"exit": 0}'
}

@test "reuse - a session's cell that a process of its own left stopped is interrupted at its timeout: the session's state is kept" {
	# A child sends the Sage SIGSTOP and exits: the interrupt at the
	# timeout was never taken, and the session was lost 2 s later
	# (attack helper 143's 1). A cold run times out alike.
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	stop = "import os, signal, time\nsage = os.getpid()\nif os.fork() == 0:\n    os.kill(sage, signal.SIGSTOP)\n    os._exit(0)\ntime.sleep(1r)\nprint('not reached')"
	run = lambda code, timeout=20: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": timeout}}
	print(json.dumps([run("a = 5"), run(stop, 3), run("print(a)")]))
	EOF
	local out
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 124, .*"stdout": "", .*KeyboardInterrupt.*"state_kept": true, "interrupted": true'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 0, .*"stdout": "5\\n"'
	expect_equal "$(sed -n 4p <<<"$out")" '{"exit": 0}'
}

# bats test_tags=any-sage
@test "reuse - a slow finalizer of a cycle a session's cell left is interrupted at the next cell's timeout, and that cell's code by a second interrupt: the session's state is kept" {
	# Collected between cells, in the launcher's reading of the next call
	# with SIGINT held, it could not be interrupted: the next cell never
	# began, and the session was lost at its timeout (attack helper 121).
	# Collected in the cell, it swallows the interrupt (Python only reports
	# a finalizer's exception), and the code ran on to the kill (attack
	# helper 122).
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	# Quick in the cell (each makes the next cycle), slow from 0.5 s after
	# it: the call that follows comes 1.5 s later.
	trap = """import gc, sys, time
	v = 7
	slow_from = time.time() + 0.5r
	class Slow:
	    def __del__(self):
	        if time.time() < slow_from:
	            cycle()
	        else:
	            print("finalizer", file=sys.stderr)
	            time.sleep(30r)
	def cycle():
	    slow = Slow(); slow.cycle = slow
	gc.set_threshold(1); cycle()"""
	run = lambda code, timeout=20: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": timeout}}
	print(json.dumps([run(trap), 1.5, run("print(v)\ntime.sleep(100r)", 3), run("print(v, gc.isenabled())")]))
	EOF
	local out
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"state_kept": true'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 124, .*"stdout": "7\\n", "stderr": "finalizer\\nException ignored in: .*KeyboardInterrupt.*time.sleep\(100r\).*KeyboardInterrupt.*"state_kept": true, "interrupted": true'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 0, .*"stdout": "7 True\\n"'
	expect_equal "$(sed -n 4p <<<"$out")" '{"exit": 0}'
}

# bats test_tags=any-sage
@test "reuse - a session's cell that replaces os's or signal's functions loses no session: a timed-out one keeps its state" {
	# The launcher's steps between cells called them through the modules
	# the code shares: os.getpid replaced (as a test's mock does) ended the
	# session at once, signal.sigpending or pthread_sigmask at the next
	# timeout, os.write or os.read at the cell's end (exit 70 or 137); a
	# module it imported there, set to None in sys.modules, hung the cell
	# or failed every later one; random.seed = None ended it at the next
	# seeded cell, and then kept that cell from running: what seeds is
	# now taken before the code, and the seed holds.
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	replaces = """import os, signal
	v = 7
	os.getpid = lambda: 1
	signal.pthread_sigmask = signal.sigpending = lambda *args: {signal.SIGINT}
	os.write = os.read = os.kill = signal.signal = signal.getsignal = signal.sigtimedwait = None"""
	# What the launcher imports and what seeds a cell, broken too.
	breaks = """import sys, ctypes, contextlib, random
	sys.modules["ast"] = sys.modules["linecache"] = sys.modules["ctypes"] = None
	ctypes.c_char = contextlib.nullcontext = random.seed = None"""
	run = lambda code, timeout=20: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": timeout}}
	seeded = run("print(v, random.random())")
	seeded["arguments"]["seed"] = 5
	fresh = {"name": "run_sagemath", "arguments": {"code": "import random\nprint(7, random.random())", "session": "t", "seed": 5}}
	print(json.dumps([run(replaces), run(breaks), run("while True: pass", 3), seeded, run("print(v, os.getpid())"), fresh]))
	EOF
	local out
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"state_kept": true'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 0, .*"state_kept": true'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 124, .*KeyboardInterrupt.*"state_kept": true, "interrupted": true'
	# Seeded as a fresh session's first cell is.
	expect_match "$(sed -n 4p <<<"$out")" '"exit_code": 0, .*"stdout": "7 0\.[0-9]+\\n".*"state_kept": true'
	local stdout='import json, sys; print(json.loads(sys.stdin.read())["structuredContent"]["stdout"], end="")'
	expect_equal "$(sed -n 4p <<<"$out" | python3 -c "$stdout")" "$(sed -n 6p <<<"$out" | python3 -c "$stdout")"
	expect_match "$(sed -n 5p <<<"$out")" '"exit_code": 0, .*"stdout": "7 1\\n"'
	expect_equal "$(sed -n 7p <<<"$out")" '{"exit": 0}'
}

# bats test_tags=any-sage
@test "reuse - what a session's cell writes on the launcher's done pipe, in another call's words or none, ends no cell" {
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	# Old words, no words, an unended one, and a late thread's: before
	# issue 33 the first ended this cell, the rest the next one at once.
	stale = r'''import os, resource, stat, threading, time
	def scribble():
	    for fd in range(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0]):
	        try:
	            if stat.S_ISFIFO(os.fstat(fd).st_mode):
	                os.write(fd, b"0\n1\nB\nB:0\n3:0\njunk")
	        except OSError:
	            pass
	scribble()
	threading.Thread(target=lambda: (time.sleep(float(0.2)), scribble()), daemon=True).start()
	time.sleep(float(0.5))
	print("one")'''
	later = "import time\ntime.sleep(float(0.5))\nprint('two')"
	# The pipe closed: the session cannot go on, and says why.
	closes = "import os\nos.closerange(3, 65536)\nprint('closed')"
	run = lambda code: {"name": "run_sagemath", "arguments": {"code": code, "session": "s", "timeout_seconds": 20}}
	print(json.dumps([run(stale), run(later), run(closes)]))
	EOF
	local out
	out=$(timeout 120 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	printf '# %s\n' "$out" >&3
	expect_match "$(sed -n 1p <<<"$out")" '"exit_code": 0, .*"stdout": "one\\n"'
	expect_match "$(sed -n 2p <<<"$out")" '"exit_code": 0, .*"stdout": "two\\n"'
	expect_match "$(sed -n 3p <<<"$out")" '"exit_code": 70, .*"stdout": "closed\\n", "stderr": "note: the code closed the session.s pipe to sage-sandbox \(descriptor [0-9]+\); the session ends\\n".*"state_kept": false'
	expect_equal "$(sed -n 4p <<<"$out")" '{"exit": 0}'
}

# bats test_tags=any-sage
@test "reuse - the MCP server outlives sessions that end by idling out and with the input, after calls that brought files back" {
	calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	save = "import os\nopen(os.environ['SAGE_SANDBOX_OUT'] + '/a.txt', 'w').write('a')\nprint('saved')"
	run = lambda code, s: {"name": "run_sagemath", "arguments": {"code": code, "session": s}}
	print(json.dumps([run(save, "idle"), run(save, "idle"), run(save, "open"), 13,
	                  run("print(1)", "other"), run(save, "open")]))
	EOF
	local out
	out=$(timeout 200 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" --session-idle 10 2>"$BATS_TEST_TMPDIR/stderr")
	expect_equal "$(grep -c '"saved' <<<"$out")" 4
	expect_equal "$(tail -n 1 <<<"$out")" '{"exit": 0}'
	expect_match "$(cat "$BATS_TEST_TMPDIR/stderr")" "session idle ended after 10 s without a call"
	expect_no_match "$(cat "$BATS_TEST_TMPDIR/stderr")" "AddressSanitizer|runtime error|Segmentation"
}

# A job whose process continues itself while the CPU throttle holds it
# stopped: a POSIX timer sends it SIGCONT every 10 ms.
SELF_CONTINUING='import ctypes, signal, time
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48r)]
class TimeSpec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", TimeSpec), ("value", TimeSpec)]
signal.signal(signal.SIGCONT, lambda *a: None)
timer = ctypes.c_void_p()
event = SigEvent(None, int(signal.SIGCONT), 0r)  # SIGEV_SIGNAL
assert libc.timer_create(1r, ctypes.byref(event), ctypes.byref(timer)) == 0r  # CLOCK_MONOTONIC
every = TimeSpec(0r, 10000000r)
assert libc.timer_settime(timer, 0r, ctypes.byref(ITimerSpec(every, every)), None) == 0r
import resource
start = time.monotonic()
while time.monotonic() < start + 8r:
    pass
u = resource.getrusage(resource.RUSAGE_SELF)
print("%.2f CPU-s in %.2f s" % (u.ru_utime + u.ru_stime, time.monotonic() - start))
print("ran 20 s at a full core")'

# expect_cpu_held CPUS SLACK: the attacker job was stopped with the CPU
# verdict, or ended having used at most CPUS x (T + 0.5) + SLACK CPU
# seconds (SLACK a Python expression in wall, T; its stdout's first line
# says "C CPU-s in T s"); and the victim after it in the same container
# gave what a fresh run gives.
expect_cpu_held() {
	local cpus=$1 slack=$2
	if [ "$(field attacker 'j["exit_code"]')" = 137 ]; then
		expect_equal "$(field attacker '[j["cpu_limit_exceeded"], j["stopped_by"], j["stdout"]]')" \
			"[True, 'cpu_limit', '']"
		expect_match "$(field attacker 'j["error"]')" "used more CPU than --cpus $cpus allows, past what stopping them holds"
	else
		expect_equal "$(field attacker 'j["exit_code"]')" 0
		echo "# held: $(field attacker 'j["stdout"]')" >&3
		python3 -c 'import sys
cpu, wall, cpus = float(sys.argv[1]), float(sys.argv[4]), float(sys.argv[6])
assert cpu <= cpus * (wall + 0.5) + eval(sys.argv[7]), sys.argv' \
			$(field attacker 'j["stdout"].splitlines()[0]') "$cpus" "$slack"
	fi
	# (Once, in a CI's sanitizer pass, the victim was not ok after about
	# 60 s, where it takes 15: what it said, should it come again.)
	[ "$(field victim 'j["ok"]')" = True ] ||
		echo "# the victim: $(field victim '[j["error"], j["stopped_by"], j["duration_ms"], j["attempts"]]')" >&2
	expect_equal "$(field victim 'j["ok"]')" True
	# (A fresh run at the default --cpus: what it prints is the same.)
	expect_as_fresh victim "$VICTIM"
}

@test "reuse - a job's end is no part of its CPU share: print(n) at --cpus 0.2 is not held back, in a cpu group or by the watchdog" {
	# A serial job's end forks the next job's process from the launcher
	# (a fork of Sage) while the kernel tears the job's down. Held at
	# --cpus with the job (the cpu group's hold lasted to its X), 7 or 8
	# of 8 print(n) jobs at --cpus 0.2 said throttled, and each took 200
	# ms where its code takes 25 (helper probe). Now the launcher's U and
	# H frames leave that work out. The watchdog, which spares the
	# launcher, is asked the same (without_cpu_group). --memory below 1g:
	# no warm-up step runs between the jobs.
	# A job is held back where it took 70 ms or more: a hold waits for
	# the next 100 ms period. With the U frame's lift undone, all 11 jobs
	# after the first took 82 to 116 ms (a median of 100, where the
	# build's was 27) and none said throttled (the hold was counted anew
	# at H): the count of throttled this test made passed it. A job's own
	# process (its start, its code, its exit) is about 20 ms of CPU, the
	# whole share of one period, so a loaded host holds some back as it
	# should (3 of 8 said throttled in one CI run on 9.5). So: the median
	# of the 11 jobs after the first (which waits for the container's
	# start) is under 70 ms, at most 5 of them held.
	local how n
	for how in grouped watchdog; do
		[ "$how" = grouped ] || without_cpu_group
		jobs_file p1 'print(1)' p2 'print(2)' p3 'print(3)' p4 'print(4)' p5 'print(5)' p6 'print(6)' \
			p7 'print(7)' p8 'print(8)' p9 'print(9)' p10 'print(10)' p11 'print(11)' p12 'print(12)'
		run_ss 0 batch --order input --jobs 1 --memory 768m --cpus 0.2 "$jobs"
		n=$(printf '%s\n' "$output" | python3 -c 'import json, sys
jobs = [json.loads(line) for line in sys.stdin][1:]
assert len(jobs) == 11
held = [j["duration_ms"] for j in jobs if j["duration_ms"] >= 70]
print(len(held), sorted(j["duration_ms"] for j in jobs))')
		echo "# $how: held back, and every job's ms: $n" >&3
		[ "${n%% *}" -le 5 ] || { printf '# %s: held back, and every job'"'"'s ms: %s\n' "$how" "$n" >&2; false; }
		expect_equal "$(field p12 'j["stdout"]')" 12 "$how"
		restore_cpu_group
	done
}

# bats test_tags=any-sage
@test "reuse - a job that continues itself while throttled is stopped with the CPU verdict; the next job's result is a fresh run's" {
	# At --cpus 0.5 one busy core is twice the share: the throttle stops
	# it; its timer continues it. Before issue 33 it ran at a full core
	# (38.6 CPU-s in 20 s at --cpus 1 was seen) and the next job in the
	# container started deep in debt. Now it is killed with the CPU
	# verdict once it is half a second past what the stop allows, or,
	# where a loaded machine gives it less than its share anyway, held to
	# --cpus x (T + 0.5) + 0.5 s + 50 ms on each core (and ticks).
	# The watchdog's throttle, as where root delegated no cpu group: in
	# one, the scheduler holds every route (030-limits.bats).
	without_cpu_group
	jobs_file attacker "$SELF_CONTINUING" victim "$VICTIM"
	run_ss 0 batch --order input --jobs 1 --cpus 0.5 "$jobs"
	expect_cpu_held 0.5 '0.5 + 0.1 + 0.05'
}

# A job whose workers are freed with their CPU time: a small process that
# ignores SIGCHLD forks workers of 5 ms each, every 3 ms, for 12 s. No
# /proc shows their time (nobody reaps them), and each ends between two
# looks; each appends what it spent to a file.
AUTOREAPED='import subprocess, sys, time
start = time.monotonic()
subprocess.run([sys.executable, "-S", "-c", """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
log = os.open("spent", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
end = time.monotonic() + 12
while time.monotonic() < end:
    if os.fork() == 0:
        t = time.process_time()
        while time.process_time() < t + 0.005:
            pass
        os.write(log, b"%f\\n" % (time.process_time() - t))
        os._exit(0)
    time.sleep(0.003)
"""])
print("%.2f CPU-s in %.2f s" % (sum(map(float, open("spent"))), time.monotonic() - start))'

# bats test_tags=slow,any-sage
@test "reuse - a job whose workers are freed unreaped with their CPU time is stopped with the CPU verdict; the next job's result is a fresh run's" {
	# Before, 10.3 CPU-s in 10 s at --cpus 0.2 went unseen: the throttle
	# charged only what /proc shows. The sampled account (memwatch.c)
	# sees the running workers. Where a loaded machine gives them less
	# than their share anyway, held to --cpus x (T + 0.5) + 0.5 s, plus
	# one interval on each core and the sampling error (four standard
	# deviations: 1.05 s x sqrt(T) on 2 cores; 2 allows for the
	# sampled account's shortfall, as tests/unit-memwatch.c does).
	without_cpu_group # the watchdog's throttle, as above
	jobs_file attacker "$AUTOREAPED" victim "$VICTIM"
	run_ss 0 batch --order input --jobs 1 --cpus 0.2 "$jobs"
	expect_cpu_held 0.2 '0.5 + 0.2 + 2 * wall ** 0.5'
}

# A job whose parents lose their workers' time, and that continues the
# run whenever it is stopped: a small process forks, one after another,
# parents that each take SA_NOCLDWAIT, fork ten workers of 5 ms, 3 ms
# apart, and end; each parent is gone within a few looks, before what its
# children took away can show. Beside it a continuer, which a timer of
# its own continues every 10 ms, sends every process of the run SIGCONT
# every 5 ms: no freeze holds. Each worker appends what it spent to a file.
SHORT_NOCLDWAIT_CONTINUING='import subprocess, sys, time
continuer = subprocess.Popen([sys.executable, "-S", "-c", """
import ctypes, os, signal, time
libc = ctypes.CDLL(None)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_byte * 48)]
class TimeSpec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
class ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", TimeSpec), ("value", TimeSpec)]
signal.signal(signal.SIGCONT, lambda *a: None)  # ignored, the kernel parks its timer
timer = ctypes.c_void_p()
event = SigEvent(None, int(signal.SIGCONT), 0)  # SIGEV_SIGNAL
assert libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer)) == 0  # CLOCK_MONOTONIC
every = TimeSpec(0, 10000000)
assert libc.timer_settime(timer, 0, ctypes.byref(ITimerSpec(every, every)), None) == 0
while True:
    os.kill(-1, signal.SIGCONT)
    time.sleep(0.005)
"""])
start = time.monotonic()
subprocess.run([sys.executable, "-S", "-c", """
import ctypes, os, signal, time
class Sigaction(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]
SA_NOCLDWAIT = 2
libc = ctypes.CDLL(None)
log = os.open("spent", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
end = time.monotonic() + 10
while time.monotonic() < end:
    parent = os.fork()
    if parent == 0:
        libc.sigaction(signal.SIGCHLD, ctypes.byref(Sigaction(flags=SA_NOCLDWAIT)), None)
        for _ in range(10):
            if os.fork() == 0:
                t = time.process_time()
                while time.process_time() < t + 0.005:
                    pass
                os.write(log, b"%f\\n" % (time.process_time() - t))
                os._exit(0)
            time.sleep(0.003)
        os._exit(0)
    os.waitpid(parent, 0)
"""])
assert continuer.poll() is None, "the continuer ended: %s" % continuer.poll()
continuer.kill()
print("%.2f CPU-s in %.2f s" % (sum(map(float, open("spent"))), time.monotonic() - start))'

# bats test_tags=any-sage
@test "reuse - a job whose short-lived parents take SA_NOCLDWAIT, with a continuer beside them, is held to --cpus by the kernel's count; the next job's result is a fresh run's" {
	# No /proc file shows the workers' time, no parent lives long enough
	# to be sampled as one that loses its children, and the continuer
	# undoes each freeze: only the kernel's count (memwatch.c) sees the
	# workers. Without it, 6.09 and 6.42 CPU-s in 10.06 s at --cpus 0.2.
	# Held to --cpus x (T + 0.5) + 0.5 s, plus one interval on each core
	# and a clock tick; or stopped with the CPU verdict (its debt past
	# that by 1 s, as tests/unit-memwatch.c shows with the continuer
	# outside).
	[ "$(cat /proc/sys/kernel/perf_event_paranoid)" -le 2 ] ||
		skip "the kernel does not let the account count a run's CPU time (perf_event_paranoid above 2)"
	without_cpu_group # the watchdog's throttle, as above
	jobs_file attacker "$SHORT_NOCLDWAIT_CONTINUING" victim "$VICTIM"
	run_ss 0 batch --order input --jobs 1 --cpus 0.2 "$jobs"
	expect_cpu_held 0.2 '0.5 + 0.2 + 0.01'
}

@test "reuse - abstract unix sockets a job keeps alive in a cycle of descriptors are gone before the next job" {
	local attacker='import array, socket
keep = []
for i in range(8):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(b"\0sage-sandbox-reuse-%d" % i)
    keep.append(s)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
fds = array.array("i", [a.fileno(), b.fileno()] + [s.fileno() for s in keep])
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
b.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
print("bound 8 names, held in flight")'
	local victim='import socket
names = open("/proc/net/unix").read().count("@sage-sandbox-reuse-")
print("names seen:", names)
for i in range(8):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(b"\0sage-sandbox-reuse-%d" % i)
print("bound all 8")'
	jobs_file attacker "$attacker" victim "$victim"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	local summary=$errors
	expect_equal "$(field attacker 'j["stdout"]')" "bound 8 names, held in flight"
	expect_equal "$(field victim 'j["stdout"]')" $'names seen: 0\nbound all 8'
	expect_as_fresh victim "$victim"
	# The launcher woke the kernel's collector: the container went on.
	expect_match "$summary" "0 containers replaced after a job"
}

@test "reuse - 94 sleeping forks of a job pass at --memory 1g in a warmed container as in a fresh run; a job that writes 1.2 GB in 20 forks is still stopped there" {
	# Each fork of a warmed template shares its 330 MB (115 MB cold); the
	# watchdog's walk of each, taken as it came, held its share among the
	# few processes of then (walks from before a fork bound a process from
	# above, no more): their sum was a stop at 1g of a run of 770 MB,
	# which passes cold at 700m (a job run again in a container of its
	# own, attempts 2; 122 through the server). Such walks are walked
	# again before a verdict. Six jobs first: each waits for one step of
	# the warm-up, so the container is warm when the forks come.
	local forks='import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            os.setsid()
            while True:
                time.sleep(100)
        n += 1
except OSError as e:
    print(n, e)'
	local hog='import os, time
for i in range(20):
    if os.fork() == 0:
        b = bytearray(60 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(30)
        os._exit(0)
time.sleep(10)
print("not stopped")'
	jobs_file w1 'print(1)' w2 'print(2)' w3 'print(3)' w4 'print(4)' w5 'print(5)' w6 'print(6)' \
		forks "$forks" hog "$hog" after 'print(factor(2^64 + 1))'
	run_ss 0 batch --order input --jobs 1 --memory 1g "$jobs"
	expect_equal "$(field forks '[j["exit_code"], j["attempts"], j["stdout"]]')" \
		"[0, 1, '94 [Errno 11] Resource temporarily unavailable\\n']"
	expect_equal "$(field hog '[j["exit_code"], j["stopped_by"], j["stdout"]]')" "[122, 'memory_limit', '']"
	expect_equal "$(field after 'j["stdout"]')" "274177 * 67280421310721"
	expect_as_fresh forks "$forks" --memory 1g
}

# bats test_tags=any-sage
@test "reuse - nothing of a job is in the next job's process: not its code, args, stdin, input file or output in memory, nor its Call, status or locals on the stack" {
	# The secret is never whole in the victim's code: it looks for A
	# followed by B, in the anonymous memory it inherited from the
	# launcher (the heap and the arenas of freed blocks), and for what the
	# launcher's frames below its own still hold.
	local secret=SANDBOX-LEAK-4f7a1c
	local hostile='import sys
SECRET = "SANDBOX-LEAK-4f7a1c"
print(SECRET, sys.argv[1:], open("in.txt").read(), sys.stdin.read())
os._exit(42r)'
	local victim='import ctypes, gc, os, sys
A, B = b"SANDBOX-LEAK-", b"4f7a1c"
kinds = sorted({type(o).__name__ for o in gc.get_objects()
                if str(getattr(type(o), "__module__", "")).startswith("launcher")} &
               {"Call", "CellWatch", "Launcher", "Reader", "StdinQueue", "Warmer", "Writer"})
held = []
f = sys._getframe().f_back
while f is not None:
    if "launcher" in f.f_code.co_filename and f.f_code.co_name not in (
            "_pad", "at_code_depth", "run_code", "run_cell", "child_main"):
        held += [(f.f_code.co_name, k) for k, v in f.f_locals.items() if v is not None and (
                 f.f_code.co_name != "prepare_child" or k not in (
                     "handlers", "mask", "namespace", "pid", "pipes", "preparse_file",
                     "self", "session", "stale", "threads"))]
    f = f.f_back
buf = bytearray(1r << 20r)
mine = ctypes.addressof(ctypes.c_char.from_buffer(buf))
hits = []
mem = os.open("/proc/self/mem", os.O_RDONLY)
for line in open("/proc/self/maps").read().splitlines():
    parts = line.split()
    if parts[1][0r] != "r" or len(parts) > 5r and parts[5r] != "[heap]":
        continue
    lo, hi = (int(x, 16r) for x in parts[0r].split("-"))
    at = lo
    while at < hi:
        n = min(len(buf), hi - at)
        got = os.preadv(mem, [memoryview(buf)[:n]], at)
        if not (mine < at + n and at < mine + len(buf)):
            i = buf.find(A, 0r, got)
            while i >= 0r:
                if buf[i + len(A):i + len(A) + len(B)] == B:
                    hits.append(hex(at + i))
                i = buf.find(A, i + 1r, got)
        at += n - 64r if at + n < hi else n
print("objects:", kinds, "locals:", held, "found:", hits)'
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	# The last hostile job closes its stdin with 2 MB of it still to come:
	# what the host still sends of it after its end came to the launcher
	# after the next jobs' processes were forked, and was not wiped (an
	# attack helper found 44 bytes of it, two jobs later).
	python3 -c '
import json, sys
secret, hostile, victim = sys.argv[1:]
for i in range(2):
    print(json.dumps({"id": "hostile%d" % i, "code": hostile, "args": [secret],
                      "stdin": secret + "\n", "files": {"in.txt": secret}}))
    print(json.dumps({"id": "victim%d" % i, "code": victim}))
print(json.dumps({"id": "unread", "code": "os.close(0r)\nprint(len(sys.argv))",
                  "stdin": (secret + "\n") * 100000}))
for i in range(2, 4):
    print(json.dumps({"id": "victim%d" % i, "code": victim}))' "$secret" "$hostile" "$victim" >"$jobs"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	local i
	for i in 0 1; do
		# It had the secret in its code, args, input file and stdin.
		expect_equal "$(field hostile$i '[j["stdout"].count("'$secret'"), j["exit_code"]]')" \
			"[4, 42]"
	done
	expect_equal "$(field unread 'j["stdout"]')" "1"
	for i in 0 1 2 3; do
		expect_equal "$(field victim$i 'j["stdout"] + j["stderr"]')" \
			"objects: [] locals: [] found: []"
	done
}
