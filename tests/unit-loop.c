/* unit-loop.c: the event loop and the process module on plain /bin/sh
 * children, as TAP: fast, no podman. Each case is a defect of the old loop
 * or a promise of the new one. */
#include "buffer.h"
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
#include <sys/socket.h>
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

static void quit_after(void *data)
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

/* A child joins spec->join_cgroup before its exec, by writing "0" to it
 * (here a plain file stands for a group's cgroup.procs); one it cannot
 * open is a failed spawn, nothing run. */
static void child_joins_cgroup(void)
{
	struct loop *loop = loop_new();
	char dir[] = "/tmp/unit-loop-XXXXXX", procs[64], marker[64];
	check(mkdtemp(dir) != NULL, "a directory for the group's file");
	snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
	snprintf(marker, sizeof marker, "%s/ran", dir);
	close(open(procs, O_WRONLY | O_CREAT, 0600));
	char *argv[] = {"/bin/sh", "-c", "touch \"$0\"", marker, NULL};
	struct exit_seen seen = {.loop = loop};
	struct process p;
	struct process_spec spec = {.argv = argv, .envp = no_env, .pass_fd = -1,
		.join_cgroup = procs, .on_exit = note_exit, .data = &seen};
	check(process_spawn(loop, &p, &spec) == 0, "spawn a child that joins a group");
	while (!seen.seen)
		loop_run(loop);
	char got[8] = {0};
	int fd = open(procs, O_RDONLY);
	check(read(fd, got, sizeof got - 1) == 1 && strcmp(got, "0") == 0,
		"it wrote \"0\" (itself) to the group's cgroup.procs");
	close(fd);
	check(seen.status == 0 && access(marker, F_OK) == 0, "then ran its program");
	process_release(&p);
	unlink(marker);
	unlink(procs);
	spec.join_cgroup = procs; /* gone now */
	errno = 0;
	check(process_spawn(loop, &p, &spec) < 0 && errno == ENOENT,
		"a group it cannot join: the spawn fails with open's errno");
	check(access(marker, F_OK) < 0, "and its program never ran");
	rmdir(dir);
	loop_free(loop);
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
	struct loop_scope scope;
	struct loop_timer *t = NULL;
	loop_scope_init(&scope, loop, "the test");
	loop_timer_arm(&scope, &t, start + 5000, quit_after, loop);
	while (!seen.seen && loop_now_ms() - start < 5000)
		loop_run(loop);
	check(seen.seen && seen.status == 4, "its exit status 4 arrives although its stdin is full");
	check(loop_now_ms() - start < 2000, "within 2 s, not at a deadline");
	/* Its end of the pipe is gone: the queue learns it from a write. */
	while (!seen.input_failed && loop_now_ms() - start < 5000) {
		loop_timer_arm(&scope, &t, loop_now_ms() + 100, quit_after, loop);
		loop_run(loop);
	}
	check(seen.input_failed, "the unread input ends in EPIPE, not a hang");
	loop_scope_end(&scope);
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
	struct loop_scope scope;
	struct loop_timer *t = NULL;
	loop_scope_init(&scope, loop, "the test");
	loop_timer_arm(&scope, &t, loop_now_ms() + 300, quit_after, loop);
	loop_run(loop);
	check(!seen.seen, "a child that ignores SIGTERM is still running");
	process_signal(&p, SIGKILL);
	loop_timer_arm(&scope, &t, loop_now_ms() + 5000, quit_after, loop);
	while (!seen.seen)
		if (loop_run(loop) < 0 || !t)
			break;
	check(seen.seen && seen.status == 128 + SIGKILL, "SIGKILL ends it: status 137");
	check(process_signal(&p, SIGKILL) < 0 && errno == ESRCH,
		"once reaped, no signal goes out (never to a reused pid)");
	loop_scope_end(&scope);
	process_release(&p);
	loop_free(loop);
}

/* A shell that runs a sleep and waits for it, in the process group
 * process_spawn gives it: the sleep's pid, or 0. The file is written
 * afresh: a pid an earlier shell wrote is never read. */
