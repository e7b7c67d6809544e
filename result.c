/* result.c: results, refusals and the sandbox summary, as JSON and as the
 * lines text mode prints. */
#include "result.h"
#include "names.h"
#include "memwatch.h"

#include <signal.h>
#include <stdlib.h>
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
		jw_integer(j, cfg->number[id]);
		break;
	case KIND_MILLI:
		jw_decimal(j, cfg->number[id]);
		break;
	case KIND_SEED:
		if (cfg->number[id] < 0)
			jw_null(j);
		else
			jw_integer(j, cfg->number[id]);
		break;
	default: {
		char text[32];
		jw_cstring(j, setting_text(cfg, id, text, sizeof text));
	}
	}
}

void write_sandbox_summary(struct json *j, const struct config *cfg)
{
	char text[64];
	jw_begin_object(j);
	for (int id = 0; id < SETTING_COUNT; id++) {
		if (settings[id].server)
			continue;
		jw_key(j, settings[id].key);
		write_setting_value(j, cfg, id);
	}
	jw_key(j, "network");
	jw_cstring(j, SANDBOX_NETWORK);
	jw_key(j, "root_filesystem");
	jw_cstring(j, "read-only");
	jw_key(j, "writable");
	snprintf(text, sizeof text, "/tmp (tmpfs, %llu MiB), /dev/shm (tmpfs, %llu MiB)",
		TMPFS_BYTES >> 20, SHM_BYTES >> 20);
	jw_cstring(j, text);
	jw_key(j, "ptys");
	jw_integer(j, PTY_MAX);
	jw_key(j, "host_mounts");
	jw_cstring(j, "none");
	jw_key(j, "user");
	snprintf(text, sizeof text, "a uid of its own, %d-%d, not root", SANDBOX_UID_MIN,
		SANDBOX_UID_MAX);
	jw_cstring(j, text);
	jw_key(j, "capabilities");
	jw_cstring(j, "none");
	jw_key(j, "no_new_privileges");
	jw_bool(j, true);
	jw_key(j, "pull");
	jw_cstring(j, SANDBOX_PULL);
	jw_end_object(j);
}

void write_json_header(struct json *j, bool ok, int exit_code, const char *error)
{
	jw_key(j, "schema_version");
	jw_integer(j, JSON_SCHEMA_VERSION);
	jw_key(j, "ok");
	jw_bool(j, ok);
	jw_key(j, "exit_code");
	jw_integer(j, exit_code);
	jw_key(j, "error");
	jw_cstring(j, error);
}

const char *stopped_by(const struct run_result *r)
{
	if (r->timed_out)
		return "timeout";
	if (r->output_limit_exceeded)
		return "output_limit";
	if (r->memory_limit_exceeded)
		return "memory_limit";
	if (r->cpu_limit_exceeded)
		return "cpu_limit";
	if (r->session_ended)
		return "session_ended";
	if (r->interrupted_by == SIGPIPE)
		return "output_closed";
	if (r->interrupted_by)
		return "signal";
	if (r->sandbox_broke)
		return "sandbox_broke";
	return NULL;
}

/* Long: one sentence per way a run is stopped, in the order they are
 * tested: a table would be no shorter. */
