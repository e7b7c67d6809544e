/* selftest.c: what self-test runs in the sandbox (the factorisation, then
 * checks.py with the values this configuration promises) and how its report
 * becomes a list of checks. */
#include "selftest.h"
#include "embedded.h"
#include "json.h"
#include "result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char factorisation_code[] = "R.<x> = QQ[]\nprint(factor(x^4 - 1))\n";
static const char factorisation_expected[] = "(x - 1) * (x + 1) * (x^2 + 1)";

/* Every check checks.py must report. One that does not (the program died,
 * or was tampered with) is a FAIL: a property passes only by being seen. */
const char *const self_test_required[] = {
	"user", "capabilities", "no_new_privs", "seccomp", "user_namespaces",
	"other_namespaces", "mount", "ptrace", "network", "socket_families", "shared_memory",
	"pty_cap", "syscall_abi", "socket_buffers", "kernel_objects", "root_read_only", "writable",
	"tmp_size", "tmp_inodes", "shm_size", "rlimit_core", "rlimit_cpu", "rlimit_data", "rlimit_fsize",
	"rlimit_msgqueue", "rlimit_nofile", "rlimit_nproc", "rlimit_sigpending", "rlimit_stack",
	"rlimit_as", "cgroup_memory", "cgroup_pids", "parent_unreachable", "host_tables",
	"host_masked", "cpu_share", "cpu_unreaped", "realtime",
};
const size_t self_test_required_count =
	sizeof self_test_required / sizeof self_test_required[0];

void self_test_code(const struct config *cfg, const struct podman_host *host,
		struct buffer *code)
{
	struct rlimit_value rlimits[RLIMIT_COUNT];
	char *text;
	size_t size;
	FILE *f = open_memstream(&text, &size);

	sandbox_rlimits(cfg, rlimits);
	fputs(factorisation_code, f);
	/* Not preparsed: checks.py is Python, run from a raw string (the
	 * preparser leaves string literals alone). */
	fprintf(f, "exec(r'''EXPECTED = {\"tmp_bytes\": %llu, \"tmp_inodes\": %d, "
		"\"shm_bytes\": %llu, \"shm_inodes\": %d, \"pty_max\": %d, \"rlimits\": {",
		TMPFS_BYTES, TMPFS_INODES, SHM_BYTES, SHM_INODES, PTY_MAX);
	for (int i = 0; i < RLIMIT_COUNT; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", rlimits[i].name,
			(unsigned long long)rlimits[i].value);
	/* A call's process forked from a warm template has the template's
	 * warm pages on top of its data and address-space limits: at most
	 * this much (checks.py). */
	fprintf(f, "}, \"warm_up_room\": %llu, \"masked\": [", (unsigned long long)warm_up_room(cfg));
	for (size_t i = 0; masked_host_paths[i]; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", masked_host_paths[i]);
	if (cgroup_tree_masked(host))
		fprintf(f, ", \"%s\"", MASKED_CGROUP_TREE);
	const char *by[MAX_ENFORCERS];
	int enforcers = setting_enforcement(SET_CPUS, host, by);
	fprintf(f, "], \"cpus\": %ld.%03ld, \"cpus_by\": \"", cfg->number[SET_CPUS] / 1000,
		cfg->number[SET_CPUS] % 1000);
	for (int i = 0; i < enforcers; i++)
		fprintf(f, "%s%s", i ? ", " : "", by[i]);
	fputs("\", \"cgroup\": {", f);
	if (host->controller[CONTROLLER_MEMORY])
		fprintf(f, "\"memory\": %llu, ", (unsigned long long)config_memory_bytes(cfg));
	if (host->controller[CONTROLLER_PIDS])
		fprintf(f, "\"pids\": %ld", cfg->number[SET_PIDS_LIMIT]);
	fprintf(f, "}}\n%s''')\n", embedded_checks_py);
	fclose(f);
	buffer_append(code, text, size);
	free(text);
}

static void add_check(struct self_test *t, const char *outcome, const char *name,
		const char *detail, int detail_len)
{
	struct check *c;
	/* A check with no room to be shown is not a pass. */
	if (t->count == MAX_CHECKS) {
		t->failed = true;
		return;
	}
	c = &t->checks[t->count++];
	snprintf(c->outcome, sizeof c->outcome, "%s", outcome);
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->detail, sizeof c->detail, "%.*s", detail_len, detail);
	if (strcmp(outcome, "PASS") != 0 && strcmp(outcome, "SKIP") != 0)
		t->failed = true;
}

