#!/usr/bin/env bats
# The command line contract: help, version, and every refusal. A refusal
# runs nothing: status 125, one line on stderr, no container.

load helpers

@test "--help - prints usage with every option on stdout, status 0" {
	run_ss 0 --help
	for opt in --image --podman --timeout --memory --cpus --pids-limit --output-limit \
		--seccomp-profile --json --show-control-chars; do
		expect_match "$output" "$opt" "help mentions $opt"
	done
	for env in IMAGE PODMAN TIMEOUT MEMORY CPUS PIDS_LIMIT OUTPUT_LIMIT SECCOMP_PROFILE; do
		expect_match "$output" "SAGE_SANDBOX_$env" "help mentions SAGE_SANDBOX_$env"
	done
	expect_equal "$errors" "" "stderr"
	run_ss 0 run --help
	expect_match "$output" "^Usage: sage-sandbox run"
}

@test "help [COMMAND] - as git and podman: the whole usage, or one command's" {
	run_ss 0 help
	expect_match "$output" "^Usage: sage-sandbox run"
	expect_match "$output" "sage-sandbox cleanup"
	run_ss 0 help run
	expect_match "$output" "^Usage: sage-sandbox run \[OPTIONS\] \[FILE \[ARG...\]\]"
	expect_match "$output" "--show-control-chars"
	expect_no_match "$output" "sage-sandbox status"
	run_ss 0 help cleanup
	expect_match "$output" "^Usage: sage-sandbox cleanup"
	expect_no_match "$output" "--timeout"
	run_ss 125 help frobnicate
	expect_equal "$errors" "sage-sandbox: help takes one command name: run, batch, self-test, status, serve, cleanup or mcp"
}

@test "--help, the man page and README - list the same options and variables" {
	run_ss 0 --help
	local docs=$BATS_TEST_DIRNAME/.. word
	for word in $(printf '%s\n' "$output" | grep -oE -- '--[a-z-]+|SAGE_SANDBOX_[A-Z_]+' | sort -u); do
		grep -qF -- "$word" "$docs/man/sage-sandbox.1.scd" ||
			{ echo "# $word is not in man/sage-sandbox.1.scd" >&2; return 1; }
		grep -qF -- "$word" "$docs/README.md" ||
			{ echo "# $word is not in README.md" >&2; return 1; }
	done
	for word in run batch self-test status cleanup mcp; do
		expect_match "$output" "sage-sandbox $word" "--help lists $word"
		grep -qF "*sage-sandbox $word*" "$docs/man/sage-sandbox.1.scd"
	done
	# mcp's own page names every option its help lists.
	run_ss 0 help mcp
	for word in $(printf '%s\n' "$output" | grep -oE -- '--[a-z-]+|SAGE_SANDBOX_[A-Z_]+' | sort -u); do
		grep -qF -- "$word" "$docs/man/sage-sandbox-mcp.7.scd" ||
			{ echo "# $word is not in man/sage-sandbox-mcp.7.scd" >&2; return 1; }
	done
}

@test "--version - prints the version" {
	run_ss 0 --version
	expect_match "$output" "^sage-sandbox [0-9]+\.[0-9]+\.[0-9]+$"
}

@test "no command or an unknown command - one line, status 125" {
	run_ss 125
	expect_equal "$errors" "sage-sandbox: missing command; use run, batch, self-test, status, serve, cleanup, mcp or help (see sage-sandbox help)"
	expect_equal "$output" ""
	run_ss 125 frobnicate
	expect_equal "$errors" "sage-sandbox: unknown command 'frobnicate'; use run, batch, self-test, status, serve, cleanup or mcp (see sage-sandbox help)"
}

# refuse ERROR-PATTERN ARGS...: sage-sandbox ARGS must refuse with status 125,
# exactly one line on stderr matching the pattern, nothing on stdout.
refuse() {
	local pattern=$1
	shift
	input_file=${input_file:-$BATS_TEST_DIRNAME/../examples/seed.sage}
	run_ss 125 "$@"
	expect_equal "$output" "" "stdout"
	expect_equal "$(printf '%s\n' "$errors" | wc -l)" 1 "lines on stderr: $errors"
	expect_match "$errors" "^sage-sandbox: .*$pattern" "stderr"
}

