# helpers.bash: shared by every test file. Tests run the real sage-sandbox
# against the real image under rootless podman: nothing here is a stand-in.

SAGE_SANDBOX=${SAGE_SANDBOX:-$BATS_TEST_DIRNAME/../sage-sandbox}
# sage-sandbox's default image, setup.sh's Sage 10 (tests/unit-cli.sh holds
# the two equal), and the image the suite runs on: the one named, else that.
DEFAULT_IMAGE=localhost/sagemath-passagemath:$(sed -n 's/^passagemath_version=//p' \
	"$BATS_TEST_DIRNAME/../setup.sh")
IMAGE=${SAGE_SANDBOX_IMAGE:-$DEFAULT_IMAGE}
LABEL_FILTER=label=sage-sandbox=1

# Tools the tests use besides bats and python3, which a minimal Debian
# lacks: without ps, a listing of a sandbox's leftover processes would come
# back empty and pass. ./setup.sh check and core install them.
for tool in ps pgrep pkill /usr/bin/time; do
	command -v "$tool" >/dev/null ||
		{ echo "tests need $tool (Debian's procps, time): ./setup.sh check installs it" >&2; exit 1; }
done

# Settings from the caller's environment or settings file must not change
# what a test means.
export SAGE_SANDBOX_SETTINGS=/dev/null
unset SAGE_SANDBOX_PODMAN SAGE_SANDBOX_TIMEOUT SAGE_SANDBOX_MEMORY SAGE_SANDBOX_WARM \
	SAGE_SANDBOX_OUTPUT_FILES SAGE_SANDBOX_OUTPUT_FILE_SIZE SAGE_SANDBOX_OUTPUT_SIZE \
	SAGE_SANDBOX_CPUS SAGE_SANDBOX_PIDS_LIMIT SAGE_SANDBOX_OUTPUT_LIMIT SAGE_SANDBOX_CONCURRENCY
# Every run cold, as the tests were written: the server's own tests
# (160-serve.bats) turn it back on, and start and stop their servers.
export SAGE_SANDBOX_SERVER=off

# The cpu group root delegated to the account (setup.sh), where one is:
# sage-sandbox holds --cpus in a group of each container's own inside it
# (cpugroup.c).
CPU_GROUP=$(awk '{ split($0, side, " - "); split(side[2], f, " ")
	if (f[1] == "cgroup" && f[3] ~ /(^|,)cpu(,|$)/) { print $5; exit } }' \
	/proc/self/mountinfo)/sage-sandbox-$(id -u)

# without_cpu_group: until the test's teardown, the account's cpu group
# is not writable, so sage-sandbox finds none and its watchdog's throttle
# holds --cpus (memwatch.c), as on a host where root delegated none.
without_cpu_group() {
	if [ -d "$CPU_GROUP" ] && [ -w "$CPU_GROUP" ]; then
		chmod a-w "$CPU_GROUP"
		CPU_GROUP_WITHHELD=1
	fi
}

restore_cpu_group() {
	if [ -n "${CPU_GROUP_WITHHELD:-}" ]; then
		chmod u+w "$CPU_GROUP"
		CPU_GROUP_WITHHELD=
	fi
}

# sage_version: the image's Sage version, as status reports it (9.5,
# 10.8.13...), asked once per test file. Where Sage's own output
# legitimately differs between versions, a test expects each's.
sage_version() {
	local cache=$BATS_FILE_TMPDIR/sage-version
	if [ ! -s "$cache" ]; then
		"$SAGE_SANDBOX" status --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["sage"]["version"])' >"$cache"
	fi
	cat "$cache"
}

# run_ss STATUS ARGS...: runs sage-sandbox ARGS (stdin from $input_file if
# set) under a hard time limit and fails, showing everything, unless it
# exits with STATUS. Leaves $output (stdout), $errors (stderr), $status.
run_ss() {
	local expected=$1
	shift
	errors_file=$BATS_TEST_TMPDIR/stderr
	set +e
	output=$(timeout 300 "$SAGE_SANDBOX" "$@" <"${input_file:-/dev/null}" 2>"$errors_file")
	status=$?
	set -e
	errors=$(cat "$errors_file")
	if [ "$status" -ne "$expected" ]; then
		printf '#/vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\n' >&2
		printf '#| sage-sandbox %s\n' "$*" >&2
		printf '#| expected status %s, got %s\n' "$expected" "$status" >&2
		printf '#| stdout: %s\n' "$output" >&2
		printf '#| stderr: %s\n' "$errors" >&2
		printf '#\\^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n' >&2
		return 1
	fi
}

