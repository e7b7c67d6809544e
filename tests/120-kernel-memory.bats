#!/usr/bin/env bats
# Kernel memory: what the code can make the kernel allocate on its behalf,
# which no memory cgroup charges on a cgroup v1 host. Each test runs one
# route of tests/kernel-memory.py in the real sandbox at --memory 512m,
# watches the host's MemAvailable from outside (tests/hostmem.py), and
# holds the run to --memory plus 512 MiB above the idle baseline. What
# holds it is the kernel's rlimits (podman passes them; self-test reads them
# from inside) and sage-sandbox's memory watchdog, the same under any
# podman: tests/podman5.sh leaves the file out.
# bats file_tags=any-podman

load helpers

MEMORY=512m
MOST_MIB=$((512 + 512))

teardown() {
	wait_no_containers 30
}

# kernel_attack ROUTE PROCESSES STATUS [ARGS...]: runs the route in
# PROCESSES processes, each holding what it made for $hold s (3 unless
# set: a refused route, which makes nothing, holds it 0 s), and fails unless
# sage-sandbox exits with STATUS and the host lost at most MOST_MIB.
# Leaves $output (what the processes printed), $errors (sage-sandbox's
# stderr), $drop_mib and $made (the objects all processes made).
kernel_attack() {
	local route=$1 processes=$2 expected=$3 code=$BATS_TEST_TMPDIR/attack.sage
	shift 3
	{
		printf "ROUTE, PROCS, HOLD = '%s', %sr, %sr\nexec(compile(r'''" "$route" "$processes" "${hold:-3}"
		cat "$BATS_TEST_DIRNAME/kernel-memory.py"
		printf "''', 'kernel-memory.py', 'exec'))\n"
	} >"$code"
	set +e
	output=$(timeout 300 python3 "$BATS_TEST_DIRNAME/hostmem.py" --idle 2 -- \
		"$SAGE_SANDBOX" run --memory "$MEMORY" --timeout 120 "$@" "$code" \
		</dev/null 2>"$BATS_TEST_TMPDIR/stderr")
	status=$?
	set -e
	local report
	report=$(tail -n 1 "$BATS_TEST_TMPDIR/stderr")
	errors=$(sed '$d' "$BATS_TEST_TMPDIR/stderr")
	drop_mib=$(printf '%s' "$report" | python3 -c 'import json, sys; print(json.load(sys.stdin)["available_drop_mib"])')
	made=$(printf '%s\n' "$output" | awk '/ made, then / { n += $3 } END { print n + 0 }')
	printf '# %s x%s: %s; %s objects made\n' "$route" "$processes" "$report" "$made" >&3
	if [ "$status" -ne "$expected" ] || [ "$drop_mib" -gt "$MOST_MIB" ]; then
		printf '# expected status %s and at most %s MiB, got %s and %s MiB\n' \
			"$expected" "$MOST_MIB" "$status" "$drop_mib" >&2
		printf '# stdout: %s\n# stderr: %s\n' "$output" "$errors" >&2
		return 1
	fi
}

# The stop of a run whose processes' charges passed --memory.
expect_memory_stop() {
	expect_match "$errors" "^sage-sandbox: the run's processes together passed the memory limit of $MEMORY \([0-9]+ MiB seen: [0-9]+ MiB of their own, [0-9]+ MiB for [0-9]+ open descriptors at 512 KiB each, [0-9]+ MiB for up to [0-9]+ memory mappings and page tables\); the container was stopped; raise --memory \(at most 8g\)$"
}

@test "kernel memory - AF_UNIX stream sockets filled by 8 processes: stopped at --memory, status 122" {
	kernel_attack unix-stream 8 122
	expect_memory_stop
}

@test "kernel memory - AF_UNIX stream sockets filled by 90 processes: stopped at --memory, status 122" {
	kernel_attack unix-stream 90 122
	expect_memory_stop
}

@test "kernel memory - AF_UNIX datagram sockets filled by 8 processes: stopped at --memory, status 122" {
	kernel_attack unix-dgram 8 122
	expect_memory_stop
}

@test "kernel memory - --json names the descriptors' stop as a memory stop" {
	kernel_attack unix-stream 4 122 --json
	output=$(printf '%s\n' "$output" | tail -n 1)
	expect_equal "$(json_get '[j["memory_limit_exceeded"], j["exit_code"], j["stopped_by"]]')" '[true, 122, "memory_limit"]'
	expect_match "$(json_get 'j["error"]')" "MiB for [0-9]+ open descriptors at 512 KiB each"
}

