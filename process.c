/* process.c: spawning and reaping children on the loop.
 *
 * The exec-error pipe is bubblewrap's: a close-on-exec pipe that the child
 * writes errno to only when exec fails, so "podman could not be executed"
 * is never confused with a status 127 of the program. The pidfd is the
 * child's identity from fork to reaping: exits are watched on it and
 * signals are sent through it, so a pid reused by the kernel is never
 * signalled. */
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_pair(int pair[2])
{
	for (int i = 0; i < 2; i++)
		if (pair[i] >= 0)
			close(pair[i]);
	pair[0] = pair[1] = -1;
}

/* The child side of fork: no stdio, no malloc, no exit(): dup2 and exec,
 * or errno down the error pipe and _exit(127) (a cgroup that could not be
 * joined is told the same way). */
static __attribute__((noreturn)) void child_exec(const struct process_spec *spec, int in_fd,
		int out_fd, int err_fd, int error_fd)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* Its own process group: a terminal's ^C reaches sage-sandbox only,
	 * which then stops the container by name (podman would only forward
	 * it). */
	setpgid(0, 0);
	/* "0": the process that writes it. */
	if (spec->join_cgroup) {
		int fd = open(spec->join_cgroup, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			goto fail;
		close(fd);
	}
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		goto fail;
	/* main() keeps 0-2 open, so pass_fd is never one of them. */
	if (spec->pass_fd == 3 ? fcntl(3, F_SETFD, 0) < 0 :
				 spec->pass_fd >= 0 && dup2(spec->pass_fd, 3) < 0)
		goto fail;
	/* Everything else, inherited or ours, closes on exec: the error pipe
	 * too, which is how the parent learns that exec succeeded. */
	if (close_range(spec->pass_fd >= 0 ? 4 : 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		goto fail;
	execve(spec->argv[0], spec->argv, spec->envp);
fail:;
	int e = errno;
	while (write(error_fd, &e, sizeof e) < 0 && errno == EINTR)
		;
	_exit(127);
}

static void on_exit_ready(int fd, unsigned events, void *data)
{
	struct process *p = data;
	siginfo_t info = {0};
	int status;
	if (waitid(P_PIDFD, (id_t)p->pidfd, &info, WEXITED | WNOHANG) < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		/* ECHILD: reaped elsewhere (a SIGCHLD left ignored would do it).
		 * The child is gone all the same: report it, never spin on it. */
		status = -1;
	} else if (info.si_pid == 0) {
		return; /* readable but not yet reapable: wait for the next turn */
	} else if (info.si_code == CLD_EXITED) {
		status = info.si_status;
	} else {
		status = 128 + info.si_status;
	}
	loop_unwatch(&p->exit_watch);
	p->exited = true;
	p->status = status;
	/* Last: on_exit may free the struct p lives in. */
	if (p->on_exit)
		p->on_exit(p, status, p->data);
}

static int set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Long: the child's side between fork and exec is one straight sequence
 * (descriptors, signals, rlimits, the exec-error pipe) that must stay in
 * order and async-signal-safe. */
static void reap_abandoned(void);

int process_spawn(struct loop *loop, struct process *p, const struct process_spec *spec)
{
	reap_abandoned();
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, error_pipe[2] = {-1, -1};
	int null_fd = -1, saved = 0;

	*p = (struct process){.pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
		.stderr_fd = -1, .on_exit = spec->on_exit, .data = spec->data};
	loop_scope_init(&p->scope, loop, "a child process");
	if ((!spec->pipe_stdin || !spec->pipe_stdout || !spec->pipe_stderr) &&
	    (null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		return -1;
	if ((spec->pipe_stdin && pipe2(in, O_CLOEXEC) < 0) ||
	    (spec->pipe_stdout && pipe2(out, O_CLOEXEC) < 0) ||
	    (spec->pipe_stderr && pipe2(err, O_CLOEXEC) < 0) || pipe2(error_pipe, O_CLOEXEC) < 0) {
		saved = errno;
		goto fail;
	}

	pid_t pid = fork();
	if (pid < 0) {
		saved = errno;
		goto fail;
	}
	if (pid == 0)
		child_exec(spec, spec->pipe_stdin ? in[0] : null_fd,
			spec->pipe_stdout ? out[1] : null_fd, spec->pipe_stderr ? err[1] : null_fd,
			error_pipe[1]);
	p->pid = pid;
	/* Until it is reaped the pid cannot be reused, so this pidfd is the
	 * child's. */
	p->pidfd = pidfd_open(pid, 0);
	saved = errno;
	close(error_pipe[1]);
	error_pipe[1] = -1;

	/* Blocks only until exec succeeded (EOF) or failed (errno). */
	int exec_errno = 0;
	ssize_t n;
	while ((n = read(error_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
		;
	if (n == sizeof exec_errno || p->pidfd < 0) {
		/* Not started, or not watchable: either way it must not run on
		 * unwatched. */
		if (n != sizeof exec_errno)
			kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		saved = n == sizeof exec_errno ? exec_errno : saved;
		goto fail;
	}
	close(error_pipe[0]);
	error_pipe[0] = -1;

	if (loop_watch(&p->scope, &p->exit_watch, p->pidfd, LOOP_READ, on_exit_ready, p) < 0) {
		saved = errno;
		pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto fail;
	}
	if (spec->pipe_stdin) {
		p->stdin_fd = in[1];
		close(in[0]);
		set_nonblocking(p->stdin_fd);
	}
	if (spec->pipe_stdout) {
		p->stdout_fd = out[0];
		close(out[1]);
		set_nonblocking(p->stdout_fd);
	}
	if (spec->pipe_stderr) {
		p->stderr_fd = err[0];
		close(err[1]);
		set_nonblocking(p->stderr_fd);
	}
	if (null_fd >= 0)
		close(null_fd);
	return 0;

fail:
	close_pair(in);
	close_pair(out);
	close_pair(err);
	close_pair(error_pipe);
	if (null_fd >= 0)
		close(null_fd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	*p = (struct process){.pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
		.stderr_fd = -1};
	errno = saved;
	return -1;
}

int process_signal(struct process *p, int sig)
{
	if (p->exited || p->pidfd < 0) {
		errno = ESRCH;
		return -1;
	}
	return pidfd_send_signal(p->pidfd, sig, NULL, 0);
}

int process_signal_group(struct process *p, int sig)
{
	if (p->exited || p->pidfd < 0 || p->pid <= 1) {
		errno = ESRCH;
		return -1;
	}
	if (kill(-p->pid, sig) == 0)
		return 0;
	return process_signal(p, sig);
}

/* The one place a process's watch is released and its descriptors closed. */
static void process_close(struct process *p)
{
	loop_scope_end(&p->scope);
	int *fds[] = {&p->pidfd, &p->stdin_fd, &p->stdout_fd, &p->stderr_fd};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

void process_release(struct process *p)
{
	if (p->pidfd >= 0 && !p->exited) {
		process_signal_group(p, SIGKILL);
		siginfo_t info;
		while (waitid(P_PIDFD, (id_t)p->pidfd, &info, WEXITED) < 0 && errno == EINTR)
			;
		p->exited = true;
	}
	process_close(p);
}

/* Children let go of running (process_abandon), by their pidfds: each is
 * reaped once it has ended, at the next spawn or abandon, so that a
 * long-lived server leaves no zombies behind its cancelled checks.
 * Process-wide, like the children themselves. */
static struct {
	int *pidfds;
	size_t count, size;
} abandoned;

static void reap_abandoned(void)
{
	size_t kept = 0;
	for (size_t i = 0; i < abandoned.count; i++) {
		int fd = abandoned.pidfds[i];
		siginfo_t info = {0};
		int rc = waitid(P_PIDFD, (id_t)fd, &info, WEXITED | WNOHANG);
		if (rc == 0 && info.si_pid == 0) {
			abandoned.pidfds[kept++] = fd; /* still running */
			continue;
		}
		close(fd); /* reaped, or by someone else (ECHILD) */
	}
	abandoned.count = kept;
	if (!kept) {
		free(abandoned.pidfds);
		abandoned.pidfds = NULL;
		abandoned.size = 0;
	}
}

void process_abandon(struct process *p)
{
	reap_abandoned();
	if (p->pidfd >= 0 && !p->exited) {
		if (abandoned.count == abandoned.size) {
			size_t size = abandoned.size ? 2 * abandoned.size : 8;
			int *bigger = realloc(abandoned.pidfds, size * sizeof *bigger);
			if (!bigger)
				abort();
			abandoned.pidfds = bigger;
			abandoned.size = size;
		}
		abandoned.pidfds[abandoned.count++] = p->pidfd;
		p->pidfd = -1;
		reap_abandoned(); /* it may have ended already */
	}
	process_close(p);
}

ssize_t read_available(int fd, struct buffer *b, size_t max)
{
	char chunk[65536];
	size_t want = sizeof chunk;
	ssize_t n;
	while ((n = read(fd, chunk, want)) < 0 && errno == EINTR)
		;
	if (n > 0) {
		size_t room = b->len < max ? max - b->len : 0;
		buffer_append(b, chunk, (size_t)n < room ? (size_t)n : room);
	}
	return n;
}

/* ---- captures --------------------------------------------------------- */

#define CAPTURE_MAX (64 * 1024)
/* After the command exits, pipes that a descendant of it still holds get
 * this long: its exit is what the caller waits for, not theirs. */
#define CAPTURE_DRAIN_MS 1000

struct capture_run {
	struct loop_scope scope; /* the pipes' watches and the timer */
	struct capture_run **slot; /* the owner's, or NULL */
	struct process proc;
	struct loop_watch *out_watch, *err_watch;
	struct loop_timer *timer;
	struct capture cap;
	capture_callback *done;
	void *data;
};

/* The one end of a run: its handles released, its child released (killed
 * and reaped if it still runs) or abandoned, the owner's slot cleared. */
static void capture_run_free(struct capture_run *r, bool abandon)
{
	loop_scope_end(&r->scope);
	if (abandon)
		process_abandon(&r->proc);
	else
		process_release(&r->proc);
	if (r->slot)
		*r->slot = NULL;
	free(r);
}

/* Called last by every callback of the run: done may free its owner, and
 * the run is gone before done runs. */
static void capture_maybe_done(struct capture_run *r)
{
	if (!r->proc.exited || r->out_watch || r->err_watch)
		return;
	capture_callback *done = r->done;
	void *data = r->data;
	struct capture cap = r->cap;
	capture_run_free(r, false);
	done(&cap, data);
}

static void capture_stream(struct capture_run *r, int fd, bool is_out)
{
	ssize_t n = read_available(fd, is_out ? &r->cap.out : &r->cap.err, CAPTURE_MAX);
	if (n > 0 || (n < 0 && errno == EAGAIN))
		return;
	loop_unwatch(is_out ? &r->out_watch : &r->err_watch);
	capture_maybe_done(r);
}

static void capture_out(int fd, unsigned events, void *data)
{
	capture_stream(data, fd, true);
}

static void capture_err(int fd, unsigned events, void *data)
{
	capture_stream(data, fd, false);
}

static void capture_timeout(void *data);

static void capture_exit(struct process *p, int status, void *data)
{
	struct capture_run *r = data;
	r->cap.status = status;
	if (r->out_watch || r->err_watch)
		loop_timer_arm(&r->scope, &r->timer, loop_now_ms() + CAPTURE_DRAIN_MS,
			capture_timeout, r);
	capture_maybe_done(r);
}

static void capture_timeout(void *data)
{
	struct capture_run *r = data;
	/* Past its deadline while running: killed. Past the drain after its
	 * exit: its status stands, the pipes are let go. */
	if (!r->proc.exited) {
		r->cap.timed_out = true;
		process_signal_group(&r->proc, SIGKILL);
	}
	/* A descendant may hold the pipes: stop listening to them. */
	loop_unwatch(&r->out_watch);
	loop_unwatch(&r->err_watch);
	capture_maybe_done(r);
}

int capture_start(struct loop *loop, struct capture_run **slot, char *const argv[],
		char *const envp[], int64_t deadline, capture_callback *done, void *data)
{
	struct capture_run *r = calloc(1, sizeof *r);
	if (!r)
		abort();
	struct process_spec spec = {.argv = argv, .envp = envp, .pipe_stdout = true,
		.pipe_stderr = true, .pass_fd = -1, .on_exit = capture_exit, .data = r};
	r->cap.status = -1;
	r->done = done;
	r->data = data;
	loop_scope_init(&r->scope, loop, "a captured command");
	if (process_spawn(loop, &r->proc, &spec) < 0) {
		int saved = errno;
		free(r);
		errno = saved;
		return -1;
	}
	/* Output that cannot be watched could not be captured: the command
	 * is killed, and counts as not started. */
	if (loop_watch(&r->scope, &r->out_watch, r->proc.stdout_fd, LOOP_READ, capture_out, r) < 0 ||
	    loop_watch(&r->scope, &r->err_watch, r->proc.stderr_fd, LOOP_READ, capture_err, r) < 0) {
		int saved = errno;
		capture_run_free(r, false);
		errno = saved;
		return -1;
	}
	loop_timer_arm(&r->scope, &r->timer, deadline, capture_timeout, r);
	if (slot) {
		capture_abandon(slot);
		*slot = r;
		r->slot = slot;
	}
	return 0;
}

void capture_abandon(struct capture_run **slot)
{
	struct capture_run *r = *slot;
	if (!r)
		return;
	capture_free(&r->cap);
	capture_run_free(r, true);
}

struct capture_wait {
	struct loop *loop;
	struct capture_run *run;
	struct capture *cap;
};

static void capture_waited(struct capture *cap, void *data)
{
	struct capture_wait *w = data;
	*w->cap = *cap;
	loop_quit(w->loop);
}

int capture_command(char *const argv[], char *const envp[], int timeout_ms, struct capture *cap)
{
	struct capture_wait w = {.loop = loop_new(), .cap = cap};
	*cap = (struct capture){.status = -1};
	if (!w.loop)
		return -1;
	if (capture_start(w.loop, &w.run, argv, envp, loop_now_ms() + timeout_ms, capture_waited,
		    &w) < 0) {
		cap->exec_errno = errno;
		loop_free(w.loop);
		return -1;
	}
	int rc = loop_run(w.loop);
	/* Only a loop that failed leaves the run unfinished. */
	capture_abandon(&w.run);
	loop_free(w.loop);
	return rc;
}

void capture_free(struct capture *cap)
{
	buffer_free(&cap->out);
	buffer_free(&cap->err);
}
