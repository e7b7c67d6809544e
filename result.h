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
/* The fields of a run: exit_code, signal, timed_out, ..., duration_ms. */
void write_run_fields(struct json *j, const struct run_result *r, const struct config *cfg);
/* The whole object of `run --json`. */
void write_run_object(FILE *out, const struct run_result *r, const struct config *cfg);
/* The whole object of a refusal; cfg NULL when the options were unreadable. */
void write_error_object(FILE *out, const struct error *err, const struct config *cfg);
/* The one line text mode adds on stderr when sage-sandbox, not the code,
 * ended the run; nothing otherwise. */
void write_stop_line(FILE *out, const struct run_result *r, const struct config *cfg);

#endif
