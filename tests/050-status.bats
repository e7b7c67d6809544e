#!/usr/bin/env bats
# sage-sandbox status and self-test against the real podman and image.

load helpers

@test "status - reports podman, rootless, image and every setting's source" {
	SAGE_SANDBOX_TIMEOUT=30 run_ss 0 status --pids-limit 64
	expect_match "$output" "podman: +$(command -v podman) \(version [0-9.]+\)"
	expect_match "$output" "rootless: +true"
	expect_match "$output" "image: +localhost/sagemath-debian:bookworm \(present\)"
	expect_match "$output" "--timeout +30 +environment"
	expect_match "$output" "--pids-limit +64 +flag +enforced by .*rlimit nproc"
	expect_match "$output" "--memory +1g +default"
	expect_match "$output" "ready: +yes"
}

@test "status --json - ok, version, rootless, image and settings, as podman says" {
	run_ss 0 status --json
	expect_equal "$(json_get 'j["ok"]')" true
	expect_equal "$(json_get 'j["podman_version"]')" "$(podman version --format '{{.Client.Version}}')"
	expect_equal "$(json_get 'j["rootless"]')" true
	expect_equal "$(json_get 'j["image"]')" localhost/sagemath-debian:bookworm
	expect_equal "$(json_get 'j["image_available"]')" true
	expect_equal "$(json_get 'j["cgroups"]')" "$(podman info --format '{{.Host.CgroupsVersion}}')"
	expect_equal "$(json_get 'j["settings"]["timeout_seconds"]')" '{"value": 60, "source": "default", "enforced_by": ["sage-sandbox", "podman --timeout"]}'
}

@test "status - memory is reported enforced exactly when podman has the memory controller" {
	run_ss 0 status --json
	local controllers
	controllers=$(podman info --format '{{.Host.CgroupControllers}}')
	if [[ $controllers == *memory* ]]; then
		expect_equal "$(json_get 'j["settings"]["memory"]["enforced_by"]')" '["cgroup memory"]'
	else
		expect_equal "$(json_get 'j["settings"]["memory"]["enforced_by"]')" '[]'
		run_ss 0 status
		expect_match "$output" "--memory +1g +default +NOT ENFORCED on this host"
	fi
}

@test "status - a missing image says how to get one, status 1" {
	run_ss 1 status --image localhost/no-such-image:1
	expect_match "$output" "image: +localhost/no-such-image:1 \(NOT PRESENT\)"
	expect_match "$output" "fix: +build the image with|fix: +build it with"
	run_ss 1 status --image localhost/no-such-image:1 --json
	expect_equal "$(json_get 'j["image_available"]')" false
	expect_match "$(json_get 'j["hint"]')" "setup.sh image"
}

@test "status - a missing podman is reported, status 1" {
	run_ss 1 status --podman /nonexistent/podman --json
	expect_equal "$(json_get 'j["podman"]')" null
	expect_equal "$(json_get 'j["rootless"]')" unknown
	expect_match "$(json_get 'j["hint"]')" "install podman"
}

@test "self-test - passes in the sandbox and prints PASS" {
	run_ss 0 self-test
	expect_equal "$output" "PASS  factorisation: factor(x^4 - 1) = (x - 1) * (x + 1) * (x^2 + 1)
self-test passed"
}

@test "self-test --json - ok true with the check and the run" {
	run_ss 0 self-test --json
	expect_equal "$(json_get 'j["ok"]')" true
	expect_equal "$(json_get 'j["checks"][0]["name"], j["checks"][0]["ok"]')" '["factorisation", true]'
	expect_equal "$(json_get 'j["checks"][0]["got"]')" "(x - 1) * (x + 1) * (x^2 + 1)"
	expect_equal "$(json_get 'j["run"]["exit_code"]')" 0
}

@test "self-test - fails with status 1 when Sage cannot finish in time" {
	run_ss 1 self-test --timeout 1
	expect_match "$output" "^FAIL  factorisation"
	expect_match "$output" "self-test FAILED$"
	expect_match "$errors" "timed out after 1 s"
}