# sage CODE STATUS ARGS...: runs CODE through `sage-sandbox run ARGS`.
sage() {
	local code=$1
	shift
	input_file=$BATS_TEST_TMPDIR/code.sage
	printf '%s\n' "$code" >"$input_file"
	run_ss "$@"
	input_file=
}

# json_get EXPR: evaluates a Python expression over the JSON in $output
# (bound to j), which must be exactly one valid object of strict UTF-8.
json_get() {
	printf '%s' "$output" | python3 -c '
import json, sys
raw = sys.stdin.buffer.read()
j = json.loads(raw.decode("utf-8", errors="strict"))
assert isinstance(j, dict), "not an object"
v = eval(sys.argv[1])
print(json.dumps(v) if not isinstance(v, str) else v)' "$1"
}

# expect_equal ACTUAL EXPECTED [WHAT]
expect_equal() {
	if [ "$1" != "$2" ]; then
		printf '# %s\n#   expected: %q\n#   actual:   %q\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

expect_match() {
	if ! [[ $1 =~ $2 ]]; then
		printf '# %s\n#   expected to match: %s\n#   actual: %q\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

expect_no_match() {
	if [[ $1 =~ $2 ]]; then
		printf '# %s\n#   expected not to match: %s\n#   actual: %q\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# settings_of ARGS...: the settings sage-sandbox makes of ARGS, as the JSON
# of a run refused for a missing podman: nothing runs, no podman is asked.
settings_of() {
	run_ss 125 run --json --podman /nonexistent/podman "$@"
	output=$(printf '%s' "$output" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["sandbox"]))')
}

our_containers() {
	podman ps -a --filter "$LABEL_FILTER" --format '{{.Names}}'
}

# containers_of PID: our containers that the sage-sandbox of PID started
# (their owner label, "BOOT-ID:PID:START").
containers_of() {
	podman ps -a --filter "$LABEL_FILTER" --format '{{.Names}} {{index .Labels "sage-sandbox.owner"}}' |
		awk -v pid="$1" '{ split($2, owner, ":"); if (owner[2] == pid) print $1 }'
}

# Every test leaves no container behind. What it finds it removes, whoever
# started it: two test runs (or a test and other sandboxes) at once as one
# account kill each other's containers, and their runs end "killed from
# outside" (exit 137, a batch job's attempts 2). Run one at a time.
expect_no_containers() {
	local left
	left=$(our_containers)
	if [ -n "$left" ]; then
		printf '# containers left behind: %s\n' "$left" >&2
		podman rm -f -t 0 $left >/dev/null 2>&1 || true
		return 1
	fi
}

# wait_for_started FILE...: waits up to 60 s until each FILE (a background
# run's stdout) holds the word "started", printed by its code.
wait_for_started() {
	local i f missing
	for ((i = 0; i < 240; i++)); do
		missing=
		for f; do
			grep -q started "$f" 2>/dev/null || missing=$f
		done
		[ -z "$missing" ] && return 0
		sleep 0.25
	done
	echo "# the run writing $missing did not print 'started' within 60 s" >&2
	return 1
}

# Waits up to $1 seconds for our containers to be gone.
wait_no_containers() {
	local i
	for ((i = 0; i < $1 * 4; i++)); do
		[ -z "$(our_containers)" ] && return 0
		sleep 0.25
	done
	expect_no_containers
}

# Every test leaves nothing behind. A run that ended by itself returns at
# the code's exit, and conmon removes its container (podman run --rm) a
# moment later: give it a few seconds.
teardown() {
	restore_cpu_group
	wait_no_containers 10
}

# host_abi i386|x32: "present" when this host's kernel runs getpid through
# that system call ABI outside any container, else "absent". Kernels of the
# same machine kind differ (some have no i386 ABI at all), and what a
# sandbox shows depends on it: tests expect what this kernel can show.
host_abi() {
	if python3 "$BATS_TEST_DIRNAME/abi-probe.py" | grep -qx "$1 exit 0"; then
		echo present
	else
		echo absent
	fi
}

# host_has_vsock: whether this kernel gives an AF_VSOCK socket at all.
host_has_vsock() {
	python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()' 2>/dev/null
}
