/* unit-loop.c: the event loop and the process module on plain /bin/sh
 * children, as TAP: fast, no podman. Each case is a defect of the old loop
 * or a promise of the new one. */
#include "loop.h"
#include "process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int test_number, failures;

static void check(bool ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++test_number, what);
	if (!ok)
		failures++;
}

static char *const no_env[] = {"PATH=/usr/bin:/bin", NULL};

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int sh(const char *script, int timeout_ms, struct capture *cap)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	return capture_command(argv, no_env, timeout_ms, cap);
}

static void quit_after(struct loop_timer *t, void *data)
{
	loop_quit(data);
}

/* ---- the child never reads its stdin ------------------------------------ */

struct exit_seen {
	struct loop *loop;
	int status;
	bool seen;
	bool input_failed;
};

static void note_exit(struct process *p, int status, void *data)
{
	struct exit_seen *e = data;
	e->status = status;
	e->seen = true;
	loop_quit(e->loop);
}

static void note_input_error(struct queue *q, void *data)
{
	((struct exit_seen *)data)->input_failed = true;
}

static void child_never_reads_stdin(void)
{
	struct loop *loop = loop_new();
	struct exit_seen seen = {.loop = loop};
	char *argv[] = {"/bin/sh", "-c", "sleep 0.2; exit 4", NULL};
	struct process p;
	struct process_spec spec = {.argv = argv, .envp = no_env, .pipe_stdin = true,
		.pass_fd = -1, .on_exit = note_exit, .data = &seen};
	check(process_spawn(loop, &p, &spec) == 0, "spawn a child that never reads stdin");
	size_t big = 4 << 20;
	char *input = calloc(1, big);
	struct queue *q = queue_new(loop, p.stdin_fd, big, NULL, note_input_error, &seen);
	p.stdin_fd = -1;
	check(queue_put(q, input, big) == big, "4 MiB queued for it without blocking");
	queue_close_when_empty(q);
	int64_t start = loop_now_ms();
	struct loop_timer *t = loop_timer(loop, start + 5000, quit_after, loop);
	while (!seen.seen && loop_now_ms() - start < 5000)
		loop_run(loop);
	check(seen.seen && seen.status == 4, "its exit status 4 arrives although its stdin is full");
	check(loop_now_ms() - start < 2000, "within 2 s, not at a deadline");
	/* Its end of the pipe is gone: the queue learns it from a write. */
	while (!seen.input_failed && loop_now_ms() - start < 5000) {
		loop_timer_cancel(t);
		t = loop_timer(loop, loop_now_ms() + 100, quit_after, loop);
		loop_run(loop);
	}
	check(seen.input_failed, "the unread input ends in EPIPE, not a hang");
	loop_timer_cancel(t);
	queue_free(q);
	process_release(&p);
	free(input);
	loop_free(loop);
}

/* ---- floods, grandchildren, signals -------------------------------------- */

static void flood(void)
{
	struct capture cap;
	int64_t start = loop_now_ms();
	sh("head -c 10000000 /dev/zero; echo err >&2; exit 0", 10000, &cap);
	check(cap.status == 0 && !cap.timed_out, "a flooding child runs to its end");
	check(cap.out.len == 64 * 1024 && cap.err.len == 4, "64 KiB of its flood kept, stderr apart");
	check(loop_now_ms() - start < 5000, "the flood is read, not waited on");
	capture_free(&cap);
}

static void grandchild_holds_pipe(void)
{
	struct capture cap;
	int64_t start = loop_now_ms();
	sh("(sleep 6) & echo hi; exit 3", 20000, &cap);
	int64_t took = loop_now_ms() - start;
	check(cap.status == 3, "a child that exits while a grandchild holds its stdout: status 3");
	check(!cap.timed_out, "... is not reported as timed out");
	check(cap.out.data && strcmp(cap.out.data, "hi\n") == 0, "... and what it printed is kept");
	check(took < 3000, "... and its end is not held up by the grandchild");
	capture_free(&cap);
}