static int shell_with_child(struct loop *loop, struct process *p, struct exit_seen *seen,
	char *pidfile)
{
	char *argv[] = {"/bin/sh", "-c", "sleep 60 & echo $! >\"$0\"; wait", pidfile, NULL};
	struct process_spec spec = {.argv = argv, .envp = no_env, .pass_fd = -1,
		.on_exit = note_exit, .data = seen};
	unlink(pidfile);
	process_spawn(loop, p, &spec);
	int child = 0;
	char text[256];
	for (int i = 0; i < 100 && child <= 0; i++) {
		usleep(20000);
		child = read_small(AT_FDCWD, pidfile, text, sizeof text) > 0 ? atoi(text) : 0;
	}
	return child > 0 && kill(child, 0) == 0 ? child : 0;
}

/* pid has ended within 2 s: its parent, reparented to init (or a
 * subreaper), reaps it. Killed where it has not. */
static bool ends(int pid)
{
	char stat[64], text[256];
	snprintf(stat, sizeof stat, "/proc/%d/stat", pid);
	for (int i = 0; i < 100; i++) {
		if (read_small(AT_FDCWD, stat, text, sizeof text) < 0 || strstr(text, ") Z "))
			return true;
		usleep(20000);
	}
	kill(pid, SIGKILL);
	return false;
}

/* A program that runs on in a child of its own (as rootless podman does,
 * executing itself again to join its user namespace), the child blocked:
 * a SIGKILL of its group ends both, as its release does; once reaped,
 * nothing goes out. */
static void group_kill(void)
{
	struct loop *loop = loop_new();
	struct exit_seen seen = {.loop = loop};
	char dir[] = "/tmp/unit-group-XXXXXX", pidfile[64];
	check(mkdtemp(dir) != NULL, "group kill: a directory");
	snprintf(pidfile, sizeof pidfile, "%s/child", dir);
	struct process p;
	int child = shell_with_child(loop, &p, &seen, pidfile);
	check(child > 0, "group kill: the child runs");
	check(process_signal_group(&p, SIGKILL) == 0, "group kill: sent to the group");
	struct loop_scope scope;
	struct loop_timer *t = NULL;
	loop_scope_init(&scope, loop, "the test");
	loop_timer_arm(&scope, &t, loop_now_ms() + 5000, quit_after, loop);
	while (!seen.seen)
		if (loop_run(loop) < 0 || !t)
			break;
	check(seen.seen && seen.status == 128 + SIGKILL && child > 0 && ends(child),
		"group kill: the program and the child it runs on in both end");
	check(process_signal_group(&p, SIGKILL) < 0 && errno == ESRCH,
		"group kill: once reaped, no signal goes out");
	loop_scope_end(&scope);
	process_release(&p);
	/* Released while it runs: its group ends with it. */
	child = shell_with_child(loop, &p, &seen, pidfile);
	check(child > 0, "release: the child runs");
	process_release(&p);
	check(child > 0 && ends(child), "release: the program and the child it runs on in both end");
	unlink(pidfile);
	rmdir(dir);
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
	struct loop_scope scope;
	struct loop_timer *timer;
	bool timer_fired;
};

static void stalled_timer(void *data)
{
	struct stalled *s = data;
	s->timer_fired = true;
	loop_quit(s->loop);
}

