/* oneshot.c: `run` and `self-test` as a front end: one call from start to
 * end on one loop: reading the code, the host check (host.c), the call on
 * a runner (runner.c), the code's stdin and output, signals, and `run`'s
 * words on the result. A run of its own has a loop, descriptors and a
 * runner of its own; the server's runs (server.c) share its loop and its
 * runners, on their clients' descriptors, and end through on_finished.
 *
 * Every stage is a source on the same loop, under the same deadline, which
 * counts from when sage-sandbox started: a FIFO or a stdin that never
 * closes, a podman that hangs, a reader that stops reading our stdout, none
 * of them outlasts --timeout or blocks the signals. */
#include "oneshot.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Output waiting for a slow reader, per stream. The sandbox is paused past
 * half of it; one turn of the sandbox delivers at most 64 KiB, so the
 * queue never has to drop a byte. */
#define SINK_BYTES (512 * 1024)
#define SINK_PAUSE_AT (256 * 1024)
/* After the result, output still queued gets until the deadline, and at
 * least this long. */
#define FLUSH_GRACE_MS 1000

static const char read_hint[] = "name a readable file, or - for standard input";

/* Once: a refusal, the call's end and a late deadline may each arrive
 * after another has finished the run. */
static void run_finished(struct oneshot *o)
{
	if (o->finished)
		return;
	o->finished = true;
	loop_timer_cancel(&o->deadline_timer);
	if (o->on_finished)
		o->on_finished(o);
	else
		loop_quit(o->loop);
}

static int fd_of(const struct oneshot *o, int stdio)
{
	return o->hosting ? o->hosting->fds[stdio] : stdio;
}

static void refuse(struct oneshot *o)
{
	o->failed = true;
	run_finished(o);
}

/* ---- output ------------------------------------------------------------- */

void oneshot_emit(struct oneshot *o, int stream, const char *bytes, size_t len)
{
	/* The live output is within the queue's bound (the sandbox pauses);
	 * the last message, bounded by the output limit, is taken whole. */
	if (o->sink[stream] && !o->mute)
		queue_put_all(o->sink[stream], bytes, len);
}

void oneshot_emit_code_output(struct oneshot *o, int stream, const char *bytes, size_t len,
		bool at_end)
{
	if (!o->escape[stream]) {
		oneshot_emit(o, stream, bytes, len);
		return;
	}
	struct buffer visible = {0};
	terminal_escape(&o->filter[stream], bytes, len, at_end, &visible);
	oneshot_emit(o, stream, visible.data, visible.len);
	buffer_free(&visible);
}

void oneshot_emit_printed(struct oneshot *o, int stream, printer *writer, const void *arg)
{
	size_t size;
	char *text = print_to_memory(writer, arg, &size);
	oneshot_emit(o, stream, text, size);
	free(text);
}

static bool pending_output(const struct oneshot *o);
static void close_at(struct oneshot *o, int64_t when);
static void closing(struct oneshot *o);

static void on_sink_drained(struct queue *q, void *data)
{
	struct oneshot *o = data;
	/* All delivered: close now, not at the deadline. */
	if (o->flushing && !pending_output(o))
		close_at(o, 0);
	if (o->call && queue_pending(o->sink[0]) < SINK_PAUSE_AT &&
	    queue_pending(o->sink[1]) < SINK_PAUSE_AT)
		call_pause_output(o->call, false);
}

static void on_sink_error(struct queue *q, void *data)
{
	struct oneshot *o = data;
	/* Our reader went away (EPIPE): like any filter, stop. */
	if (o->call)
		call_cancel(o->call, SIGPIPE);
}

static void on_call_output(struct call *c, int stream, const char *bytes, size_t len,
		void *data)
{
	struct oneshot *o = data;
	if (!o->stream)
		return;
	oneshot_emit_code_output(o, stream, bytes, len, false);
	if (queue_pending(o->sink[stream]) >= SINK_PAUSE_AT)
		call_pause_output(c, true);
}

/* ---- signals ------------------------------------------------------------ */

/* The first signal (signals.c: a second one exits at once). */
static void on_signal(int sig, void *data)
{
	struct oneshot *o = data;
	oneshot_signal(o, sig);
}

