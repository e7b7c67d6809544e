/* result.c: results, refusals and the sandbox summary, as JSON and as the
 * lines text mode prints. */
#include "result.h"

#include <signal.h>
#include <string.h>

const char *signal_name(int sig, char *buf, size_t size)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, size, "SIG%s", abbrev);
	else
		snprintf(buf, size, "signal %d", sig);
	return buf;
}

void write_setting_value(struct json *j, const struct config *cfg, int id)
{
	switch (settings[id].kind) {
	case KIND_INTEGER:
		json_integer(j, cfg->number[id]);
		break;
	case KIND_MILLI:
		json_decimal(j, cfg->number[id]);
		break;
	default:
		json_cstring(j, cfg->value[id]);
	}
}

void write_sandbox_summary(struct json *j, const struct config *cfg)
{
	char text[64];
	json_begin_object(j);
	for (int id = 0; id < SETTING_COUNT; id++) {
		json_key(j, settings[id].key);
		write_setting_value(j, cfg, id);
	}
	json_key(j, "network");
	json_cstring(j, SANDBOX_NETWORK);
	json_key(j, "root_filesystem");
	json_cstring(j, "read-only");
	json_key(j, "writable");
	snprintf(text, sizeof text, "/tmp (tmpfs, %llu MiB)", TMPFS_BYTES >> 20);
	json_cstring(j, text);
	json_key(j, "ptys");
	json_integer(j, PTY_MAX);
	json_key(j, "host_mounts");
	json_cstring(j, "none");
	json_key(j, "user");
	snprintf(text, sizeof text, "a uid of its own, %d-%d, not root", SANDBOX_UID_MIN,
		SANDBOX_UID_MAX);
	json_cstring(j, text);
	json_key(j, "capabilities");
	json_cstring(j, "none");
	json_key(j, "no_new_privileges");
	json_bool(j, true);
	json_key(j, "pull");
	json_cstring(j, SANDBOX_PULL);
	json_end_object(j);
}

void write_run_fields(struct json *j, const struct run_result *r, const struct config *cfg)
{
	char name[32];
	json_key(j, "exit_code");
	json_integer(j, r->exit_code);
	json_key(j, "signal");
	if (r->signal)
		json_cstring(j, signal_name(r->signal, name, sizeof name));
	else
		json_null(j);
	json_key(j, "timed_out");
	json_bool(j, r->timed_out);
	json_key(j, "output_limit_exceeded");
	json_bool(j, r->output_limit_exceeded);
	json_key(j, "memory_limit_exceeded");
	json_bool(j, r->memory_limit_exceeded);
	json_key(j, "stdout");
	json_string(j, r->out.data ? r->out.data : "", r->out.len);
	json_key(j, "stderr");
	json_string(j, r->err.data ? r->err.data : "", r->err.len);
	json_key(j, "truncated");
	json_begin_object(j);
	json_key(j, "stdout");
	json_bool(j, r->out_truncated);
	json_key(j, "stderr");
	json_bool(j, r->err_truncated);
	json_key(j, "max_bytes_per_stream");
	json_integer(j, cfg->number[SET_OUTPUT_LIMIT] * 1024);
	json_end_object(j);
	json_key(j, "duration_ms");
	json_integer(j, r->duration_ms);
	if (r->interrupted_by) {
		json_key(j, "error");
		json_cstring(j, signal_name(r->interrupted_by, name, sizeof name));
	}
}

void write_run_object(FILE *out, const struct run_result *r, const struct config *cfg)
{
	struct json j = {.out = out};
	json_begin_object(&j);
	json_key(&j, "ok");
	json_bool(&j, r->exit_code == 0);
	write_run_fields(&j, r, cfg);
	json_key(&j, "sandbox");
	write_sandbox_summary(&j, cfg);
	json_end_object(&j);
}

void write_error_object(FILE *out, const struct error *err, const struct config *cfg)
{
	struct json j = {.out = out};
	json_begin_object(&j);
	json_key(&j, "ok");
	json_bool(&j, false);
	json_key(&j, "exit_code");
	json_integer(&j, err->status);
	json_key(&j, "error");
	json_cstring(&j, err->message);
	json_key(&j, "hint");
	json_cstring(&j, err->hint);
	if (cfg) {
		json_key(&j, "sandbox");
		write_sandbox_summary(&j, cfg);
	}
	json_end_object(&j);
}

void write_stop_line(FILE *out, const struct run_result *r, const struct config *cfg)
{
	char name[32];
	if (r->timed_out)
		fprintf(out, "sage-sandbox: timed out after %ld s; the container was stopped\n",
			cfg->number[SET_TIMEOUT]);
	else if (r->output_limit_exceeded)
		fprintf(out,
			"sage-sandbox: %s passed the output limit of %ld KiB; the container was stopped\n",
			r->out_truncated ? "stdout" : "stderr", cfg->number[SET_OUTPUT_LIMIT]);
	else if (r->memory_limit_exceeded)
		fprintf(out,
			"sage-sandbox: the run's processes together passed the memory limit of %s "
			"(%llu MiB seen); the container was stopped\n",
			cfg->value[SET_MEMORY], (unsigned long long)(r->memory_seen >> 20));
	else if (r->interrupted_by && r->interrupted_by != SIGPIPE)
		fprintf(out, "sage-sandbox: interrupted by %s; the container was stopped\n",
			signal_name(r->interrupted_by, name, sizeof name));
}
