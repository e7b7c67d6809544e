#!/bin/bash
# unit-cli.sh: the real ./sage-sandbox's command line against
# tests/fake-podman, given with --podman (or SAGE_SANDBOX_PODMAN): a podman
# that cannot run, podman's own refusals, batch's --order, and the
# Makefile's flags. TAP; no podman, no Sage, some ten seconds.
#
# Each case has a directory of its own (fake-podman says why): podman there
# is a link to the fake, mode how it behaves, calls what it was asked; and a
# cache of its own (XDG_CACHE_HOME), since sage-sandbox keeps podman's and
# the image's answers per user. sage-sandbox refuses to run as root: as
# root, it runs here as uid 1000 of a user namespace of its own, which is
# root outside (files stay root's).
set -u
cd "$(dirname "$0")/.."
top=$PWD
fake=$top/tests/fake-podman
[ -x "$top/sage-sandbox" ] || { echo "Bail out! no $top/sage-sandbox: run make first"; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/unit-cli.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT

# The caller's settings, runtime directory (where the cache would go) and
# remote podman mean nothing here.
for v in $(compgen -e); do
	case $v in SAGE_SANDBOX_* | CONTAINER_HOST | CONTAINER_CONNECTION) unset "$v" ;; esac
done
unset XDG_RUNTIME_DIR
# Never a server that happens to answer for this uid: every call here is
# this build's own, against the fake podman.
export SAGE_SANDBOX_SETTINGS=/dev/null HOME=$scratch/home SAGE_SANDBOX_SERVER=off
mkdir -m 700 "$HOME"

as_user=()
not_root=
if [ "$(id -u)" -ne 0 ]; then
	not_root=yes
elif unshare --user --map-user=1000 --map-group=1000 true 2>/dev/null; then
	as_user=(unshare --user --map-user=1000 --map-group=1000)
	not_root=yes
fi

# sage-sandbox's default image (settings.c) is the one ./setup.sh builds
# by default: Sage 10 of the passagemath release setup.sh pins. The image
# probe's refusal below names it, which holds the two equal.
default_image=localhost/sagemath-passagemath:$(sed -n 's/^passagemath_version=//p' setup.sh)

n=0
failures=0
out=$scratch/stdout
err=$scratch/stderr

# The last run, shown when a check fails.
show_last() {
	printf '#   sage-sandbox %s\n#   status %s\n' "${last_args:-}" "${status:-}"
	sed -n '1,8s/^/#   stdout: /p' "$out" 2>/dev/null | cut -c1-300
	sed -n '1,8s/^/#   stderr: /p' "$err" 2>/dev/null | cut -c1-300
}

# check WHAT COMMAND...: one TAP line, ok when COMMAND succeeds.
check() {
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		failures=$((failures + 1))
		show_last
	fi
}

skip() {
	n=$((n + 1))
	echo "ok $n - $1 # skip $2"
}

# fake_case NAME MODE: a case's directory, its fake podman ($podman) and
# its own empty cache.
fake_case() {
	dir=$scratch/$1
	podman=$dir/podman
	mkdir -p "$dir"
	ln -s "$fake" "$podman"
	printf '%b' "$2" >"$dir/mode"
	mkdir -m 700 "$dir/cache"
	export XDG_CACHE_HOME=$dir/cache
}

# ss ARGS...: sage-sandbox ARGS, stdin from $input (default /dev/null),
# under a time limit; leaves $status, and $out and $err as files.
ss() {
	last_args="$*"
	timeout 60 "${as_user[@]}" "$top/sage-sandbox" "$@" <"${input:-/dev/null}" >"$out" 2>"$err"
	status=$?
}

# one_line RE: stderr is exactly one line, and it matches RE.
one_line() {
	[ "$(wc -l <"$err")" -eq 1 ] && [ -z "$(tail -c1 "$err" | tr -d '\n')" ] &&
		[[ $(cat "$err") =~ $1 ]]
}

# refused STATUS RE: exits STATUS, nothing on stdout, one line on stderr
# that matches RE.
refused() {
	[ "$status" -eq "$1" ] && [ ! -s "$out" ] && one_line "$2"
}

# json_is EXPR: stdout is one JSON object (j), and the Python EXPR holds;
# the stderr line (line) is also at hand.
json_is() {
	python3 - "$1" "$out" "$err" <<-'EOF'
		import json, sys
		j = json.loads(open(sys.argv[2], encoding="utf-8", errors="strict").read())
		line = open(sys.argv[3]).read().rstrip("\n")
		sys.exit(0 if isinstance(j, dict) and eval("(" + sys.argv[1] + ")") else 1)
	EOF
}