@test "kernel memory - sockets in flight (sent, closed, in no descriptor table) stop at the per-uid limit" {
	kernel_attack in-flight 8 0
	expect_match "$output" "then \[Errno 109\] Too many references"
	[ "$made" -le 1300 ]
}

@test "kernel memory - loopback TCP and UDP sockets are refused" {
	hold=0 kernel_attack tcp 2 0
	expect_match "$output" "tcp [0-9]+: 0 made, then \[Errno 97\] Address family not supported by protocol"
	hold=0 kernel_attack udp 2 0
	expect_match "$output" "udp [0-9]+: 0 made, then \[Errno 97\] Address family not supported by protocol"
}

@test "kernel memory - pipes widened to 1 MiB and filled: stopped at --memory, status 122" {
	kernel_attack pipes 8 122
	expect_memory_stop
}

@test "kernel memory - epoll watches, descriptors squared: stopped at --memory, status 122" {
	kernel_attack epoll 8 122
	expect_memory_stop
}

@test "kernel memory - eventfd, timerfd, epoll and signalfd objects: stopped at --memory, status 122" {
	kernel_attack descriptors 8 122
	expect_memory_stop
}

@test "kernel memory - inotify is refused" {
	hold=0 kernel_attack inotify 2 0
	expect_match "$output" "inotify [0-9]+: 0 made, then \[Errno 38\] Function not implemented"
}

@test "kernel memory - POSIX timers and queued signals stop at the sigpending rlimit, 1024 for the run" {
	kernel_attack timers 8 0
	expect_match "$output" "then \[Errno 11\] Resource temporarily unavailable"
	[ "$made" -le 1024 ]
	kernel_attack signals 8 0
	expect_match "$output" "then \[Errno 11\] Resource temporarily unavailable"
	[ "$made" -le 1024 ]
}

@test "kernel memory - empty files, directories and symlinks with 200-byte names stop at 16384 inodes" {
	kernel_attack inodes 8 0
	expect_match "$output" "then \[Errno 28\] No space left on device"
	[ "$made" -le 16384 ]
}

@test "kernel memory - extended attributes on /tmp are refused" {
	hold=0 kernel_attack xattrs 2 0
	expect_match "$output" "xattrs [0-9]+: 0 made, then \[Errno 95\] Operation not supported"
}

@test "kernel memory - threads' kernel stacks stop at --pids-limit" {
	kernel_attack threads 8 0 --pids-limit 64
	expect_match "$output" "then can't start new thread"
	[ "$made" -le 64 ]
}

@test "kernel memory - byte-range locks past 4096, counted in /proc/locks: stopped, status 122; SQLite still works" {
	kernel_attack locks 8 122
	expect_equal "$errors" "sage-sandbox: the run's processes held more than 4096 byte-range locks at once, kernel memory that no limit counts; the container was stopped; hold fewer (SQLite takes one or two a database)"
	sage 'import sqlite3
db = sqlite3.connect("/tmp/t.db")
db.execute("create table t (x)")
db.execute("insert into t values (42)")
db.commit()
print(db.execute("select x from t").fetchone()[0], EllipticCurve("37a1").rank())' 0 run
	expect_equal "$output" "42 1"
}

@test "kernel memory - memory mappings split by 90 processes: stopped at --memory, status 122" {
	kernel_attack mappings 90 122
	expect_memory_stop
}

@test "kernel memory - memory mappings split by 500 processes at --pids-limit 512: stopped at --memory, status 122" {
	kernel_attack mappings 500 122 --pids-limit 512
	expect_memory_stop
}

@test "kernel memory - 85 processes slow to measure, then 8 fill 450 MiB each: stopped at --memory, status 122" {
	kernel_attack mappings-then-fill 85 122 --pids-limit 512
	expect_memory_stop
}

@test "kernel memory - asynchronous I/O contexts (the host-wide fs.aio-nr) are refused" {
	sage 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
context = ctypes.c_ulong(0)
if os.uname().machine == "x86_64":
    print(libc.syscall(int(206), int(128), ctypes.byref(context)), os.strerror(ctypes.get_errno()))
else:
    print(-1, "Function not implemented")  # io_setup has another number there' 0 run
	expect_equal "$output" "-1 Function not implemented"
}

@test "kernel memory - open file description locks, which /proc/locks shows without an owner, are refused" {
	hold=0 kernel_attack ofd-locks 2 0
	expect_match "$output" "ofd-locks [0-9]+: 0 made, then \[Errno 37\] No locks available"
}