static void stalled_reader(void)
{
	int pipe_fds[2];
	struct stalled s = {.loop = loop_new()};
	loop_scope_init(&s.scope, s.loop, "the test");
	pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK);
	struct queue *q = queue_new(s.loop, pipe_fds[1], 1 << 20, NULL, NULL, &s);
	char block[65536] = {0};
	size_t queued = 0;
	for (int i = 0; i < 16; i++)
		queued += queue_put(q, block, sizeof block);
	check(queued == 1 << 20 && queue_room(q) == 0, "a full queue takes no more: the producer waits");
	int64_t start = loop_now_ms();
	loop_timer_arm(&s.scope, &s.timer, start + 200, stalled_timer, &s);
	loop_run(s.loop);
	check(s.timer_fired && loop_now_ms() - start < 1000,
		"with nobody reading, the timers still fire on time");
	check(queue_pending(q) > 0, "... and the unread bytes wait in the queue");
	char sink[65536];
	while (read(pipe_fds[0], sink, sizeof sink) > 0)
		;
	loop_timer_arm(&s.scope, &s.timer, loop_now_ms() + 100, stalled_timer, &s);
	loop_run(s.loop);
	check(queue_pending(q) < (1u << 20) - 65536, "once the reader reads, the queue drains");
	queue_free(q);
	close(pipe_fds[0]);
	loop_scope_end(&s.scope);
	loop_free(s.loop);
}

static void regular_file_never_blocks(void)
{
	char path[] = "/tmp/sage-sandbox-unit-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	struct loop *loop = loop_new();
	struct loop_scope scope;
	struct loop_timer *t = NULL;
	loop_scope_init(&scope, loop, "the test");
	struct queue *q = queue_new(loop, fd, 1 << 16, NULL, NULL, NULL);
	check(q != NULL, "a regular file, which epoll cannot watch, still gets a queue");
	queue_put(q, "hello", 5);
	loop_timer_arm(&scope, &t, loop_now_ms() + 50, quit_after, loop);
	loop_run(loop);
	check(queue_pending(q) == 0, "... and is written on the next turn");
	char last[100000];
	memset(last, 'j', sizeof last);
	queue_put_all(q, last, sizeof last);
	check(queue_pending(q) == sizeof last, "a last message past the queue's bound is taken whole");
	queue_free(q);
	loop_scope_end(&scope);
	loop_free(loop);
}

struct hangups {
	struct loop *loop;
	struct loop_scope scope;
	struct loop_watch *watch;
	struct loop_timer *timer;
	int calls;
};

static void count_hangup(int fd, unsigned events, void *data)
{
	struct hangups *h = data;
	h->calls++;
}

static void paused_watch_hears_hangup_once(void)
{
	int pipe_fds[2];
	struct hangups h = {.loop = loop_new()};
	loop_scope_init(&h.scope, h.loop, "the test");
	pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK);
	loop_watch(&h.scope, &h.watch, pipe_fds[1], 0, count_hangup, &h);
	close(pipe_fds[0]);
	loop_timer_arm(&h.scope, &h.timer, loop_now_ms() + 100, quit_after, h.loop);
	loop_run(h.loop);
	check(h.calls == 1, "a paused watch whose reader is gone is told once, no busy turns");
	loop_watch_events(h.watch, LOOP_WRITE);
	loop_timer_arm(&h.scope, &h.timer, loop_now_ms() + 50, quit_after, h.loop);
	loop_run(h.loop);
	check(h.calls >= 2, "... and asking for events again hears of the error again");
	loop_scope_end(&h.scope);
	close(pipe_fds[1]);
	loop_free(h.loop);
}


/* ---- issue 32: no callback outlives its object ---------------------------- */

/* An owner as the front ends have them: a scope, slots, and a count of
 * what reached it. */
struct owner {
	struct loop *loop;
	struct loop_scope scope;
	struct loop_timer *timer, *other;
	struct loop_watch *watch;
	int fired, other_fired, watch_calls;
	bool slot_was_clear, freed;
};

static void owner_fire(void *data)
{
	struct owner *o = data;
	o->fired++;
	o->slot_was_clear = o->timer == NULL;
}

static void owner_other(void *data)
{
	((struct owner *)data)->other_fired++;
}

static void owner_watch_call(int fd, unsigned events, void *data)
{
	((struct owner *)data)->watch_calls++;
}

static struct owner *owner_new(struct loop *loop)
{
	struct owner *o = calloc(1, sizeof *o);
	o->loop = loop;
	loop_scope_init(&o->scope, loop, "a test owner");
	return o;
}

static void owner_free(void *data)
{
	struct owner *o = data;
	loop_scope_end(&o->scope);
	free(o);
}

