/* pool.c: the warm pool: sandboxes started ahead on the loop, handed out
 * one per call, replaced at once, retired at a maximum age, and restarted
 * with backoff when podman keeps failing.
 *
 * The replacement of a sandbox handed to a call starts once the call has
 * its answer (measured in bench/mcp.mjs: started at the hand-out, its
 * `podman run` and Sage's import took the 2 cores the call needed).
 *
 * A warm sandbox is an ordinary sandbox (sandbox_start, the same podman
 * arguments, rlimits and seccomp profile as `run`) whose program has not
 * come yet: the launcher has imported Sage, said ready on its own channel
 * before any code existed, and is blocked reading its first frame. Nothing
 * of one call can reach the next, because no sandbox serves two. */
#include "pool.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

/* A warm sandbox that has not said ready by then failed to start. */
#define POOL_START_LIMIT_MS 60000
/* After a failed start: 1 s, doubling, at most a minute. */
#define POOL_BACKOFF_FIRST_MS 1000
#define POOL_BACKOFF_MAX_MS 60000

struct warm {
	struct pool *pool;
	struct sandbox *sb;
	struct loop_timer *start_timer;
	bool was_ready;
	bool ended; /* stopped or gone: no longer one of the waiting */
	struct warm *next;
};

struct pool {
	struct pool_options opt;
	struct warm *list; /* every sandbox the pool owns, oldest first */
	int failures;      /* starts in a row that never got ready */
	struct loop_timer *refill_timer;
	int64_t created_at;
	bool first_ready_logged;
	bool draining;
	void (*drained)(void *data);
	void *drained_data;
};

static void refill(struct pool *p);

static int waiting(const struct pool *p)
{
	int n = 0;
	for (const struct warm *w = p->list; w; w = w->next)
		n += !w->ended;
	return n;
}

int pool_ready(const struct pool *p)
{
	int n = 0;
	for (const struct warm *w = p->list; w; w = w->next)
		n += !w->ended && sandbox_state(w->sb) == SANDBOX_READY;
	return n;
}

static void unlink_warm(struct pool *p, struct warm *gone)
{
	for (struct warm **at = &p->list; *at; at = &(*at)->next) {
		if (*at == gone) {
			*at = gone->next;
			return;
		}
	}
}

static void check_drained(struct pool *p)
{
	if (!p->draining || p->list || !p->drained)
		return;
	void (*done)(void *) = p->drained;
	p->drained = NULL;
	done(p->drained_data);
}

static void on_warm_ready(struct sandbox *sb, void *data)
{
	struct warm *w = data;
	struct pool *p = w->pool;
	loop_timer_cancel(w->start_timer);
	w->start_timer = NULL;
	w->was_ready = true;
	p->failures = 0;
	if (p->opt.log && !p->first_ready_logged) {
		p->first_ready_logged = true;
		fprintf(stderr, "sage-sandbox mcp: first warm sandbox ready %lld ms after start\n",
			(long long)(loop_now_ms() - p->created_at));
	}
}

static int64_t backoff_ms(const struct pool *p)
{
	if (p->failures == 0)
		return 0;
	int64_t ms = (int64_t)POOL_BACKOFF_FIRST_MS << (p->failures > 7 ? 6 : p->failures - 1);
	return ms < POOL_BACKOFF_MAX_MS ? ms : POOL_BACKOFF_MAX_MS;
}

static void on_warm_done(struct sandbox *sb, void *data)
{
	struct warm *w = data;
	struct pool *p = w->pool;
	struct run_result *r = sandbox_result(sb);
	w->ended = true;
	loop_timer_cancel(w->start_timer);
	w->start_timer = NULL;
	if (p->draining)
		return;
	/* Ready and then ended: retired at its age, or died while waiting;
	 * replaced at once. Never ready: podman or the image is failing. */
	if (!w->was_ready) {
		p->failures++;
		if (p->opt.log)
			fprintf(stderr, "sage-sandbox mcp: a warm sandbox did not start (%s); "
					"next try in %lld s\n",
				r->failed ? r->failure.message : "it ended before it was ready",
				(long long)(backoff_ms(p) / 1000));
	}
	refill(p);
}

static void on_warm_released(struct sandbox *sb, void *data)
{
	struct warm *w = data;
	struct pool *p = w->pool;
	unlink_warm(p, w);
	sandbox_free(sb);
	free(w);
	check_drained(p);
}

