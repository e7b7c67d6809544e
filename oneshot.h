/* oneshot.h: `run` and `self-test` as a front end: one call from start to
 * end: reading the code, the host check, the call on a runner, the code's
 * stdin and output, signals, and `run`'s words on the result. The same
 * whether the run is on its own (a loop, descriptors 0, 1, 2 and a runner
 * of its own) or one of the server's (its loop and runners, the client's
 * descriptors). */
#ifndef SAGE_SANDBOX_ONESHOT_H
#define SAGE_SANDBOX_ONESHOT_H

#include "host.h"
#include "loop.h"
#include "result.h"
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
	const char *file;   /* the code's file as named: NULL or "-" for stdin;
			     * from a file, our stdin is the code's, streamed */
	int code_fd;        /* that file, opened with open_code_file(), or -1 */
	const char *const *args; /* the code's arguments after its name */
	int argc;
	const struct infiles *in; /* files put beside the code, or NULL */
	struct outfiles *out;     /* where $SAGE_SANDBOX_OUT's files go, or NULL */
	const char *code;   /* or take this code (self-test) */
	size_t code_len;
	/* Or make the code once the host is known (self-test's depends on it). */
	void (*code_for_host)(struct oneshot *o, const struct podman_host *host);
	void *hook_data;

	/* Where it runs: the server's (runner.h), or NULL for a run of its
	 * own. Hosted, on_finished is called when the result (or the
	 * refusal) is known: the run is then the server's to word and close
	 * (oneshot_close). */
	const struct hosting *hosting;
	void (*on_finished)(struct oneshot *o);
	/* Nothing more is written (the server's client is gone, as a killed
	 * run of its own would write nothing more). */
	bool mute;
	/* `status`'s run (sandbox_options): never hosted. */
	bool for_status;

	/* out, once finished */
	bool failed;            /* nothing ran: see err */
	struct error err;
	struct run_result *result; /* when it ran: the call's */

	/* private */
	/* Its watches and timers: ended, with everything else it holds, in
	 * one place (release() in oneshot.c). */
	struct loop_scope scope;
	struct loop *loop;       /* hosting's, or its own */
	struct queue *sink[2];   /* stdout's, stderr's: one where they meet (2>&1) */
	bool escape[2]; /* that stream is a terminal: the code's controls are shown */
	struct terminal_filter filter[2];
	struct stop_signals *signals;
	int signalled;           /* the first stop signal, own or forwarded */
	struct loop_watch *code_watch, *input_watch;
	struct loop_timer *deadline_timer, *close_timer;
	int code_read_fd, input_fd;
	struct buffer code_read;
	struct host host;        /* owned: what the host check found */
	struct host_check *host_check; /* while it asks podman: cancelled at release */
	struct runner *runner;   /* owned unless hosting's runner_for gave it */
	struct call *call;       /* the runner's, until the close frees it */
	const char **argv;       /* the call's arguments: owned, kept until its end */
	/* finished: the result or the refusal is known (on_finished was
	 * called, once). closing: oneshot_close was called (once is all it
	 * takes). flushing: the queued output is on its way, until close_at.
	 * released: everything above has gone. */
	bool finished, closing, flushing, released;
	int64_t deadline, close_at;
	void (*closed)(struct oneshot *o);
};

/* Opens a code FILE (not "-") for oneshot's code_fd: without blocking (a
 * FIFO with no writer yet), never as a controlling terminal. -1 with err
 * set (the file and the fix) when it cannot be read. */
int open_code_file(const char *file, int *fd, struct error *err);

/* Sets up the loop (its own, unless hosted), stdout and stderr as non-blocking
 * queues and, on a loop of its own, the terminating signals (SIGINT,
 * SIGTERM, SIGHUP, unless the caller ignores them). -1 with err set. */
int oneshot_begin(struct oneshot *o);
/* Starts: on_finished tells when it is over. The deadline counts from
 * o->started_at, reading the code included. */
void oneshot_start(struct oneshot *o);
/* Starts and runs its own loop to the result: 0 with o->result, or -1 with
 * o->err when nothing ran. */
int oneshot_run(struct oneshot *o);
/* A stop signal as the run's own would be (the server forwards a
 * client's): the call stops, or nothing is run. */
void oneshot_signal(struct oneshot *o, int sig);
/* Queues bytes for stdout (stream 0) or stderr (stream 1). */
void oneshot_emit(struct oneshot *o, int stream, const char *bytes, size_t len);
/* The same for bytes the code wrote: escaped where that stream is a
 * terminal (see terminal.c). at_end: the stream is over. */
void oneshot_emit_code_output(struct oneshot *o, int stream, const char *bytes, size_t len,
		bool at_end);
/* What a printer (result.h) printed, queued on a stream. */
void oneshot_emit_printed(struct oneshot *o, int stream, printer *writer, const void *arg);
/* `run`'s words once it is over: the refusal's line (and object, with
 * json), or the files brought back and the stop line, or run --json's
 * object. The exit status of the run. */
int oneshot_report_run(struct oneshot *o, bool json);
/* Delivers what is queued (until the run's deadline, and at least one more
 * second; a stop signal meanwhile cuts that short), frees everything, then
 * calls closed (which may free o), never from inside this call. Finished or
 * not, the run is over: a second close, a signal, a late deadline change
 * nothing. */
void oneshot_close(struct oneshot *o, void (*closed)(struct oneshot *o));
/* oneshot_close on its own loop, to its end. */
void oneshot_end(struct oneshot *o);
/* Frees everything now, closed never called: for a run abandoned with its
 * loop (the server's, when the loop itself failed). Idempotent. */
void oneshot_discard(struct oneshot *o);

#endif
