/* loop.h: the one event loop: file descriptors with callbacks, timers on
 * CLOCK_MONOTONIC, and bounded output queues drained when writable. */
#ifndef SAGE_SANDBOX_LOOP_H
#define SAGE_SANDBOX_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;
struct loop_watch;
struct loop_timer;
struct loop_handle;

/* events: LOOP_READ and/or LOOP_WRITE, plus LOOP_HANGUP or LOOP_ERROR as
 * the kernel reported them. */
enum { LOOP_READ = 1, LOOP_WRITE = 2, LOOP_HANGUP = 4, LOOP_ERROR = 8 };

typedef void loop_fd_callback(int fd, unsigned events, void *data);
typedef void loop_timer_callback(void *data);

int64_t loop_now_ms(void);

struct loop *loop_new(void);
/* Frees the loop, after running what loop_release() deferred. Every scope
 * must have ended: a timer or watch still held is a callback that would
 * outlive its owner, reported on stderr, and an abort where loop_strict is
 * set (the sanitizer build and the unit tests). */
void loop_free(struct loop *loop);
extern bool loop_strict;

/* How a callback can never outlive its object (issue 32's rules):
 *
 * - Every timer and watch lives in a slot, a field of its owner, and
 *   belongs to the owner's scope. Arming a slot cancels what it held; the
 *   loop clears a timer's slot before it calls back, and an unwatch clears
 *   the watch's slot, so a slot is never a dangling pointer.
 * - The owner's free function ends its scope: every timer and watch still
 *   held is released there, in one place, and no callback of the scope
 *   runs after it. A scope that is never ended shows in loop_free().
 * - A watch works on the loop's own duplicate of the descriptor, closed on
 *   unwatch: the caller may close its descriptor in any order, and epoll
 *   never reports a descriptor whose watch is gone (a closed fd whose file
 *   lives on through another descriptor stays in epoll otherwise).
 * - An object freed from inside a callback is freed at the end of the
 *   loop's turn (loop_release()), after every caller up the stack has
 *   returned.
 * - "Later" is a timer at 0: it runs after the current callback returns,
 *   never inside the call that asked for it. */
struct loop_scope {
	struct loop *loop;
	struct loop_handle *handles; /* live ones only */
	const char *owner;           /* named in loop_free()'s report */
};

void loop_scope_init(struct loop_scope *scope, struct loop *loop, const char *owner);
/* Releases every timer and watch of the scope (their slots cleared, the
 * watches' duplicates closed). Idempotent; a scope never begun (all zero)
 * is fine. */
void loop_scope_end(struct loop_scope *scope);

/* Arms the timer of *slot to call back once at `when` (loop_now_ms()
 * clock; 0 or a past time: on the loop's next look at its timers, never
 * inside this call). What the slot held is cancelled first. */
void loop_timer_arm(struct loop_scope *scope, struct loop_timer **slot, int64_t when,
		loop_timer_callback *cb, void *data);
/* Cancels the timer of *slot, if any, and clears the slot. Safe from
 * inside any callback, its own included. */
void loop_timer_cancel(struct loop_timer **slot);
bool loop_timer_armed(struct loop_timer *const *slot);

/* Watches fd (through a duplicate of the loop's own) for events, calling
 * back with that duplicate. A descriptor that epoll cannot watch (a
 * regular file, /dev/null) never blocks, so it is reported ready on every
 * turn while events are asked for. What *slot held is unwatched first.
 * 0, or -1 with errno and the slot cleared. The caller keeps owning fd. */
int loop_watch(struct loop_scope *scope, struct loop_watch **slot, int fd, unsigned events,
		loop_fd_callback *cb, void *data);
/* Changes the events asked for; 0 pauses the watch (backpressure). A
 * paused watch hears of a hangup or error once, not on every turn. A
 * NULL watch is ignored. */
void loop_watch_events(struct loop_watch *w, unsigned events);
/* Stops watching *slot, closes the loop's duplicate and clears the slot:
 * safe from inside any callback, the watch's own included. */
void loop_unwatch(struct loop_watch **slot);

/* Frees obj with destroy(obj) at the end of the loop's current turn, or at
 * once outside loop_run(): for an object whose free is asked for from
 * inside a callback while callers up the stack may still hold it. */
void loop_release(struct loop *loop, void (*destroy)(void *), void *obj);

/* SIGINT, SIGTERM and SIGHUP as events: blocked, and delivered through a
 * signalfd (*fd, the caller's to close) for which cb is called; it reads a
 * struct signalfd_siginfo. keep_ignored: a signal the caller ignores
 * (nohup, a background job) stays ignored. -1 with errno on failure. */
int loop_watch_stop_signals(struct loop_scope *scope, struct loop_watch **slot,
		bool keep_ignored, int *fd, loop_fd_callback *cb, void *data);

/* Turns until loop_quit() or until nothing is watched and no timer is set.
 * Returns 0, or -1 with errno when epoll itself failed: never reported as
 * success. */
int loop_run(struct loop *loop);
void loop_quit(struct loop *loop);

/* A bounded queue of bytes for one non-blocking descriptor, drained by the
 * loop when the descriptor is writable. Nothing is ever written with a
 * blocking call: a reader that stops reading fills the queue, and then the
 * producer is told to wait (queue_room() is 0) while every other source and
 * every timer keeps running. */
struct queue;
typedef void queue_callback(struct queue *q, void *data);

/* The queue owns fd and closes it (queue_free() ends its watch).
 * on_drained: the queue went from full to having room, or became empty, or
 * closed after queue_close_when_empty(); on_error: a write failed (errno
 * set; EPIPE for a closed reader). */
struct queue *queue_new(struct loop *loop, int fd, size_t limit, queue_callback *on_drained,
		queue_callback *on_error, void *data);
/* Bytes that may still be queued. */
size_t queue_room(const struct queue *q);
size_t queue_pending(const struct queue *q);
/* Queues at most queue_room() bytes; returns how many were taken. */
size_t queue_put(struct queue *q, const void *bytes, size_t len);
/* Queues all of it, past the limit if need be: for a last message whose
 * size the caller has bounded (a result object). */
void queue_put_all(struct queue *q, const void *bytes, size_t len);
/* After everything queued is written, closes the descriptor and calls
 * on_drained once more. */
void queue_close_when_empty(struct queue *q);
bool queue_closed(const struct queue *q);
/* Writes what it can without blocking, once: for a last attempt. */
void queue_flush_now(struct queue *q);
void queue_free(struct queue *q);

/* A descriptor that refers to the same file as fd but has its own
 * O_NONBLOCK flag, so that inherited stdin and stdout (shared with the
 * caller's shell) are never switched to non-blocking under it. Pipes,
 * FIFOs and terminals are reopened through /proc/self/fd; anything else
 * is duplicated (regular files and /dev/null never block). -1 on error. */
int reopen_nonblocking(int fd, int flags);
/* Writes bytes to fd until they are all out, or until a write would block
 * or fails: on a non-blocking descriptor whose reader does not read, the
 * rest is lost rather than waited for. */
void write_what_fits(int fd, const void *bytes, size_t len);

#endif