bool describe_stop(const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob, char *buf, size_t size)
{
	static const struct timeout_knob option = {"--timeout", 600};
	char name[32], memory[32], cpus[32];
	if (!knob)
		knob = &option;
	const char *by = stopped_by(r);
	if (!by)
		return false;
	struct rlimit_value rl[RLIMIT_COUNT];
	sandbox_rlimits(cfg, rl);
	/* The CPU limit shaped a timeout where it held the run to its share
	 * for a quarter of its code's time or more until the clock ran out (one
	 * burst held back, then a sleep to the deadline, did not): every
	 * timeout's sentence then names it, and --cpus as a fix. */
	bool held = r->timed_out && r->throttled_looks && r->throttled_looks * 4 >= r->looks;
	char throttle[160] = "", fix[256];
	if (held)
		snprintf(throttle, sizeof throttle, ", held back to --cpus %s by the CPU throttle",
			setting_text(cfg, SET_CPUS, cpus, sizeof cpus));
	snprintf(fix, sizeof fix, "raise %s (at most %ld)%s", knob->name, knob->most,
		held ? " or --cpus" : "");
	char limit[160];
	if (r->timed_out)
		snprintf(limit, sizeof limit, "its timeout of %ld s%s", cfg->number[SET_TIMEOUT],
			throttle);
	else
		snprintf(limit, sizeof limit, "its CPU time of %llu s",
			(unsigned long long)rl[RL_CPU].value);
	/* A session's cell: never begun, interrupted, its Sage kept, or
	 * killed with it. */
	if (r->after == AFTER_KEPT && r->cell_interrupted && r->timed_out && !r->code_begun)
		snprintf(buf, size, "timed out at %s before the code began (the session's "
			"start, Sage's import or the wait for its sandbox took that long); nothing was "
			"run; the session's state is kept; %s", limit, fix);
	else if (r->after == AFTER_KEPT && r->cell_interrupted &&
		 (r->timed_out || r->cpu_limit_exceeded))
		snprintf(buf, size, "interrupted (KeyboardInterrupt) at %s; the session's state "
			"is kept; %s, or split the work", limit, fix);
	else if (r->after == AFTER_KEPT && r->timed_out)
		/* It ended as its deadline passed, before the launcher's look
		 * sent its interrupt (calls.CellWatch). */
		snprintf(buf, size, "timed out after %ld s%s: it ended as its timeout came, before "
			"it could be interrupted; its output is whole and the session's state is kept; "
			"%s", cfg->number[SET_TIMEOUT], throttle, fix);
	else if (r->after == AFTER_LOST && (r->timed_out || r->cpu_limit_exceeded))
		snprintf(buf, size, "did not stop within %d s of its interrupt at %s; the session "
			"ended and its state is lost; %s, or split the work",
			SESSION_INTERRUPT_GRACE_MS / 1000, limit, fix);
	else if (r->timed_out && !r->code_begun)
		/* Not the code's time: a user who raised --timeout for slow
		 * code would be misled, and so would one who debugs us. */
		snprintf(buf, size, "timed out after %ld s before its code began (the sandbox's "
			"start, Sage's import or a warm-up step took that long); %s; %s",
			cfg->number[SET_TIMEOUT], r->after == AFTER_NEXT ? "nothing was run and the "
			"container serves the next call" : "the container was stopped", fix);
	else if (r->timed_out)
		snprintf(buf, size, "timed out after %ld s%s; %s; %s", cfg->number[SET_TIMEOUT],
			throttle, r->after == AFTER_NEXT ? "its processes were killed and the container "
			"serves the next call" : "the container was stopped", fix);
	else if (r->output_limit_exceeded)
		snprintf(buf, size, "%s passed the output limit of %ld KiB; the container was "
			"stopped; raise --output-limit (at most %ld)",
			r->out_truncated ? "stdout" : "stderr", cfg->number[SET_OUTPUT_LIMIT],
			settings[SET_OUTPUT_LIMIT].max);
	else if (r->memory_limit_exceeded && r->locks_seen > LOCKS_MAX)
		snprintf(buf, size, "the run's processes held more than %d byte-range locks at once, "
			"kernel memory that no limit counts; the container was stopped; hold fewer "
			"(SQLite takes one or two a database)", LOCKS_MAX);
	else if (r->memory_limit_exceeded) {
		uint64_t descriptors = r->descriptors_seen * DESCRIPTOR_CHARGE_BYTES;
		snprintf(buf, size, "the run's processes together passed the memory limit of %s "
			"(%llu MiB seen: %llu MiB of their own, %llu MiB for %llu open descriptors "
			"at %d KiB each, %llu MiB for up to %llu memory mappings and page tables); the "
			"container was stopped; raise --memory (at most 8g)",
			setting_text(cfg, SET_MEMORY, memory, sizeof memory),
			(unsigned long long)(r->memory_seen >> 20),
			(unsigned long long)((r->memory_seen - descriptors - r->kernel_seen) >> 20),
			(unsigned long long)(descriptors >> 20),
			(unsigned long long)r->descriptors_seen, DESCRIPTOR_CHARGE_KIB,
			(unsigned long long)(r->kernel_seen >> 20),
			(unsigned long long)r->mappings_seen);
	}
	else if (r->cpu_limit_exceeded && r->cpu_escaped) {
		snprintf(buf, size, "the run's processes used more CPU than --cpus %s allows, "
			"past what stopping them holds (processes that continue themselves, or "
			"that their parent frees unreaped, ignoring SIGCHLD); the container was "
			"stopped; let the code's processes be stopped, and reap them",
			setting_text(cfg, SET_CPUS, cpus, sizeof cpus));
	} else if (r->cpu_limit_exceeded) {
		snprintf(buf, size, "the code used its CPU time limit of %llu s (--timeout x "
			"--cpus x 1.25) and the kernel killed it; raise --timeout or --cpus",
			(unsigned long long)rl[RL_CPU].value);
	} else if (r->session_ended)
		snprintf(buf, size, "its session was ended while it ran (sage_sandbox_end_session); "
			"the session's state is lost");
	else if (r->interrupted_by == SIGPIPE)
		snprintf(buf, size, "standard output was closed; the container was stopped");
	else if (r->interrupted_by)
		snprintf(buf, size, "interrupted by %s; the container was stopped",
			signal_name(r->interrupted_by, name, sizeof name));
	/* The sandbox broke under the code: at its container's life limit,
	 * or by a SIGKILL from outside (sandbox.c, finish_result, says why). */
	else if (r->life_over)
		snprintf(buf, size, "the container reached its life limit of %d hours (podman's "
			"--timeout, for a container that serves several calls) before the code ended; "
			"what it printed until then is kept; run it again", SESSION_MAX_SECONDS / 3600);
	else if (r->signal == SIGKILL)
		snprintf(buf, size, "the sandbox was killed from outside before the code ended "
			"(SIGKILL to its container or its podman: podman rm, kill or stop, or the "
			"kernel's OOM killer); what it printed until then is kept; run it again");
	else if (r->signal)
		snprintf(buf, size, "the sandbox's launcher or its podman died of %s before the "
			"code ended; what it printed until then is kept; run it again, and if it "
			"recurs, check the host with 'sage-sandbox status'",
			signal_name(r->signal, name, sizeof name));
	else
		snprintf(buf, size, "the sandbox's launcher or its podman exited before the "
			"code's end was reported; what it printed until then is kept; run it again, "
			"and if it recurs, check the host with 'sage-sandbox status'");
	return true;
}

