/* runner.c: the fleet: sandboxes started ahead or for a call, calls handed
 * to them in order, reuse, replacement, retries, sessions and the drain.
 *
 * Every sandbox is a slot, owned by the runner from its start until
 * podman's last child of it has ended (on_released), and every call is
 * owned by the runner from runner_submit until the front end's call_free.
 * A slot points at the call it runs only between handing it over and the
 * sandbox's on_done, where the result moves into the call and the slot
 * lets go of it: a call freed after its answer is pointed at by nothing.
 * A call freed while it runs is let go of at call_free, its program too.
 * A call's on_done comes from the loop, never from inside a call of the
 * front end's into the runner: a call that ends without a sandbox's word
 * (refused, cancelled, drained) hears of it on the loop's next look at its
 * timers.
 *
 * Kinds of slot, by the policy of runner_options:
 *   once     one call, then the container ends: started for a call, or
 *            ahead (warm) and handed to the next call that needs one
 *            (the pool: mcp);
 *   serial   call after call, each in a fresh child of the launcher with
 *            /tmp and the launcher put back as before the first
 *            (launcher/calls.py), replaced after SERIAL_CALLS_MAX calls or
 *            SERIAL_AGE_SECONDS (batch);
 *   session  one Sage, cell after cell, one call at a time (mcp).
 * With opt.overflow (serve), a call that waited behind busy serial
 * sandboxes as long as a start takes, or a retry, gets a one-call sandbox
 * started for it outside running_max (overflow_for).
 * A call whose sandbox broke under it (podman died, the container was
 * killed from outside, the memory watchdog ended it, podman refused to
 * start it) runs once more, in a container of its own, if it asked to. */
#include "runner.h"
#include "result.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sandbox started ahead that has not said ready by then failed to start. */
#define START_LIMIT_MS 60000
/* After a failed start of a warm sandbox: 1 s, doubling, at most a minute. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000
/* Serial sandboxes that fail to start in a row before calls get one-call
 * sandboxes (whose failure is then the call's result, said in it). */
#define SERIAL_START_FAILURES 3

enum slot_kind { SLOT_ONCE, SLOT_SERIAL, SLOT_SESSION };

struct slot {
	struct runner *r;
	struct loop_scope scope; /* its timers, released by slot_free() */
	struct sandbox *sb; /* owned: freed at on_released */
	enum slot_kind kind;
	struct call *call;  /* the call it runs, from hand-over to on_done */
	bool warm;          /* started ahead, waiting for its first call */
	bool was_ready;
	bool leaving;       /* takes no more calls: stopped, or ends by itself */
	bool overflow;      /* started for a call that waited past a start, or a retry (opt.overflow) */
	long calls;
	int64_t born;
	char session[SESSION_NAME_MAX + 1];
	struct loop_timer *start_timer, *idle_timer;
	struct slot *next;
};

enum call_state { CALL_WAITING, CALL_RUNNING, CALL_DONE };

struct call {
	struct runner *r;
	struct loop_scope scope;        /* released by call_destroy() */
	struct loop_timer *done_timer;  /* on_done on its way, for a call that never ran */
	struct call_spec spec;
	enum call_state state;
	struct slot *slot;        /* while running */
	struct run_result result; /* once done: the call's own, buffers included */
	bool warm;
	int attempts;
	long session_calls;
	int64_t started_at;
	int64_t waiting_since;    /* submitted, or put back to wait (a retry) */
	struct call *next;        /* in the runner's list, in order of submission */
};

struct runner {
	struct runner_options opt;
	struct loop_scope scope; /* its timers, released by runner_free() */
	struct slot *slots;
	struct call *calls;
	int warm_failures;   /* warm starts in a row that never got ready */
	int serial_failures; /* serial starts in a row that never got ready */
	struct loop_timer *refill_timer;
	struct loop_timer *drain_check; /* a drain's end looked at, later */
	struct loop_timer *overflow_timer; /* the first waiting call's wait is up */
	int64_t start_ms;    /* the last sandbox's time from its start to ready */
	int64_t overflow_failed_at; /* an overflow start failed then; 0: the last did not */
	bool backoff_over;   /* the refill timer fired: the next start goes now */
	int64_t created_at;
	bool first_ready_logged;
	bool first_warm_logged;
	/* A warm-up killed its launcher (warm_up_broke): in this image it
	 * would kill every container's, each after one call. The sandboxes
	 * started from then on get none (those already warming may crash in
	 * turn: a retry each). */
	bool cold;
	bool draining;
	int drain_signal;
	char drain_why[160];
	void (*drained)(void *data);
	void *drained_data;
	bool pumping, pump_again;
};

