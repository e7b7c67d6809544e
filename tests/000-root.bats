#!/usr/bin/env bats
# As root, podman is rootful: sage-sandbox must refuse and run nothing.
# setup.sh check runs this file as root; as any other user it is skipped.

load helpers

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root: run by ./setup.sh check as root"
}

teardown() {
	# The account's settings file as it was before a test that changed it.
	[ -n "${account_settings:-}" ] || return 0
	if [ -e "$saved_settings" ]; then
		cp -p "$saved_settings" "$account_settings"
	else
		rm -f "$account_settings"
	fi
	account_settings=
}

@test "run - as root refuses with status 125 and names the account to run it as" {
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	run_ss 125 run
	expect_equal "$output" "" "stdout"
	expect_equal "$errors" "sage-sandbox: refusing to run as root: rootless podman needs an unprivileged user; run it as the account setup.sh made (sudo -iu sage-sandbox sage-sandbox run FILE), or as your own user after './setup.sh image'" "stderr"
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1 "lines on stderr"
	[ -z "$(podman ps -aq)" ]
}

@test "run --json - as root refuses with ok false, error and hint" {
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	run_ss 125 run --json
	expect_equal "$(json_get 'j["ok"]')" false
	expect_equal "$(json_get 'j["exit_code"]')" 125
	expect_match "$(json_get 'j["error"]')" "refusing to run as root"
	expect_match "$(json_get 'j["hint"]')" "sudo -iu sage-sandbox"
}

@test "self-test and status - as root: rootless false, and the image is the account's, not missing" {
	run_ss 125 self-test
	expect_match "$errors" "refusing to run as root"
	run_ss 1 status
	expect_match "$output" "image: +$IMAGE \(not checked: images are per user"
	expect_no_match "$output" "NOT PRESENT"
	expect_match "$output" "fix: +run it as the account that has the image: sudo -iu sage-sandbox sage-sandbox status"
	expect_no_match "$output" " $"$'\n' "no trailing spaces"
	run_ss 1 status --json
	expect_equal "$(json_get 'j["rootless"], j["image_available"], j["ok"], j["exit_code"]')" '[false, null, false, 1]'
}

# remove_user USER: USER and their home (their podman storage with it),
# once rootless podman's pause process is gone, and what setup.sh made for
# them: their cpu group (with their containers' groups in it) and their
# subordinate ids.
remove_user() {
	local i uid
	uid=$(id -u "$1" 2>/dev/null) || return 0
	for ((i = 0; i < 40; i++)); do
		pkill -KILL -u "$1" || true
		pgrep -u "$1" >/dev/null || break
		sleep 0.25
	done
	find /sys/fs/cgroup/cpu*/sage-sandbox-"$uid" -depth -type d -exec rmdir {} + 2>/dev/null || true
	userdel -r "$1" 2>/dev/null || true
	sed -i "/^$1:/d" /etc/subuid /etc/subgid
	! id "$1" >/dev/null 2>&1
}