# calls_are TEXT: the events of the fake's calls file (their first words),
# in order, are TEXT.
calls_are() {
	[ "$(grep -v '^$' "$dir/calls" | cut -d' ' -f1 | tr '\n' ' ')" = "$1" ]
}

echo 'print(1)' >"$scratch/code.sage"
# The line of any refusal to start podman: what, then the fix.
no_podman_fix="; install podman \(apt-get install podman runc uidmap\) or name it with --podman PATH\$"

# ---- a. a podman that cannot run ------------------------------------------------------

input=$scratch/code.sage
ss run --podman /nonexistent/podman
check "run - --podman that does not exist: 125, one line naming it and the fix, no stdout" \
	refused 125 "^sage-sandbox: podman executable '/nonexistent/podman' not found$no_podman_fix"
ss run --json --podman /nonexistent/podman
check "run --json - --podman that does not exist: 125, the same line" \
	eval '[ "$status" -eq 125 ] && one_line "^sage-sandbox: podman executable .*/nonexistent/podman"'
check "run --json - ... and one error object: ok false, exit_code 125, error and hint as the line says" \
	json_is 'j["ok"] is False and j["exit_code"] == 125 and j["schema_version"] == 1 and
		"sage-sandbox: %s; %s" % (j["error"], j["hint"]) == line and
		j["sandbox"]["podman"] == "/nonexistent/podman"'

touch "$scratch/not-executable"
ss run --podman "$scratch/not-executable"
check "run - --podman a file that is not executable: 125, one line naming it and the fix" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/not-executable: Permission denied; make it executable for this user \\(chmod \\+x\\), or name another with --podman PATH$"
SAGE_SANDBOX_PODMAN=$scratch/not-executable ss run
check "run - SAGE_SANDBOX_PODMAN a file that is not executable: the same" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/not-executable: Permission denied; make it executable for this user \\(chmod \\+x\\), or name another with --podman PATH$"
# cleanup and status said "install podman" for it (review helper 159).
ss cleanup --podman "$scratch/not-executable"
check "cleanup - --podman a file that is not executable: 125, the chmod +x fix" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/not-executable: Permission denied; make it executable for this user \\(chmod \\+x\\), or name another with --podman PATH$"
ss status --podman "$scratch/not-executable"
check "status - --podman a file that is not executable: 1, not ready, the chmod +x fix" \
	eval '[ "$status" -eq 1 ] && grep -q "^ready: *no: cannot execute podman $scratch/not-executable" "$out" &&
		grep -q "^fix: *make it executable for this user (chmod +x)" "$out"'
ss status --json --podman "$scratch/not-executable"
check "status --json - ... the same error and hint" \
	json_is '"cannot execute podman" in j["error"] and "chmod +x" in j["hint"]'
ss run --json --podman "$scratch/not-executable"
check "run --json - ... the error object" \
	json_is 'j["ok"] is False and j["exit_code"] == 125 and "not-executable" in j["error"] and
		"sage-sandbox: %s; %s" % (j["error"], j["hint"]) == line'

mkdir "$scratch/a-directory"
ss run --podman "$scratch/a-directory"
check "run - --podman a directory: 125, one line: cannot execute it, why, and the fix" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/a-directory: Permission denied; that is a directory: name the podman program itself with --podman PATH\$"

# Attack helper 162: each was told to install podman, or echoed raw.
ss status --podman "$scratch/not-executable"
check "status - --podman a file that cannot be run: its podman line says so, not NOT FOUND" \
	eval 'grep -qx "podman: *cannot execute podman $scratch/not-executable: Permission denied" "$out"'
printf '#!/nonexistent/interpreter\n' > "$scratch/no-interpreter"
chmod +x "$scratch/no-interpreter"
ss run --podman "$scratch/no-interpreter"
check "run - --podman a script whose interpreter is missing: 125, its #! line named" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/no-interpreter: No such file or directory; the file is there, but a #! interpreter or a loader it needs is not: name the podman program with --podman PATH\$"
ss cleanup --podman "$scratch/no-interpreter"
check "cleanup - ... the same, not 'podman ps failed (status -1)'" \
	refused 125 "^sage-sandbox: cannot execute podman $scratch/no-interpreter: No such file or directory; the file is there"
