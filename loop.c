/* loop.c: the one event loop (epoll), its timers and its output queues.
 *
 * Shaped after conmon and crun: every source the process waits on is a
 * watch with a callback, every deadline a timer, and every write goes
 * through a bounded queue drained on EPOLLOUT, so that nothing blocks and
 * one stalled peer never stops the clock, the signals or the other
 * sandboxes on the same loop. */
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The sanitizer build and the unit tests abort on a handle that outlives
 * its owner; elsewhere it is reported, and the handles are never called. */
#ifdef LOOP_STRICT
bool loop_strict = true;
#else
bool loop_strict;
#endif

enum handle_kind { HANDLE_TIMER, HANDLE_WATCH };

/* What timers and watches share: the scope that holds them while they
 * live and the slot that points at them. Memory of the loop's own: a dead
 * handle stays until the next turn's sweep, so that a dispatch in progress
 * can still see that it is dead. */
struct loop_handle {
	enum handle_kind kind;
	bool dead;
	/* Still held when its loop was freed (a bug loop_free reported): out
	 * of the loop, freed when its owner lets go of it. */
	bool orphaned;
	const char *owner; /* its scope's, for loop_free's report */
	struct loop *loop;
	struct loop_scope *scope;
	struct loop_handle *scope_next, **scope_prev;
	void **slot;
};

struct loop_watch {
	struct loop_handle h;
	int fd;            /* the loop's own duplicate, closed on unwatch */
	unsigned events;
	bool always_ready; /* epoll refused it: a file that never blocks */
	/* Out of epoll: paused (no events asked for) when the kernel said
	 * hangup or error, which epoll reports whatever was asked for. */
	bool parked;
	loop_fd_callback *cb;
	void *data;
	struct loop_watch *next;
};

struct loop_timer {
	struct loop_handle h;
	int64_t when;
	loop_timer_callback *cb;
	void *data;
	struct loop_timer *next;
};

struct deferred {
	void (*destroy)(void *);
	void *obj;
	struct deferred *next;
};

struct loop {
	int epoll_fd;
	bool quit;
	int turning; /* inside loop_run's dispatch: releases wait for its end */
	struct loop_watch *watches;
	struct loop_timer *timers;
	struct deferred *deferred, **deferred_tail;
};

int64_t loop_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct loop *loop_new(void)
{
	struct loop *loop = calloc(1, sizeof *loop);
	if (!loop)
		abort();
	loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epoll_fd < 0) {
		free(loop);
		return NULL;
	}
	loop->deferred_tail = &loop->deferred;
	return loop;
}

/* ---- scopes and handles ------------------------------------------------- */

void loop_scope_init(struct loop_scope *scope, struct loop *loop, const char *owner)
{
	*scope = (struct loop_scope){.loop = loop, .owner = owner};
}

static void handle_attach(struct loop_handle *h, struct loop_scope *scope, void **slot)
{
	h->loop = scope->loop;
	h->owner = scope->owner;
	h->scope = scope;
	h->slot = slot;
	h->scope_next = scope->handles;
	if (scope->handles)
		scope->handles->scope_prev = &h->scope_next;
	h->scope_prev = &scope->handles;
	scope->handles = h;
	*slot = h;
}

/* Dead from here on: out of its scope, its slot cleared. The memory waits
 * for the sweep. */