@test "run - each out-of-range or malformed flag is refused, naming the option and the range" {
	refuse "invalid --timeout '0': allowed is an integer from 1 to 600" run --timeout 0
	refuse "invalid --timeout '601'" run --timeout 601
	refuse "invalid --timeout '1.5'" run --timeout 1.5
	refuse "invalid --timeout '-1'" run --timeout=-1
	refuse "invalid --timeout ' 5'" run --timeout ' 5'
	refuse "invalid --memory '9g': allowed is a size from 256m to 8g: a number, a fraction allowed, with b, k, m or g \(any case\)" run --memory 9g
	refuse "invalid --memory '255m'" run --memory 255m
	refuse "invalid --memory '8.001g'" run --memory 8.001g
	refuse "invalid --memory '1x'" run --memory 1x
	refuse "invalid --memory '1.5.5g'" run --memory 1.5.5g
	refuse "invalid --memory 'g'" run --memory g
	refuse "invalid --memory '1ib'" run --memory 1ib
	refuse "invalid --memory '-1g'" run --memory=-1g
	refuse "invalid --cpus '0.09': allowed is a number from 0.1 to 4" run --cpus 0.09
	refuse "invalid --cpus '4.001'" run --cpus 4.001
	refuse "invalid --cpus 'inf'" run --cpus inf
	refuse "invalid --cpus '1e0'" run --cpus 1e0
	refuse "invalid --cpus '.'" run --cpus .
	refuse "invalid --cpus '0.0001'" run --cpus 0.0001
	refuse "invalid --pids-limit '15': allowed is an integer from 16 to 512" run --pids-limit 15
	refuse "invalid --pids-limit '513'" run --pids-limit 513
	refuse "invalid --output-limit '15': allowed is an integer from 16 to 2048" run --output-limit 15
	refuse "invalid --output-limit '2049'" run --output-limit 2049
	refuse "invalid --image '-v=/:/host'" run --image=-v=/:/host
	refuse "invalid --image 'a b'" run --image 'a b'
	refuse "invalid --image 'a.*'" run --image "$(printf 'a\tb')"
	refuse "invalid --podman ''" run --podman ''
}

@test "run - each out-of-range environment variable is refused, naming the variable" {
	SAGE_SANDBOX_TIMEOUT=0 refuse "invalid SAGE_SANDBOX_TIMEOUT '0': allowed is an integer from 1 to 600" run
	SAGE_SANDBOX_MEMORY=16g refuse "invalid SAGE_SANDBOX_MEMORY '16g'" run
	SAGE_SANDBOX_CPUS=5 refuse "invalid SAGE_SANDBOX_CPUS '5'" run
	SAGE_SANDBOX_PIDS_LIMIT=1000 refuse "invalid SAGE_SANDBOX_PIDS_LIMIT '1000'" run
	SAGE_SANDBOX_OUTPUT_LIMIT=1 refuse "invalid SAGE_SANDBOX_OUTPUT_LIMIT '1'" run
	SAGE_SANDBOX_IMAGE=--privileged refuse "invalid SAGE_SANDBOX_IMAGE '--privileged'" run
}

@test "run - a flag overrides an invalid environment variable without checking it" {
	# (status starts an empty program, Sage imported: 5 s is too little
	# for Sage 10's import on a busy machine.)
	SAGE_SANDBOX_TIMEOUT=0 run_ss 0 status --timeout 60 --json
	expect_equal "$(json_get 'j["settings"]["timeout_seconds"]["value"], j["settings"]["timeout_seconds"]["source"]')" '[60, "flag"]'
}

@test "run - mcp's own settings are checked by mcp alone: run and batch take no notice of them" {
	# SAGE_SANDBOX_WARM=9 refused every run and batch (attack helper 157).
	local settings=$BATS_TEST_TMPDIR/settings
	printf 'sessions = x\n' >"$settings"
	input_file=$BATS_TEST_TMPDIR/code.sage
	printf 'print(6*7)\n' >"$input_file"
	SAGE_SANDBOX_WARM=9 SAGE_SANDBOX_SETTINGS=$settings run_ss 0 run --no-server
	expect_equal "$output" 42
	printf '%s\n' '{"id": "a", "code": "print(6*7)"}' >"$input_file"
	SAGE_SANDBOX_SESSIONS=x SAGE_SANDBOX_SETTINGS=$settings run_ss 0 batch --no-server
	expect_match "$output" '"stdout":"42\\n"'
	input_file=
	SAGE_SANDBOX_WARM=9 refuse "invalid SAGE_SANDBOX_WARM '9': allowed is an integer from 0 to 8" mcp
	SAGE_SANDBOX_SETTINGS=$settings refuse "invalid sessions 'x'.*settings file $settings, line 1" mcp
}

@test "run - unknown option, missing value, a value for a switch, extra argument are refused" {
	refuse "unknown option '--memmory'" run --memmory 1g
	refuse "unknown option '-t'" run -t 5
	refuse "option --timeout needs a value: an integer from 1 to 600" run --timeout
	refuse "option --show-control-chars takes no value" run --show-control-chars=1
	refuse "option --show-control-chars takes no value" self-test --show-control-chars=
	# --json= still asked for JSON: the refusal is an object too.
	run_ss 125 run --json=
	expect_equal "$(json_get 'j["error"]')" "option --json takes no value"
	run_ss 125 status --json=yes
	expect_equal "$(json_get 'j["error"]')" "option --json takes no value"
	refuse "unexpected argument 'x'" status x
	refuse "unexpected argument 'x'" self-test x
	refuse "unexpected argument 'x'" cleanup x
}

