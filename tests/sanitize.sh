#!/bin/sh
# tests/sanitize.sh FILE...: the bats files named (make check names the front
# ends': core, MCP, batch, reuse, server), as the account, against
# sage-sandbox built with AddressSanitizer and UndefinedBehaviorSanitizer
# (make sanitize): any finding (a use after free, a leak at exit, undefined
# behaviour) aborts sage-sandbox, and the test that ran it fails. make check
# runs them here alone, not also against the plain build: the plain build
# meets them in CI's core passes (070 and 090 under podman 5, the tests of
# 090, 130, 150 and 160 not tagged any-sage on the other image). The
# slowest tests (tagged slow) and those that measure sage-sandbox's own
# memory (ASan's shadow would be measured) run against the plain build,
# SAGE_SANDBOX if set; the rest always against build-sanitize/.
set -eu
cd "$(dirname "$0")/.."
[ "$#" -gt 0 ] || { echo "usage: tests/sanitize.sh FILE.bats..." >&2; exit 2; }
make -s sanitize
# abort_on_error: a finding is a crash the test sees; the leak check runs
# at every exit; UBSan stops at its first report.
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS
plain=${SAGE_SANDBOX:-$(pwd)/sage-sandbox}
status=0
SAGE_SANDBOX=$(pwd)/build-sanitize/sage-sandbox ${BATS:-bats} --timing \
	--filter-tags '!slow,!measures-rss' "$@" || status=$?
SAGE_SANDBOX=$plain ${BATS:-bats} --timing --filter-tags slow --filter-tags measures-rss "$@" ||
	status=$?
exit "$status"