static void handle_kill(struct loop_handle *h)
{
	if (h->dead)
		return;
	h->dead = true;
	*h->scope_prev = h->scope_next;
	if (h->scope_next)
		h->scope_next->scope_prev = h->scope_prev;
	h->scope = NULL;
	if (*h->slot == h)
		*h->slot = NULL;
	h->slot = NULL;
	if (h->orphaned) {
		free(h); /* its loop, and its descriptor, are gone already */
		return;
	}
	if (h->kind == HANDLE_WATCH) {
		struct loop_watch *w = (struct loop_watch *)h;
		if (!w->always_ready && !w->parked)
			epoll_ctl(h->loop->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
		close(w->fd);
		w->fd = -1;
		w->events = 0;
	}
}

void loop_scope_end(struct loop_scope *scope)
{
	while (scope->handles)
		handle_kill(scope->handles);
}

static void sweep(struct loop *loop)
{
	for (struct loop_watch **p = &loop->watches; *p;) {
		struct loop_watch *w = *p;
		if (w->h.dead) {
			*p = w->next;
			free(w);
		} else {
			p = &w->next;
		}
	}
	for (struct loop_timer **p = &loop->timers; *p;) {
		struct loop_timer *t = *p;
		if (t->h.dead) {
			*p = t->next;
			free(t);
		} else {
			p = &t->next;
		}
	}
}

static void run_deferred(struct loop *loop)
{
	while (loop->deferred) {
		struct deferred *d = loop->deferred;
		loop->deferred = d->next;
		if (!loop->deferred)
			loop->deferred_tail = &loop->deferred;
		d->destroy(d->obj);
		free(d);
	}
}

void loop_release(struct loop *loop, void (*destroy)(void *), void *obj)
{
	if (!obj)
		return;
	if (!loop->turning) {
		destroy(obj);
		return;
	}
	struct deferred *d = malloc(sizeof *d);
	if (!d)
		abort();
	*d = (struct deferred){.destroy = destroy, .obj = obj};
	*loop->deferred_tail = d;
	loop->deferred_tail = &d->next;
}

/* Handles still held as the loop goes: never called back again, and out
 * of the loop; their owners still point at them (slot, scope) and free
 * them when they let go. */
static void orphan_live_handles(struct loop *loop)
{
	for (struct loop_watch **p = &loop->watches; *p;) {
		struct loop_watch *w = *p;
		if (w->h.dead) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		close(w->fd);
		w->fd = -1;
		w->h.orphaned = true;
	}
	for (struct loop_timer **p = &loop->timers; *p;) {
		struct loop_timer *t = *p;
		if (t->h.dead) {
			p = &t->next;
			continue;
		}
		*p = t->next;
		t->h.orphaned = true;
	}
}

void loop_free(struct loop *loop)
{
	if (!loop)
		return;
	run_deferred(loop);
	int live = 0;
	const char *owner = NULL;
	for (struct loop_watch *w = loop->watches; w; w = w->next)
		if (!w->h.dead && ++live)
			owner = w->h.owner;
	for (struct loop_timer *t = loop->timers; t; t = t->next)
		if (!t->h.dead && ++live)
			owner = t->h.owner;
	if (live) {
		fprintf(stderr, "sage-sandbox: internal error: %d timers or watches outlive their "
			"owners (one of %s)\n", live, owner ? owner : "an unnamed scope");
		if (loop_strict)
			abort();
		orphan_live_handles(loop);
	}
	sweep(loop);
	close(loop->epoll_fd);
	free(loop);
}

static uint32_t epoll_events(unsigned events)
{
	return (events & LOOP_READ ? EPOLLIN : 0) | (events & LOOP_WRITE ? EPOLLOUT : 0);
}

int loop_watch(struct loop_scope *scope, struct loop_watch **slot, int fd, unsigned events,
		loop_fd_callback *cb, void *data)
{
	loop_unwatch(slot);
	struct loop *loop = scope->loop;
	/* The loop's own descriptor: what epoll holds is closed by the loop
	 * alone, so unwatching always takes it out, whatever became of fd. */
	int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (own < 0)
		return -1;
	struct loop_watch *w = calloc(1, sizeof *w);
	if (!w)
		abort();
	*w = (struct loop_watch){.h.kind = HANDLE_WATCH, .fd = own, .events = events, .cb = cb,
		.data = data};
	struct epoll_event ev = {.events = epoll_events(events), .data.ptr = w};
	if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, own, &ev) < 0) {
		if (errno != EPERM) {
			int saved = errno;
			close(own);
			free(w);
			errno = saved;
			return -1;
		}
		w->always_ready = true;
	}
	w->next = loop->watches;
	loop->watches = w;
	handle_attach(&w->h, scope, (void **)slot);
	return 0;
}

void loop_watch_events(struct loop_watch *w, unsigned events)
{
	if (!w || w->h.dead || w->events == events)
		return;
	w->events = events;
	if (!w->always_ready) {
		struct epoll_event ev = {.events = epoll_events(events), .data.ptr = w};
		/* A parked watch asked for events again: back into epoll, which
		 * reports the hangup or error at once if it still holds. */
		epoll_ctl(w->h.loop->epoll_fd, w->parked ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, w->fd, &ev);
		w->parked = false;
	}
}

void loop_unwatch(struct loop_watch **slot)
{
	if (*slot)
		handle_kill(&(*slot)->h);
	*slot = NULL;
}

void loop_timer_arm(struct loop_scope *scope, struct loop_timer **slot, int64_t when,
		loop_timer_callback *cb, void *data)
{
	loop_timer_cancel(slot);
	struct loop *loop = scope->loop;
	struct loop_timer *t = calloc(1, sizeof *t);
	if (!t)
		abort();
	*t = (struct loop_timer){.h.kind = HANDLE_TIMER, .when = when, .cb = cb, .data = data,
		.next = loop->timers};
	loop->timers = t;
	handle_attach(&t->h, scope, (void **)slot);
}

