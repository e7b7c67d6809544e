#!/usr/bin/env bats
# sage-sandbox batch: JSON Lines in and out through warm containers that
# serve job after job, with nothing of one job visible to the next.

load helpers

# results FILE EXPR: for each line of FILE (each must be a JSON object),
# prints Python EXPR over it (bound to j), one line each.
results() {
	python3 -c '
import json, sys
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    assert line.endswith("\n"), "line %d is torn" % n
    j = json.loads(line)
    assert isinstance(j, dict), "line %d is not an object" % n
    print(eval(sys.argv[2]))' "$@"
}

# batch_in_background COUNT SECONDS: `batch --jobs 2` in the background on
# COUNT jobs that each sleep SECONDS and print their id squared, into
# $dir/out.jsonl and $dir/err; its pid in $pid.
batch_in_background() {
	python3 -c '
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({"id": i, "code": "import time\ntime.sleep(%sr)\nprint(%d^2)" % (sys.argv[2], i)}))' \
		"$1" "$2" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 2 "$dir/jobs.jsonl" >"$dir/out.jsonl" 2>"$dir/err" &
	pid=$!
}

@test "batch - options it cannot take are refused with one line, status 125, nothing run" {
	run_ss 125 batch --jobs 0
	expect_equal "$errors" "sage-sandbox: --jobs '0' is not a count from 1 to 64; see sage-sandbox --help"
	run_ss 125 batch --order random
	expect_equal "$errors" "sage-sandbox: --order 'random' is not input or completion; see sage-sandbox --help"
	run_ss 125 batch --shard 3/2
	expect_match "$errors" "^sage-sandbox: --shard '3/2' is not K/N with 0 <= K < N; give --shard K/N"
	SLURM_ARRAY_TASK_ID= run_ss 125 batch --shard auto
	expect_match "$errors" "SLURM_ARRAY_TASK_ID is not set"
	run_ss 125 batch --json
	expect_equal "$errors" "sage-sandbox: option --json is not for batch; drop it: batch always writes one JSON object a line"
	run_ss 125 batch /nonexistent/jobs.jsonl
	expect_equal "$errors" "sage-sandbox: cannot read jobs from /nonexistent/jobs.jsonl: No such file or directory; name a readable JSON Lines file, or - for stdin"
	# A directory, refused as a missing file is, not read as a bad line
	# with status 1 (attack helper 146).
	run_ss 125 batch "$BATS_TEST_TMPDIR"
	expect_equal "$errors" "sage-sandbox: cannot read jobs from $BATS_TEST_TMPDIR: Is a directory; name a readable JSON Lines file, or - for stdin"
	expect_equal "$output" "" "no result line for a directory"
	run_ss 125 batch --resume /nonexistent/out.jsonl
	expect_match "$errors" "^sage-sandbox: cannot read --resume /nonexistent/out.jsonl: No such file"
	expect_equal "$output" ""
	expect_no_containers
}

@test "batch - a missing image refuses the batch: one line, status 125, no result line, nothing left" {
	input_file=$BATS_TEST_TMPDIR/jobs.jsonl
	printf '{"id": 1, "code": "print(1)"}\n' >"$input_file"
	run_ss 125 batch --image localhost/sage-sandbox-no-such-image:1
	expect_equal "$output" ""
	expect_match "$errors" "^sage-sandbox: image 'localhost/sage-sandbox-no-such-image:1' is not present locally"
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1
	expect_no_containers
}

