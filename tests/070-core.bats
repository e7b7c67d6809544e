#!/usr/bin/env bats
# The core: one loop for the code, podman, the clock, the signals and our
# output; the rootless check and its cache; podman as a child that is
# executed once. Each test is a defect of the old loop or a promise of the
# new one, against the real image.

load helpers

flood='while True: print("x" * 1000)'

# logging_podman: a podman that writes its subcommand to $podman_log and
# execs the real one (so everything else is real podman).
logging_podman() {
	podman_log=$BATS_TEST_TMPDIR/podman.log
	: >"$podman_log"
	cat >"$BATS_TEST_TMPDIR/podman" <<-EOF
		#!/bin/sh
		for a; do case \$a in -*) ;; *) echo "\$a" >>"$podman_log"; break ;; esac; done
		exec $(command -v podman) "\$@"
	EOF
	chmod 755 "$BATS_TEST_TMPDIR/podman"
}

@test "run - a caller that leaves SIGCHLD ignored gets a normal run and status, no spin" {
	local ignore='import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])'
	local start=$SECONDS
	printf 'print(factor(2^64+1))\n' >"$BATS_TEST_TMPDIR/f.sage"
	run_ss 0 status
	output=$(timeout 60 python3 -c "$ignore" "$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/f.sage")
	expect_equal "$output" "274177 * 67280421310721"
	output=$(timeout 60 python3 -c "$ignore" "$SAGE_SANDBOX" status --json)
	expect_equal "$(json_get 'j["rootless"]')" true
	[ $((SECONDS - start)) -lt 40 ]
}

@test "run - a reader that stops reading our stdout does not stop the timeout" {
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	# The reader opens the FIFO and never reads it.
	sleep 120 <"$BATS_TEST_TMPDIR/fifo" &
	local reader=$! start=$SECONDS
	printf '%s\n' "$flood" >"$BATS_TEST_TMPDIR/flood.sage"
	# An output limit the flood cannot reach before our queue is full.
	status=0
	timeout 100 "$SAGE_SANDBOX" run --timeout 3 --output-limit 2048 "$BATS_TEST_TMPDIR/flood.sage" \
		>"$BATS_TEST_TMPDIR/fifo" 2>"$BATS_TEST_TMPDIR/err" || status=$?
	kill "$reader" 2>/dev/null || true
	expect_equal "$status" 124
	# (Before its code began, where the container's start and Sage's
	# import took the 3 s: what this test checks holds either way.)
	expect_match "$(cat "$BATS_TEST_TMPDIR/err")" \
		"^sage-sandbox: timed out after 3 s( before its code began \\(.*\\))?; the container was stopped; raise --timeout \\(at most 600\\)$"
	[ $((SECONDS - start)) -lt 20 ]
	expect_no_containers
}

@test "run - a reader that stops reading does not stop the signals either" {
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	sleep 120 <"$BATS_TEST_TMPDIR/fifo" &
	local reader=$!
	printf 'print("started", flush=True)\n%s\n' "$flood" >"$BATS_TEST_TMPDIR/flood.sage"
	env --default-signal=TERM "$SAGE_SANDBOX" run --timeout 120 --output-limit 2048 \
		"$BATS_TEST_TMPDIR/flood.sage" \
		>"$BATS_TEST_TMPDIR/fifo" 2>"$BATS_TEST_TMPDIR/err" &
	local pid=$!
	sleep 8
	local start=$SECONDS
	kill -TERM "$pid"
	status=0
	wait "$pid" || status=$?
	kill "$reader" 2>/dev/null || true
	expect_equal "$status" 143
	[ $((SECONDS - start)) -lt 10 ]
	expect_no_containers
}

@test "run - code that exits 125 after a podman-like message is reported as the code's own" {
	sage 'import os, sys
print("partial")
sys.stderr.write("Error: short-name resolution enforced but cannot prompt without a TTY\n")
sys.stderr.flush()
os._exit(125)' 125 run
	expect_equal "$output" partial
	expect_equal "$errors" "Error: short-name resolution enforced but cannot prompt without a TTY"
	sage 'import os; print("x"); os._exit(125)' 125 run --json
	expect_equal "$(json_get '[j["exit_code"], j["stdout"], j["error"]]')" '[125, "x\n", null]'
}