static void on_start_limit(struct loop_timer *t, void *data)
{
	struct warm *w = data;
	w->start_timer = NULL;
	sandbox_stop(w->sb, STOP_TIMEOUT, 0);
}

static int start_warm(struct pool *p)
{
	struct warm *w = calloc(1, sizeof *w);
	struct error err;
	if (!w)
		abort();
	w->pool = p;
	/* Its deadline until a call brings its own: the maximum age. */
	struct sandbox_options so = {.cfg = p->opt.cfg, .host = p->opt.host,
		.image = p->opt.image, .podman = p->opt.podman,
		.deadline = loop_now_ms() + POOL_MAX_IDLE_SECONDS * 1000ll,
		.idle_seconds = POOL_MAX_IDLE_SECONDS,
		.cb = {.on_ready = on_warm_ready, .on_done = on_warm_done,
			.on_released = on_warm_released, .data = w}};
	w->sb = sandbox_start(p->opt.loop, &so, &err);
	if (!w->sb) {
		free(w);
		p->failures++;
		if (p->opt.log)
			fprintf(stderr, "sage-sandbox mcp: cannot start a warm sandbox: %s\n",
				err.message);
		return -1;
	}
	w->start_timer = loop_timer(p->opt.loop, loop_now_ms() + POOL_START_LIMIT_MS,
		on_start_limit, w);
	struct warm **end = &p->list;
	while (*end)
		end = &(*end)->next;
	*end = w;
	return 0;
}

static void start_missing(struct pool *p)
{
	while (!p->draining && waiting(p) < p->opt.size)
		if (start_warm(p) < 0) {
			refill(p); /* after the backoff */
			return;
		}
}

static void on_refill_timer(struct loop_timer *t, void *data)
{
	struct pool *p = data;
	p->refill_timer = NULL;
	start_missing(p);
}

/* Brings the pool back to its size: now, or after the backoff. */
static void refill(struct pool *p)
{
	if (p->draining || p->refill_timer || waiting(p) >= p->opt.size)
		return;
	int64_t delay = backoff_ms(p);
	if (delay) {
		p->refill_timer = loop_timer(p->opt.loop, loop_now_ms() + delay, on_refill_timer, p);
		return;
	}
	start_missing(p);
}

struct pool *pool_new(const struct pool_options *opt)
{
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		abort();
	p->opt = *opt;
	if (p->opt.size > POOL_MAX_SIZE)
		p->opt.size = POOL_MAX_SIZE;
	p->created_at = loop_now_ms();
	refill(p);
	return p;
}

struct sandbox *pool_take(struct pool *p, const struct sandbox_callbacks *cb, int64_t deadline,
		bool *warm, struct error *err)
{
	for (struct warm *w = p->list; w; w = w->next) {
		if (w->ended || sandbox_state(w->sb) != SANDBOX_READY)
			continue;
		struct sandbox *sb = w->sb;
		unlink_warm(p, w);
		loop_timer_cancel(w->start_timer);
		free(w);
		sandbox_set_callbacks(sb, cb);
		*warm = true;
		/* Its replacement waits for pool_call_ended: a `podman run` and
		 * Sage's import would take the CPU the call needs now. */
		return sb;
	}
	/* None ready: a call does not wait for the pool. */
	*warm = false;
	struct sandbox_options so = {.cfg = p->opt.cfg, .host = p->opt.host,
		.image = p->opt.image, .podman = p->opt.podman, .deadline = deadline, .cb = *cb};
	return sandbox_start(p->opt.loop, &so, err);
}

void pool_call_ended(struct pool *p)
{
	refill(p);
}

void pool_drain(struct pool *p, void (*done)(void *data), void *data)
{
	p->draining = true;
	p->drained = done;
	p->drained_data = data;
	loop_timer_cancel(p->refill_timer);
	p->refill_timer = NULL;
	for (struct warm *w = p->list; w; w = w->next) {
		loop_timer_cancel(w->start_timer);
		w->start_timer = NULL;
		if (!w->ended)
			sandbox_stop(w->sb, STOP_SIGNAL, SIGTERM);
	}
	check_drained(p);
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	loop_timer_cancel(p->refill_timer);
	while (p->list) {
		struct warm *w = p->list;
		p->list = w->next;
		loop_timer_cancel(w->start_timer);
		sandbox_free(w->sb);
		free(w);
	}
	free(p);
}