@test "setup.sh image --for USER - a desktop user other than the account gets the image and a working run, their own ./setup.sh image finds it, and Sage 9.5 by name" {
	local user=ss-desktop-test sandbox=$BATS_TEST_DIRNAME/../sage-sandbox account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox} home
	# setup.sh chooses the newest: copied, not built, where the account has it.
	runuser -l "$account" -c "podman image exists $DEFAULT_IMAGE" ||
		skip "the account has no $DEFAULT_IMAGE (./setup.sh check builds it where Sage 10 can be built)"
	# Globals: teardown puts the account's settings file back (setup.sh
	# --for writes it too), whatever happens here.
	home=$(getent passwd "$account" | cut -d: -f6)
	account_settings=$home/.config/sage-sandbox/settings
	saved_settings=$BATS_TEST_TMPDIR/settings
	[ ! -e "$account_settings" ] || cp -p "$account_settings" "$saved_settings"
	# A new user, whatever an interrupted earlier run left.
	remove_user "$user"
	useradd -m -s /bin/bash "$user"
	# The binary and setup.sh where that user can run them: the account's
	# home, where the tree is, is 0700 on Debian 13 (useradd's HOME_MODE).
	install -o "$user" -m 755 "$sandbox" "$BATS_TEST_DIRNAME/../setup.sh" "/home/$user/"
	sandbox=/home/$user/sage-sandbox
	# That user's own rootless podman, as it works on this host kind.
	runuser -l "$user" -c 'mkdir -p ~/.config/containers &&
		printf "[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n" >~/.config/containers/containers.conf &&
		printf "[storage]\ndriver = \"overlay\"\n" >~/.config/containers/storage.conf'
	# Without the image, the refusal names the command that fixes it for this user.
	run runuser -l "$user" -c "echo 'print(1)' | $sandbox run"
	expect_equal "$status" 125
	expect_match "$output" "put it in this user's podman storage with './setup.sh image'"
	env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE "$BATS_TEST_DIRNAME/../setup.sh" image --for "$user"
	run runuser -l "$user" -c "echo 'print(factor(2^32+1))' | $sandbox run"
	expect_equal "$status" 0
	expect_equal "$output" "641 * 6700417"
	# The user's own ./setup.sh image finds it in their storage: nothing
	# built, no sudo asked, no settings file written for the default.
	run runuser -l "$user" -c "./setup.sh image"
	expect_equal "$status" 0
	expect_match "$output" "setup: Sage 10, $DEFAULT_IMAGE: the newest; its image is in your podman storage"
	expect_match "$output" "setup: image $DEFAULT_IMAGE is ready for $user"
	expect_no_match "$output" "sudo"
	[ ! -e "/home/$user/.config/sage-sandbox/settings" ]
	if runuser -l "$account" -c "podman image exists localhost/sagemath-debian:bookworm"; then
		# Sage 9.5 by name for that user: copied from the account's
		# storage, and named in their settings file (the account's too:
		# teardown puts it back), which their run then uses.
		env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE "$BATS_TEST_DIRNAME/../setup.sh" image --sage 9.5 --for "$user"
		expect_equal "$(cat "/home/$user/.config/sage-sandbox/settings")" \
			"# written by setup.sh: Sage 9.5, chosen with --sage 9.5"$'\n'"image = localhost/sagemath-debian:bookworm"
		run runuser -l "$user" -c "echo 'print(version())' | $sandbox run"
		expect_equal "$status" 0
		expect_match "$output" "^SageMath version 9\.5"
		# The user's own ./setup.sh image, with both there: the newest,
		# and the two lines go.
		run runuser -l "$user" -c "./setup.sh image"
		expect_equal "$status" 0
		expect_match "$output" "setup: Sage 10, $DEFAULT_IMAGE: the newest; its image is in your podman storage"
		expect_equal "$(cat "/home/$user/.config/sage-sandbox/settings")" ""
	fi
	remove_user "$user"
	[ ! -e "/home/$user" ]
}