@test "run - a process that exited is not timed out because a descendant holds its output" {
	sage 'import subprocess
subprocess.Popen(["sleep", "60"])
print("done")' 0 run --timeout 20 --json
	expect_equal "$(json_get '[j["stdout"], j["timed_out"], j["exit_code"]]')" '["done\n", false, 0]'
	[ "$(json_get 'j["duration_ms"]')" -lt 15000 ]
}

@test "run --timeout - counts from the start: a FIFO with no writer cannot outlast it" {
	mkfifo "$BATS_TEST_TMPDIR/code.fifo"
	local start=$SECONDS
	run_ss 124 run --timeout 2 "$BATS_TEST_TMPDIR/code.fifo"
	expect_equal "$errors" "sage-sandbox: timed out after 2 s reading the code; nothing was run; name a FILE that ends (a FIFO ends when its writer closes it), or raise --timeout"
	[ $((SECONDS - start)) -lt 8 ]
}

@test "run --timeout - counts from the start: a stdin that never closes cannot outlast it" {
	mkfifo "$BATS_TEST_TMPDIR/stdin"
	# A writer that sends one line and keeps the pipe open.
	(echo 'print(1)'; sleep 30) >"$BATS_TEST_TMPDIR/stdin" &
	local writer=$! start=$SECONDS
	status=0
	output=$(timeout 60 "$SAGE_SANDBOX" run --timeout 2 --json <"$BATS_TEST_TMPDIR/stdin") ||
		status=$?
	kill "$writer" 2>/dev/null || true
	expect_equal "$status" 124
	expect_equal "$(json_get '[j["ok"], j["exit_code"]]')" '[false, 124]'
	expect_match "$(json_get 'j["error"]')" "timed out after 2 s reading the code"
	[ $((SECONDS - start)) -lt 8 ]
}

# A podman whose `rm` waits, once $hold exists, until $go exists: the
# removal after the first signal is held open until the second is in, so
# that the second always finds the removal running (without it, a removal
# that ended within the 0.3 s made the line the test looks for optional,
# and a process that had not yet exited made it required: a flaky test).
holding_podman() {
	hold=$BATS_TEST_TMPDIR/rm.hold go=$BATS_TEST_TMPDIR/rm.go
	cat >"$BATS_TEST_TMPDIR/podman" <<-EOF
	#!/bin/sh
	case " \$* " in *" rm "*)
	    i=0
	    while [ -e "$hold" ] && [ ! -e "$go" ] && [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done ;;
	esac
	exec $(command -v podman) "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/podman"
	export SAGE_SANDBOX_PODMAN=$BATS_TEST_TMPDIR/podman
}

# twice STARTED_FILE PID: two SIGTERMs 0.3 s apart to PID once STARTED_FILE
# says the code runs, the removal held open between them (holding_podman);
# then its status, and no container of ours right after.
twice() {
	wait_for_started "$1"
	rm -f "$go"
	touch "$hold"
	kill -TERM "$2"
	sleep 0.3
	kill -TERM "$2"
	sleep 0.2
	touch "$go"
	status=0
	wait "$2" || status=$?
	rm -f "$hold"
	expect_equal "$status" 143 "exit status after two SIGTERMs"
	expect_equal "$(our_containers)" "" "containers right after exit"
}

