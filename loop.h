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

/* events: LOOP_READ and/or LOOP_WRITE, plus LOOP_HANGUP or LOOP_ERROR as
 * the kernel reported them. */
enum { LOOP_READ = 1, LOOP_WRITE = 2, LOOP_HANGUP = 4, LOOP_ERROR = 8 };

typedef void loop_fd_callback(struct loop_watch *w, int fd, unsigned events, void *data);
typedef void loop_timer_callback(struct loop_timer *t, void *data);

int64_t loop_now_ms(void);

struct loop *loop_new(void);
/* Frees the loop; every watch and timer must be gone already. */
void loop_free(struct loop *loop);

/* Calls back when fd is ready for the events asked for. A descriptor that
 * epoll cannot watch (a regular file, /dev/null) never blocks, so it is
 * reported ready on every turn while events are asked for. NULL with errno
 * on failure. The caller keeps owning fd. */
struct loop_watch *loop_watch(struct loop *loop, int fd, unsigned events, loop_fd_callback *cb,
		void *data);
/* Changes the events asked for; 0 pauses the watch (backpressure). A
 * paused watch hears of a hangup or error once, not on every turn. */
void loop_watch_events(struct loop_watch *w, unsigned events);
/* Stops watching: safe from inside any callback, even w's own. */
void loop_unwatch(struct loop_watch *w);

/* SIGINT, SIGTERM and SIGHUP as events: blocked, and delivered through a
 * signalfd (*fd, the caller's to close) for which cb is called; it reads a
 * struct signalfd_siginfo. keep_ignored: a signal the caller ignores
 * (nohup, a background job) stays ignored. NULL with errno on failure. */
struct loop_watch *loop_watch_stop_signals(struct loop *loop, bool keep_ignored, int *fd,
		loop_fd_callback *cb, void *data);

/* Calls back once at `when` (loop_now_ms() clock). */
struct loop_timer *loop_timer(struct loop *loop, int64_t when, loop_timer_callback *cb,
		void *data);
/* Safe from inside any callback, even t's own; NULL is ignored. */
void loop_timer_cancel(struct loop_timer *t);

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

/* The queue owns fd and closes it. on_drained: the queue went from full to
 * having room, or became empty, or closed after queue_close_when_empty(); on_error: a write
 * failed (errno set; EPIPE for a closed reader). */
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

#endif