static void ignores_sigterm(void)
{
	struct loop *loop = loop_new();
	struct exit_seen seen = {.loop = loop};
	char *argv[] = {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done", NULL};
	struct process p;
	struct process_spec spec = {.argv = argv, .envp = no_env, .pass_fd = -1,
		.on_exit = note_exit, .data = &seen};
	process_spawn(loop, &p, &spec);
	usleep(100000);
	check(process_signal(&p, SIGTERM) == 0, "SIGTERM sent through the pidfd");
	struct loop_timer *t = loop_timer(loop, loop_now_ms() + 300, quit_after, loop);
	loop_run(loop);
	check(!seen.seen, "a child that ignores SIGTERM is still running");
	loop_timer_cancel(t);
	process_signal(&p, SIGKILL);
	t = loop_timer(loop, loop_now_ms() + 5000, quit_after, loop);
	while (!seen.seen)
		if (loop_run(loop) < 0 || !t)
			break;
	check(seen.seen && seen.status == 128 + SIGKILL, "SIGKILL ends it: status 137");
	check(process_signal(&p, SIGKILL) < 0 && errno == ESRCH,
		"once reaped, no signal goes out (never to a reused pid)");
	loop_timer_cancel(t);
	process_release(&p);
	loop_free(loop);
}

static void sigchld_ignored(void)
{
	struct capture cap;
	struct rusage before, after;
	signal(SIGCHLD, SIG_IGN);
	getrusage(RUSAGE_SELF, &before);
	int64_t start = loop_now_ms();
	sh("exit 0", 5000, &cap);
	int64_t took = loop_now_ms() - start;
	getrusage(RUSAGE_SELF, &after);
	long cpu_ms = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000 +
		(after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1000;
	signal(SIGCHLD, SIG_DFL);
	check(took < 2000 && cpu_ms < 500, "SIGCHLD ignored by the caller: no spin, no hang");
	check(cap.status == -1 || cap.status == 0, "... the child's end is reported all the same");
	capture_free(&cap);
}

/* ---- exec errors and leaks ------------------------------------------------ */

static void exec_failure(void)
{
	struct capture cap;
	char *missing[] = {"/nonexistent/podman", NULL};
	check(capture_command(missing, no_env, 5000, &cap) < 0 && cap.exec_errno == ENOENT,
		"a program that cannot be executed is an exec error (ENOENT), not a status");
	capture_free(&cap);
	char *not_exec[] = {"/etc/passwd", NULL};
	check(capture_command(not_exec, no_env, 5000, &cap) < 0 && cap.exec_errno == EACCES,
		"... EACCES for a file that is not executable");
	capture_free(&cap);
	sh("exit 127", 5000, &cap);
	check(cap.status == 127 && cap.exec_errno == 0,
		"a program that runs and exits 127 is a status 127, not an exec error");
	capture_free(&cap);
}

static void no_fd_leak_when_spawn_fails(void)
{
	struct rlimit old;
	getrlimit(RLIMIT_NOFILE, &old);
	int base = open_fds();
	bool failed_once = false, leaked = false;
	/* Every limit between "no pipe at all" and "everything fits": each
	 * failure point of process_spawn, pidfd_open's included. */
	for (int extra = 0; extra < 14; extra++) {
		struct rlimit lim = {(rlim_t)(base + extra), old.rlim_max};
		struct loop *loop = loop_new();
		struct process p;
		char *argv[] = {"/bin/true", NULL};
		struct process_spec spec = {.argv = argv, .envp = no_env, .pipe_stdin = true,
			.pipe_stdout = true, .pipe_stderr = true, .pass_fd = -1};
		int before = open_fds();
		setrlimit(RLIMIT_NOFILE, &lim);
		int rc = process_spawn(loop, &p, &spec);
		setrlimit(RLIMIT_NOFILE, &old);
		if (rc < 0)
			failed_once = true;
		else
			process_release(&p);
		if (open_fds() != before)
			leaked = true;
		loop_free(loop);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	check(failed_once, "spawn fails under a low descriptor limit");
	check(!leaked, "... and leaves no descriptor open, whichever step failed");
}

/* ---- a reader that stops reading ------------------------------------------ */

struct stalled {
	struct loop *loop;
	bool timer_fired;
};

static void stalled_timer(struct loop_timer *t, void *data)
{
	struct stalled *s = data;
	s->timer_fired = true;
	loop_quit(s->loop);
}

static void stalled_reader(void)
{
	int pipe_fds[2];
	struct stalled s = {.loop = loop_new()};
	pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK);
	struct queue *q = queue_new(s.loop, pipe_fds[1], 1 << 20, NULL, NULL, &s);
	char block[65536] = {0};
	size_t queued = 0;
	for (int i = 0; i < 16; i++)
		queued += queue_put(q, block, sizeof block);
	check(queued == 1 << 20 && queue_room(q) == 0, "a full queue takes no more: the producer waits");
	int64_t start = loop_now_ms();
	loop_timer(s.loop, start + 200, stalled_timer, &s);
	loop_run(s.loop);
	check(s.timer_fired && loop_now_ms() - start < 1000,
		"with nobody reading, the timers still fire on time");
	check(queue_pending(q) > 0, "... and the unread bytes wait in the queue");
	char sink[65536];
	while (read(pipe_fds[0], sink, sizeof sink) > 0)
		;
	loop_timer(s.loop, loop_now_ms() + 100, stalled_timer, &s);
	loop_run(s.loop);
	check(queue_pending(q) < (1u << 20) - 65536, "once the reader reads, the queue drains");
	queue_free(q);
	close(pipe_fds[0]);
	loop_free(s.loop);
}

static void regular_file_never_blocks(void)
{
	char path[] = "/tmp/sage-sandbox-unit-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	struct loop *loop = loop_new();
	struct queue *q = queue_new(loop, fd, 1 << 16, NULL, NULL, NULL);
	check(q != NULL, "a regular file, which epoll cannot watch, still gets a queue");
	queue_put(q, "hello", 5);
	loop_timer(loop, loop_now_ms() + 50, quit_after, loop);
	loop_run(loop);
	check(queue_pending(q) == 0, "... and is written on the next turn");
	char last[100000];
	memset(last, 'j', sizeof last);
	queue_put_all(q, last, sizeof last);
	check(queue_pending(q) == sizeof last, "a last message past the queue's bound is taken whole");
	queue_free(q);
	loop_free(loop);
}

struct hangups {
	struct loop *loop;
	int calls;
};

static void count_hangup(struct loop_watch *w, int fd, unsigned events, void *data)
{
	struct hangups *h = data;
	h->calls++;
}

static void paused_watch_hears_hangup_once(void)
{
	int pipe_fds[2];
	struct hangups h = {.loop = loop_new()};
	pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK);
	struct loop_watch *w = loop_watch(h.loop, pipe_fds[1], 0, count_hangup, &h);
	close(pipe_fds[0]);
	loop_timer(h.loop, loop_now_ms() + 100, quit_after, h.loop);
	loop_run(h.loop);
	check(h.calls == 1, "a paused watch whose reader is gone is told once, no busy turns");
	loop_watch_events(w, LOOP_WRITE);
	loop_timer(h.loop, loop_now_ms() + 50, quit_after, h.loop);
	loop_run(h.loop);
	check(h.calls >= 2, "... and asking for events again hears of the error again");
	loop_unwatch(w);
	close(pipe_fds[1]);
	loop_free(h.loop);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	child_never_reads_stdin();
	flood();
	grandchild_holds_pipe();
	ignores_sigterm();
	sigchld_ignored();
	exec_failure();
	no_fd_leak_when_spawn_fails();
	stalled_reader();
	regular_file_never_blocks();
	paused_watch_hears_hangup_once();
	printf("1..%d\n", test_number);
	return failures ? 1 : 0;
}