@test "run, batch and mcp - two SIGTERMs 0.3 s apart: the removals finish, exit 143, no container left" {
	local code='import time
print("started", flush=True)
time.sleep(120)'
	holding_podman
	printf '%s\n' "$code" >"$BATS_TEST_TMPDIR/bg.sage"
	env --default-signal=INT "$SAGE_SANDBOX" run "$BATS_TEST_TMPDIR/bg.sage" \
		>"$BATS_TEST_TMPDIR/run.out" 2>"$BATS_TEST_TMPDIR/run.err" &
	twice "$BATS_TEST_TMPDIR/run.out" $!
	expect_match "$(cat "$BATS_TEST_TMPDIR/run.err")" "still removing the containers; a third signal exits at once"

	CODE=$code python3 -c 'import json, os; print(json.dumps({"id": 1, "code": os.environ["CODE"]}))' \
		>"$BATS_TEST_TMPDIR/jobs.jsonl"
	"$SAGE_SANDBOX" batch "$BATS_TEST_TMPDIR/jobs.jsonl" >"$BATS_TEST_TMPDIR/batch.out" \
		2>"$BATS_TEST_TMPDIR/batch.err" &
	local pid=$!
	# batch prints nothing until a job ends: its container running says it started.
	local i
	for ((i = 0; i < 240; i++)); do
		[ -n "$(our_containers)" ] && break
		sleep 0.25
	done
	sleep 3
	printf 'started\n' >"$BATS_TEST_TMPDIR/batch.started"
	twice "$BATS_TEST_TMPDIR/batch.started" "$pid"
	expect_match "$(cat "$BATS_TEST_TMPDIR/batch.err")" "stopped by SIGTERM"
	expect_match "$(cat "$BATS_TEST_TMPDIR/batch.err")" "still removing the containers; a third signal exits at once"

	mkfifo "$BATS_TEST_TMPDIR/mcp.in"
	"$SAGE_SANDBOX" mcp --warm 1 <"$BATS_TEST_TMPDIR/mcp.in" >"$BATS_TEST_TMPDIR/mcp.out" \
		2>"$BATS_TEST_TMPDIR/mcp.err" &
	pid=$!
	exec 7>"$BATS_TEST_TMPDIR/mcp.in"
	for ((i = 0; i < 240; i++)); do
		grep -q "first warm sandbox ready" "$BATS_TEST_TMPDIR/mcp.err" && break
		sleep 0.25
	done
	printf 'started\n' >"$BATS_TEST_TMPDIR/mcp.started"
	twice "$BATS_TEST_TMPDIR/mcp.started" "$pid"
	exec 7>&-
	expect_match "$(cat "$BATS_TEST_TMPDIR/mcp.err")" "signal 15; stopping"
	expect_match "$(cat "$BATS_TEST_TMPDIR/mcp.err")" "still removing the containers; a third signal exits at once"
}

@test "run - a sage-sandbox stopped (SIGSTOP) past its deadline reports the run as timed out" {
	printf 'import time\nprint("started", flush=True)\ntime.sleep(120)\n' >"$BATS_TEST_TMPDIR/s.sage"
	# 8 s: the timeout counts from the start, Sage's import included, and
	# "started" must be printed before it (3 s did not always suffice).
	"$SAGE_SANDBOX" run --timeout 8 "$BATS_TEST_TMPDIR/s.sage" \
		>"$BATS_TEST_TMPDIR/s.out" 2>"$BATS_TEST_TMPDIR/s.err" &
	local pid=$!
	wait_for_started "$BATS_TEST_TMPDIR/s.out"
	kill -STOP "$pid"
	# podman's backstop (the timeout + 5 s) kills the container meanwhile.
	wait_no_containers 45
	kill -CONT "$pid"
	status=0
	wait "$pid" || status=$?
	expect_equal "$status" 124
	expect_equal "$(cat "$BATS_TEST_TMPDIR/s.err")" \
		"sage-sandbox: timed out after 8 s; the container was stopped; raise --timeout (at most 600)"
}

@test "run - podman that cannot be executed is said so, never a status 127 of Sage" {
	printf '\x7fELF-not-really' >"$BATS_TEST_TMPDIR/podman"
	chmod 755 "$BATS_TEST_TMPDIR/podman"
	sage 'print(1)' 125 run --podman "$BATS_TEST_TMPDIR/podman"
	expect_equal "$errors" "sage-sandbox: cannot execute podman $BATS_TEST_TMPDIR/podman: Exec format error; it is no program this machine runs (not this machine's binary, nor a script with a #! line): name the podman program with --podman PATH"
}

@test "run - on the success path podman is executed once: no info (cached), no image exists" {
	logging_podman
	sage 'print(1)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	sage 'print(2)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	expect_equal "$output" 2
	# The first run asks podman info and probes the image (this podman
	# path is new to both caches); the second runs podman once.
	expect_equal "$(cat "$podman_log")" "info
run
run
run"
}

