/* oneshot.h: `run` and `self-test` as a front end: one call from start to
 * end on one loop: reading the code, the host check, the call on the
 * runner, the code's stdin and output, signals. */
#ifndef SAGE_SANDBOX_ONESHOT_H
#define SAGE_SANDBOX_ONESHOT_H

#include "host.h"
#include "loop.h"
#include "runner.h"
#include "signals.h"
#include "terminal.h"

#include <stdbool.h>
#include <stdint.h>

struct oneshot {
	/* in */
	const struct config *cfg;
	int64_t started_at; /* loop_now_ms() when sage-sandbox started */
	bool stream;        /* copy the code's output live to stdout/stderr */
	bool show_control_chars; /* on a terminal too: no escaping */
	const char *file;   /* read the code from it: NULL or "-" for stdin; from
			     * a file, our stdin is the code's, streamed */
	const char *const *args; /* the code's arguments after its name */
	int argc;
	const struct infiles *in; /* files put beside the code, or NULL */
	struct outfiles *out;     /* where $SAGE_SANDBOX_OUT's files go, or NULL */
	const char *code;   /* or take this code (self-test) */
	size_t code_len;
	/* Or make the code once the host is known (self-test's depends on it). */
	void (*code_for_host)(struct oneshot *o, const struct podman_host *host);
	void *hook_data;

	/* out, after oneshot_run */
	bool failed;            /* nothing ran: see err */
	struct error err;
	struct run_result *result; /* when it ran: the call's */

	/* private */
	struct loop *loop;
	struct queue *sink[2];
	bool escape[2]; /* that stream is a terminal: the code's controls are shown */
	struct terminal_filter filter[2];
	struct stop_signals *signals;
	struct loop_watch *code_watch, *input_watch;
	struct loop_timer *deadline_timer;
	int code_fd, input_fd;
	struct buffer code_read;
	struct host host;        /* owned: what the host check found */
	bool host_checking;
	struct runner *runner;   /* owned */
	struct call *call;       /* the runner's, until oneshot_end frees it */
	const char **argv;       /* the call's arguments: owned, kept until its end */
	bool finished, flushing;
	int64_t deadline;
};

/* Sets up the loop, stdout and stderr as non-blocking queues and the
 * terminating signals (SIGINT, SIGTERM, SIGHUP, unless the caller ignores
 * them). -1 with err set on failure. */
int oneshot_begin(struct oneshot *o);
/* Runs to the result: 0 with o->result, or -1 with o->err when nothing
 * ran. The deadline counts from o->started_at, reading the code included. */
int oneshot_run(struct oneshot *o);
/* Queues bytes for stdout (stream 0) or stderr (stream 1). */
void oneshot_emit(struct oneshot *o, int stream, const char *bytes, size_t len);
/* The same for bytes the code wrote: escaped where that stream is a
 * terminal (see terminal.c). at_end: the stream is over. */
void oneshot_emit_code_output(struct oneshot *o, int stream, const char *bytes, size_t len,
		bool at_end);
/* Delivers what is queued (until the run's deadline, and at least one more
 * second), then frees everything. */
void oneshot_end(struct oneshot *o);

#endif
