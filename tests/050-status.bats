#!/usr/bin/env bats
# sage-sandbox status and self-test against the real podman and image.

load helpers

@test "status - reports podman, rootless, image and every setting's source" {
	SAGE_SANDBOX_TIMEOUT=30 run_ss 0 status --pids-limit 64
	expect_match "$output" "podman: +$(command -v podman) \(version [0-9.]+\)"
	expect_match "$output" "rootless: +yes"
	expect_match "$output" "image: +$IMAGE \(present, sha256:[0-9a-f]{64}\)"
	expect_match "$output" "--timeout +30 +environment"
	expect_match "$output" "--pids-limit +64 +flag +enforced by .*rlimit nproc"
	expect_match "$output" "--memory +1g +default +enforced by .*rlimit data \(per process\)"
	expect_match "$output" "--cpus +1 +default +enforced by .*rlimit cpu"
	expect_match "$output" "--seccomp-profile +builtin +default"
	expect_match "$output" "runtime: +$(podman info --format '{{.Host.OCIRuntime.Name}}')"
	expect_match "$output" "storage: +$(podman info --format '{{.Store.GraphDriverName}}')"
	expect_match "$output" "ready: +yes"
	expect_no_match "$output" " "$'\n' "no trailing spaces"
}

@test "status --json - ok, version, rootless, image and settings, as podman says" {
	run_ss 0 status --json
	expect_equal "$(json_get 'j["ok"]')" true
	expect_equal "$(json_get 'j["podman_version"]')" "$(podman version --format '{{.Client.Version}}')"
	expect_equal "$(json_get 'j["rootless"]')" true
	expect_equal "$(json_get 'j["image"]')" "$IMAGE"
	expect_equal "$(json_get 'j["image_available"]')" true
	expect_equal "$(json_get 'j["cgroups"]')" "$(podman info --format '{{.Host.CgroupsVersion}}')"
	expect_equal "$(json_get 'j["settings"]["timeout_seconds"]')" '{"value": 60, "source": "default", "enforced_by": ["sage-sandbox", "podman --timeout"]}'
}

@test "status - the memory cgroup is reported exactly when podman has the controller; the rlimit always" {
	run_ss 0 status --json
	local controllers
	controllers=$(podman info --format '{{.Host.CgroupControllers}}')
	if [[ $controllers == *memory* ]]; then
		expect_equal "$(json_get 'j["settings"]["memory"]["enforced_by"]')" '["cgroup memory", "rlimit data (per process)", "rlimit as (per process, + 1 GiB)"]'
	else
		expect_equal "$(json_get 'j["settings"]["memory"]["enforced_by"]')" '["sage-sandbox (the run'"'"'s total: its pages, 512 KiB per open descriptor, its mappings and page tables)", "rlimit data (per process)", "rlimit as (per process, + 1 GiB)"]'
	fi
	expect_equal "$(json_get 'j["image_digest"]')" "$(podman image inspect --format '{{.Digest}}' "$IMAGE")"
	expect_equal "$(json_get 'j["oci_runtime"], j["storage_driver"]')" "$(podman info --format '["{{.Host.OCIRuntime.Name}}", "{{.Store.GraphDriverName}}"]')"
}

@test "status - a missing image says how to get one, status 1" {
	run_ss 1 status --image localhost/no-such-image:1
	expect_match "$output" "image: +localhost/no-such-image:1 \(NOT PRESENT\)"
	expect_match "$output" "ready: +no: the image is not in this user's podman storage"
	expect_match "$output" "fix: +put it in this user's podman storage with './setup.sh image'"
	run_ss 1 status --image localhost/no-such-image:1 --json
	expect_equal "$(json_get 'j["image_available"]')" false
	expect_match "$(json_get 'j["hint"]')" "setup.sh image"
}

