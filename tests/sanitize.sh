#!/bin/sh
# tests/sanitize.sh: the core, MCP, session, batch, reuse and server tests
# once more, as the account, against sage-sandbox built with AddressSanitizer
# and UndefinedBehaviorSanitizer (make sanitize): any finding (a use after free,
# a leak at exit, undefined behaviour) aborts sage-sandbox, and the test
# that ran it fails. The slowest tests (tagged slow) and those that measure
# sage-sandbox's own memory (ASan's shadow would be measured) are left to
# the plain pass. Run from the tree, after make check.
set -eu
cd "$(dirname "$0")/.."
make -s sanitize
SAGE_SANDBOX=$(pwd)/build-sanitize/sage-sandbox
# abort_on_error: a finding is a crash the test sees; the leak check runs
# at every exit; UBSan stops at its first report.
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export SAGE_SANDBOX ASAN_OPTIONS UBSAN_OPTIONS
exec ${BATS:-bats} --timing --filter-tags '!slow,!measures-rss' tests/070-core.bats tests/090-mcp.bats \
	tests/130-batch.bats tests/150-reuse.bats tests/160-serve.bats