void write_run_fields(struct json *j, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob)
{
	char name[32], sentence[384];
	write_json_header(j, r->exit_code == 0, r->exit_code,
		describe_stop(r, cfg, knob, sentence, sizeof sentence) ? sentence : NULL);
	jw_key(j, "file");
	jw_cstring(j, r->file);
	jw_key(j, "signal");
	if (r->signal)
		jw_cstring(j, signal_name(r->signal, name, sizeof name));
	else
		jw_null(j);
	jw_key(j, "stopped_by");
	jw_cstring(j, stopped_by(r));
	jw_key(j, "timed_out");
	jw_bool(j, r->timed_out);
	jw_key(j, "output_limit_exceeded");
	jw_bool(j, r->output_limit_exceeded);
	jw_key(j, "memory_limit_exceeded");
	jw_bool(j, r->memory_limit_exceeded);
	jw_key(j, "cpu_limit_exceeded");
	jw_bool(j, r->cpu_limit_exceeded);
	jw_key(j, "throttled");
	jw_bool(j, r->throttled);
	jw_key(j, "stdout");
	jw_string(j, r->out.data ? r->out.data : "", r->out.len);
	jw_key(j, "stderr");
	jw_string(j, r->err.data ? r->err.data : "", r->err.len);
	jw_key(j, "truncated");
	jw_begin_object(j);
	jw_key(j, "stdout");
	jw_bool(j, r->out_truncated);
	jw_key(j, "stderr");
	jw_bool(j, r->err_truncated);
	jw_key(j, "max_bytes_per_stream");
	jw_integer(j, cfg->number[SET_OUTPUT_LIMIT] * 1024);
	jw_end_object(j);
	jw_key(j, "stdin_truncated");
	jw_bool(j, r->input_truncated);
	jw_key(j, "duration_ms");
	jw_integer(j, r->duration_ms);
	write_files_fields(j, r->files);
}

void write_files_fields(struct json *j, const struct outfiles *o)
{
	jw_key(j, "files");
	if (!o) {
		jw_null(j);
	} else {
		jw_begin_array(j);
		for (size_t i = 0; i < o->count; i++) {
			const struct outfile *f = &o->files[i];
			jw_begin_object(j);
			jw_key(j, "name");
			jw_cstring(j, f->name);
			jw_key(j, "size");
			jw_integer(j, (long long)f->size);
			jw_key(j, "sha256");
			jw_cstring(j, f->sha256);
			jw_key(j, "media_type");
			jw_cstring(j, f->kind.media_type);
			jw_key(j, "width");
			if (f->kind.width)
				jw_integer(j, f->kind.width);
			else
				jw_null(j);
			jw_key(j, "height");
			if (f->kind.height)
				jw_integer(j, f->kind.height);
			else
				jw_null(j);
			jw_end_object(j);
		}
		jw_end_array(j);
	}
	jw_key(j, "files_not_saved");
	if (!o) {
		jw_null(j);
	} else {
		jw_begin_array(j);
		for (size_t i = 0; i < o->dropped_count && i < OUTFILES_DROPPED_LISTED; i++) {
			jw_begin_object(j);
			jw_key(j, "name");
			jw_cstring(j, o->dropped[i].name);
			jw_key(j, "reason");
			jw_cstring(j, o->dropped[i].reason);
			jw_end_object(j);
		}
		jw_end_array(j);
	}
	jw_key(j, "files_not_saved_count");
	jw_integer(j, o ? (long long)o->dropped_count : 0);
}