@test "status - a podman that fails asking for the image, without a word, is no missing image" {
	# Found by the attack helper of stop 52: it said NOT PRESENT, with the
	# fix for a missing image.
	local wrapper=$BATS_TEST_TMPDIR/podman
	printf '#!/bin/sh\n[ "$1" = image ] && exit 1\nexec podman "$@"\n' >"$wrapper"
	chmod +x "$wrapper"
	run_ss 1 status --podman "$wrapper"
	expect_match "$output" "image: +$IMAGE \(unknown: podman failed asking for it\)"
	expect_match "$output" "ready: +no: podman image inspect $IMAGE failed and said nothing"
	expect_no_match "$output" "NOT PRESENT|setup.sh image"
	run_ss 1 status --podman "$wrapper" --json
	expect_equal "$(json_get 'j["image_available"]')" null
	# A missing image is still one where a warning comes first.
	printf '#!/bin/sh\n[ "$1" = image ] && echo "WARN[0000] a warning first" >&2\nexec podman "$@"\n' >"$wrapper"
	run_ss 1 status --podman "$wrapper" --image localhost/no-such-image:1
	expect_match "$output" "image: +localhost/no-such-image:1 \(NOT PRESENT\)"
}

@test "status - a missing podman is reported, status 1" {
	run_ss 1 status --podman /nonexistent/podman --json
	expect_equal "$(json_get 'j["podman"]')" null
	expect_equal "$(json_get 'j["rootless"], j["image_available"]')" '[null, null]'
	expect_match "$(json_get 'j["hint"]')" "install podman"
	run_ss 1 status --podman /nonexistent/podman
	expect_match "$output" "image: +$IMAGE \(unknown \(no podman\)\)"
	expect_match "$output" "rootless: +unknown"
}

@test "self-test - verifies every property from inside the sandbox: all PASS, cgroups as the host allows" {
	run_ss 0 self-test
	local name
	for name in factorisation exit_status user capabilities no_new_privs seccomp user_namespaces \
		other_namespaces mount ptrace network socket_families shared_memory syscall_abi \
		pty_cap root_read_only writable tmp_size shm_size rlimit_as rlimit_stack rlimit_core \
		rlimit_cpu rlimit_data rlimit_fsize rlimit_msgqueue rlimit_nofile rlimit_nproc; do
		printf '%s\n' "$output" | grep -q "^PASS  $name " ||
			{ echo "# check $name did not PASS" >&2; return 1; }
	done
	expect_match "$output" "PASS  factorisation +\(x - 1\) \* \(x \+ 1\) \* \(x\^2 \+ 1\)"
	expect_equal "$(printf '%s\n' "$output" | grep '^PASS  writable')" \
		"PASS  writable          writable: /dev/shm, /tmp, /tmp/sage-home"
	local controllers
	controllers=$(podman info --format '{{.Host.CgroupControllers}}')
	if [[ $controllers == *memory* ]]; then
		expect_match "$output" "PASS  cgroup_memory"
	else
		expect_match "$output" "SKIP  cgroup_memory +Not checked: podman cannot apply a memory cgroup on this host; the data and address-space rlimits and the memory watchdog hold it instead\."
	fi
	expect_match "$output" "PASS  user_namespaces +unshare\(CLONE_NEWUSER\) refused: EPERM"
	expect_match "$output" "PASS  other_namespaces +unshare\(CLONE_NEWNS\) refused: EPERM; unshare\(CLONE_NEWNET\) refused: EPERM"
	expect_match "$output" "PASS  socket_buffers +SO_SNDBUF EPERM; SO_RCVBUF EPERM; SO_SNDBUFFORCE EPERM; SO_RCVBUFFORCE EPERM; send buffer [0-9]+ bytes"
	expect_match "$output" "PASS  kernel_objects +splice ENOSYS; tee ENOSYS; inotify_init1 ENOSYS; setxattr ENOTSUP; F_OFD_SETLK ENOLCK"
	expect_match "$output" "PASS  tmp_inodes +16384 inodes, expected 16384"
	expect_match "$output" "PASS  shm_size +67108864 bytes, 1024 inodes, noexec; expected 67108864, 1024, noexec"
	expect_match "$output" "PASS  rlimit_sigpending +\(1024, 1024\)"
	expect_match "$output" "self-test passed: (3[0-9]|40) passed, 0 failed, [0-3] skipped"
}