static void run_for(struct loop *loop, int ms)
{
	struct loop_scope scope;
	struct loop_timer *t = NULL;
	loop_scope_init(&scope, loop, "run_for");
	loop_timer_arm(&scope, &t, loop_now_ms() + ms, quit_after, loop);
	loop_run(loop);
	loop_scope_end(&scope);
}

static void slots(void)
{
	struct loop *loop = loop_new();
	struct owner *o = owner_new(loop);
	loop_timer_arm(&o->scope, &o->timer, loop_now_ms() + 20, owner_fire, o);
	loop_timer_arm(&o->scope, &o->timer, loop_now_ms() + 40, owner_fire, o);
	run_for(loop, 150);
	check(o->fired == 1, "arming a slot again cancels what it held: one call, not two");
	check(o->slot_was_clear && o->timer == NULL,
		"the loop clears a timer's slot before it calls back");
	loop_timer_arm(&o->scope, &o->timer, loop_now_ms() + 20, owner_fire, o);
	loop_timer_cancel(&o->timer);
	loop_timer_cancel(&o->timer);
	run_for(loop, 60);
	check(o->fired == 1 && o->timer == NULL, "a cancel clears the slot, and twice is harmless");
	owner_free(o);
	loop_free(loop);
}

static void scope_end_releases_all(void)
{
	struct loop *loop = loop_new();
	struct owner *o = owner_new(loop);
	int pair[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair);
	loop_timer_arm(&o->scope, &o->timer, loop_now_ms() + 10, owner_fire, o);
	loop_timer_arm(&o->scope, &o->other, 0, owner_other, o);
	loop_watch(&o->scope, &o->watch, pair[0], LOOP_READ, owner_watch_call, o);
	struct owner copy_before_free = *o;
	loop_scope_end(&o->scope);
	check(!o->timer && !o->other && !o->watch, "ending a scope clears every slot of it");
	/* Freed: with ASan any call into it is a report, without it a count
	 * in freed memory; the peer's write and the timers' times pass. */
	free(o);
	write(pair[1], "x", 1);
	close(pair[1]);
	run_for(loop, 60);
	check(copy_before_free.fired == 0, "... and nothing of the scope is called after it ended");
	close(pair[0]);
	loop_free(loop);
}

/* The batch bug: the caller closes its descriptor while another one (fd
 * 0 of a socket stdin) keeps the file alive; the watch must go all the
 * same. */
static void watch_outlives_callers_fd(void)
{
	struct loop *loop = loop_new();
	struct owner *o = owner_new(loop);
	int pair[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair);
	int keeps_alive = dup(pair[0]);
	loop_watch(&o->scope, &o->watch, pair[0], LOOP_READ, owner_watch_call, o);
	close(pair[0]);
	loop_unwatch(&o->watch);
	int calls = o->watch_calls;
	close(pair[1]); /* a hangup on the file that keeps_alive holds open */
	run_for(loop, 60);
	check(o->watch_calls == calls && o->watch == NULL,
		"a watch whose caller closed its fd first is gone on unwatch: no hangup reaches it");
	close(keeps_alive);
	owner_free(o);
	loop_free(loop);
}

struct releasing {
	struct loop *loop;
	struct loop_scope scope;
	struct loop_timer *first, *second;
	struct owner *victim;
	bool victim_alive_in_second;
};

static void release_victim(void *data)
{
	struct releasing *r = data;
	loop_release(r->loop, owner_free, r->victim);
}

static void look_at_victim(void *data)
{
	struct releasing *r = data;
	/* Freed memory would be ASan's report; the flag says it was not. */
	r->victim_alive_in_second = !r->victim->freed;
}

static void destroy_counted(void *data)
{
	(*(int *)data)++;
}