@test "setup.sh - a podman whose state names processes that are all gone (killed, or a restart that kept /tmp) is repaired for the account; sage-sandbox names the repair" {
	# CI on stop 52 failed so: the machine's processes were killed while a
	# run's container was up, and every podman command of the account then
	# failed ("invalid internal status, try resetting the pause process
	# with podman system migrate"). A test account, made by setup.sh, with
	# a container of a static program on a root of its own (no image
	# needed), then every process of the account killed at once.
	local user=ss-stale-test sandbox=$BATS_TEST_DIRNAME/../sage-sandbox said=$BATS_TEST_TMPDIR/said
	remove_user "$user"
	SAGE_SANDBOX_ACCOUNT=$user "$BATS_TEST_DIRNAME/../setup.sh" account
	install -o "$user" -m 755 "$sandbox" "/home/$user/"
	sandbox=/home/$user/sage-sandbox
	mkdir "/home/$user/root"
	printf '#include <unistd.h>\nint main(void) { pause(); return 0; }\n' >"$BATS_TEST_TMPDIR/pause.c"
	cc -static -O2 -o "/home/$user/root/pause" "$BATS_TEST_TMPDIR/pause.c"
	chown -R "$user:" "/home/$user/root"
	runuser -l "$user" -c "podman run -d --network none --stop-timeout 1 --rootfs ~/root /pause" >/dev/null
	pkill -KILL -u "$user"
	run runuser -l "$user" -c "podman ps -a"
	expect_equal "$status" 1 "podman ps's status, its state broken"
	expect_match "$output" "podman system migrate"
	# sage-sandbox passes podman's repair on, for run and status.
	run runuser -l "$user" -c "echo 'print(1)' | $sandbox run"
	expect_equal "$status" 125
	expect_match "$output" "run 'podman system migrate' as this user"
	run runuser -l "$user" -c "$sandbox status"
	expect_equal "$status" 1
	expect_match "$output" "fix: +run 'podman system migrate' as this user, as podman asks"
	# setup.sh repairs the account's, and says so.
	SAGE_SANDBOX_ACCOUNT=$user "$BATS_TEST_DIRNAME/../setup.sh" account 2>"$said"
	expect_match "$(cat "$said")" "setup: podman's state for $user names processes that are gone \(killed, or a restart that kept /tmp\): podman system migrate"
	run runuser -l "$user" -c "podman ps -a --format '{{.Command}}'"
	expect_equal "$status" 0 "podman ps's status, repaired"
	expect_equal "$output" "/pause"
	remove_user "$user"
}

@test "setup.sh image - where Sage 10 was chosen because the index answers and its build fails, Sage 9.5 is built or found instead, and the settings file says why" {
	local user=ss-fallback-test account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox}
	runuser -l "$account" -c "podman image exists localhost/sagemath-debian:bookworm" ||
		skip "the account has no localhost/sagemath-debian:bookworm to give the test account"
	# An account of its own, made by setup.sh, that has 9.5's image (copied
	# from the account's storage: building it takes 5 minutes) and not
	# Sage 10's, so that setup.sh must build Sage 10.
	remove_user "$user"
	SAGE_SANDBOX_ACCOUNT=$user "$BATS_TEST_DIRNAME/../setup.sh" account
	runuser -l "$account" -c "podman save localhost/sagemath-debian:bookworm" |
		runuser -l "$user" -c "podman load --quiet" >/dev/null
	# Sage 10's build fails at its first step: a debootstrap first on PATH
	# that fails (a mirror that breaks off, say); the rest is setup.sh's
	# own, and 9.5 the real image. The build's files go to a directory of
	# the test's.
	mkdir "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/build"
	printf '#!/bin/sh\necho "debootstrap: failing for the test" >&2\nexit 1\n' \
		>"$BATS_TEST_TMPDIR/bin/debootstrap"
	chmod 755 "$BATS_TEST_TMPDIR/bin/debootstrap"
	run env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE SAGE_SANDBOX_ACCOUNT=$user \
		SAGE_SANDBOX_BUILD_DIR="$BATS_TEST_TMPDIR/build" PATH="$BATS_TEST_TMPDIR/bin:$PATH" \
		"$BATS_TEST_DIRNAME/../setup.sh" image
	case $output in
	*"Sage 9.5, localhost/sagemath-debian:bookworm: the Python package index does not answer"*)
		remove_user "$user"
		skip "the Python package index does not answer here: Sage 10 is not chosen" ;;
	esac
	expect_equal "$status" 0
	expect_match "$output" "setup: Sage 10, $DEFAULT_IMAGE: the newest; the Python package index answers"
	expect_match "$output" "debootstrap: failing for the test"
	expect_match "$output" "setup: Sage 9.5, localhost/sagemath-debian:bookworm: Sage 10's build failed \(above\); Sage 9.5 comes from the apt mirror"
	expect_match "$output" "setup: image localhost/sagemath-debian:bookworm is present for $user"
	expect_equal "$(cat "/home/$user/.config/sage-sandbox/settings")" \
		"# written by setup.sh: Sage 9.5, Sage 10's build failed (above); Sage 9.5 comes from the apt mirror"$'\n'"image = localhost/sagemath-debian:bookworm"
	run runuser -l "$user" -c "podman image exists $DEFAULT_IMAGE"
	expect_equal "$status" 1
	# The failed build's root is gone; its log stays, named above.
	expect_equal "$(find "$BATS_TEST_TMPDIR/build" -mindepth 1 -maxdepth 1 -name 'sage-sandbox-rootfs.*')" ""
	remove_user "$user"
}