@test "batch - every bad line gets a result line with its line number and reason; the batch goes on, status 1" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	cat >"$jobs" <<-'EOF'
	{"id": "good", "code": "print(6*7)"}
	not json

	{"id": "nocode"}
	{"id": "odd", "code": "print(1)", "colour": "red"}
	{"id": "slow", "code": "print(1)", "timeout": 61}
	{"code": "print(2)"}
	{"id": "nul", "code": "print(1)\u0000"}
	{"id": "loud", "code": "print(1)", "output_limit": 9999}
	[1, 2]
	{"id": "also-good", "code": "import sys; print(sys.stdin.read()[::-1], sys.argv[1:])", "stdin": "olleh", "args": ["x", "y"]}
	{"id": "quoted", "code": "print(1)", "timeout": "5"}
	{"id": "zero", "code": "print(1)", "timeout": 0}
	{"id": "seed", "code": "print(1)", "seed": "5"}
	{"id": "word", "code": "print(1)", "seed": "none"}
	EOF
	run_ss 1 batch --order input --jobs 1 "$jobs"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/out.jsonl"
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" '"%s %s %s %s" % (j["id"], j["line"], j["exit_code"], j["error"])')" \
"good 1 0 None
None 2 125 line 2 of $jobs: not JSON ('[' or '{' expected near 'not', at column 3)
nocode 4 125 line 4 of $jobs: the job has no code
odd 5 125 line 5 of $jobs: unknown key 'colour'
slow 6 125 line 6 of $jobs: timeout must be an integer from 1 to 60 (the batch's --timeout)
None 7 125 line 7 of $jobs: the job has no id
nul 8 125 code from line 8 of $jobs contains a NUL byte at offset 8
loud 9 125 line 9 of $jobs: output_limit must be an integer from 1 to 256 (the batch's --output-limit)
None 10 125 line 10 of $jobs: not a JSON object
also-good 11 0 None
quoted 12 125 line 12 of $jobs: timeout must be an integer from 1 to 60 (the batch's --timeout)
zero 13 125 line 13 of $jobs: timeout must be an integer from 1 to 60 (the batch's --timeout)
seed 14 125 line 14 of $jobs: seed must be an integer from 0 to 4294967295 or null
word 15 125 line 15 of $jobs: seed must be an integer from 0 to 4294967295 or null"
	# A number in quotes is told how to write it, not to raise a limit
	# (attack helper).
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" '"%s: %s" % (j["id"], j.get("hint"))' | grep -E '^(slow|quoted|zero|seed|word):')" \
"slow: a job may lower the batch's limits, never raise them: lower the job's, or raise the batch's
quoted: write it as a JSON number, without quotes
zero: give a whole number from 1 to 60
seed: write it as a JSON number, without quotes
word: give a seed from 0 to 4294967295, or null for fresh random state"
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" 'j["stdout"].strip() if j["ok"] else j["hint"] != ""' | sort -u)" \
"42
True
hello ['x', 'y']"
	expect_match "$errors" "sage-sandbox batch: 14 jobs in [0-9.]+ s \([0-9.]+ jobs/s\): 2 ok, 0 failed, 12 bad lines, 0 not run; 0 retried, 0 skipped"
}

@test "batch - a repeated id is refused naming both lines, in one file or across files; the first runs; status 1; --resume skips it" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	more=$BATS_TEST_TMPDIR/more.jsonl
	cat >"$jobs" <<-'EOF'
	{"id": "a", "code": "print('first a')"}
	{"id": "b", "code": "print('b')"}
	{"id": "a", "code": "print('second a')"}
	EOF
	printf '{"id": "b", "code": "print(\x27second b\x27)"}\n' >"$more"
	run_ss 1 batch --order input --jobs 1 "$jobs" "$more"
	out=$BATS_TEST_TMPDIR/out.jsonl
	printf '%s\n' "$output" >"$out"
	expect_equal "$(results "$out" '"%s %s %s %s %s" % (j["id"], j["source"], j["line"], j["exit_code"], j["stdout"].strip() if j["ok"] else j["error"])')" \
"a $jobs 1 0 first a
b $jobs 2 0 b
a $jobs 3 125 line 3 of $jobs: id \"a\" is already the id of line 1 of $jobs
b $more 1 125 line 1 of $more: id \"b\" is already the id of line 2 of $jobs"
	expect_equal "$(results "$out" 'j.get("hint")' | tail -1)" \
		"give each job an id of its own: --resume finds jobs by it"
	expect_no_match "$output" "second [ab]" "a refused job's code ran"
	expect_match "$errors" "4 jobs in [0-9.]+ s \([0-9.]+ jobs/s\): 2 ok, 0 failed, 2 bad lines, 0 not run"
	# Both ids are done: each of their lines is skipped, none refused.
	run_ss 0 batch --resume "$out" --jobs 1 "$jobs" "$more"
	expect_equal "$output" ""
	expect_match "$errors" "0 jobs in .* 0 bad lines, 0 not run; 0 retried, 4 skipped"
}

@test "batch - hostile jobs in one container leave nothing for the next: processes, files, environment, directory, Sage's names; a fork that runs to the code's end ends nothing" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	python3 - >"$jobs" <<-'EOF'
	import json
	jobs = [
	    ("background", "import subprocess, os\nsubprocess.Popen(['sleep', '1000'])\nos.system('sleep 999 &')\nprint('left')"),
	    ("files", "import os\nfor d in ('/tmp', os.environ['HOME'], os.environ['DOT_SAGE'], os.environ['SAGE_SANDBOX_OUT']):\n    open(d + '/left', 'w').write('x')\nos.makedirs('/tmp/deep/a/b')\nos.chmod('/tmp/deep/a', 0)\nos.symlink('/etc/passwd', '/tmp/link')\nimport glob\np = glob.glob(os.environ['DOT_SAGE'] + '/cache/*')[0]\nopen(p, 'ab').write(b'poison')\nprint('left')"),
	    ("state", "import os, sys\nos.environ['LEAK'] = '1'\nos.chdir('/tmp/sage-home')\nimport sage.all\nsage.all.factor = lambda n: 'PATCHED'\nsys.modules['sage.all_cmdline'].factor = lambda n: 'PATCHED'\nleaked = 1\nprint(factor(6))"),
	    ("forked", "import os, time\nif os.fork():\n    time.sleep(1)\n    print('waited')\nelse:\n    print('forked')"),
	    ("forkbomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        print('refused'); break"),
	    ("hog", "x = bytearray(3 * 1024**3)"),
	    ("check", "import os, glob\nprocs = sorted(open('/proc/%s/comm' % p).read().strip() for p in os.listdir('/proc') if p.isdigit())\nleft = sorted(r + '/' + f for r, ds, fs in os.walk('/tmp') for f in fs + ds if 'left' in f or f in ('deep', 'link'))\ncache = [open(p, 'rb').read() for p in glob.glob(os.environ['DOT_SAGE'] + '/cache/*')]\nprint(procs, left, b'poison' in b''.join(cache), os.environ.get('LEAK'), os.getcwd(), factor(6), 'leaked' in globals())"),
	]
	for name, code in jobs:
	    print(json.dumps({"id": name, "code": code, "timeout": 30}))
	EOF
	# The fork bomb's processes each make their own copies of pages as they
	# run: at the default 96 of them they can pass --memory together, and
	# the watchdog would end (and batch retry) that job, which is not what
	# this test looks at.
	run_ss 0 batch --order input --jobs 1 --pids-limit 48 "$jobs"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/out.jsonl"
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" '"%s %s %s" % (j["id"], j["exit_code"], j["attempts"])')" \
"background 0 1
files 0 1
state 0 1
forked 0 1
forkbomb 0 1
hog 1 1
check 0 1"
	# The forked process ran to the end first: the job is its process's,
	# which still had a line to print.
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" 'j["stdout"].split() if j["id"] == "forked" else None' | grep -v None)" \
		"['forked', 'waited']"
	# Only the launcher and the job's own process; nothing of the earlier
	# jobs, and Sage's names are Sage's.
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" 'j["stdout"].strip()' | tail -1)" \
		"['python3', 'python3'] [] False None /tmp 2 * 3 False"
	expect_match "$(results "$BATS_TEST_TMPDIR/out.jsonl" 'j["stderr"]' | grep -c MemoryError)" "^1$"
}

@test "batch - a job whose processes pass --memory ends its container; it is retried once in a fresh one, and the next job runs" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	cat >"$jobs" <<-'EOF'
	{"id": "together", "code": "import os, time\nfor i in range(4):\n    if os.fork() == 0:\n        x = bytearray(400 << 20)\n        for k in range(0, len(x), 4096): x[k] = 1\n        time.sleep(30)\n        os._exit(0)\ntime.sleep(30)"}
	{"id": "after", "code": "print(factor(2^32 + 1))"}
	EOF
	run_ss 0 batch --order input --jobs 1 "$jobs"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/out.jsonl"
	expect_equal "$(results "$BATS_TEST_TMPDIR/out.jsonl" '"%s %s %s %s" % (j["id"], j["exit_code"], j["stopped_by"], j["attempts"])')" \
"together 122 memory_limit 2
after 0 None 1"
	expect_match "$errors" "1 ok, 1 failed, 0 bad lines, 0 not run; 1 retried"
}