@test "self-test - checks the rlimits of the settings given" {
	run_ss 0 self-test --memory 512m --pids-limit 40 --timeout 30 --cpus 0.5
	expect_match "$output" "PASS  rlimit_data +\(536870912, 536870912\)"
	expect_match "$output" "PASS  rlimit_nproc +\(40, 40\)"
	expect_match "$output" "PASS  rlimit_cpu +\(19, 19\)"
	expect_match "$output" "PASS  rlimit_as +\(1610612736, 1610612736\)"
}

@test "status - CONTAINER_HOST pointing nowhere: the remote socket named, tried, and refused with why, status 1" {
	CONTAINER_HOST=unix:///nowhere/podman.sock run_ss 1 status
	expect_match "$output" "remote: +CONTAINER_HOST=unix:///nowhere/podman.sock; the service does not answer: "
	expect_match "$output" "ready: +no: refusing to run: podman is remote \(CONTAINER_HOST is set"
	CONTAINER_HOST=unix:///nowhere/podman.sock run_ss 1 status --json
	expect_equal "$(json_get 'j["remote"], j["rootless"]')" '["CONTAINER_HOST=unix:///nowhere/podman.sock", null]'
	expect_match "$(json_get 'j["remote_answer"]')" "^the service does not answer: "
}

@test "self-test --json - ok true, every check named with its outcome" {
	run_ss 0 self-test --json
	expect_equal "$(json_get 'j["ok"]')" true
	expect_equal "$(json_get 'j["checks"][0]["name"], j["checks"][0]["outcome"]')" '["factorisation", "PASS"]'
	expect_equal "$(json_get 'sorted({c["outcome"] for c in j["checks"]} - {"SKIP"})')" '["PASS"]'
	expect_equal "$(json_get 'len(j["checks"])')" 40
	expect_equal "$(json_get 'j["run"]["exit_code"]')" 0
}

@test "self-test - FAILS, status 1, when the sandbox is weakened to podman's default seccomp profile" {
	[ -r /usr/share/containers/seccomp.json ] || skip "podman's default profile is not installed"
	run_ss 1 self-test --seccomp-profile /usr/share/containers/seccomp.json
	expect_match "$output" "FAIL  user_namespaces +unshare\(CLONE_NEWUSER\) ALLOWED"
	expect_match "$output" "FAIL  socket_families +.*AF_INET ALLOWED"
	expect_match "$output" "FAIL  socket_buffers +SO_SNDBUF ALLOWED; SO_RCVBUF ALLOWED"
	expect_match "$output" "FAIL  kernel_objects +splice ALLOWED; tee ALLOWED; inotify_init1 ALLOWED; setxattr ALLOWED; F_OFD_SETLK ALLOWED"
	# Each row the weakened profile lets through fails, where this kernel
	# has the interface to let through: a kernel without the i386 ABI or
	# vsock cannot fail those rows, and the i386 row says why in words.
	if [ "$(host_abi i386)" = present ]; then
		expect_match "$output" "FAIL  syscall_abi +i386: ALLOWED \(getpid worked\)"
	else
		expect_match "$output" "PASS  syscall_abi +i386: absent from this kernel"
	fi
	if host_has_vsock; then
		expect_match "$output" "FAIL  socket_families +AF_VSOCK ALLOWED"
	else
		expect_match "$output" "socket_families +AF_VSOCK EAFNOSUPPORT"
	fi
	expect_match "$output" "PASS  seccomp "
	expect_match "$output" "self-test FAILED: "
	SAGE_SANDBOX_SECCOMP_PROFILE=/usr/share/containers/seccomp.json run_ss 1 self-test --json
	expect_equal "$(json_get '[c["outcome"] for c in j["checks"] if c["name"] == "user_namespaces"]')" '["FAIL"]'
	expect_equal "$(json_get 'j["ok"]')" false
}