static void pump(struct runner *r);
static void refill(struct runner *r);

static void say(const struct runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct runner *r, const char *fmt, ...)
{
	va_list ap;
	if (!r->opt.log)
		return;
	fprintf(stderr, "sage-sandbox %s: ", r->opt.who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- counting -------------------------------------------------------------- */

/* The slot takes no more calls: retired, or its sandbox ended while it
 * waited for one (its podman exited: sandbox_state) and is being removed. */
static bool slot_gone(const struct slot *s)
{
	return s->leaving || (!s->call && sandbox_state(s->sb) == SANDBOX_DONE);
}

static int count_slots(const struct runner *r, enum slot_kind kind, bool only_waiting)
{
	int n = 0;
	for (const struct slot *s = r->slots; s; s = s->next)
		n += s->kind == kind && !slot_gone(s) && (!only_waiting || !s->call);
	return n;
}

int runner_running(const struct runner *r)
{
	int n = 0;
	for (const struct call *c = r->calls; c; c = c->next)
		n += c->state == CALL_RUNNING;
	return n;
}

/* Running calls that count against opt.running_max: all but those in
 * overflow sandboxes, which have their own bound. */
static int running_in_turn(const struct runner *r)
{
	int n = 0;
	for (const struct call *c = r->calls; c; c = c->next)
		n += c->state == CALL_RUNNING && !c->slot->overflow;
	return n;
}

/* Overflow containers, those still being stopped or removed included: the
 * bound is on containers, not calls. */
static int count_overflow(const struct runner *r)
{
	int n = 0;
	for (const struct slot *s = r->slots; s; s = s->next)
		n += s->overflow;
	return n;
}

int runner_waiting(const struct runner *r)
{
	int n = 0;
	for (const struct call *c = r->calls; c; c = c->next)
		n += c->state == CALL_WAITING;
	return n;
}

/* Warm one-call sandboxes: started ahead, no call yet. */
static int count_warm(const struct runner *r)
{
	int n = 0;
	for (const struct slot *s = r->slots; s; s = s->next)
		n += s->kind == SLOT_ONCE && s->warm && !slot_gone(s);
	return n;
}

static bool slot_ready(const struct slot *s)
{
	return !slot_gone(s) && !s->call && sandbox_state(s->sb) == SANDBOX_READY;
}

int runner_ready(const struct runner *r)
{
	int n = 0;
	for (const struct slot *s = r->slots; s; s = s->next)
		n += s->kind != SLOT_SESSION && slot_ready(s);
	return n;
}

int runner_sessions(const struct runner *r)
{
	return count_slots(r, SLOT_SESSION, false);
}

/* A serial container has served its calls or its time (SERIAL_CALLS_MAX,
 * SERIAL_AGE_SECONDS): replaced at a call's end, or at the next call where
 * it waited meanwhile; so no call runs near its 24-hour life (podman's
 * --timeout of a container that serves several calls, podman.c). */
static bool serial_worn(const struct slot *s)
{
	return s->calls >= SERIAL_CALLS_MAX || loop_now_ms() - s->born >= SERIAL_AGE_SECONDS * 1000LL;
}

static struct slot *find_session(struct runner *r, const char *name)
{
	for (struct slot *s = r->slots; s; s = s->next)
		if (s->kind == SLOT_SESSION && !slot_gone(s) && strcmp(s->session, name) == 0)
			return s;
	return NULL;
}

/* ---- calls -------------------------------------------------------------------- */

static void unlink_call(struct call *c)
{
	for (struct call **at = &c->r->calls; *at; at = &(*at)->next)
		if (*at == c) {
			*at = c->next;
			return;
		}
}

const struct run_result *call_result(const struct call *c)
{
	return c->state == CALL_RUNNING ? sandbox_result(c->slot->sb) : &c->result;
}

struct run_result *call_result_mutable(struct call *c)
{
	return c->state == CALL_RUNNING ? sandbox_result(c->slot->sb) : &c->result;
}

bool call_warm(const struct call *c)
{
	return c->warm;
}

int call_attempts(const struct call *c)
{
	return c->attempts;
}

long call_session_calls(const struct call *c)
{
	return c->session_calls;
}

int64_t call_started_at(const struct call *c)
{
	return c->started_at;
}

size_t call_input(struct call *c, const char *bytes, size_t len)
{
	return c->state == CALL_RUNNING ? sandbox_input(c->slot->sb, bytes, len) : 0;
}

size_t call_input_room(const struct call *c)
{
	return c->state == CALL_RUNNING ? sandbox_input_room(c->slot->sb) : 0;
}

void call_input_end(struct call *c)
{
	if (c->state == CALL_RUNNING)
		sandbox_input_end(c->slot->sb);
}

void call_pause_output(struct call *c, bool paused)
{
	if (c->state == CALL_RUNNING)
		sandbox_pause_output(c->slot->sb, paused);
}

static void check_drained(struct runner *r);

static void on_drain_check(void *data)
{
	check_drained(data);
}

static void deliver_done(void *data)
{
	struct call *c = data;
	struct runner *r = c->r;
	c->spec.on_done(c, c->spec.data); /* may free c, never r */
	if (r->draining)
		check_drained(r); /* last: its done may free the runner */
}

/* The call is over without a sandbox's word: refused, cancelled or drained
 * before it ran. Its result is there at once; on_done comes later, from
 * the loop, so that whoever asked (runner_submit, call_cancel, a refusal)
 * returns first with the call still theirs. */
static void end_unstarted(struct call *c, const struct run_result *why)
{
	c->result = *why;
	c->state = CALL_DONE;
	loop_timer_arm(&c->scope, &c->done_timer, 0, deliver_done, c);
}

static void refuse(struct call *c, const struct error *err)
{
	end_unstarted(c, &(struct run_result){.failed = true, .failure = *err,
		.exit_code = err->status});
}

void call_cancel(struct call *c, int sig)
{
	if (c->state == CALL_RUNNING) {
		sandbox_stop(c->slot->sb, STOP_SIGNAL, sig);
	} else if (c->state == CALL_WAITING) {
		end_unstarted(c, &(struct run_result){.interrupted_by = sig, .exit_code = 128 + sig});
		pump(c->r);
	}
}

bool call_refuse_waiting(struct call *c, const struct error *err)
{
	if (c->state != CALL_WAITING)
		return false;
	refuse(c, err);
	pump(c->r);
	return true;
}

/* The one place a call's on_done on its way is dropped and its memory
 * freed. */
static void call_destroy(struct call *c)
{
	loop_scope_end(&c->scope);
	buffer_free(&c->result.out);
	buffer_free(&c->result.err);
	free(c);
}

void call_free(struct call *c)
{
	if (!c)
		return;
	struct runner *r = c->r;
	bool done_coming = loop_timer_armed(&c->done_timer);
	if (c->state == CALL_RUNNING) {
		/* Freed before its end (the front end was stopped): the slot
		 * lets go of it, and the container goes. The sandbox lets go
		 * of the program as well (code, arguments, files in and out),
		 * which the front end frees next. */
		c->slot->call = NULL;
		c->slot->leaving = true;
		sandbox_stop(c->slot->sb, STOP_SIGNAL, SIGTERM);
		sandbox_drop_program(c->slot->sb);
	}
	unlink_call(c);
	call_destroy(c);
	/* A drain that waited for this call's on_done waits no more: it is
	 * looked at from the loop, never inside call_free (its done may free
	 * the runner). */
	if (done_coming && r->draining)
		loop_timer_arm(&r->scope, &r->drain_check, 0, on_drain_check, r);
	pump(r);
}

struct call *runner_submit(struct runner *r, const struct call_spec *spec)
{
	struct call *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	c->r = r;
	loop_scope_init(&c->scope, r->opt.loop, "a call");
	c->spec = *spec;
	c->waiting_since = loop_now_ms();
	struct call **end = &r->calls;
	while (*end)
		end = &(*end)->next;
	*end = c;
	if (r->draining) {
		struct error err;
		error_set(&err, 128 + r->drain_signal, NULL, "%s", r->drain_why);
		refuse(c, &err);
		return c;
	}
	pump(r);
	return c;
}

/* ---- slots ------------------------------------------------------------------------ */

static void unlink_slot(struct slot *gone)
{
	for (struct slot **at = &gone->r->slots; *at; at = &(*at)->next)
		if (*at == gone) {
			*at = gone->next;
			return;
		}
}

/* Drained: every sandbox released, and every on_done delivered. */
static void check_drained(struct runner *r)
{
	if (!r->draining || r->slots || !r->drained)
		return;
	for (const struct call *c = r->calls; c; c = c->next)
		if (loop_timer_armed(&c->done_timer))
			return;
	void (*done)(void *) = r->drained;
	r->drained = NULL;
	done(r->drained_data);
}

/* The slot takes no more calls; a container still waiting is stopped. */
static void retire(struct slot *s, bool stop)
{
	s->leaving = true;
	loop_timer_cancel(&s->idle_timer);
	loop_timer_cancel(&s->start_timer);
	if (stop)
		sandbox_stop(s->sb, STOP_SIGNAL, s->r->drain_signal ? s->r->drain_signal : SIGTERM);
}

static int64_t backoff_ms(int failures)
{
	if (failures == 0)
		return 0;
	int64_t ms = (int64_t)BACKOFF_FIRST_MS << (failures > 7 ? 6 : failures - 1);
	return ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
}

static void on_ready(struct sandbox *sb, void *data)
{
	struct slot *s = data;
	struct runner *r = s->r;
	loop_timer_cancel(&s->start_timer);
	if (!s->was_ready)
		r->start_ms = loop_now_ms() - s->born;
	s->was_ready = true;
	if (s->kind == SLOT_SERIAL)
		r->serial_failures = 0;
	if (s->warm) {
		r->warm_failures = 0;
		/* Not once warming stopped (mcp's end of input): the log would
		 * say the server gets ready after it said it is ending. */
		if (!r->first_ready_logged && r->opt.warm) {
			r->first_ready_logged = true;
			say(r, "first warm sandbox ready %lld ms after start",
				(long long)(loop_now_ms() - r->created_at));
		}
	}
	pump(r);
}

/* A container's warm-up (launcher/warm.py) ended: the first is logged with
 * its time, and any that ended early with why (its calls pay what it did
 * not start; a template it left unsafe to fork serves one call, then is
 * replaced). */
static void on_warm(struct sandbox *sb, const struct warm_report *w, void *data)
{
	struct slot *s = data;
	struct runner *r = s->r;
	if (w->why[0]) {
		/* The launcher's words, from an exception's text: printable
		 * only. */
		char why[sizeof w->why];
		size_t i = 0;
		for (; w->why[i]; i++)
			why[i] = (unsigned char)w->why[i] < ' ' || w->why[i] == 0x7f ? '?' : w->why[i];
		why[i] = '\0';
		say(r, "a sandbox's warm-up ended early: %s", why);
	}
	else if (!r->first_warm_logged) {
		r->first_warm_logged = true;
		say(r, "first sandbox warmed for GAP, Maxima, matplotlib, Singular and scipy %lld ms "
			"after start (its steps: %lld ms)", (long long)(loop_now_ms() - r->created_at),
			(long long)w->ms);
	}
}

static void on_output(struct sandbox *sb, int stream, const char *bytes, size_t len, void *data)
{
	struct slot *s = data;
	if (s->call && s->call->spec.on_output)
		s->call->spec.on_output(s->call, stream, bytes, len, s->call->spec.data);
}

static void on_input_room(struct sandbox *sb, void *data)
{
	struct slot *s = data;
	if (s->call && s->call->spec.on_input_room)
		s->call->spec.on_input_room(s->call, s->call->spec.data);
}

static void on_session_idle(void *data)
{
	struct slot *s = data;
	say(s->r, "session %s ended after %ld s without a call", s->session,
		s->r->opt.session_idle_seconds);
	retire(s, true);
}

/* A broken sandbox, not the call: podman or the container died under it,
 * the memory watchdog ended the container, or podman refused to start it. */
static bool sandbox_broke(const struct run_result *res)
{
	return res->failed || res->sandbox_broke || res->memory_limit_exceeded;
}

/* The sandbox says the call is over: the result moves into the call, and
 * the slot goes on to its next call, waits for one, or goes. */
static void on_done(struct sandbox *sb, void *data)
{
	struct slot *s = data;
	struct runner *r = s->r;
	struct run_result *res = sandbox_result(sb);
	struct call *c = s->call;
	s->call = NULL;
	s->calls++;
	/* A sandbox stopped before it was ready (the drain, a retirement) did
	 * not fail to start. */
	if (!s->was_ready && !r->draining && !s->leaving) {
		int *failures = s->kind == SLOT_SERIAL ? &r->serial_failures : &r->warm_failures;
		if (s->kind == SLOT_SERIAL || s->warm)
			(*failures)++;
		if (s->warm) {
			/* None where warming stopped (mcp's end of input). */
			char next_try[48] = "";
			if (r->opt.warm)
				snprintf(next_try, sizeof next_try, "; next try in %lld s",
					(long long)(backoff_ms(*failures) / 1000));
			say(r, "a warm sandbox did not start (%s)%s",
				res->failed ? res->failure.message : "it ended before it was ready",
				next_try);
		}
	}
	if (s->kind == SLOT_SERIAL && res->ends_why[0])
		say(r, "a container is replaced after a call: %s", res->ends_why);
	if (res->warm_up_broke && !r->cold) {
		char sig[32];
		r->cold = true;
		say(r, "a sandbox's launcher died by %s during its warm-up (a library of the image "
			"that crashes as it starts: GAP, Maxima, matplotlib, Singular or scipy; a call "
			"that uses it crashes too); the sandboxes started from now on serve their calls "
			"without a warm-up", signal_name(res->signal, sig, sizeof sig));
	}
	bool next = SERVES_NEXT(res) && !r->draining && !s->leaving &&
		!(s->kind == SLOT_SERIAL && serial_worn(s));
	if (!next) {
		/* A container that waits for another call is stopped; any other
		 * ends, or was stopped, by itself. */
		retire(s, SERVES_NEXT(res));
	} else if (s->kind == SLOT_SESSION) {
		loop_timer_arm(&s->scope, &s->idle_timer, loop_now_ms() +
			r->opt.session_idle_seconds * 1000LL, on_session_idle, s);
	}
	if (c) {
		if (c->spec.retry && c->attempts < 2 && sandbox_broke(res) && !r->draining) {
			/* Once more, first in line, in a container of its own. */
			c->state = CALL_WAITING;
			c->slot = NULL;
			c->waiting_since = loop_now_ms();
			unlink_call(c);
			c->next = r->calls;
			r->calls = c;
		} else {
			c->result = *res;
			/* The buffers are the call's now. */
			res->out = res->err = (struct buffer){0};
			c->state = CALL_DONE;
			c->slot = NULL;
			c->spec.on_done(c, c->spec.data);
		}
	}
	if (s->kind == SLOT_ONCE)
		refill(r); /* the pool is brought back once the call has its answer */
	pump(r);
}

/* The one place a slot's timers are released and its memory freed; its
 * sandbox is its caller's to free. */
static void slot_free(struct slot *s)
{
	loop_scope_end(&s->scope);
	free(s);
}

static void destroy_sandbox(void *sb)
{
	sandbox_free(sb);
}

static void on_released(struct sandbox *sb, void *data)
{
	struct slot *s = data;
	struct runner *r = s->r;
	if (s->call) {
		/* Ended with no result reported (abandoned start). */
		s->call->state = CALL_WAITING;
		s->call->slot = NULL;
		s->call = NULL;
	}
	unlink_slot(s);
	slot_free(s);
	/* Freed at the end of the loop's turn: this is the sandbox's own
	 * callback, and its code is still up the stack. Until then it calls
	 * nobody back. */
	sandbox_set_callbacks(sb, &(struct sandbox_callbacks){0});
	loop_release(r->opt.loop, destroy_sandbox, sb);
	if (r->draining) {
		check_drained(r); /* last: its done may free the runner */
		return;
	}
	refill(r);
	pump(r);
}

static void on_start_limit(void *data)
{
	struct slot *s = data;
	sandbox_stop(s->sb, STOP_TIMEOUT, 0);
}

/* Starts a slot's sandbox: for call c (its deadline the call's), or ahead
 * (warm, its deadline its maximum age). NULL with err when podman cannot
 * be started at all. */
static struct slot *start_slot(struct runner *r, enum slot_kind kind, struct call *c,
		struct error *err)
{
	struct slot *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	s->r = r;
	loop_scope_init(&s->scope, r->opt.loop, "a runner's sandbox slot");
	s->kind = kind;
	s->born = loop_now_ms();
	s->warm = !c;
	struct sandbox_options so = {.cfg = r->opt.cfg, .host = &r->opt.host->podman_host,
		.image = &r->opt.host->image, .podman = r->opt.host->podman,
		.session = kind == SLOT_SESSION, .serial = kind == SLOT_SERIAL, .cold = r->cold,
		.for_status = r->opt.for_status,
		.cb = {.keep_output = true, .on_ready = on_ready, .on_warm = on_warm,
			.on_output = on_output, .on_input_room = on_input_room, .on_done = on_done,
			.on_released = on_released, .data = s}};
	if (kind == SLOT_SERIAL) {
		so.deadline = loop_now_ms() + SESSION_MAX_SECONDS * 1000LL;
		so.idle_seconds = SESSION_MAX_SECONDS;
	} else if (s->warm) {
		so.deadline = loop_now_ms() + POOL_MAX_IDLE_SECONDS * 1000LL;
		so.idle_seconds = POOL_MAX_IDLE_SECONDS;
	} else {
		so.deadline = c->spec.program.deadline;
	}
	if (c)
		so.cb.keep_output = c->spec.keep_output;
	s->sb = sandbox_start(r->opt.loop, &so, err);
	if (!s->sb) {
		slot_free(s);
		return NULL;
	}
	if (!c)
		loop_timer_arm(&s->scope, &s->start_timer, loop_now_ms() + START_LIMIT_MS,
			on_start_limit, s);
	s->next = r->slots;
	r->slots = s;
	return s;
}

/* Hands call c to slot s, which waits for a call or was started for it. */
static void hand_over(struct slot *s, struct call *c)
{
	struct runner *r = s->r;
	loop_timer_cancel(&s->idle_timer);
	loop_timer_cancel(&s->start_timer);
	c->warm = s->warm || s->calls > 0;
	s->warm = false;
	s->call = c;
	c->slot = s;
	c->state = CALL_RUNNING;
	c->attempts++;
	c->started_at = loop_now_ms();
	c->session_calls = s->kind == SLOT_SESSION ? s->calls + 1 : 0;
	if (!c->spec.program.deadline || c->attempts > 1)
		c->spec.program.deadline = c->started_at + c->spec.timeout_ms;
	struct sandbox_callbacks cb = {.keep_output = c->spec.keep_output, .on_ready = on_ready,
		.on_warm = on_warm, .on_output = on_output, .on_input_room = on_input_room, .on_done = on_done,
		.on_released = on_released, .data = s};
	sandbox_set_callbacks(s->sb, &cb);
	sandbox_submit(s->sb, &c->spec.program);
	if (c->spec.on_start)
		c->spec.on_start(c, c->spec.data);
	if (r->opt.log && s->kind == SLOT_SESSION && s->calls == 0)
		say(r, "session %s started", s->session);
}

/* ---- the pool ------------------------------------------------------------------------ */

static void on_refill_timer(void *data)
{
	struct runner *r = data;
	r->backoff_over = true;
	refill(r);
}

/* How long the next start ahead waits: none once the backoff's timer
 * fired (one try, then the failures decide again). */
static int64_t start_delay(struct runner *r, int failures)
{
	if (r->backoff_over) {
		r->backoff_over = false;
		return 0;
	}
	return backoff_ms(failures);
}

void runner_stop_warming(struct runner *r)
{
	r->opt.warm = 0;
	loop_timer_cancel(&r->refill_timer);
}

/* Brings the warm sandboxes back to their number: now, or after the
 * backoff of failed starts. With serial sandboxes (serve), those are
 * started ahead, up to opt.warm of opt.serial; else one-call ones. */
static void refill(struct runner *r)
{
	if (r->draining || r->refill_timer)
		return;
	int ahead = r->opt.warm < r->opt.serial ? r->opt.warm : r->opt.serial;
	while (r->opt.serial > 0 && count_slots(r, SLOT_SERIAL, false) < ahead) {
		int64_t delay = start_delay(r, r->serial_failures);
		if (delay) {
			loop_timer_arm(&r->scope, &r->refill_timer, loop_now_ms() + delay,
				on_refill_timer, r);
			return;
		}
		struct error err;
		if (!start_slot(r, SLOT_SERIAL, NULL, &err)) {
			r->serial_failures++;
			say(r, "cannot start a warm sandbox: %s", err.message);
		}
	}
	while (r->opt.serial == 0 && count_warm(r) < r->opt.warm) {
		int64_t delay = start_delay(r, r->warm_failures);
		if (delay) {
			loop_timer_arm(&r->scope, &r->refill_timer, loop_now_ms() + delay,
				on_refill_timer, r);
			return;
		}
		struct error err;
		if (!start_slot(r, SLOT_ONCE, NULL, &err)) {
			r->warm_failures++;
			say(r, "cannot start a warm sandbox: %s", err.message);
		}
	}
}

/* ---- the order of calls ------------------------------------------------------------ */

/* A sandbox for call c, by the policy: its session's; a ready serial one
 * or a new one while there are fewer than opt.serial; a warm one-call
 * sandbox, or one started for it. A retried call gets one of its own.
 * NULL when c must wait; with err set when it cannot run at all. */
static struct slot *slot_for(struct runner *r, struct call *c, struct error *err)
{
	err->status = 0;
	if (c->spec.session) {
		struct slot *s = find_session(r, c->spec.session);
		if (s)
			return s->call ? NULL : s;
		if (runner_sessions(r) >= r->opt.sessions_max) {
			long most = r->opt.sessions_max;
			error_set(err, EXIT_REFUSED, most ? "end one with sage_sandbox_end_session, or "
					"run without session" : "run without session, or start the server "
					"with --sessions N",
				"%ld session%s open, this server's most (--sessions %ld); session %s was "
				"not started", most, most == 1 ? " is" : "s are", most, c->spec.session);
			return NULL;
		}
		s = start_slot(r, SLOT_SESSION, c, err);
		if (s)
			snprintf(s->session, sizeof s->session, "%s", c->spec.session);
		return s;
	}
	/* With overflow, a retry gets an overflow sandbox, outside the turn;
	 * at their bound, one of its own in turn. */
	if (r->opt.overflow && c->attempts > 0 && count_overflow(r) < POOL_MAX_SIZE)
		return NULL;
	bool serial = r->opt.serial > 0 && c->attempts == 0 &&
		r->serial_failures < SERIAL_START_FAILURES;
	if (serial) {
		for (struct slot *s = r->slots; s; s = s->next) {
			if (s->kind != SLOT_SERIAL || !slot_ready(s))
				continue;
			/* One worn while it waited is replaced as at a call's end. */
			if (serial_worn(s)) {
				retire(s, true);
				continue;
			}
			return s;
		}
		if (count_slots(r, SLOT_SERIAL, false) >= r->opt.serial)
			return NULL;
		return start_slot(r, SLOT_SERIAL, c, err);
	}
	if (c->attempts == 0)
		for (struct slot *s = r->slots; s; s = s->next)
			if (s->kind == SLOT_ONCE && s->warm && slot_ready(s))
				return s;
	/* None ready: a call does not wait for the pool. */
	return start_slot(r, SLOT_ONCE, c, err);
}

/* An overflow start that failed (podman could not be spawned) is tried
 * again this much later, not at every pump: one log line a second. */
#define OVERFLOW_RETRY_MS 1000

static void on_overflow_timer(void *data)
{
	pump(data);
}

/* opt.overflow: a one-call sandbox for call c, which waits, once it has
 * waited as long as a sandbox takes to start here (so that the wait and
 * the start together are at most about twice a cold start, however long
 * the calls ahead run); a retried call, which runs in a container of its
 * own anyway, at once. A serial sandbox starting ahead that could take c
 * (in_turn) is nearer than a new one, for as long as a start takes. NULL
 * while c waits on, also where the container cannot be started (said in
 * the log, and tried again OVERFLOW_RETRY_MS later, or as a serial
 * sandbox ends), but for a retry, which can have no other (then with
 * err); with *passed when it will not get one however long it waits (its
 * deadline comes before a container could start: it times out waiting,
 * nothing run), so that those behind it may. */
static struct slot *overflow_for(struct runner *r, struct call *c, bool in_turn,
		struct error *err, bool *passed)
{
	err->status = 0;
	*passed = false;
	bool retry = c->attempts > 0; /* its deadline is made anew as it starts */
	if (!r->opt.overflow || c->spec.session || count_overflow(r) >= POOL_MAX_SIZE ||
	    (!retry && r->start_ms == 0))
		return NULL;
	int64_t now = loop_now_ms();
	if (!retry) {
		if (c->spec.program.deadline && now + r->start_ms >= c->spec.program.deadline) {
			*passed = true;
			return NULL;
		}
		int64_t from = c->waiting_since;
		for (const struct slot *s = r->slots; in_turn && s; s = s->next)
			if (s->kind == SLOT_SERIAL && !slot_gone(s) && !s->call && s->born > from)
				from = s->born;
		int64_t at = from + r->start_ms;
		if (r->overflow_failed_at && at < r->overflow_failed_at + OVERFLOW_RETRY_MS)
			at = r->overflow_failed_at + OVERFLOW_RETRY_MS;
		if (now < at) {
			loop_timer_arm(&r->scope, &r->overflow_timer, at, on_overflow_timer, r);
			return NULL;
		}
	}
	struct slot *s = start_slot(r, SLOT_ONCE, c, err);
	if (!s && !retry) {
		say(r, "cannot start a container for a call that waits (tried again in %d ms): %s",
			OVERFLOW_RETRY_MS, err->message);
		err->status = 0;
		r->overflow_failed_at = now;
		loop_timer_arm(&r->scope, &r->overflow_timer, now + OVERFLOW_RETRY_MS,
			on_overflow_timer, r);
	}
	if (!s)
		return NULL;
	r->overflow_failed_at = 0;
	s->overflow = true;
	if (retry)
		say(r, "a retried call gets a container of its own behind busy sandboxes");
	else
		say(r, "a call waited %lld ms behind busy sandboxes; it gets a container of its own",
			(long long)(now - c->waiting_since));
	return s;
}

/* Starts waiting calls, in order, while there is room; past a session's
 * busy call, and with overflow past one passed over (overflow_for). A call
 * can end as it starts (a refusal), which pumps again: that is noted and
 * done here, so that no walk of the list outlives a call it holds. */
static void pump(struct runner *r)
{
	if (r->pumping) {
		r->pump_again = true;
		return;
	}
	r->pumping = true;
	do {
		r->pump_again = false;
		if (r->draining)
			break;
		for (struct call *c = r->calls; c; c = c->next) {
			bool in_turn = running_in_turn(r) < r->opt.running_max;
			if (!in_turn && !r->opt.overflow)
				break;
			if (c->state != CALL_WAITING)
				continue;
			struct error err = {0};
			bool passed = false;
			struct slot *s = in_turn ? slot_for(r, c, &err) : NULL;
			if (!s && !err.status)
				s = overflow_for(r, c, in_turn, &err, &passed);
			if (err.status) {
				/* No sandbox for it: podman itself cannot be started,
				 * or no room for a session. */
				struct run_result why = {.failed = true, .failure = err,
					.exit_code = err.status, .podman_failed = !c->spec.session};
				end_unstarted(c, &why);
				r->pump_again = true;
				break;
			}
			if (!s) {
				/* A session busy with its call: the calls behind it
				 * in other sessions go on; so do those behind a call
				 * passed over for an overflow sandbox. Any other wait
				 * keeps the order. */
				if (c->spec.session || passed)
					continue;
				break;
			}
			hand_over(s, c);
			r->pump_again = true;
			break;
		}
	} while (r->pump_again);
	r->pumping = false;
}

void session_ended_error(struct error *err, const char *name)
{
	error_set(err, 128 + SIGTERM, "call again with the session to start a new, empty one",
		"session %s was ended (sage_sandbox_end_session) before this call began; "
		"nothing was run", name);
}

long runner_end_session(struct runner *r, const char *name)
{
	/* Its calls still waiting end too, nothing of them run: the session
	 * they were sent to is gone (its first one, not started yet, with
	 * it), and a new one would start empty under their code. */
	int waiting = 0;
	for (struct call *c = r->calls; c; c = c->next) {
		if (c->state != CALL_WAITING || !c->spec.session || strcmp(c->spec.session, name) != 0)
			continue;
		struct error err;
		session_ended_error(&err, name);
		refuse(c, &err);
		waiting++;
	}
	struct slot *s = find_session(r, name);
	if (!s && waiting)
		say(r, "session %s ended before it started", name);
	if (!s)
		return waiting ? 0 : -1;
	long calls = s->calls + (s->call != NULL);
	say(r, "session %s ended", name);
	s->leaving = true;
	loop_timer_cancel(&s->idle_timer);
	sandbox_stop(s->sb, s->call ? STOP_ENDED : STOP_SIGNAL, SIGTERM);
	return calls;
}

struct runner *runner_new(const struct runner_options *opt)
{
	struct runner *r = calloc(1, sizeof *r);
	if (!r)
		abort();
	r->opt = *opt;
	loop_scope_init(&r->scope, opt->loop, "the runner");
	if (r->opt.warm > POOL_MAX_SIZE)
		r->opt.warm = POOL_MAX_SIZE;
	if (r->opt.running_max < 1)
		r->opt.running_max = 1;
	r->created_at = loop_now_ms();
	refill(r);
	return r;
}

void runner_drain(struct runner *r, int sig, const char *why, void (*done)(void *data),
		void *data)
{
	if (r->draining)
		return;
	r->draining = true;
	r->drain_signal = sig;
	snprintf(r->drain_why, sizeof r->drain_why, "%s", why);
	r->drained = done;
	r->drained_data = data;
	loop_timer_cancel(&r->refill_timer);
	loop_timer_cancel(&r->overflow_timer);
	/* Calls that never started end now, in order (their on_done on the
	 * loop's next look at its timers; the drain is done after them). */
	for (struct call *c = r->calls; c; c = c->next) {
		if (c->state != CALL_WAITING)
			continue;
		struct error err;
		error_set(&err, 128 + sig, NULL, "%s", why);
		refuse(c, &err);
	}
	for (struct slot *s = r->slots; s; s = s->next)
		if (!s->leaving || s->call)
			retire(s, true);
	check_drained(r);
}

void runner_free(struct runner *r)
{
	if (!r)
		return;
	loop_scope_end(&r->scope);
	while (r->slots) {
		struct slot *s = r->slots;
		r->slots = s->next;
		sandbox_free(s->sb);
		slot_free(s);
	}
	while (r->calls) {
		struct call *c = r->calls;
		r->calls = c->next;
		call_destroy(c);
	}
	free(r);
}