@test "status - probes the image once, and a run right after it asks podman nothing more" {
	logging_podman
	run_ss 0 status --podman "$BATS_TEST_TMPDIR/podman"
	# info, the probe (the host check), the image's digest, the empty
	# program's run: the probe's answer is cached, so that run does not
	# probe again.
	expect_equal "$(grep -v '^--version$' "$podman_log")" "info
run
image
run"
	: >"$podman_log"
	sage 'print(1)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	expect_equal "$(cat "$podman_log")" "run"
}

@test "rootless cache - private, and asked again when the configuration changes" {
	logging_podman
	local conf=$HOME/.config/containers/containers.conf
	sage 'print(1)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	local dir=${XDG_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}}/sage-sandbox
	expect_equal "$(stat -c %a "$dir") $(stat -c %a "$dir/podman-host-4")" "700 600"
	# A changed containers.conf (a new inode, as editors write it) is asked about.
	cp -p "$conf" "$conf.new" && mv "$conf.new" "$conf"
	sage 'print(1)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	# A cache file others could have written is not trusted.
	chmod 620 "$dir/podman-host-4"
	sage 'print(1)' 0 run --podman "$BATS_TEST_TMPDIR/podman"
	expect_equal "$(stat -c %a "$dir/podman-host-4")" 600 "rewritten privately"
	expect_equal "$(grep -c info "$podman_log")" 3
	# Runs: 3, and the image probed twice (its key holds podman's: the
	# changed containers.conf asks the image again too).
	expect_equal "$(grep -c run "$podman_log")" 5
}

@test "rootless check - CONTAINER_HOST or CONTAINER_CONNECTION is refused without running podman" {
	logging_podman
	CONTAINER_HOST=unix:///run/podman/podman.sock sage 'print(1)' 125 run --podman "$BATS_TEST_TMPDIR/podman"
	expect_match "$errors" "^sage-sandbox: refusing to run: podman is remote \(CONTAINER_HOST is set"
	CONTAINER_CONNECTION=other sage 'print(1)' 125 run --podman "$BATS_TEST_TMPDIR/podman" --json
	expect_match "$(json_get 'j["error"]')" "CONTAINER_CONNECTION is set"
	expect_equal "$(cat "$podman_log")" ""
}

@test "run - podman gets CONTAINERS_CONF and XDG_CONFIG_HOME, as the user's own podman would" {
	local probe='import os; print(os.environ.get("SAGE_SANDBOX_PROBE"))'
	local conf=$BATS_TEST_TMPDIR/config/containers
	mkdir -p "$conf"
	cp "$HOME/.config/containers/storage.conf" "$conf/"
	{ cat "$HOME/.config/containers/containers.conf"
	  printf '[containers]\nenv = ["SAGE_SANDBOX_PROBE=from-xdg-config-home"]\n'; } >"$conf/containers.conf"
	XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config sage "$probe" 0 run
	expect_equal "$output" from-xdg-config-home
	sed 's/from-xdg-config-home/from-containers-conf/' "$conf/containers.conf" >"$BATS_TEST_TMPDIR/c.conf"
	CONTAINERS_CONF=$BATS_TEST_TMPDIR/c.conf sage "$probe" 0 run
	expect_equal "$output" from-containers-conf
	sage "$probe" 0 run
	expect_equal "$output" None
}

@test "make - a failing step leaves no embedded.c that looks up to date" {
	local tree=$BATS_TEST_TMPDIR/tree
	mkdir -p "$tree"
	cp -r "$BATS_TEST_DIRNAME"/../{Makefile,seccomp.json,launcher,mcp-tools.json} "$tree"
	# checks.py a directory: sed cannot read it, as whoever runs this
	# (a file of mode 000 would not stop root).
	mkdir "$tree/checks.py"
	run make -s -C "$tree" embedded.c
	expect_equal "$status" 2 "make's status when the embedded.c step fails"
	expect_match "$output" "checks.py"
	[ ! -e "$tree/embedded.c" ]
	rmdir "$tree/checks.py"
	cp "$BATS_TEST_DIRNAME/../checks.py" "$tree"
	make -s -C "$tree" embedded.c
	grep -q embedded_checks_py "$tree/embedded.c"
}