@test "setup.sh image --sage 9.5 - names Debian's image in the account's settings file, which status then shows; the newest takes it back; the file's own lines stay" {
	local account=${SAGE_SANDBOX_ACCOUNT:-sage-sandbox} home said=$BATS_TEST_TMPDIR/said
	runuser -l "$account" -c "podman image exists localhost/sagemath-debian:bookworm && podman image exists $DEFAULT_IMAGE" ||
		skip "the account has not both images (./setup.sh check builds both where Sage 10 can be built)"
	home=$(getent passwd "$account" | cut -d: -f6)
	# Globals: teardown puts the account's file back, whatever happens here.
	account_settings=$home/.config/sage-sandbox/settings
	saved_settings=$BATS_TEST_TMPDIR/settings
	if [ -e "$account_settings" ]; then
		! grep -qE '^[[:space:]]*image[[:space:]]*=' "$account_settings" ||
			skip "$account_settings names an image by hand"
		cp -p "$account_settings" "$saved_settings"
	fi
	runuser -l "$account" -c "mkdir -p ${account_settings%/*} && printf 'timeout = 30' >$account_settings"
	# Both images are there: nothing is built or copied.
	env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE "$BATS_TEST_DIRNAME/../setup.sh" image --sage 9.5 2>"$said"
	expect_match "$(cat "$said")" "setup: Sage 9.5, localhost/sagemath-debian:bookworm: chosen with --sage 9.5"
	expect_equal "$(cat "$account_settings")" "timeout = 30"$'\n'"# written by setup.sh: Sage 9.5, chosen with --sage 9.5"$'\n'"image = localhost/sagemath-debian:bookworm"
	run runuser -l "$account" -c "cd $BATS_TEST_DIRNAME/.. && ./sage-sandbox status"
	expect_match "$output" "--image +localhost/sagemath-debian:bookworm +settings file"
	expect_match "$output" "--timeout +30 +settings file"
	# Twice gives the two lines once.
	env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE "$BATS_TEST_DIRNAME/../setup.sh" image --sage 9.5 2>/dev/null
	expect_equal "$(grep -c '^# written by setup.sh\|^image = ' "$account_settings")" 2 "setup.sh's lines: a comment and an image"
	# The newest again (its image is there): the two lines go, the file's own stays.
	env -u SAGE_SANDBOX_IMAGE -u SAGE_SANDBOX_SAGE "$BATS_TEST_DIRNAME/../setup.sh" image 2>"$said"
	expect_match "$(cat "$said")" "setup: Sage 10, $DEFAULT_IMAGE: the newest; its image is built"
	expect_equal "$(cat "$account_settings")" "timeout = 30"
}