static bool reported(const struct self_test *t, const char *name)
{
	for (int i = 0; i < t->count; i++)
		if (strcmp(t->checks[i].name, name) == 0)
			return true;
	return false;
}

void self_test_parse(const char *out, int exit_code, struct self_test *t)
{
	const char *cursor = out, *line;
	size_t len = 0;
	const char *first = next_line(&cursor, &len);
	size_t first_len = first ? len : 0;
	bool factored = first_len == strlen(factorisation_expected) &&
		strncmp(first, factorisation_expected, first_len) == 0;

	*t = (struct self_test){0};
	char exit_detail[64];
	add_check(t, factored ? "PASS" : "FAIL", "factorisation", first ? first : "", (int)first_len);
	snprintf(exit_detail, sizeof exit_detail, "Sage exited with status %d", exit_code);
	add_check(t, exit_code == 0 ? "PASS" : "FAIL", "exit_status", exit_detail, -1);
	while ((line = next_line(&cursor, &len))) {
		char outcome[8], name[64];
		int detail_at = 0;
		/* CHECK<tab>OUTCOME<tab>NAME<tab>DETAIL */
		if (sscanf(line, "CHECK\t%7[A-Z]\t%63[a-z_]\t%n", outcome, name, &detail_at) == 2 &&
		    detail_at > 0 && (size_t)detail_at <= len && !reported(t, name))
			add_check(t, outcome, name, line + detail_at, (int)(len - (size_t)detail_at));
	}
	for (size_t i = 0; i < self_test_required_count; i++)
		if (!reported(t, self_test_required[i]))
			add_check(t, "FAIL", self_test_required[i],
				"not reported: the checks did not run to the end", -1);
}

void write_self_test(FILE *f, const struct self_test *t, const struct run_result *res,
		const struct config *cfg, bool json, int status)
{
	int counts[3] = {0}; /* passed, failed, skipped */
	for (int i = 0; i < t->count; i++)
		counts[t->checks[i].outcome[0] == 'P' ? 0 : t->checks[i].outcome[0] == 'S' ? 2 : 1]++;
	if (!json) {
		for (int i = 0; i < t->count; i++)
			fprintf(f, "%-4s  %-17s %s\n", t->checks[i].outcome, t->checks[i].name,
				t->checks[i].detail);
		fprintf(f, "self-test %s: %d passed, %d failed, %d skipped\n",
			t->failed ? "FAILED" : "passed", counts[0], counts[1], counts[2]);
		return;
	}
	struct json j = {.out = f};
	char sentence[128];
	snprintf(sentence, sizeof sentence, "self-test failed: %d of %d checks failed", counts[1],
		t->count);
	jw_begin_object(&j);
	write_json_header(&j, status == 0, status, t->failed ? sentence : NULL);
	jw_key(&j, "checks");
	jw_begin_array(&j);
	for (int i = 0; i < t->count; i++) {
		jw_begin_object(&j);
		jw_key(&j, "name");
		jw_cstring(&j, t->checks[i].name);
		jw_key(&j, "outcome");
		jw_cstring(&j, t->checks[i].outcome);
		jw_key(&j, "detail");
		jw_cstring(&j, t->checks[i].detail);
		jw_end_object(&j);
	}
	jw_end_array(&j);
	jw_key(&j, "run");
	jw_begin_object(&j);
	write_run_fields(&j, res, cfg, NULL);
	jw_end_object(&j);
	jw_key(&j, "sandbox");
	write_sandbox_summary(&j, cfg);
	jw_end_object(&j);
}

void print_self_test(FILE *f, const void *arg)
{
	const struct printed_self_test *p = arg;
	write_self_test(f, p->t, p->result, p->cfg, p->json, p->status);
}
