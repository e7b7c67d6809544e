#!/usr/bin/env bats
# As root, podman is rootful: sage-sandbox must refuse and run nothing.
# setup.sh check runs this file as root; as any other user it is skipped.

load helpers

setup() {
	[ "$(id -u)" -eq 0 ] || skip "needs root: run by ./setup.sh check as root"
}

teardown() { :; }

@test "run - as root refuses with status 125 and says podman is not rootless" {
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	run_ss 125 run
	expect_equal "$output" "" "stdout"
	expect_match "$errors" "^sage-sandbox: refusing to run: podman is not rootless" "stderr"
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1 "lines on stderr"
	[ -z "$(podman ps -aq)" ]
}

@test "run --json - as root refuses with ok false, error and hint" {
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	run_ss 125 run --json
	expect_equal "$(json_get 'j["ok"]')" false
	expect_equal "$(json_get 'j["exit_code"]')" 125
	expect_match "$(json_get 'j["error"]')" "not rootless"
	expect_match "$(json_get 'j["hint"]')" "unprivileged user"
}

@test "self-test and status - as root report rootless false" {
	run_ss 125 self-test
	expect_match "$errors" "not rootless"
	run_ss 1 status --json
	expect_equal "$(json_get 'j["rootless"]')" false
	expect_equal "$(json_get 'j["ok"]')" false
}