@test "unit-sandbox as root - a uid let go while its container's removal runs (a freed sandbox's, a lost start's) is rid of what runs as it first" {
	# Only root can make a process of another uid, as a container's
	# leftover would be: as the account, these cases skip.
	local dir account
	dir=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	account=$(stat -c %U "$dir")
	if [ "$account" = root ]; then
		make -s -C "$dir" tests/unit-sandbox
	else
		runuser -u "$account" -- make -s -C "$dir" tests/unit-sandbox
	fi
	run "$dir/tests/unit-sandbox" race-claims stop-claim-free
	printf '%s\n' "$output"
	expect_equal "$status" 0 "unit-sandbox's status"
	expect_equal "$(grep -c '^not ok\|# skip' <<<"$output")" 0 "cases failed or skipped"
	expect_equal "$(grep -c '^ok .* killed' <<<"$output")" 3 "kill cases passed"
}

@test "batch - as root refuses with status 125, one line, no result line" {
	input_file=$BATS_TEST_TMPDIR/jobs.jsonl
	printf '{"id": 1, "code": "print(1)"}\n' >"$input_file"
	run_ss 125 batch
	expect_equal "$output" "" "stdout"
	expect_match "$errors" "^sage-sandbox: refusing to run as root: "
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1 "lines on stderr"
	[ -z "$(podman ps -aq)" ]
}

@test "serve - a connection from root to the account's server is refused (SO_PEERCRED) before a byte of it is read; a batch on root's pipes runs on its own" {
	local account dir uid log
	dir=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	account=$(stat -c %U "$dir")
	[ "$account" != root ] || skip "the tree is root's: no account to serve"
	uid=$(id -u "$account")
	log=/tmp/sage-sandbox-root-test-$$.log
	runuser -l "$account" -c "cd '$dir' && SAGE_SANDBOX_SETTINGS=/dev/null ./sage-sandbox serve --warm 0 --idle 60" 2>"$log" &
	local i
	for ((i = 0; i < 300; i++)); do
		[ ! -S "/tmp/sage-sandbox-$uid/server.sock" ] || break
		sleep 0.1
	done
	local said
	said=$(python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.settimeout(5)
# The server closes without reading: depending on timing the send or the
# receive sees the reset, or the receive sees the end. Any of them is a
# refusal; an answer of any bytes is not.
try:
    s.send(b"SSR1S")
    print("answered" if s.recv(100) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")' "/tmp/sage-sandbox-$uid/server.sock")
	expect_equal "$said" closed "the server's answer to root"
	expect_match "$(cat "$log")" "refused a connection of uid 0 \(pid [0-9]+\): only uid $uid may use this server"
	# Its own user is answered.
	expect_match "$(runuser -l "$account" -c "cd '$dir' && ./sage-sandbox status --json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["server"]["answers"])')" True
	# A batch whose stdin and stdout are root's pipes (as after sudo -u):
	# the server could not reopen them non-blocking, so the batch runs on
	# its own, right, and the server hosts none. The account's own pipes
	# go through it.
	local job='{"id": "a", "code": "print(2+2)"}'
	run bash -c "printf '%s\n' '$job' | runuser -l '$account' -c \"cd '$dir' && SAGE_SANDBOX_SERVER=auto ./sage-sandbox batch --jobs 1 2>/dev/null\""
	expect_equal "$status" 0 "a batch from root's pipes"
	expect_equal "$(json_get '[j["id"], j["ok"], j["stdout"]]')" '["a", true, "4\n"]' "its line"
	expect_no_match "$(cat "$log")" "batch [0-9]+ for pid"
	run runuser -l "$account" -c "cd '$dir' && printf '%s\n' '$job' | SAGE_SANDBOX_SERVER=auto ./sage-sandbox batch --jobs 1 2>/dev/null | cat"
	expect_equal "$(json_get '[j["id"], j["ok"], j["stdout"]]')" '["a", true, "4\n"]' "the account's own batch's line"
	expect_match "$(cat "$log")" "batch [0-9]+ for pid [0-9]+: exit 0"
	runuser -l "$account" -c "cd '$dir' && ./sage-sandbox serve --stop"
	wait
	rm -f "$log"
}