# A serial container warms up between jobs (warm.py's steps), and a job
# that comes while a step runs waits for it: Maxima's and GAP's steps take
# more than a second here, past a job's timeout of 1 s. Before the fix the
# code was handed over past its deadline, and read as its own timeout.
# Each waiting job may also run (a quick step), be killed as its code
# began (a step that ended just before its deadline), or end its
# container (a step past the host's 3 s of grace): one at least must have
# been told, as nothing was run, to wait past its timeout.
@test "batch - a job whose timeout passes while it waits for a warm-up step says its code never began; the container serves the next job" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	python3 -c '
import json
print(json.dumps({"id": "prints-0", "code": "print(0)"}))
for i in range(1, 5):
    print(json.dumps({"id": "waits-prints-%d" % i, "code": "print(%d)" % i, "timeout": 1}))
    print(json.dumps({"id": "prints-%d" % (10 * i), "code": "print(%d)" % (10 * i)}))' >"$jobs"
	run_ss 0 batch --order input --jobs 1 "$jobs"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/out.jsonl"
	local fix="raise the job's timeout (at most the batch's --timeout) or the batch's --timeout (at most 600)"
	local waited="timed out after 1 s before its code began (the sandbox's start, Sage's import or a warm-up step took that long)"
	never_began=0
	while IFS='|' read -r id code out error; do
		case $id:$code:$error in
		*:0:None)
			expect_equal "$out" "${id##*-}" "$id's stdout" ;;
		"waits-"*":124:$waited; nothing was run and the container serves the next call; $fix")
			expect_equal "$out" "" "$id's stdout"
			never_began=$((never_began + 1)) ;;
		"waits-"*":124:$waited; the container was stopped; $fix" | \
			"waits-"*":124:timed out after 1 s"*"; its processes were killed and the container serves the next call; "*) ;;
		*)
			expect_equal "$id:$code $error" "an ok job, or a waiting one that timed out" ;;
		esac
	done < <(results "$BATS_TEST_TMPDIR/out.jsonl" '"%s|%s|%s|%s" % (j["id"], j["exit_code"], j["stdout"].strip(), j["error"])')
	[ "$never_began" -ge 1 ] || { echo "# no job was told it waited past its timeout" >&2; return 1; }
}