void loop_timer_cancel(struct loop_timer **slot)
{
	if (*slot)
		handle_kill(&(*slot)->h);
	*slot = NULL;
}

bool loop_timer_armed(struct loop_timer *const *slot)
{
	return *slot != NULL;
}

void loop_quit(struct loop *loop)
{
	loop->quit = true;
}

static bool has_work(struct loop *loop, int64_t *next_timer, bool *ready_now)
{
	bool any = false;
	*next_timer = INT64_MAX;
	*ready_now = false;
	for (struct loop_watch *w = loop->watches; w; w = w->next) {
		if (w->h.dead)
			continue;
		any = true;
		if (w->always_ready && w->events)
			*ready_now = true;
	}
	for (struct loop_timer *t = loop->timers; t; t = t->next) {
		if (t->h.dead)
			continue;
		any = true;
		if (t->when < *next_timer)
			*next_timer = t->when;
	}
	return any;
}

static void fire_timers(struct loop *loop)
{
	int64_t now = loop_now_ms();
	/* Timers added by a callback are put in front: they wait for the next
	 * turn. */
	for (struct loop_timer *t = loop->timers; t; t = t->next) {
		if (!t->h.dead && t->when <= now) {
			loop_timer_callback *cb = t->cb;
			void *data = t->data;
			/* Dead, out of its scope and its slot cleared before the
			 * call: the callback may arm the same slot again, or free
			 * its owner. */
			handle_kill(&t->h);
			cb(data);
		}
	}
}

static void dispatch(struct loop *loop, struct epoll_event *events, int n)
{
	for (int i = 0; i < n; i++) {
		struct loop_watch *w = events[i].data.ptr;
		unsigned got = (events[i].events & EPOLLIN ? LOOP_READ : 0) |
			(events[i].events & EPOLLOUT ? LOOP_WRITE : 0) |
			(events[i].events & EPOLLHUP ? LOOP_HANGUP : 0) |
			(events[i].events & EPOLLERR ? LOOP_ERROR : 0);
		/* A watch unwatched earlier in this turn is not called. */
		if (!w->h.dead && (w->events || (got & (LOOP_HANGUP | LOOP_ERROR))))
			w->cb(w->fd, got, w->data);
		/* Told once: a paused watch whose descriptor hung up or failed
		 * would otherwise wake every turn (a pipe whose reader exited,
		 * while its writer waits for the exit). */
		if (!w->h.dead && !w->events && (got & (LOOP_HANGUP | LOOP_ERROR)) && !w->parked) {
			epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
			w->parked = true;
		}
	}
	for (struct loop_watch *w = loop->watches; w; w = w->next)
		if (!w->h.dead && w->always_ready && w->events)
			w->cb(w->fd, w->events, w->data);
	fire_timers(loop);
}

int loop_run(struct loop *loop)
{
	loop->quit = false;
	for (;;) {
		int64_t next_timer;
		bool ready_now;
		sweep(loop);
		if (loop->quit || !has_work(loop, &next_timer, &ready_now))
			return 0;
		int64_t now = loop_now_ms();
		int wait = -1;
		if (ready_now || next_timer <= now)
			wait = 0;
		else if (next_timer != INT64_MAX)
			wait = next_timer - now > INT_MAX ? INT_MAX : (int)(next_timer - now);

		struct epoll_event events[32];
		int n = epoll_wait(loop->epoll_fd, events, 32, wait);
		if (n < 0 && errno != EINTR)
			return -1;
		loop->turning++;
		dispatch(loop, events, n < 0 ? 0 : n);
		loop->turning--;
		/* The turn's end: objects freed from inside its callbacks go
		 * now, when nothing up the stack can hold them. */
		if (!loop->turning)
			run_deferred(loop);
	}
}

/* ---- queues ----------------------------------------------------------- */

struct queue {
	struct loop_scope scope;
	struct loop_watch *watch;
	int fd;
	char *data;
	size_t head, len, limit;
	bool closing, closed, failed;
	queue_callback *on_drained, *on_error;
	void *cb_data;
};

static void queue_finish(struct queue *q)
{
	loop_scope_end(&q->scope);
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	q->closed = true;
}