ss batch --shard $'1/4\n\e[31mred' "$scratch/code.sage"
check "batch - a --shard with a newline and a terminal escape: 125, one line, both shown escaped" \
	refused 125 "^sage-sandbox: --shard '1/4\\\\x0a\\\\x1b\\[31mred' is not K/N with 0 <= K < N; give"
SAGE_SANDBOX_TIMEOUT=$'9\r\e]0;title\a' ss run
check "run - a setting's value with a carriage return and an escape: 125, one line, escaped" \
	refused 125 "^sage-sandbox: invalid SAGE_SANDBOX_TIMEOUT '9\\\\x0d\\\\x1b\\]0;title\\\\x07': allowed is"

mkfifo "$scratch/settings-fifo"
SAGE_SANDBOX_SETTINGS=$scratch/settings-fifo ss run --podman /nonexistent/podman
check "run - a settings file that is a FIFO no one writes: no wait for a writer (it holds nothing)" \
	refused 125 "^sage-sandbox: podman executable '/nonexistent/podman' not found"
SAGE_SANDBOX_SETTINGS=<(printf 'timeout = x\n') ss run --podman /nonexistent/podman
check "run - a settings file from the shell's <(...): read, its line refused" \
	refused 125 "^sage-sandbox: invalid timeout 'x': allowed is an integer from 1 to 600 \\(settings file /dev/fd/[0-9]+, line 1\\)"
ss run --podman "$(printf '/usr/bin/pod\342\200\213man')" # not $'\u200b': a C locale's bash
check "run - --podman with a zero-width space: 125, refused as a value a hint could not name" \
	refused 125 "^sage-sandbox: invalid --podman '/usr/bin/pod\\\\xe2\\\\x80\\\\x8bman': allowed is"

ss batch --podman /nonexistent/podman "$scratch/code.sage"
check "batch - --podman that does not exist: 125, one line, no result line" \
	refused 125 "^sage-sandbox: podman executable '/nonexistent/podman' not found$no_podman_fix"
input=

# ---- b. podman answers info, then refuses the run ------------------------------------

if [ -z "$not_root" ]; then
	for what in "run - the fake podman" "run - podman exits 125 on run" "batch - --order"; do
		skip "$what" "as root with no user namespace to run sage-sandbox in (it refuses root)"
	done