# bats test_tags=slow,any-sage
@test "batch - 200 generated jobs: each its own answer; every 23rd gives what sage-sandbox run gives, byte for byte" {
	dir=$BATS_TEST_TMPDIR
	mkdir "$dir/code"
	python3 - "$dir" <<-'EOF'
	import json, sys
	dir = sys.argv[1]
	kinds = [
	    "print(factor({n}))",
	    "import sys\nprint({n}, file=sys.stderr)\nsys.exit(int({n} % 7))",
	    "x = {n}\nprint(x^2 + 1)\nraise ValueError('job %d' % x)",
	    "print(len(str(2^{n})))\nprint(next_prime({n}))",
	    "R.<t> = PolynomialRing(QQ)\nprint((t^2 - {n}).factor())",
	]
	with open(dir + "/jobs.jsonl", "w") as jobs:
	    for i in range(200):
	        code = kinds[i % len(kinds)].format(n=1000 + i)
	        jobs.write(json.dumps({"id": "job-%03d" % i, "code": code}) + "\n")
	        # Every 23rd (all five kinds) is run cold too: 200 cold
	        # runs took three and a half minutes.
	        if i % 23 == 0:
	            open("%s/code/job-%03d" % (dir, i), "w").write(code)
	EOF
	run_ss 0 batch "$dir/jobs.jsonl"
	printf '%s\n' "$output" >"$dir/batch.jsonl"
	expect_match "$errors" "200 jobs in"
	# Those jobs as `run --json` of their code on stdin, two at a time.
	ls "$dir/code" | xargs -P 2 -I{} sh -c '"$0" run --json <"$1/code/{}" >"$1/run-{}.json" || true' \
		"$SAGE_SANDBOX" "$dir"
	python3 - "$dir" <<-'EOF'
	import json, sys, os
	dir = sys.argv[1]
	batch = {}
	for line in open(dir + "/batch.jsonl"):
	    j = json.loads(line)
	    assert j["id"] not in batch, "twice: " + j["id"]
	    batch[j["id"]] = j
	assert len(batch) == 200, len(batch)
	differ = []
	# Every job's own answer, told without Sage: what its kind prints
	# for its number, on stdout and stderr, and its status.
	def primes(n):
	    return [p for p in range(2, n + 1) if n % p == 0 and all(p % q for q in range(2, p))]
	def factored(n):
	    parts = []
	    for p in primes(n):
	        k = 0
	        while n % p == 0:
	            n, k = n // p, k + 1
	        parts.append("%d^%d" % (p, k) if k > 1 else "%d" % p)
	    return " * ".join(parts)
	def next_prime(n):
	    return next(m for m in range(n + 1, 2 * n) if primes(m) == [m])
	def quadratic(n):
	    r = int(n ** 0.5)
	    return "(t - %d) * (t + %d)" % (r, r) if r * r == n else "t^2 - %d" % n
	for i in range(200):
	    b, n = batch["job-%03d" % i], 1000 + i
	    want = [(0, "%s\n" % factored(n), ""), (n % 7, "", "%d\n" % n),
	            (1, "%d\n" % (n * n + 1), None),
	            (0, "%d\n%d\n" % (len(str(2 ** n)), next_prime(n)), ""),
	            (0, "%s\n" % quadratic(n), "")][i % 5]
	    got = (b["exit_code"], b["stdout"], b["stderr"])
	    if got[:2] != want[:2] or (want[2] is not None and got[2] != want[2]) or \
	            (want[2] is None and not got[2].endswith("ValueError: job %d\n" % n)) or \
	            b["ok"] != (want[0] == 0) or b["stopped_by"] is not None:
	        differ.append("job-%03d: got %r" % (i, got))
	codes = sorted(os.listdir(dir + "/code"))
	assert len(codes) == 9, len(codes)
	for name in codes:
	    run = json.load(open("%s/run-%s.json" % (dir, name)))
	    b = batch[name]
	    for key in ("stdout", "stderr", "exit_code", "ok", "signal", "stopped_by"):
	        if run[key] != b[key]:
	            differ.append("%s %s: run %r, batch %r" % (name, key, run[key], b[key]))
	assert not differ, "\n".join(differ[:10])
	exits = sorted(set(j["exit_code"] for j in batch.values()))
	assert exits == [0, 1, 2, 3, 4, 5, 6], exits
	EOF
}