/* "23 KiB", "1.5 MiB", "12 bytes". */
static void human_size(uint64_t bytes, char *buf, size_t size)
{
	if (bytes < 1024)
		snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
	else if (bytes < (1u << 20))
		snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
	else
		snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
}

void describe_file(const struct outfile *f, char *buf, size_t size)
{
	char human[32];
	human_size(f->size, human, sizeof human);
	if (f->kind.width && f->kind.height)
		snprintf(buf, size, "%s, %s, %ux%u pixels", human, f->kind.media_type, f->kind.width,
			f->kind.height);
	else
		snprintf(buf, size, "%s, %s", human, f->kind.media_type);
}

void write_files_lines(FILE *out, const struct outfiles *o)
{
	char about[128];
	if (!o)
		return;
	/* The names as "not saved" shows them: one a reader can tell from
	 * another (a zero-width space, a tag character: attack helper 166). */
	char *dir = printable_whole(o->dir);
	for (size_t i = 0; i < o->count; i++) {
		char *name = printable_whole(o->files[i].name);
		describe_file(&o->files[i], about, sizeof about);
		fprintf(out, "sage-sandbox: saved %s/%s (%s)\n", dir, name, about);
		free(name);
	}
	free(dir);
	for (size_t i = 0; i < o->dropped_count && i < OUTFILES_DROPPED_LISTED; i++)
		fprintf(out, "sage-sandbox: not saved: %s: %s\n", o->dropped[i].name,
			o->dropped[i].reason);
	if (o->dropped_count > OUTFILES_DROPPED_LISTED)
		fprintf(out, "sage-sandbox: not saved: %zu more\n",
			o->dropped_count - OUTFILES_DROPPED_LISTED);
}

void write_run_object(FILE *out, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob)
{
	struct json j = {.out = out};
	jw_begin_object(&j);
	write_run_fields(&j, r, cfg, knob);
	jw_key(&j, "sandbox");
	write_sandbox_summary(&j, cfg);
	jw_end_object(&j);
}

void write_error_object(FILE *out, const struct error *err, const struct config *cfg)
{
	struct json j = {.out = out};
	jw_begin_object(&j);
	write_json_header(&j, false, err->status, err->message);
	jw_key(&j, "hint");
	jw_cstring(&j, err->hint);
	if (cfg) {
		jw_key(&j, "sandbox");
		write_sandbox_summary(&j, cfg);
	}
	jw_end_object(&j);
}

void write_stop_line(FILE *out, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob)
{
	char sentence[384];
	if (r->input_truncated)
		fprintf(out, "sage-sandbox: the code's standard input was cut at %llu MiB; it read "
			"end of file there\n", MAX_INPUT_BYTES >> 20);
	/* A closed stdout is the reader's own doing: nothing to tell it. */
	if (describe_stop(r, cfg, knob, sentence, sizeof sentence) && r->interrupted_by != SIGPIPE)
		fprintf(out, "sage-sandbox: %s\n", sentence);
}

void print_error_line(FILE *f, const void *arg)
{
	const struct error *err = ((const struct printed *)arg)->err;
	fprintf(f, "sage-sandbox: %s%s%s\n", err->message, err->hint[0] ? "; " : "", err->hint);
}

void print_error_object(FILE *f, const void *arg)
{
	const struct printed *p = arg;
	write_error_object(f, p->err, p->cfg);
}

void print_run_object(FILE *f, const void *arg)
{
	const struct printed *p = arg;
	write_run_object(f, p->result, p->cfg, p->knob);
}

void print_files_lines(FILE *f, const void *arg)
{
	const struct printed *p = arg;
	write_files_lines(f, p->result->files);
}

void print_stop_line(FILE *f, const void *arg)
{
	const struct printed *p = arg;
	write_stop_line(f, p->result, p->cfg, p->knob);
}

char *print_to_memory(printer *writer, const void *arg, size_t *len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	if (!f)
		abort();
	writer(f, arg);
	fclose(f);
	*len = size;
	return text;
}