@test "run --seccomp-profile - an unreadable profile, or one that is no JSON object, is refused before anything runs" {
	sage 'print(1)' 125 run --seccomp-profile /nonexistent/profile.json
	expect_equal "$errors" "sage-sandbox: cannot read seccomp profile /nonexistent/profile.json: No such file or directory; give a readable seccomp profile of at most 1 MiB, or builtin"
	SAGE_SANDBOX_SECCOMP_PROFILE=/nonexistent/p.json sage 'print(1)' 125 run --json
	expect_match "$(json_get 'j["error"]')" "cannot read seccomp profile /nonexistent/p.json"
	# Podman's own word named neither the file nor the option (attack
	# helper 157).
	local bad=$BATS_TEST_TMPDIR/bad.json
	printf '{bad' >"$bad"
	sage 'print(1)' 125 run --no-server --seccomp-profile "$bad"
	expect_equal "$errors" "sage-sandbox: seccomp profile $bad is not JSON: string or '}' expected near 'bad' (line 1); give --seccomp-profile a profile in podman's JSON format (an object), or builtin"
	printf '[]' >"$bad"
	sage 'print(1)' 125 run --no-server --seccomp-profile "$bad"
	expect_equal "$errors" "sage-sandbox: seccomp profile $bad is not a JSON object; give --seccomp-profile a profile in podman's JSON format (an object), or builtin"
	expect_equal "$(podman ps -aq --filter "$LABEL_FILTER")" "" "containers left"
}

@test "run --seccomp-profile builtin and a copy of it as a file behave the same" {
	local profile
	profile=$BATS_TEST_DIRNAME/../seccomp.json
	sage 'import ctypes; print(ctypes.CDLL(None).unshare(0x10000000r))' 0 run --seccomp-profile "$profile"
	expect_equal "$output" -1
	sage 'import ctypes; print(ctypes.CDLL(None).unshare(0x10000000r))' 0 run --seccomp-profile builtin
	expect_equal "$output" -1
}

@test "self-test - when Sage cannot start in the sandbox, it is a refusal (125) with the launcher's last word, never a pass" {
	# A profile without clone: Sage's own start (cysignals' thread) fails.
	# (Checks that do not report are FAILs: tests/unit.c.)
	python3 -c '
import json, sys
profile = json.load(open(sys.argv[1]))
profile["syscalls"] = [r for r in profile["syscalls"] if "clone" not in r["names"]]
json.dump(profile, sys.stdout)' "$BATS_TEST_DIRNAME/../seccomp.json" >"$BATS_TEST_TMPDIR/nofork.json"
	run_ss 125 self-test --seccomp-profile "$BATS_TEST_TMPDIR/nofork.json"
	expect_equal "$output" ""
	expect_match "$errors" "^sage-sandbox: Sage did not start in the sandbox: the launcher ended with status [1-9][0-9]* before Sage was ready: .+; check the image with 'sage-sandbox status', and what a --seccomp-profile of your own refuses$"
	sage 'print(1)' 125 run --json --seccomp-profile "$BATS_TEST_TMPDIR/nofork.json"
	expect_equal "$(json_get 'j["ok"], "stdout" in j')" '[false, false]'
	# status, which made that run, does not send its user to status.
	run_ss 1 status --seccomp-profile "$BATS_TEST_TMPDIR/nofork.json"
	expect_match "$output" $'\nfix: +podman and the image passed the checks above: see the message, and what a --seccomp-profile of your own refuses(\n|$)'
	expect_no_match "$output" "sage-sandbox status" "status pointing at itself"
}