# bats test_tags=any-sage
@test "batch - kill -9 in the middle, then --resume: every id exactly once, no torn line" {
	dir=$BATS_TEST_TMPDIR
	batch_in_background 60 0.2
	for ((i = 0; i < 600; i++)); do
		[ "$(wc -l <"$dir/out.jsonl")" -ge 15 ] && break
		sleep 0.1
	done
	kill -9 "$pid"
	wait "$pid" || true
	first=$(wc -l <"$dir/out.jsonl")
	[ "$first" -ge 15 ] && [ "$first" -lt 60 ]
	# The containers the killed batch left end with their stdin; cleanup
	# removes what is left.
	"$SAGE_SANDBOX" cleanup >/dev/null
	# As the man page says to: appended to the same file.
	"$SAGE_SANDBOX" batch --resume "$dir/out.jsonl" "$dir/jobs.jsonl" >>"$dir/out.jsonl" 2>"$dir/err"
	expect_match "$(cat "$dir/err")" "[1-9][0-9]* skipped \(--resume\)"
	python3 - "$dir/out.jsonl" <<-'EOF'
	import json, sys
	seen = {}
	for n, line in enumerate(open(sys.argv[1]), 1):
	    assert line.endswith("\n"), "torn line %d" % n
	    if not line.strip():
	        continue
	    try:
	        j = json.loads(line)
	    except ValueError:
	        continue  # the line the kill tore, ended by --resume
	    seen[j["id"]] = seen.get(j["id"], 0) + 1
	    assert j["stdout"] == "%d\n" % (j["id"] ** 2), j
	assert sorted(seen) == list(range(60)), sorted(seen)
	assert set(seen.values()) == {1}, [k for k, v in seen.items() if v > 1]
	EOF
}