else
	fake_case works 'run launcher\n'
	input=$scratch/code.sage
	ss run --podman "$podman"
	check "run - the fake podman: info, probe, one container, the code's output, status 0" \
		eval '[ "$status" -eq 0 ] && [ "$(cat "$out")" = "out:print(1)" ] && [ ! -s "$err" ] &&
			calls_are "info probe run user call end "'
	ss run --podman "$podman"
	check "run - a second run asks neither podman info nor the image again (the cache)" \
		eval '[ "$status" -eq 0 ] && calls_are "info probe run user call end run user call end "'
	ss cleanup --podman "$podman"
	check "cleanup - podman ps lists nothing: status 0, one line" \
		eval '[ "$status" -eq 0 ] && [ ! -s "$err" ] &&
			[ "$(cat "$out")" = "removed 0 containers left by killed runs" ]'
	ss status --podman "$podman"
	check "status - the fake podman: version 4.3.1, rootless, Sage 9.5, ready, status 0" \
		eval '[ "$status" -eq 0 ] && grep -qx "podman: *$podman (version 4.3.1)" "$out" &&
			grep -qx "rootless: *yes" "$out" && grep -qx "sage: *9.5" "$out" &&
			grep -qx "ready: *yes" "$out"'

	fake_case exit-early 'run exit-early WARN[0000] a warning first\\nError: fake podman: crun: cannot set up the container\n'
	ss run --podman "$podman"
	check "run - podman exits 125 on run: 125, one line with its status and its last stderr line" \
		refused 125 "^sage-sandbox: podman could not run the container \(status 125\): Error: fake podman: crun: cannot set up the container; "
	check "run - ... and not the warning before it" \
		eval '! grep -q "a warning first" "$err"'
	ss run --json --podman "$podman"
	check "run --json - podman exits 125 on run: the error object carries the same message" \
		json_is 'j["ok"] is False and j["exit_code"] == 125 and
			j["error"] == "podman could not run the container (status 125): Error: fake podman: crun: cannot set up the container" and
			"sage-sandbox: %s; %s" % (j["error"], j["hint"]) == line'

	fake_case probe-fails 'probe fails WARN[0000] a warning first\\nError: fake podman: crun: cannot set up the container\n'
	ss run --podman "$podman"
	# podman's own failure (the image's shell never ran): podman's words,
	# not the image blamed.
	check "run - podman exits 125 on the image probe: 125, one line, naming the default image, setup.sh's" \
		refused 125 "^sage-sandbox: podman could not run a container of image '${default_image//./\\.}' \\(status 125\\): "
	check "run - ... the line carries podman's last stderr line, its error" \
		eval 'grep -q ": Error: fake podman: crun: cannot set up the container;" "$err"'

	fake_case info-fails 'info fails WARN[0000] a warning first\\nError: fake podman: cannot connect\n'
	ss run --podman "$podman"
	check "run - podman info exits 125: 125, one line: rootless not confirmed" \
		refused 125 "^sage-sandbox: refusing to run: cannot confirm podman is rootless: podman info exited with status 125: .*; check that podman works for this user: $podman info\$"
	check "run - ... the line carries podman's last stderr line, its error" \
		eval 'grep -q ": Error: fake podman: cannot connect;" "$err"'

	fake_case ps-fails 'ps fails Error: fake podman: database is locked\n'
	ss cleanup --podman "$podman"
	check "cleanup - podman ps exits 125: 125, one line" \
		refused 125 "^sage-sandbox: podman ps failed \(status 125\): Error: fake podman: database is locked; check that podman works for this user: $podman ps\$"
	check "cleanup - ... the line carries podman's message" \
		eval 'grep -q "database is locked" "$err"'
	input=

	# What podman prints reaches status's lines as error_set shows it:
	# escapes as \xNN, never a terminal's control (attack helper 164).
	fake_case info-escape 'info fails Error: \033[2J\033]0;pwn\007 bad\n'
	ss status --podman "$podman"
	check "status - podman info's escapes: 1, shown as \\xNN on its lines, no ESC or BEL written" \
		eval '[ "$status" -eq 1 ] && ! grep -q $'"'"'[\e\a]'"'"' "$out" &&
			grep -q "^rootless: *unknown: podman info exited with status 125: Error: \\\\x1b\\[2J" "$out" &&
			grep -q "^fix: *check that podman works for this user: $podman info$" "$out"'

	# The warm pool of an MCP server whose podman refuses every run, for
	# 4 s (then its input ends): tries at 0, 1 and 3 s.
	fake_case pool-fails 'run exit-early Error: fake podman: cannot start\n'
	last_args="mcp --podman $podman (stdin open for 4 s)"
	sleep 4 | timeout 60 "${as_user[@]}" "$top/sage-sandbox" mcp --podman "$podman" >"$out" 2>"$err"
	status=$?
	check "mcp - the pool's podman refuses: a line says so and when it tries again; exit 0 at the end of input" \
		eval '[ "$status" -eq 0 ] && [ ! -s "$out" ] && grep -qxF "sage-sandbox mcp: a warm sandbox did not start (podman could not run the container (status 125): Error: fake podman: cannot start); next try in 1 s" "$err"'
	check "mcp - ... it tries again after 1 s, then 2 s: 2 or 3 tries in 4 s" \
		eval 'tries=$(grep -c "^run " "$dir/calls"); [ "$tries" -ge 2 ] && [ "$tries" -le 3 ] &&
			grep -q "next try in 2 s" "$err"'
fi

# ---- c. batch --order, around a slow first job --------------------------------------------

# 200 jobs, 4 sandboxes at once: the first four take 1200, 900, 600 and 300
# ms, and so end in reverse order; the other 196 take none. --order input
# holds at most 32 x --jobs = 128 results back for a slow job (man page,
# BATCH): 200 jobs pass that window, and job 128 waits for job 0's end.
python3 -c '
import json
slow = {0: 1200, 1: 900, 2: 600, 3: 300}
for i in range(200):
    print(json.dumps({"id": "j%d" % i, "code": "print(%d)  #sleep %d" % (i, slow.get(i, 0))}))
' >"$scratch/jobs.jsonl"

