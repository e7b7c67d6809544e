/* result.h: a run's result, a refusal and the sandbox summary as JSON, and
 * the lines text mode adds; one writer for run, self-test and what follows. */
#ifndef SAGE_SANDBOX_RESULT_H
#define SAGE_SANDBOX_RESULT_H

#include "json.h"
#include "sandbox.h"

#include <stdio.h>

/* "SIGKILL", or "signal N". */
const char *signal_name(int sig, char *buf, size_t size);

/* A setting's value as JSON: a number for numeric settings. */
void write_setting_value(struct json *j, const struct config *cfg, int id);
/* The settings and the fixed properties of the sandbox, from the same
 * constants as the podman arguments. */
void write_sandbox_summary(struct json *j, const struct config *cfg);
/* Bumped when a field changes meaning or goes away; new fields do not. */
#define JSON_SCHEMA_VERSION 1

/* The fields every object begins with: schema_version, ok, exit_code, and
 * error (a sentence, or null). */
void write_json_header(struct json *j, bool ok, int exit_code, const char *error);
/* Why the run was ended by a limit or by sage-sandbox: "timeout",
 * "output_limit", "memory_limit", "cpu_limit", "signal", "output_closed";
 * NULL when the code ended by itself. */
const char *stopped_by(const struct run_result *r);
/* What a front end calls the timeout a user may raise, and its most:
 * "--timeout" (run), "timeout_seconds" (mcp), a job's "timeout" (batch).
 * NULL: --timeout, up to its largest setting. */
struct timeout_knob {
	const char *name;
	long most;
};
/* That, as a sentence that says what to change; false when there is none. */
bool describe_stop(const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob, char *buf, size_t size);
/* The fields of a run, the header first: schema_version, ok, exit_code,
 * error, file, signal, stopped_by, ..., duration_ms. */
void write_run_fields(struct json *j, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob);
/* "files" (name, size, sha256, media_type, width, height of each file
 * brought back), "files_not_saved" (name, reason) and their count; null
 * when nothing was asked back. */
void write_files_fields(struct json *j, const struct outfiles *o);
/* "12.3 KiB, image/png, 640x480 pixels". */
void describe_file(const struct outfile *f, char *buf, size_t size);
/* Text mode's lines on them: "sage-sandbox: saved DIR/NAME (...)". */
void write_files_lines(FILE *out, const struct outfiles *o);
/* The whole object of `run --json`. */
void write_run_object(FILE *out, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob);
/* The whole object of a refusal; cfg NULL when the options were unreadable. */
void write_error_object(FILE *out, const struct error *err, const struct config *cfg);
/* The line text mode adds on stderr when a limit or sage-sandbox, not the
 * code, ended the run, or the code's stdin was cut; nothing otherwise. */
void write_stop_line(FILE *out, const struct run_result *r, const struct config *cfg,
		const struct timeout_knob *knob);

/* The writers above behind one signature, for output that is queued or
 * embedded rather than written straight to a stream. */
typedef void printer(FILE *f, const void *arg);
struct printed {
	const struct error *err;
	const struct run_result *result;
	const struct config *cfg;
	const struct timeout_knob *knob; /* NULL: --timeout */
};
printer print_error_line;   /* "sage-sandbox: MESSAGE; HINT" */
printer print_error_object; /* write_error_object */
printer print_run_object;   /* write_run_object */
printer print_stop_line;    /* write_stop_line */
printer print_files_lines;  /* write_files_lines */
/* What writer printed, as a malloc'd string of *len bytes. */
char *print_to_memory(printer *writer, const void *arg, size_t *len);

#endif