@test "batch --shard K/N: the shards hold every job once; --shard auto reads Slurm's array task" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	# Lines refused before any sandbox starts: the shards' split is what
	# this test checks.
	for i in $(seq 0 9); do printf '{"id": %d, "code": "print(1)", "shard_me": 1}\n' "$i"; done >"$jobs"
	for k in 0 1 2; do
		run_ss 1 batch --shard $k/3 "$jobs"
		printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/shard-$k.jsonl"
	done
	expect_equal "$(results "$BATS_TEST_TMPDIR/shard-1.jsonl" 'j["id"]' | tr '\n' ' ')" "1 4 7 "
	expect_equal "$(cat "$BATS_TEST_TMPDIR"/shard-*.jsonl | python3 -c 'import json,sys; print(sorted(json.loads(l)["id"] for l in sys.stdin))')" \
		"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"
	SLURM_ARRAY_TASK_ID=12 SLURM_ARRAY_TASK_MIN=10 SLURM_ARRAY_TASK_COUNT=4 run_ss 1 batch --shard auto "$jobs"
	expect_equal "$(printf '%s\n' "$output" | python3 -c 'import json,sys; print([json.loads(l)["id"] for l in sys.stdin])')" "[2, 6]"
	JOB_COMPLETION_INDEX=3 run_ss 1 batch --shard auto/5 "$jobs"
	expect_equal "$(printf '%s\n' "$output" | python3 -c 'import json,sys; print([json.loads(l)["id"] for l in sys.stdin])')" "[3, 8]"
}