static void queue_write_some(struct queue *q)
{
	bool was_full = q->len >= q->limit, wrote = q->len > 0;
	while (q->len > 0) {
		ssize_t n = write(q->fd, q->data + q->head, q->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			int saved = errno;
			q->failed = true;
			q->len = 0;
			queue_finish(q);
			errno = saved;
			if (q->on_error)
				q->on_error(q, q->cb_data);
			return;
		}
		q->head += (size_t)n;
		q->len -= (size_t)n;
	}
	if (q->len == 0)
		q->head = 0;
	if (q->watch)
		loop_watch_events(q->watch, q->len ? LOOP_WRITE : 0);
	if (q->len == 0 && q->closing && !q->closed) {
		queue_finish(q);
		if (q->on_drained)
			q->on_drained(q, q->cb_data);
		return;
	}
	if (((was_full && q->len < q->limit) || (wrote && q->len == 0)) && q->on_drained)
		q->on_drained(q, q->cb_data);
}

static void queue_writable(int fd, unsigned events, void *data)
{
	queue_write_some(data);
}

struct queue *queue_new(struct loop *loop, int fd, size_t limit, queue_callback *on_drained,
		queue_callback *on_error, void *data)
{
	struct queue *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	*q = (struct queue){.fd = fd, .limit = limit, .on_drained = on_drained,
		.on_error = on_error, .cb_data = data};
	q->data = malloc(limit ? limit : 1);
	if (!q->data)
		abort();
	loop_scope_init(&q->scope, loop, "a queue");
	if (loop_watch(&q->scope, &q->watch, fd, 0, queue_writable, q) < 0) {
		free(q->data);
		free(q);
		return NULL;
	}
	return q;
}

size_t queue_room(const struct queue *q)
{
	return q->closed || q->closing || q->failed ? 0 : q->limit - q->len;
}

size_t queue_pending(const struct queue *q)
{
	return q->len;
}

size_t queue_put(struct queue *q, const void *bytes, size_t len)
{
	size_t room = queue_room(q);
	if (len > room)
		len = room;
	if (len == 0)
		return 0;
	if (q->head + q->len + len > q->limit) {
		memmove(q->data, q->data + q->head, q->len);
		q->head = 0;
	}
	memcpy(q->data + q->head + q->len, bytes, len);
	q->len += len;
	loop_watch_events(q->watch, LOOP_WRITE);
	return len;
}

void queue_put_all(struct queue *q, const void *bytes, size_t len)
{
	if (q->closed || q->closing || q->failed || len == 0)
		return;
	if (q->len + len > q->limit) {
		memmove(q->data, q->data + q->head, q->len);
		q->head = 0;
		char *bigger = realloc(q->data, q->len + len);
		if (!bigger)
			abort();
		q->data = bigger;
		q->limit = q->len + len;
	}
	queue_put(q, bytes, len);
}

void queue_close_when_empty(struct queue *q)
{
	if (q->closed || q->closing)
		return;
	q->closing = true;
	/* Done on the next turn, never from inside the caller's own call. */
	loop_watch_events(q->watch, LOOP_WRITE);
}

bool queue_closed(const struct queue *q)
{
	return q->closed;
}

void queue_flush_now(struct queue *q)
{
	if (!q->closed && q->len)
		queue_write_some(q);
}

void queue_free(struct queue *q)
{
	if (!q)
		return;
	if (!q->closed)
		queue_finish(q);
	free(q->data);
	free(q);
}

int reopen_nonblocking(int fd, int flags)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -1;
	flags |= O_NONBLOCK | O_CLOEXEC;
	if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		int reopened = open(path, flags | O_NOCTTY);
		if (reopened >= 0)
			return reopened;
	}
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return -1;
	/* A socket (Node gives its children socket pairs) cannot be reopened;
	 * its end is the child's own, so its flag is ours to set. Regular files
	 * and /dev/null never block and need nothing. */
	if (S_ISSOCK(st.st_mode)) {
		int fl = fcntl(copy, F_GETFL);
		if (fl >= 0)
			fcntl(copy, F_SETFL, fl | O_NONBLOCK);
	}
	return copy;
}

void write_what_fits(int fd, const void *bytes, size_t len)
{
	for (size_t done = 0; fd >= 0 && done < len;) {
		ssize_t n = write(fd, (const char *)bytes + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		done += (size_t)n;
	}
}

int loop_watch_stop_signals(struct loop_scope *scope, struct loop_watch **slot,
		bool keep_ignored, int *fd, loop_fd_callback *cb, void *data)
{
	static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
		struct sigaction old;
		if (keep_ignored && sigaction(stop_signals[i], NULL, &old) == 0 &&
		    old.sa_handler == SIG_IGN)
			continue;
		sigaddset(&set, stop_signals[i]);
	}
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	*fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (*fd < 0)
		return -1;
	return loop_watch(scope, slot, *fd, LOOP_READ, cb, data);
}