void oneshot_signal(struct oneshot *o, int sig)
{
	if (o->flushing) {
		/* Over, its output still on its way: who wants out does not
		 * wait for a slow reader past the grace, and a client that is
		 * gone (mute) not at all. */
		close_at(o, o->mute ? 0 : loop_now_ms() + FLUSH_GRACE_MS);
		return;
	}
	if (o->signalled || o->finished || o->closing)
		return;
	o->signalled = sig;
	if (o->call) {
		call_cancel(o->call, sig);
		return;
	}
	error_set(&o->err, 128 + sig, NULL, "interrupted by signal %d before the code ran", sig);
	refuse(o);
}

/* ---- the stages --------------------------------------------------------- */

/* The deadline came (or had passed when the host check answered). */
static void time_out(struct oneshot *o)
{
	if (o->finished)
		return;
	if (o->call) {
		/* A started call has its own deadline; one that still waits
		 * for a server's busy sandboxes ends here, nothing run. */
		struct error err;
		error_set(&err, EXIT_TIMEOUT, "raise --timeout, or give the server more sandboxes "
			"(serve --warm N)", "timed out after %ld s waiting for a warm sandbox; "
			"nothing was run", o->cfg->number[SET_TIMEOUT]);
		/* Its on_done, on a later turn, finishes the run. */
		call_refuse_waiting(o->call, &err);
		return;
	}
	/* Reading the code waits for our caller; checking podman, for podman
	 * and the image's probe (a podman that hangs: attack helper 157). */
	const char *hint;
	if (o->code_watch && (!o->file || strcmp(o->file, "-") == 0))
		hint = "close standard input, name a FILE, or raise --timeout";
	else if (o->code_watch)
		hint = "name a FILE that ends (a FIFO ends when its writer closes it), or raise --timeout";
	else if (o->for_status)
		hint = "see podman's answers above, or raise --timeout";
	else
		hint = "see what podman answers with 'sage-sandbox status', or raise --timeout";
	error_set(&o->err, EXIT_TIMEOUT, hint,
		"timed out after %ld s %s; nothing was run", o->cfg->number[SET_TIMEOUT],
		o->code_watch ? "reading the code" : "checking podman");
	refuse(o);
}

static void on_deadline(void *data)
{
	time_out(data);
}

static void on_call_done(struct call *c, void *data)
{
	struct oneshot *o = data;
	o->result = call_result_mutable(c);
	/* The code is gone: nothing more of our stdin is wanted. */
	loop_unwatch(&o->input_watch);
	for (int s = 0; s < 2; s++)
		if (o->stream)
			oneshot_emit_code_output(o, s, NULL, 0, true);
	if (o->result->failed) {
		o->err = o->result->failure;
		o->failed = true;
	}
	run_finished(o);
}

/* ---- the code's stdin ---------------------------------------------------- */

static void end_input(struct oneshot *o)
{
	call_input_end(o->call);
	loop_unwatch(&o->input_watch);
	if (o->input_fd >= 0)
		close(o->input_fd);
	o->input_fd = -1;
}