# bats test_tags=measures-rss,any-sage
@test "batch - 100,000 lines go through in constant memory" {
	dir=$BATS_TEST_TMPDIR
	# Every line is parsed whole and answered; one in 10,000 runs, the
	# rest are refused (an unknown key), so that the input's size, not
	# Sage, sets the pace.
	python3 -c '
import json
for i in range(100000):
    job = {"id": i, "code": "print(%d)" % i + "#" * 900}
    if i % 10000:
        job["unknown"] = 1
    print(json.dumps(job))' >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl" 2>"$dir/err" &
	pid=$!
	peak=0
	samples=()
	while kill -0 "$pid" 2>/dev/null; do
		rss=$(awk '/^VmRSS/ { print $2 }' /proc/$pid/status 2>/dev/null || true)
		[ -n "$rss" ] && samples+=("$rss") && [ "$rss" -gt "$peak" ] && peak=$rss
		sleep 0.2
	done
	wait "$pid" || [ $? -eq 1 ]
	expect_equal "$(wc -l <"$dir/out.jsonl")" 100000 "result lines"
	expect_equal "$(grep -c '"exit_code":0' "$dir/out.jsonl")" 10 "jobs run"
	local quarter=${samples[$((${#samples[@]} / 4))]}
	echo "# RSS (KiB) of ${#samples[@]} samples: peak $peak, at a quarter $quarter, last ${samples[-1]}" >&3
	# The input is 93 MB, the results 150 MB: neither is held whole. What
	# grows with the lines read is only the set of ids (a repeated id is
	# refused): some 50 bytes for each of these short ones, 64 allowed.
	[ "$peak" -lt 16000 ]
	[ "${samples[-1]}" -lt $((quarter + 2048 + 100000 * 64 / 1024)) ]
}

@test "batch - .sage files named as arguments are jobs, their names the ids" {
	cp "$BATS_TEST_DIRNAME/../examples/seed.sage" "$BATS_TEST_TMPDIR/a.sage"
	printf 'print(2^10)\n' >"$BATS_TEST_TMPDIR/b.sage"
	cd "$BATS_TEST_TMPDIR"
	run_ss 0 batch --order input a.sage b.sage
	printf '%s\n' "$output" >out.jsonl
	expect_equal "$(results out.jsonl '"%s %s %s" % (j["id"], j["exit_code"], j["file"])')" "a.sage 0 a.sage
b.sage 0 b.sage"
	expect_equal "$(results out.jsonl 'j["stdout"].strip()' | tail -1)" "1024"
}

# bats test_tags=any-sage
@test "batch - SIGTERM stops running jobs, removes every container, writes the summary, exits 143" {
	dir=$BATS_TEST_TMPDIR
	batch_in_background 20 5
	for ((i = 0; i < 300; i++)); do
		[ -n "$(our_containers)" ] && break
		sleep 0.1
	done
	sleep 5
	kill -TERM "$pid"
	set +e
	wait "$pid"
	status=$?
	set -e
	expect_equal "$status" 143
	expect_match "$(cat "$dir/err")" "stopped by SIGTERM"
	expect_match "$(cat "$dir/err")" "sage-sandbox batch: [0-9]+ jobs in"
	expect_no_containers
}

@test "batch --resume - a done job whose output holds a NUL byte, or any text, or whose line lost only its newline, is not run again" {
	jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	cat >"$jobs" <<-'EOF'
	{"id": "nul", "code": "print('a' + chr(0) + 'b')"}
	{"id": 7, "code": "print('\u00e9\u2603')"}
	{"id": "7", "code": "import sys; sys.exit(125r)"}
	EOF
	"$SAGE_SANDBOX" batch "$jobs" >"$BATS_TEST_TMPDIR/out.jsonl" 2>/dev/null || true
	expect_equal "$(wc -l <"$BATS_TEST_TMPDIR/out.jsonl")" 3
	run_ss 0 batch --resume "$BATS_TEST_TMPDIR/out.jsonl" "$jobs"
	expect_equal "$output" ""
	expect_match "$errors" "0 jobs in .* 3 skipped \(--resume\)"
	# A last line whole but for its newline (cut just before it) is done
	# too; appended to, the file gets that newline first.
	truncate -s -1 "$BATS_TEST_TMPDIR/out.jsonl"
	"$SAGE_SANDBOX" batch --resume "$BATS_TEST_TMPDIR/out.jsonl" "$jobs" \
		>>"$BATS_TEST_TMPDIR/out.jsonl" 2>"$BATS_TEST_TMPDIR/err"
	expect_match "$(cat "$BATS_TEST_TMPDIR/err")" "0 jobs in .* 3 skipped \(--resume\)"
	expect_equal "$(wc -l <"$BATS_TEST_TMPDIR/out.jsonl")" 3
}

# bats test_tags=any-sage
@test "batch - - with stdin a socket (as Node and socket activation give): every job runs, a clean exit" {
	# The jobs come one at a time, each after the last one's result, so
	# that the batch waits on the socket between them; then the writer
	# shuts its side. The descriptor the batch read is closed at the end
	# of input while fd 0 keeps the socket open: a watch left on it would
	# be told of its end on every turn.
	run python3 - "$SAGE_SANDBOX" <<'PY'
import json, socket, subprocess, sys
ours, theirs = socket.socketpair()
batch = subprocess.Popen([sys.argv[1], "batch", "--jobs", "1", "-"], stdin=theirs,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
theirs.close()
for i in range(1, 4):
    ours.sendall((json.dumps({"id": i, "code": "print(%d^2)" % i}) + "\n").encode())
    line = json.loads(batch.stdout.readline())
    assert line["id"] == i and line["stdout"] == "%d\n" % (i * i), line
ours.shutdown(socket.SHUT_WR)
rest = batch.stdout.read()
status = batch.wait(timeout=120)
err = batch.stderr.read().decode()
print(err)
assert rest == b"", rest
assert status == 0, status
assert "3 jobs in" in err and "3 ok" in err, err
ours.close()
print("ok")
PY
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = ok ]
	expect_no_containers
}
