/* runner.h: the fleet of sandboxes and the calls they run, under every front
 * end (run, batch, mcp, serve). A front end submits calls and words their
 * results; the runner starts sandboxes (ahead, warm, or for a call), hands
 * calls to them in order, reuses, replaces, retries and stops them, and
 * drains them all at the end. The pool of one-call sandboxes (mcp), serial
 * sandboxes that serve call after call (batch, serve) and sessions (mcp)
 * are its policies, chosen in runner_options. */
#ifndef SAGE_SANDBOX_RUNNER_H
#define SAGE_SANDBOX_RUNNER_H

#include "host.h"
#include "sandbox.h"

#include <stdbool.h>
#include <stdint.h>

/* A warm one-call sandbox older than this is retired and replaced, so
 * that no container lives for long on one start; podman's --timeout
 * backstop of a warm sandbox adds it (see podman_run_args). */
#define POOL_MAX_IDLE_SECONDS 600
#define POOL_MAX_SIZE 8
/* A serial sandbox serves at most this many calls, or this long, then
 * another replaces it: what any one container accumulates stays bounded. */
#define SERIAL_CALLS_MAX 1000
#define SERIAL_AGE_SECONDS 3600
#define SESSION_NAME_MAX 64

/* Where a front end (oneshot.c, batch.c) runs when the server hosts it,
 * all the server's (borrowed): its loop, the client's descriptors (0, 1,
 * 2, then the request's), and runner_for, the runner a checked host's
 * calls go to, given owner. NULL in its place: a loop, descriptors and
 * a runner of its own. */
struct hosting {
	struct loop *loop;
	const int *fds;
	struct runner *(*runner_for)(void *owner, const struct config *cfg, const struct host *h);
	void *owner;
};

struct runner_options {
	struct loop *loop;
	const struct host *host;  /* podman, the rootless answer, the image: borrowed */
	const struct config *cfg; /* the sandboxes' settings; a call may lower its own */
	const char *who;          /* "mcp", "batch": the front end, in log lines */
	bool log;                 /* a line on stderr for each event worth one */
	int running_max;          /* calls at once; more wait, in order (but overflow) */
	int warm;                 /* sandboxes kept ready, 0 to POOL_MAX_SIZE: one-call
				   * ones (the pool), or with serial, that many of those */
	int serial;               /* sandboxes that serve call after call; 0: none */
	/* With serial: a call that has waited behind busy serial sandboxes as
	 * long as this runner's last sandbox took to start, or a retry, gets a
	 * one-call sandbox of its own, as a cold run would (at most
	 * POOL_MAX_SIZE containers at once, past running_max): behind long
	 * calls, the wait for the code's start is at most about twice a cold
	 * start's (serve). */
	bool overflow;
	int sessions_max;         /* sessions open at once */
	long session_idle_seconds;
	bool for_status;          /* its sandboxes' (sandbox_options) */
};

/* One call: owned by the runner from runner_submit until call_free, which
 * the front end calls once it has used the result (after on_done), or to
 * drop it early (then its on_done never comes). The runner never points
 * into a freed call: the sandbox that ran it lets go of it at its on_done,
 * or at call_free. */
struct call;

struct call_spec {
	/* Borrowed from the front end until on_done or call_free, whichever
	 * comes first: code, arguments, files. program.deadline, if set, is
	 * the call's; else it is timeout_ms from when the call starts (a call
	 * that waits does not lose its time). */
	struct program program;
	long timeout_ms;
	const char *session; /* the session it runs in, or NULL */
	bool retry;          /* once more, in a fresh container, when the sandbox broke */
	bool keep_output;    /* stdout and stderr in the result */
	/* Output as it arrives (within the output limit); the receiver may
	 * pause it (call_pause_output). */
	void (*on_output)(struct call *c, int stream, const char *bytes, size_t len, void *data);
	/* The call was handed to a sandbox (again, when it is retried): its
	 * stdin may be sent from the start. This one can come inside
	 * runner_submit (a sandbox was ready): it must not free the call. */
	void (*on_start)(struct call *c, void *data);
	/* The code's stdin has room again (call_input). */
	void (*on_input_room)(struct call *c, void *data);
	/* The result is known: call_result(). Called once for every call not
	 * freed before: also for one refused, cancelled or drained before it
	 * ran. Always from the loop, never inside a call into the runner
	 * (runner_submit, call_cancel, call_refuse_waiting, runner_drain): a
	 * call that ends without running hears of it on the loop's next look
	 * at its timers. It may free the call; never the runner. */
	void (*on_done)(struct call *c, void *data);
	void *data;
};

struct runner;

struct runner *runner_new(const struct runner_options *opt);
/* Queues a call (it starts as soon as the policy allows: at once, when a
 * sandbox is free, after the calls before it). Returns the call, live
 * until call_free: also one refused at once, whose on_done comes later. */
struct call *runner_submit(struct runner *r, const struct call_spec *spec);
/* Calls waiting for their turn, and running. */
int runner_waiting(const struct runner *r);
int runner_running(const struct runner *r);
/* Warm sandboxes ready for a call now (pool and serial). */
int runner_ready(const struct runner *r);

/* The result, once on_done was called; the call's own, kept until
 * call_free. Before that, what came so far (output kept). */
const struct run_result *call_result(const struct call *c);
/* Its output was kept in the result; the front end's to move or copy. */
struct run_result *call_result_mutable(struct call *c);
bool call_warm(const struct call *c);      /* it ran in a sandbox started ahead */
int call_attempts(const struct call *c);   /* sandboxes it took (2: retried) */
long call_session_calls(const struct call *c); /* its session's calls, this one included */
int64_t call_started_at(const struct call *c); /* loop_now_ms(), 0 if it never started */
/* The code's stdin, as sandbox_input: takes at most the room there is. */
size_t call_input(struct call *c, const char *bytes, size_t len);
size_t call_input_room(const struct call *c);
void call_input_end(struct call *c);
void call_pause_output(struct call *c, bool paused);
/* Ends the call early (as by signal sig: the result says so); on_done
 * follows, from the loop: once its container is removed, or on the loop's
 * next look at its timers for a call that had not started. */
void call_cancel(struct call *c, int sig);
/* A call still waiting for a sandbox ends with err; true if it was
 * waiting. Its result says so at once; on_done comes on the loop's next
 * look at its timers. A started call is left alone. */
bool call_refuse_waiting(struct call *c, const struct error *err);
void call_free(struct call *c);

/* Ends a session: its running call is stopped (the result says the
 * session was ended), its container removed, and its calls still waiting
 * refused (status 143). Its calls so far (0 for one that had not started),
 * or -1 when no session of that name is open or asked for. */
long runner_end_session(struct runner *r, const char *name);
/* The refusal of a call that waited for a session ended before it began:
 * the runner's, and that of a front end holding calls not yet given to it. */
void session_ended_error(struct error *err, const char *name);
int runner_sessions(const struct runner *r);

/* No more sandboxes are started ahead of calls (the front end's input
 * ended: no call is coming for them); those there serve the calls left. */
void runner_stop_warming(struct runner *r);

/* Stops everything: calls waiting end as not run (on_done, from the loop,
 * with failure.status 128 + sig and why), running ones are stopped, every
 * container is removed; done once all are gone and every on_done was
 * delivered (at once when there is nothing to wait for). done may free
 * the runner. */
void runner_drain(struct runner *r, int sig, const char *why, void (*done)(void *data),
		void *data);
/* Frees the runner: only after the drain's done, or to abandon what is
 * left to podman's --timeout backstop. Calls not freed are freed. */
void runner_free(struct runner *r);

#endif