@test "options - a repeated option: the last one wins; a repeated --json is harmless" {
	settings_of --timeout 30 --timeout 120 --json --json
	expect_equal "$(json_get 'j["timeout_seconds"]')" 120
	SAGE_SANDBOX_TIMEOUT=9 settings_of --timeout=5 --memory 1g --timeout 7 --memory=512m
	expect_equal "$(json_get '[j[k] for k in ("timeout_seconds", "memory")]')" '[7, "512m"]'
	# A bad value that a later one replaces is not checked, as with the environment.
	settings_of --timeout 0 --timeout 60
	expect_equal "$(json_get 'j["timeout_seconds"]')" 60
	run_ss 0 status --timeout 30 --timeout 120 --json
	expect_equal "$(json_get 'j["settings"]["timeout_seconds"]["value"]')" 120
}

@test "options - sizes as podman takes them, normalised; --cpus .5" {
	local given expected
	for pair in 1G:1g 1g:1g 1024m:1g 1024M:1g 768m:768m 1.5g:1536m 1.5G:1536m 1gb:1g \
		1GiB:1g 262144k:256m 268435456:256m 268435456b:256m 8g:8g .5g:512m 2.g:2g; do
		given=${pair%%:*} expected=${pair#*:}
		settings_of --memory "$given"
		expect_equal "$(json_get 'j["memory"]')" "$expected" "--memory $given"
	done
	SAGE_SANDBOX_MEMORY=1.5G settings_of
	expect_equal "$(json_get 'j["memory"]')" 1536m
	for pair in .5:0.5 0.5:0.5 1.:1 2.25:2.25 4:4; do
		given=${pair%%:*} expected=${pair#*:}
		settings_of --cpus "$given"
		expect_equal "$(json_get 'j["cpus"]')" "$expected" "--cpus $given"
	done
}

@test "run - an unreadable file, a missing file and a directory are refused" {
	refuse "cannot open /nonexistent/code.sage: No such file or directory" run /nonexistent/code.sage
	refuse "cannot read $BATS_TEST_DIRNAME: Is a directory" run "$BATS_TEST_DIRNAME"
	local unreadable=$BATS_TEST_TMPDIR/secret.sage
	echo 'print(1)' >"$unreadable"
	chmod 000 "$unreadable"
	refuse "cannot open $unreadable: Permission denied" run "$unreadable"
}

@test "run - code over 50000 bytes is refused; exactly 50000 is not refused for size" {
	input_file=$BATS_TEST_TMPDIR/big.sage
	head -c 50001 /dev/zero | tr '\0' '#' >"$input_file"
	refuse "code from standard input is larger than 50000 bytes" run
	refuse "code from $input_file is larger than 50000 bytes" run "$input_file"
	head -c 49990 /dev/zero | tr '\0' '#' >"$input_file"
	printf '\nprint(7)\n' >>"$input_file"
	expect_equal "$(stat -c %s "$input_file")" 50000 "file size"
	run_ss 0 run "$input_file"
	expect_equal "$output" 7
}

@test "run - code with a NUL byte is refused with its offset" {
	input_file=$BATS_TEST_TMPDIR/nul.sage
	printf 'print(1)\0print(2)\n' >"$input_file"
	refuse "code from standard input contains a NUL byte at offset 8" run
}

@test "run --json - a refusal is one JSON object with ok false, exit_code, error and hint" {
	input_file=$BATS_TEST_DIRNAME/../examples/seed.sage
	run_ss 125 run --bogus --json
	expect_equal "$(json_get 'j["ok"]')" false
	expect_equal "$(json_get 'j["exit_code"]')" 125
	expect_equal "$(json_get 'j["error"]')" "unknown option '--bogus'"
	expect_equal "$(json_get 'j["hint"]')" "see sage-sandbox --help"
	run_ss 125 run --json --memory 9g
	expect_match "$(json_get 'j["error"]')" "invalid --memory '9g'"
}

@test "make install, then make uninstall - leaves nothing of sage-sandbox behind" {
	local dest=$BATS_TEST_TMPDIR/dest
	make -s -C "$BATS_TEST_DIRNAME/.." install DESTDIR="$dest" PREFIX=/usr/local >/dev/null
	expect_equal "$(cd "$dest" && find . -name '*sage-sandbox*' | sort | tr '\n' ' ')" \
		"./usr/local/bin/sage-sandbox ./usr/local/lib/systemd/user/sage-sandbox.service ./usr/local/lib/systemd/user/sage-sandbox.socket ./usr/local/share/man/man1/sage-sandbox.1 ./usr/local/share/man/man5/sage-sandbox.5 ./usr/local/share/man/man7/sage-sandbox-mcp.7 ./usr/local/share/sage-sandbox "
	expect_equal "$(grep ExecStart "$dest/usr/local/lib/systemd/user/sage-sandbox.service")" \
		"ExecStart=/usr/local/bin/sage-sandbox serve"
	make -s -C "$BATS_TEST_DIRNAME/.." uninstall DESTDIR="$dest" PREFIX=/usr/local
	expect_equal "$(cd "$dest" && find . -name '*sage-sandbox*')" ""
}