# result_ids: the ids of stdout's lines, each a JSON object, one a line.
result_ids() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    print(json.loads(line)["id"])' "$out"
}
# in_order ID...: the ids come in this order among stdout's lines.
in_order() {
	local at last=-1 id
	for id; do
		at=$(result_ids | grep -nx "$id" | cut -d: -f1)
		[ -n "$at" ] && [ "$at" -gt "$last" ] || return 1
		last=$at
	done
}
# started_before CODE1 CODE2: the fake's "call" of CODE1 is logged before
# the "end" of CODE2.
called_before_end() {
	local called ended
	called=$(grep -nx "call $1" "$dir/calls" | cut -d: -f1)
	ended=$(grep -nx "end $2" "$dir/calls" | cut -d: -f1)
	[ -n "$called" ] && [ -n "$ended" ] && [ "$called" -lt "$ended" ]
}
# served_by_four: four serial containers took every job, and each was
# removed at the end.
served_by_four() {
	local name
	[ "$(grep -c '^run ' "$dir/calls")" -eq 4 ] || return 1
	for name in $(sed -n 's/^run //p' "$dir/calls"); do
		grep -qx "rm $name" "$dir/calls" || return 1
	done
}
all_ids="$(for i in $(seq 0 199); do echo "j$i"; done)"

if [ -n "$not_root" ]; then
	fake_case batch-input 'run launcher\n'
	ss batch --jobs 4 --order input --podman "$podman" "$scratch/jobs.jsonl"
	check "batch --order input - status 0, 200 lines, in the input's order, each id once" \
		eval '[ "$status" -eq 0 ] && [ "$(result_ids)" = "$all_ids" ]'
	check "batch --order input - job 128 starts only after job 0 ended (the 32 x --jobs window)" \
		eval '! called_before_end "print(128)  #sleep 0" "print(0)  #sleep 1200" &&
			called_before_end "print(127)  #sleep 0" "print(0)  #sleep 1200"'
	check "batch --order input - four serial containers served it, each removed" served_by_four

	fake_case batch-completion 'run launcher\n'
	ss batch --jobs 4 --podman "$scratch/batch-completion/podman" "$scratch/jobs.jsonl"
	check "batch --order completion - status 0, 200 lines, each id once" \
		eval '[ "$status" -eq 0 ] && [ "$(result_ids | sort)" = "$(sort <<<"$all_ids")" ]'
	check "batch --order completion - the slow first four in reverse order, the fastest of them first" \
		eval 'in_order j3 j2 j1 j0 && [ "$(result_ids | sed -n 1p)" = j3 ]'
	check "batch --order completion - job 128 runs before job 0 ends (no window)" \
		called_before_end "print(128)  #sleep 0" "print(0)  #sleep 1200"
	check "batch --order completion - four serial containers served it, each removed" served_by_four
fi

# ---- d. the Makefile: a packager's flags add to ours ---------------------------------

# A copy of the tree's sources (the build's outputs left out): make -n and
# the build run there, and nothing of theirs is left in the tree.
copy=$scratch/tree
mkdir "$copy"
tar -C "$top" --exclude=./.git --exclude=./lmstudio --exclude=./tests --exclude='./build-*' \
	--exclude='*.o' --exclude=./sage-sandbox --exclude=./embedded.c --exclude=./launcher-bundle.py \
	-c . | tar -C "$copy" -x
make -n -C "$copy" CFLAGS=-O2 >"$out" 2>"$err"
status=$?
last_args="(make -n CFLAGS=-O2)"
# compiles_with FLAG...: every compiler line of the dry run has each FLAG.
compiles_with() {
	local lines flag
	lines=$(grep -E -- ' -c -o [^ ]+\.o [^ ]+\.c$' "$out")
	[ "$status" -eq 0 ] && [ "$(wc -l <<<"$lines")" -ge 30 ] || return 1
	for flag; do
		! grep -vq -- " $flag\\b" <<<"$lines" || return 1
	done
}
check "make -n CFLAGS=-O2 - every object is compiled with -std=c11, -Wall and -O2" \
	compiles_with -std=c11 -Wall -O2
make -s -C "$copy" -j "$(nproc)" CPPFLAGS=-DNDEBUG sage-sandbox >"$out" 2>"$err"
status=$?
last_args="(make CPPFLAGS=-DNDEBUG sage-sandbox)"
check "make CPPFLAGS=-DNDEBUG - builds sage-sandbox, which runs" \
	eval '[ "$status" -eq 0 ] && "$copy/sage-sandbox" --version | grep -q "^sage-sandbox "'
sed 's/^/# make CPPFLAGS=-DNDEBUG: /' "$err" | head -n 20

echo "1..$n"
[ "$failures" -eq 0 ]
