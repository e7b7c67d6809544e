/* selftest.h: self-test's code and the checks it reports. */
#ifndef SAGE_SANDBOX_SELFTEST_H
#define SAGE_SANDBOX_SELFTEST_H

#include "podman.h"
#include "settings.h"
#include "buffer.h"
#include "sandbox.h"

#include <stdio.h>

#define MAX_CHECKS 64

/* The checks every self-test must report: one missing is a FAIL. */
extern const char *const self_test_required[];
extern const size_t self_test_required_count;

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

/* The checks as text (a table and a verdict line) or as self-test's JSON
 * object, which carries the run and the sandbox summary too. */
void write_self_test(FILE *f, const struct self_test *t, const struct run_result *res,
		const struct config *cfg, bool json, int status);

/* write_self_test's arguments, for print_to_memory. */
struct printed_self_test {
	const struct self_test *t;
	const struct run_result *result;
	const struct config *cfg;
	bool json;
	int status;
};
void print_self_test(FILE *f, const void *arg);

#endif