static void on_input_readable(int fd, unsigned events, void *data)
{
	struct oneshot *o = data;
	char chunk[65536];
	size_t room = call_input_room(o->call);
	ssize_t n;
	if (room == 0) {
		/* The code is not reading: leave the rest in our stdin. */
		loop_watch_events(o->input_watch, 0);
		return;
	}
	while ((n = read(fd, chunk, room < sizeof chunk ? room : sizeof chunk)) < 0 &&
	       errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	/* End of file, or an error: EIO is a background job's terminal. */
	if (n <= 0) {
		end_input(o);
		return;
	}
	call_input(o->call, chunk, (size_t)n);
	if (call_result(o->call)->input_truncated)
		end_input(o);
}

static void on_input_room(struct call *c, void *data)
{
	struct oneshot *o = data;
	loop_watch_events(o->input_watch, LOOP_READ);
}

/* Our stdin, when the code came from a file, is the code's, as with `sage
 * FILE`: streamed through the launcher's channel, never read whole. */
static void relay_input(struct oneshot *o)
{
	/* A background job reading its terminal would be stopped (SIGTTIN);
	 * ignored, the read fails with EIO instead: end of the code's input. */
	if (!o->hosting && isatty(0))
		signal(SIGTTIN, SIG_IGN);
	o->input_fd = reopen_nonblocking(fd_of(o, 0), O_RDONLY);
	if (o->input_fd < 0 ||
	    loop_watch(&o->scope, &o->input_watch, o->input_fd, LOOP_READ, on_input_readable, o) < 0)
		end_input(o);
}

/* The call, on runner (the server's), or on a runner of its own. */
static void start_call(struct oneshot *o, struct runner *runner)
{
	bool from_file = o->file && strcmp(o->file, "-") != 0;
	o->argv = calloc((size_t)o->argc + 1, sizeof *o->argv);
	if (!o->argv)
		abort();
	o->argv[0] = o->file ? o->file : "-";
	for (int i = 0; i < o->argc; i++)
		o->argv[1 + i] = o->args[i];
	if (!runner) {
		struct runner_options ro = {.loop = o->loop, .host = &o->host, .cfg = o->cfg,
			.who = "run", .running_max = 1, .for_status = o->for_status};
		runner = o->runner = runner_new(&ro);
	}
	struct call_spec spec = {.program = {.code = o->code, .code_len = o->code_len,
		.argv = o->argv, .argc = o->argc + 1, .input_follows = from_file,
		.deadline = o->deadline, .in = o->in, .out = o->out,
		.display_last = strcmp(o->cfg->value[SET_DISPLAY], "last") == 0,
		.seeded = o->cfg->number[SET_SEED] >= 0, .seed = (uint32_t)o->cfg->number[SET_SEED]},
		.keep_output = !o->stream, .on_output = on_call_output,
		.on_input_room = on_input_room, .on_done = on_call_done, .data = o};
	/* Its on_done comes on a later turn, a refusal's too: the call is
	 * ours to feed until then, and a refused one takes nothing. */
	o->call = runner_submit(runner, &spec);
	if (from_file)
		relay_input(o);
}

static void on_host(struct host *h, void *data)
{
	struct oneshot *o = data;
	if (o->finished)
		return;
	/* A run whose deadline passed while podman was asked, or had passed
	 * before it began (a client's start time long gone), runs nothing. */
	if (loop_now_ms() >= o->deadline) {
		time_out(o);
	} else if (h->refusal.status) {
		o->err = h->refusal;
		refuse(o);
	} else {
		if (o->code_for_host)
			o->code_for_host(o, &h->podman_host);
		start_call(o, o->hosting ?
				o->hosting->runner_for(o->hosting->owner, o->cfg, h) : NULL);
	}
}

static const char *code_origin(const struct oneshot *o)
{
	return o->file && strcmp(o->file, "-") != 0 ? o->file : "standard input";
}

static void check_host(struct oneshot *o)
{
	if (o->code && sandbox_check_code(o->code, o->code_len, code_origin(o), &o->err) < 0) {
		refuse(o);
		return;
	}
	host_check(o->loop, &o->host_check, o->cfg, o->deadline, true, &o->host, on_host, o);
}

/* Reads what is there; at the end (or past the size limit) goes on. */
static void on_code_readable(int fd, unsigned events, void *data)
{
	struct oneshot *o = data;
	char chunk[65536];
	ssize_t n;
	/* One read a turn: a file that never blocks still lets the loop turn. */
	while ((n = read(fd, chunk, sizeof chunk)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		error_set(&o->err, EXIT_REFUSED, read_hint, "cannot read %s: %s", code_origin(o),
			strerror(errno));
		loop_unwatch(&o->code_watch);
		refuse(o);
		return;
	}
	if (n > 0) {
		size_t room = MAX_CODE_BYTES + 1 - o->code_read.len;
		buffer_append(&o->code_read, chunk, (size_t)n < room ? (size_t)n : room);
		if (o->code_read.len <= MAX_CODE_BYTES)
			return;
	}
	/* End of file, or one byte too many: enough to decide. */
	loop_unwatch(&o->code_watch);
	if (!o->code_read.data)
		buffer_append(&o->code_read, "", 0);
	o->code = o->code_read.data;
	o->code_len = o->code_read.len;
	check_host(o);
}

int open_code_file(const char *file, int *fd, struct error *err)
{
	/* O_NONBLOCK: opening a FIFO with no writer yet must not block before
	 * the loop (and its deadline) runs. */
	*fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (*fd < 0) {
		error_set(err, EXIT_REFUSED, read_hint, "cannot open %s: %s", file, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(*fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		error_set(err, EXIT_REFUSED, read_hint, "cannot read %s: %s", file,
			S_ISDIR(st.st_mode) ? strerror(EISDIR) : strerror(errno));
		close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

static void read_code(struct oneshot *o)
{
	bool from_stdin = !o->file || strcmp(o->file, "-") == 0;
	/* A reopened descriptor of our own (stdin's flags are not ours to
	 * change), or the FILE the caller opened. */
	o->code_read_fd = from_stdin ? reopen_nonblocking(fd_of(o, 0), O_RDONLY) :
		fcntl(o->code_fd, F_DUPFD_CLOEXEC, 3);
	struct stat st;
	if (o->code_read_fd < 0 || fstat(o->code_read_fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		error_set(&o->err, EXIT_REFUSED, read_hint, "cannot read %s: %s", code_origin(o),
			o->code_read_fd >= 0 && S_ISDIR(st.st_mode) ? strerror(EISDIR) :
			strerror(errno));
		refuse(o);
		return;
	}
	if (loop_watch(&o->scope, &o->code_watch, o->code_read_fd, LOOP_READ, on_code_readable,
			o) < 0) {
		error_set(&o->err, EXIT_REFUSED, read_hint, "cannot read %s: %s", code_origin(o),
			strerror(errno));
		refuse(o);
	}
}

/* ---- the whole ----------------------------------------------------------- */

/* Whether the code's standard output and error land in one place (2>&1,
 * one terminal): the same pipe or device, or, for a file, the same open
 * file (its offset shared) or two that both append (a file opened twice
 * at its own offsets is written as two). */
static bool one_destination(int out, int err)
{
	struct stat a, b;
	if (fstat(out, &a) < 0 || fstat(err, &b) < 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return false;
	if (!S_ISREG(a.st_mode))
		return true;
	/* Two opens of the file, both appending (>>f 2>>f): each write lands
	 * at its end, in the order made, as through one (review helper 158). */
	int out_flags = fcntl(out, F_GETFL), err_flags = fcntl(err, F_GETFL);
	if (out_flags >= 0 && err_flags >= 0 && (out_flags & err_flags & O_APPEND))
		return true;
	pid_t self = getpid();
	return syscall(SYS_kcmp, self, self, KCMP_FILE, out, err) == 0;
}

int oneshot_begin(struct oneshot *o)
{
	o->code_read_fd = -1;
	o->input_fd = -1;
	o->loop = o->hosting ? o->hosting->loop : loop_new();
	if (!o->loop) {
		error_set(&o->err, EXIT_REFUSED, NULL, "cannot create an event loop: %s",
			strerror(errno));
		return -1;
	}
	loop_scope_init(&o->scope, o->loop, "a run");
	for (int s = 0; s < 2; s++) {
		o->escape[s] = !o->show_control_chars && isatty(fd_of(o, 1 + s));
		if (s == 1 && one_destination(fd_of(o, 1), fd_of(o, 2))) {
			/* One queue for both: each drains as its descriptor turns
			 * writable, which epoll reports in no set order, and a
			 * "main" printed before sys.exit()'s "3" came after it in
			 * 2>&1 one time in two (attack helper 154). */
			o->sink[1] = o->sink[0];
			break;
		}
		int fd = reopen_nonblocking(fd_of(o, 1 + s), O_WRONLY);
		o->sink[s] = fd < 0 ? NULL :
			queue_new(o->loop, fd, SINK_BYTES, on_sink_drained, s == 0 ? on_sink_error : NULL, o);
		if (!o->sink[s]) {
			if (fd >= 0)
				close(fd);
			error_set(&o->err, EXIT_REFUSED, NULL, "cannot use %s: %s",
				s ? "standard error" : "standard output", strerror(errno));
			return -1;
		}
	}
	if (o->hosting)
		return 0; /* the server forwards its client's signals */
	/* A signal the caller ignores (nohup, a background job) stays
	 * ignored: that was the caller's choice. */
	o->signals = stop_signals_watch(o->loop, true, on_signal, o, &o->err);
	return o->signals ? 0 : -1;
}

void oneshot_start(struct oneshot *o)
{
	o->deadline = o->started_at + o->cfg->number[SET_TIMEOUT] * 1000;
	loop_timer_arm(&o->scope, &o->deadline_timer, o->deadline, on_deadline, o);
	if (o->code)
		check_host(o);
	else
		read_code(o);
}

int oneshot_run(struct oneshot *o)
{
	oneshot_start(o);
	while (!o->finished) {
		if (loop_run(o->loop) < 0) {
			error_set(&o->err, EXIT_REFUSED, NULL, "the event loop failed: %s",
				strerror(errno));
			o->failed = true;
			break;
		}
	}
	return o->failed ? -1 : 0;
}

int oneshot_report_run(struct oneshot *o, bool json)
{
	if (o->failed) {
		struct printed p = {.err = &o->err, .cfg = o->cfg};
		oneshot_emit_printed(o, 1, print_error_line, &p);
		if (json)
			oneshot_emit_printed(o, 0, print_error_object, &p);
		return o->err.status;
	}
	struct printed p = {.result = o->result, .cfg = o->cfg};
	if (o->file && strcmp(o->file, "-") != 0)
		o->result->file = o->file;
	/* A run is worded as the run of its own it stands for, byte for byte,
	 * also where the server's container serves the next run after it:
	 * of the run, nothing is left either way. */
	o->result->after = AFTER_ENDS;
	if (!json && o->out)
		oneshot_emit_printed(o, 1, print_files_lines, &p);
	oneshot_emit_printed(o, json ? 0 : 1, json ? print_run_object : print_stop_line, &p);
	return o->result->exit_code;
}

static bool pending_output(const struct oneshot *o)
{
	for (int s = 0; s < 2; s++)
		if (o->sink[s] && queue_pending(o->sink[s]))
			return true;
	return false;
}

/* The one place where everything the run holds goes: its watches and
 * timers (its scope), the signals, the queues with what they still hold,
 * the call, a runner of its own, its descriptors. */
static void release(struct oneshot *o)
{
	if (o->released)
		return;
	o->released = true;
	o->flushing = false;
	loop_scope_end(&o->scope);
	/* A check still asking podman is cancelled: it would write into
	 * o->host. */
	host_check_cancel(&o->host_check);
	stop_signals_free(o->signals);
	o->signals = NULL;
	if (o->sink[1] != o->sink[0])
		queue_free(o->sink[1]);
	queue_free(o->sink[0]);
	o->sink[0] = o->sink[1] = NULL;
	o->result = NULL;
	call_free(o->call);
	o->call = NULL;
	/* A run of its own does not wait for its container to exit and be
	 * removed (about 0.1 s): the result is complete at the launcher's
	 * exit frame, and conmon removes the container (podman run --rm)
	 * whether or not we are still there. A stopped run's container is
	 * already gone. */
	runner_free(o->runner);
	o->runner = NULL;
	free(o->argv);
	o->argv = NULL;
	if (o->code_read_fd >= 0)
		close(o->code_read_fd);
	if (o->input_fd >= 0)
		close(o->input_fd);
	o->code_read_fd = o->input_fd = -1;
	buffer_free(&o->code_read);
}

/* Delivered, or out of time: everything goes, and the owner hears of it. */
static void closing(struct oneshot *o)
{
	o->flushing = false;
	loop_timer_cancel(&o->close_timer);
	release(o);
	o->closed(o);
}

static void on_close_timer(void *data)
{
	closing(data);
}

/* The flush ends at when, or sooner: never later than already set. */
static void close_at(struct oneshot *o, int64_t when)
{
	if (!o->flushing || (loop_timer_armed(&o->close_timer) && when >= o->close_at))
		return;
	o->close_at = when;
	loop_timer_arm(&o->scope, &o->close_timer, when, on_close_timer, o);
}

void oneshot_close(struct oneshot *o, void (*closed)(struct oneshot *o))
{
	if (o->closing)
		return;
	o->closing = true;
	/* Over, whether or not it finished: nothing later finishes it. */
	o->finished = true;
	/* An interrupted run gets the grace only: the caller wants out. */
	int64_t until = loop_now_ms() + FLUSH_GRACE_MS;
	bool interrupted = o->signalled || (o->result && o->result->interrupted_by);
	if (o->deadline > until && !interrupted)
		until = o->deadline;
	o->closed = closed;
	loop_unwatch(&o->code_watch);
	loop_unwatch(&o->input_watch);
	loop_timer_cancel(&o->deadline_timer);
	/* Deliver what is queued; a reader that stopped reading gets until
	 * the deadline, never forever. Out of the caller's stack either way:
	 * it may be the runner's. */
	o->flushing = true;
	close_at(o, pending_output(o) && !o->mute ? until : 0);
}

static void quit_own_loop(struct oneshot *o)
{
	loop_quit(o->loop);
}

void oneshot_end(struct oneshot *o)
{
	if (o->loop) {
		oneshot_close(o, quit_own_loop);
		/* To the close's end. A loop that failed, or that has nothing
		 * left to wait for, ends it here. */
		loop_run(o->loop);
	}
	release(o);
	if (!o->hosting)
		loop_free(o->loop);
	o->loop = NULL;
}

void oneshot_discard(struct oneshot *o)
{
	release(o);
}