static void release_waits_for_turn(void)
{
	struct releasing r = {.loop = loop_new()};
	loop_scope_init(&r.scope, r.loop, "the test");
	r.victim = owner_new(r.loop);
	loop_timer_arm(&r.victim->scope, &r.victim->timer, loop_now_ms() + 5000, owner_fire,
		r.victim);
	/* Both due in the same turn: the first asks for the free, the second
	 * still holds the pointer. */
	int64_t when = loop_now_ms() + 10;
	loop_timer_arm(&r.scope, &r.second, when, look_at_victim, &r);
	loop_timer_arm(&r.scope, &r.first, when, release_victim, &r);
	run_for(r.loop, 50);
	check(r.victim_alive_in_second, "a free asked for inside a callback waits for the turn's end");
	int destroyed = 0;
	loop_release(r.loop, destroy_counted, &destroyed);
	check(destroyed == 1, "outside the loop's turn it happens at once");
	loop_scope_end(&r.scope);
	loop_free(r.loop);
}

struct later {
	struct loop_scope scope;
	struct loop_timer *soon;
	bool in_call, ran_inside, ran;
};

static void later_cb(void *data)
{
	struct later *l = data;
	l->ran = true;
	l->ran_inside = l->in_call;
}

static void later_from_watch(int fd, unsigned events, void *data)
{
	struct later *l = data;
	char c;
	read(fd, &c, 1);
	l->in_call = true;
	loop_timer_arm(&l->scope, &l->soon, 0, later_cb, l);
	l->in_call = false;
}

static void later_is_never_inside(void)
{
	struct loop *loop = loop_new();
	struct later l = {0};
	struct loop_watch *w = NULL;
	loop_scope_init(&l.scope, loop, "the test");
	int pair[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair);
	loop_watch(&l.scope, &w, pair[0], LOOP_READ, later_from_watch, &l);
	write(pair[1], "x", 1);
	run_for(loop, 30);
	check(l.ran && !l.ran_inside, "a timer at 0 runs after the call that armed it, not in it");
	loop_scope_end(&l.scope);
	close(pair[0]);
	close(pair[1]);
	loop_free(loop);
}

static void leaked_handle_is_caught(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		loop_strict = true;
		struct loop *loop = loop_new();
		struct owner *o = owner_new(loop);
		loop_timer_arm(&o->scope, &o->timer, loop_now_ms() + 1000, owner_fire, o);
		free(o); /* without ending its scope: the bug */
		loop_free(loop);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	check(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		"a strict loop_free aborts on a timer that outlives its owner");
}

static void leaked_handle_lenient(void)
{
	/* Where loop_strict is off (a release build): reported, never called
	 * back, and the owner that lets go afterwards writes nothing freed. */
	loop_strict = false;
	int devnull = open("/dev/null", O_WRONLY), saved = dup(2);
	dup2(devnull, 2);
	struct loop *loop = loop_new();
	struct owner *o = owner_new(loop);
	int pair[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair);
	loop_timer_arm(&o->scope, &o->timer, 0, owner_fire, o);
	loop_watch(&o->scope, &o->watch, pair[0], LOOP_READ, owner_watch_call, o);
	loop_free(loop);
	dup2(saved, 2);
	close(saved);
	close(devnull);
	loop_strict = true;
	check(o->timer && o->watch && o->fired == 0, "lenient loop_free: the handles are never called");
	owner_free(o);
	check(true, "... and their owner's scope ends after it without touching freed memory");
	close(pair[0]);
	close(pair[1]);
}

int main(void)
{
	loop_strict = true;
	signal(SIGPIPE, SIG_IGN);
	child_never_reads_stdin();
	child_joins_cgroup();
	flood();
	grandchild_holds_pipe();
	ignores_sigterm();
	group_kill();
	sigchld_ignored();
	exec_failure();
	no_fd_leak_when_spawn_fails();
	stalled_reader();
	regular_file_never_blocks();
	paused_watch_hears_hangup_once();
	slots();
	scope_end_releases_all();
	watch_outlives_callers_fd();
	release_waits_for_turn();
	later_is_never_inside();
	leaked_handle_is_caught();
	leaked_handle_lenient();
	printf("1..%d\n", test_number);
	return failures ? 1 : 0;
}
