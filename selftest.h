/* selftest.h: self-test's code and the checks it reports. */
#ifndef SAGE_SANDBOX_SELFTEST_H
#define SAGE_SANDBOX_SELFTEST_H

#include "podman.h"
#include "settings.h"
#include "buffer.h"

#define MAX_CHECKS 32

struct check {
	char outcome[8]; /* PASS, FAIL or SKIP */
	char name[64];
	char detail[512];
};

struct self_test {
	struct check checks[MAX_CHECKS];
	int count;
	bool failed;
};

/* The Sage code self-test runs: the factorisation, then checks.py told what
 * this configuration on this host promises. */
void self_test_code(const struct config *cfg, const struct podman_host *host,
		struct buffer *code);

/* Turns the run's stdout into checks; any missing, FAIL or a non-zero exit
 * makes the whole self-test fail. */
void self_test_parse(const char *out, int exit_code, struct self_test *t);

#endif
