/* unit-sandbox.c: sandbox.c's state machine, and runner.c above it, against
 * tests/fake-podman, a podman that misbehaves on purpose: as TAP, fast, no
 * podman and no Sage. Each case is a promise to a front end (what the
 * result says, with which status, that the container is removed and that
 * nothing is left running) when podman or the launcher breaks.
 *
 * Each case gets a directory of its own under a scratch directory: podman
 * there is a symlink to the fake, mode says how the fake behaves, calls is
 * what the fake was asked to do (fake-podman says why a file and not a
 * variable: sandbox.c gives podman a fixed environment). */
#include "cpugroup.h"
#include "loop.h"
#include "result.h"
#include "runner.h"
#include "sandbox.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int test_number, failures;

static void check(bool ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++test_number, what);
	if (!ok)
		failures++;
}

static void skip(const char *what, const char *why)
{
	printf("ok %d - %s # skip %s\n", ++test_number, what, why);
}

static bool same(const struct buffer *b, const char *text)
{
	return b->len == strlen(text) && (b->len == 0 || memcmp(b->data, text, b->len) == 0);
}

static bool has(const char *text, const char *part)
{
	return text && strstr(text, part);
}

static char fake_script[PATH_MAX], scratch[PATH_MAX - 64], podman_setting[PATH_MAX + 16];
static struct config cfg;
/* No cgroup controller and no uid range: no memory watchdog, no throttle. */
static const struct podman_host bare_host;
/* A uid range, so that each sandbox draws and claims a uid of its own
 * (uidclaim.c), mapped to host uids no process has; cgroups said to hold
 * memory and CPU, so that no watchdog looks for the run's processes. */
#define RANGED_HOST_UID_BASE 3900000000UL
static const struct podman_host ranged_host = {
	.controller = {[CONTROLLER_MEMORY] = true, [CONTROLLER_CPU] = true},
	.id_count = 65537,
	.uid_map = {{0, 1000, 1}, {1, RANGED_HOST_UID_BASE, 65536}},
	.uid_ranges = 2,
};
static const struct sage_image fake_image = {.python = "/usr/bin/python3", .user = "sage",
	.uid = 1000, .gid = 1000};

/* ---- the fake's cases ----------------------------------------------------- */

struct fake {
	char dir[PATH_MAX];
	char podman[PATH_MAX + 16];
};

/* A case's directory: podman, a link to the fake, and its mode. */
static void fake_new(struct fake *f, const char *name, const char *mode)
{
	char path[PATH_MAX + 16];
	snprintf(f->dir, sizeof f->dir, "%s/%s", scratch, name);
	snprintf(f->podman, sizeof f->podman, "%s/podman", f->dir);
	snprintf(path, sizeof path, "%s/mode", f->dir);
	FILE *m = NULL;
	if (mkdir(f->dir, 0700) < 0 || symlink(fake_script, f->podman) < 0 ||
	    !(m = fopen(path, "w")) || fputs(mode, m) < 0 || fclose(m) != 0) {
		printf("Bail out! cannot make %s: %s\n", f->dir, strerror(errno));
		exit(2);
	}
	/* The config names the same podman as the sandbox options. */
	char why[256];
	snprintf(podman_setting, sizeof podman_setting, "%s", f->podman);
	setting_set(&cfg, SET_PODMAN, podman_setting, FROM_FLAG, why, sizeof why);
}

/* The fake's log lines "EVENT ARG" (arg NULL: any); the nth one's argument
 * in nth_arg when asked. */
static int fake_lines(const struct fake *f, const char *event, const char *arg, int nth,
		char *nth_arg, size_t size)
{
	char path[PATH_MAX + 16];
	struct buffer log = {0};
	const char *cursor, *line;
	size_t len, elen = strlen(event);
	int n = 0;
	snprintf(path, sizeof path, "%s/calls", f->dir);
	if (read_file(path, 1 << 20, &log) < 0 || !log.data) {
		buffer_free(&log);
		return 0;
	}
	for (cursor = log.data; (line = next_line(&cursor, &len));) {
		if (len <= elen || memcmp(line, event, elen) != 0 || line[elen] != ' ')
			continue;
		const char *rest = line + elen + 1;
		size_t rest_len = len - elen - 1;
		if (arg && (rest_len != strlen(arg) || memcmp(rest, arg, rest_len) != 0))
			continue;
		if (n++ == nth && nth_arg)
			snprintf(nth_arg, size, "%.*s", (int)rest_len, rest);
	}
	buffer_free(&log);
	return n;
}

static int fake_count(const struct fake *f, const char *event, const char *arg)
{
	return fake_lines(f, event, arg, -1, NULL, 0);
}

/* Processes that run the case's podman (its path is in their command
 * line, a grandchild's too): counted, or after a failed case killed by
 * pid and reaped (sandbox_free leaves a running client be), so that the
 * next case starts clean. */
static int case_processes(const struct fake *f, bool end_them)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	int found = 0;
	while (proc && (e = readdir(proc))) {
		char path[300], cmdline[4096];
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, cmdline, sizeof cmdline);
		close(fd);
		if (n <= 0 || !memmem(cmdline, (size_t)n, f->podman, strlen(f->podman)))
			continue;
		found++;
		if (end_them) {
			pid_t pid = (pid_t)atoi(e->d_name);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	if (proc)
		closedir(proc);
	return found;
}

/* No child of ours is left, reaped or not, and nothing runs the case's
 * podman. */
static bool nothing_left(const struct fake *f)
{
	int status;
	pid_t child = waitpid(-1, &status, WNOHANG);
	return child < 0 && errno == ECHILD && case_processes(f, false) == 0;
}

/* ---- turning the loop ------------------------------------------------------ */

struct guard {
	struct loop *loop;
	struct loop_scope scope;
	struct loop_timer *timer;
	bool hit;
};

static void guard_hit(void *data)
{
	struct guard *g = data;
	g->hit = true;
	loop_quit(g->loop);
}

/* Turns the loop until *count reaches want (the callbacks that count quit
 * the loop) or ms pass: a generous bound, never a timing assertion. */
static bool turn_until(struct loop *loop, const int *count, int want, int ms)
{
	struct guard g = {.loop = loop};
	loop_scope_init(&g.scope, loop, "a test's guard");
	loop_timer_arm(&g.scope, &g.timer, loop_now_ms() + ms, guard_hit, &g);
	while (*count < want && !g.hit)
		if (loop_run(loop) < 0)
			break;
	loop_scope_end(&g.scope);
	return *count >= want;
}

/* Turns the loop for ms, whatever its callbacks do. */
static void turn_for(struct loop *loop, int ms)
{
	static const int never = 0;
	turn_until(loop, &never, 1, ms);
}

/* Waits, without the loop, until the case's fake has logged an event at
 * least want times, or ms pass. */
static bool wait_for_fake(const struct fake *f, const char *event, const char *arg, int want,
		int ms)
{
	int64_t until = loop_now_ms() + ms;
	while (fake_count(f, event, arg) < want && loop_now_ms() < until)
		usleep(20 * 1000);
	return fake_count(f, event, arg) >= want;
}

/* Reaps the children a freed sandbox let go of running (process_abandon
 * never reaps them), once nothing of the case runs any more; each as it
 * ends, within the same bound: a child killed a moment ago has no command
 * line while it exits, and is no zombie yet to reap (CI's loaded machine
 * found one there, and nothing_left failed). */
static void reap_abandoned(const struct fake *f)
{
	int64_t until = loop_now_ms() + 10000;
	while (case_processes(f, false) > 0 && loop_now_ms() < until)
		usleep(20 * 1000);
	for (;;) {
		pid_t child = waitpid(-1, NULL, WNOHANG);
		if (child < 0 || (child == 0 && loop_now_ms() >= until))
			break;
		if (child == 0)
			usleep(20 * 1000);
	}
}

/* ---- one sandbox --------------------------------------------------------- */

struct watch {
	struct loop *loop;
	struct sandbox *sb;
	const struct fake *fake;
	int ready, done, released;
	/* Submitted at on_ready, its deadline then ms away: as a warm
	 * sandbox gets its call, and a deadline that a slow start of the
	 * fake on a loaded machine does not eat into. */
	struct program *at_ready;
	int at_ready_ms;
	enum sandbox_state state_at_done[2];
	struct buffer streamed[2]; /* what on_output gave, stdout and stderr */
	bool rm_over_at_done;      /* the fake's rm had ended by on_done */
	/* A serial sandbox's second call, submitted at the first's on_done,
	 * and the first's result then (its output copied). */
	const struct program *then;
	struct run_result first;
	char first_out[64];
};

static void watch_ready(struct sandbox *sb, void *data)
{
	struct watch *w = data;
	w->ready++;
	if (w->at_ready) {
		w->at_ready->deadline = loop_now_ms() + w->at_ready_ms;
		sandbox_submit(sb, w->at_ready);
	}
}

static void watch_output(struct sandbox *sb, int stream, const char *bytes, size_t len, void *data)
{
	struct watch *w = data;
	buffer_append(&w->streamed[stream], bytes, len);
}

static void watch_done(struct sandbox *sb, void *data)
{
	struct watch *w = data;
	struct run_result *r = sandbox_result(sb);
	if (w->done < 2)
		w->state_at_done[w->done] = sandbox_state(sb);
	w->done++;
	w->rm_over_at_done = fake_count(w->fake, "rm-end", sandbox_name(sb)) > 0;
	if (w->then && w->done == 1) {
		w->first = *r;
		w->first.out = w->first.err = (struct buffer){0};
		snprintf(w->first_out, sizeof w->first_out, "%s", r->out.data ? r->out.data : "");
		sandbox_submit(sb, w->then);
	}
	loop_quit(w->loop);
}

static void watch_released(struct sandbox *sb, void *data)
{
	struct watch *w = data;
	w->released++;
	loop_quit(w->loop);
}

/* What a started sandbox serves, besides one call: start_on's serves. */
enum { SERVES_SERIAL = 1, SERVES_SESSION = 2 };

static bool start_on(struct watch *w, const struct fake *f, const struct podman_host *host,
		unsigned serves, struct error *err)
{
	*w = (struct watch){.loop = loop_new(), .fake = f};
	struct sandbox_options opt = {.cfg = &cfg, .host = host, .image = &fake_image,
		.podman = f->podman, .deadline = loop_now_ms() + 30000,
		.serial = serves & SERVES_SERIAL, .session = serves & SERVES_SESSION,
		.cb = {.keep_output = true, .on_ready = watch_ready, .on_output = watch_output,
			.on_done = watch_done, .on_released = watch_released, .data = w}};
	w->sb = sandbox_start(w->loop, &opt, err);
	if (!w->sb) {
		printf("Bail out! the fake podman %s cannot be started: %s\n", f->podman,
			err->message);
		exit(2);
	}
	return true;
}

static bool start(struct watch *w, const struct fake *f, bool serial, struct error *err)
{
	return start_on(w, f, &bare_host, serial ? SERVES_SERIAL : 0, err);
}

static struct program make_program(const char *code, int64_t deadline)
{
	static const char *const argv[] = {"-"};
	return (struct program){.code = code, .code_len = strlen(code), .argv = argv, .argc = 1,
		.deadline = deadline};
}

/* Turns until the sandbox is released (podman and any rm ended). */
static bool settle(struct watch *w, int ms)
{
	return turn_until(w->loop, &w->released, 1, ms);
}

/* The end of a case: the sandbox is freed and nothing of it runs. One that
 * was never released is stopped, and if even that does not release it,
 * abandoned with its loop, which never turns again: what it started is
 * then left running, and the case says so. */
static void finish(struct watch *w, const char *name)
{
	char what[200];
	snprintf(what, sizeof what, "%s: released, nothing left running", name);
	bool released = w->released == 1;
	if (!w->released) {
		sandbox_stop(w->sb, STOP_SIGNAL, SIGTERM);
		settle(w, 5000);
	}
	sandbox_free(w->sb);
	if (w->released)
		loop_free(w->loop);
	buffer_free(&w->streamed[0]);
	buffer_free(&w->streamed[1]);
	bool ok = released && nothing_left(w->fake);
	check(ok, what);
	if (!ok)
		case_processes(w->fake, true);
}

/* ---- the cases -------------------------------------------------------------- */

static void normal_call(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "normal", "run normal exit 3\n");
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	check(start(&w, &f, false, &err), "run - sandbox_start with the fake podman");
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	check(w.ready == 1 && w.done == 1 && w.released == 1,
		"run - on_ready, on_done, on_released: once each");
	check(w.state_at_done[0] == SANDBOX_DONE, "run - the state is DONE at on_done");
	check(r->started && !r->failed && !r->sandbox_broke && !r->timed_out &&
		!r->output_limit_exceeded, "run - a normal call: started, not failed, not broken");
	check(r->exit_code == 3 && r->signal == 0, "run - the X trailer's exit 3 is exit_code");
	check(same(&w.streamed[0], "out:print(1)") && same(&w.streamed[1], "err\n"),
		"run - O and E frames reach on_output, stdout and stderr apart");
	check(same(&r->out, "out:print(1)") && same(&r->err, "err\n"),
		"run - and are kept in the result (keep_output)");
	check(fake_count(&f, "call", "print(1)") == 1,
		"run - the launcher got the code once (L, A, C, I frames)");
	check(fake_count(&f, "rm", NULL) == 0,
		"run - a call that ended by itself is left to conmon's --rm: no podman rm");
	finish(&w, "run - normal");

	fake_new(&f, "signal", "run normal signal 9\n");
	p = make_program("print(1)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	r = sandbox_result(w.sb);
	check(!r->failed && r->signal == 9 && r->exit_code == 128 + 9,
		"run - an X trailer with signal 9: signal 9, exit_code 137");
	finish(&w, "run - signal");
}

static void podman_not_executable(void)
{
	struct fake f;
	struct error err = {0};
	struct loop *loop = loop_new();
	struct sandbox_options opt = {.cfg = &cfg, .host = &bare_host, .image = &fake_image,
		.podman = "/nonexistent/podman", .deadline = loop_now_ms() + 30000};
	struct sandbox *sb = sandbox_start(loop, &opt, &err);
	check(!sb && err.status == EXIT_REFUSED,
		"run - a podman that does not exist: sandbox_start fails with status 125");
	check(has(err.message, "cannot execute podman /nonexistent/podman") &&
		has(err.message, "No such file"), "run - ... the message names podman and why");
	check(has(err.hint, "--podman") && has(err.hint, "install podman"),
		"run - ... the hint says how to fix it");

	fake_new(&f, "not-executable", "run normal\n");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/plain-file", f.dir);
	FILE *plain = fopen(path, "w");
	if (plain)
		fclose(plain);
	opt.podman = path;
	err = (struct error){0};
	sb = sandbox_start(loop, &opt, &err);
	check(!sb && err.status == EXIT_REFUSED && has(err.message, "cannot execute podman") &&
		has(err.message, "Permission denied") && has(err.hint, "chmod +x"),
		"run - a podman that is not executable: status 125, EACCES named, chmod the fix");
	loop_free(loop);
	check(nothing_left(&f), "run - not executable: nothing left running");
}

/* A sandbox on fake podman MODE (NAME's case) given print(1): its result,
 * settled. */
static struct run_result *settled_run(struct watch *w, struct fake *f, const char *name,
		const char *mode)
{
	struct error err;
	fake_new(f, name, mode);
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	start(w, f, false, &err);
	sandbox_submit(w->sb, &p);
	settle(w, 20000);
	return sandbox_result(w->sb);
}

static void podman_exits_early(void)
{
	struct fake f;
	struct watch w;
	struct run_result *r = settled_run(&w, &f, "exit-early", "run exit-early WARN[0000] a "
		"warning first\\nError: fake podman: crun: cannot set up the container\n");
	check(r->failed && r->failure.status == EXIT_REFUSED && !r->started,
		"run - podman exits 125 before any frame: failed, status 125, not started");
	check(has(r->failure.message, "podman could not run the container (status 125)") &&
		has(r->failure.message, "crun: cannot set up the container") &&
		!has(r->failure.message, "a warning first"),
		"run - ... the message has podman's status and the tail of its stderr, its error");
	check(r->exit_code == EXIT_REFUSED,
		"run - ... and exit_code is the failure's status, 125 (not 128, not 0)");
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 0,
		"run - ... no podman rm: no container was started");
	finish(&w, "run - exit early");

	r = settled_run(&w, &f, "exit-silent", "run exit-early\n");
	check(r->failed && r->failure.status == EXIT_REFUSED &&
		strcmp(r->failure.message, "podman could not run the container (status 125) and "
			"said nothing") == 0 && has(r->failure.hint, f.podman) &&
		has(r->failure.hint, " run --rm ") && !has(r->failure.hint, "IMAGE"),
		"run - podman exits 125 without a word: said so, with how to see why (the podman "
		"and image in use)");
	finish(&w, "run - exit silent");

	r = settled_run(&w, &f, "no-image", "run exit-early Error: localhost/sage: image not known\n");
	check(r->failed && r->failure.status == EXIT_REFUSED &&
		has(r->failure.message, "is not present locally") &&
		has(r->failure.hint, "setup.sh image"),
		"run - podman says the image is missing: failed 125, with the image hint");
	finish(&w, "run - no image");

	r = settled_run(&w, &f, "killed-starting", "run killed-starting\n");
	check(r->failed && r->failure.status == EXIT_REFUSED &&
		has(r->failure.message, "Sage did not start in the sandbox: the container or its "
			"podman was killed from outside (SIGKILL: status 137) before Sage was ready") &&
		has(r->failure.hint, "nothing of the image is to blame"),
		"run - killed after S, before R: 125, said killed from outside, the image not blamed");
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done,
		"run - ... its container, started, is removed before on_done");
	finish(&w, "run - killed starting");

	/* The launcher's K frame is its own end: nothing left to remove. */
	r = settled_run(&w, &f, "refuse", "run refuse\n");
	check(r->failed && r->failure.status == EXIT_REFUSED &&
		has(r->failure.message, "cannot import sage.all: fake") &&
		fake_count(&f, "rm", sandbox_name(w.sb)) == 0,
		"run - Sage cannot start (K frame): 125, its words, no podman rm");
	finish(&w, "run - refuse");
}

/* The launcher breaks the protocol: failed, 125, said, removed. */
static void protocol_case(const char *name, const char *mode, const char *said)
{
	struct fake f;
	struct watch w;
	struct error err;
	char what[200];
	fake_new(&f, name, mode);
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	snprintf(what, sizeof what, "protocol - %s: failed, status 125, \"%s\"", name, said);
	check(r->failed && r->failure.status == EXIT_REFUSED &&
		has(r->failure.message, "broke its protocol") && has(r->failure.message, said), what);
	snprintf(what, sizeof what, "protocol - %s: exit_code 125 too", name);
	check(r->exit_code == EXIT_REFUSED, what);
	snprintf(what, sizeof what, "protocol - %s: the container is removed (podman rm NAME), "
		"before on_done", name);
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done, what);
	snprintf(what, sizeof what, "protocol - %s", name);
	finish(&w, what);
}

static void protocol_broken(void)
{
	protocol_case("big-frame", "run big-frame\n", "a frame longer than 64 KiB");
	protocol_case("before-start", "run before-start\n", "a frame before the start frame");
	protocol_case("x-first", "run x-first\n", "a frame before the start frame");
	protocol_case("unknown-frame", "run unknown-frame\n", "an unknown frame type");
	protocol_case("u-once", "run u-once\n", "a call's end killed outside a serial call");
	protocol_case("files", "run files\n", "files nobody asked for");
	protocol_case("x-notjson", "run x-notjson\n", "a malformed end frame");
	protocol_case("x-both", "run x-both\n", "a malformed end frame");
	protocol_case("x-kept", "run x-kept\n", "a malformed end frame");
	protocol_case("x-next", "run x-next\n", "a malformed end frame");
}

/* What describe_stop says of r ("" where it says nothing), until the next
 * call. */
static const char *stop_sentence(const struct run_result *r)
{
	static char sentence[384];
	if (!describe_stop(r, &cfg, NULL, sentence, sizeof sentence))
		sentence[0] = '\0';
	return sentence;
}

/* A one-shot run held back by its cpu group in its last moments says so:
 * its end reads the group's count, as its own. Where a memory cgroup
 * holds --memory no watchdog looks (bare_host has no uid range: none here
 * either), and that end was all there was to read; before, never read, it
 * said throttled false. A real group: the one root delegated to the
 * account (./setup.sh), the fake podman in it. */
static void throttled_at_its_end(void)
{
	const char *what = "run - a one-shot run that spent 150 ms of CPU at --cpus 0.1, "
		"no watchdog looking: throttled, read at its end";
	char delegated[512];
	if (!cpugroup_delegated(delegated, sizeof delegated)) {
		skip(what, "no cpu group delegated to this account");
		return;
	}
	long cpus = cfg.number[SET_CPUS];
	cfg.number[SET_CPUS] = 100;
	struct fake f;
	struct watch w;
	struct run_result *r = settled_run(&w, &f, "burn", "run normal burn 150\n");
	check(!r->failed && r->exit_code == 0 && r->code_begun && r->throttled, what);
	finish(&w, "run - burn");
	cfg.number[SET_CPUS] = cpus;
}

static void podman_dies_mid_output(void)
{
	struct fake f;
	struct watch w;
	struct run_result *r = settled_run(&w, &f, "die-mid", "run die-mid\n");
	check(!r->failed && r->started && r->sandbox_broke,
		"run - podman dies after R and output, without X: sandbox_broke, not failed");
	check(r->exit_code == 1 && r->signal == 0, "run - ... exit_code is podman's status 1");
	check(same(&r->out, "partial output\n") && same(&w.streamed[0], "partial output\n"),
		"run - ... the output so far is kept");
	check(has(r->err.data, "fake launcher died"), "run - ... and podman's stderr goes with it");
	check(strcmp(stopped_by(r), "sandbox_broke") == 0 &&
	      has(stop_sentence(r), "exited before the code's end was reported"),
		"run - ... stopped_by sandbox_broke, and a sentence that says so");
	/* Its container may run on (a client killed alone): removed, and
	 * what runs as its uid killed, before the result is known. */
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done,
		"run - ... its container is removed (podman rm NAME) before on_done");
	finish(&w, "run - dies mid-output");

	/* Killed from outside (podman rm of its container, say): 137. */
	r = settled_run(&w, &f, "die-mid-killed", "run die-mid killed\n");
	check(r->sandbox_broke && r->exit_code == 137 && r->signal == SIGKILL &&
	      same(&r->out, "partial output\n"),
		"run - podman killed after R and output: sandbox_broke, 137, the output kept");
	check(has(stop_sentence(r), "killed from outside") && has(stop_sentence(r), "run it again"),
		"run - ... its sentence: killed from outside, run it again");
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done,
		"run - ... its container is removed before on_done (its client may have died alone)");
	finish(&w, "run - killed mid-output");

	/* Exit 0 without the code's end: no ok run. */
	r = settled_run(&w, &f, "die-mid-exit0", "run die-mid exit0\n");
	check(r->sandbox_broke && r->exit_code == 1 && r->signal == 0 &&
	      has(stop_sentence(r), "exited before the code's end was reported"),
		"run - podman exits 0 after R, without X: sandbox_broke, exit_code 1, said");
	finish(&w, "run - exits 0 mid-output");

	/* A stop that comes while that removal runs shares it: one podman
	 * rm, over before on_done, the stop's result. */
	struct error err;
	fake_new(&f, "die-mid-stopped", "run die-mid killed\nrm slow 1000\n");
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	for (int64_t until = loop_now_ms() + 20000;
	     !fake_count(&f, "rm", sandbox_name(w.sb)) && loop_now_ms() < until;)
		turn_for(w.loop, 20);
	sandbox_stop(w.sb, STOP_SIGNAL, SIGTERM);
	settle(&w, 20000);
	r = sandbox_result(w.sb);
	check(w.done == 1 && fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done &&
		r->interrupted_by == SIGTERM,
		"run - a stop during that removal: one podman rm, over before on_done, interrupted");
	finish(&w, "run - stopped while removed");
}

/* A sandbox started on fake MODE, given print(1) as it is ready, with a
 * deadline DEADLINE_MS from then (P holds the program). */
static void start_given_at_ready(struct watch *w, struct fake *f, const char *name,
		const char *mode, unsigned serves, struct program *p, int deadline_ms)
{
	struct error err;
	fake_new(f, name, mode);
	*p = make_program("print(1)", 0);
	start_on(w, f, &bare_host, serves, &err);
	w->at_ready = p;
	w->at_ready_ms = deadline_ms;
}

/* A session's cell whose end the launcher stamped past its deadline: a
 * timeout whether or not it was interrupted (the launcher stamps a cell's
 * end when its status comes), its container kept. */
static void session_cell_late(const char *name, const char *mode, bool interrupted)
{
	struct fake f;
	struct watch w;
	struct program p;
	char what[200];
	start_given_at_ready(&w, &f, name, mode, SERVES_SESSION, &p, 2000);
	turn_until(w.loop, &w.done, 1, 20000);
	struct run_result *r = sandbox_result(w.sb);
	snprintf(what, sizeof what, "session - a cell stamped past its deadline, %s: timed out, "
		"exit 124, kept, its output whole", interrupted ? "interrupted" : "not interrupted");
	check(r->after == AFTER_KEPT && same(&r->out, "done\n") && r->timed_out &&
		r->exit_code == EXIT_TIMEOUT && r->cell_interrupted == interrupted, what);
	/* The session's container waits for its next cell: ended here. */
	sandbox_stop(w.sb, STOP_SIGNAL, SIGTERM);
	settle(&w, 20000);
	finish(&w, what);
}

static void session_cells_late(void)
{
	session_cell_late("cell-late", "run cell-late\n", false);
	session_cell_late("cell-late-interrupted", "run cell-late interrupted\n", true);
}

static void deadline_case(const char *name, const char *mode, const char *what_rm)
{
	struct fake f;
	struct watch w;
	struct program p;
	char what[200];
	start_given_at_ready(&w, &f, name, mode, 0, &p, 500);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	snprintf(what, sizeof what, "%s: timed_out, exit 124, killed", name);
	check(!r->failed && r->timed_out && r->exit_code == EXIT_TIMEOUT && r->signal == SIGKILL,
		what);
	snprintf(what, sizeof what, "%s: the call, submitted when ready, ran; its output kept",
		name);
	check(w.ready == 1 && same(&r->out, "working\n"), what);
	snprintf(what, sizeof what, "%s: %s", name, what_rm);
	if (strstr(mode, "rm fails"))
		check(fake_count(&f, "rm", sandbox_name(w.sb)) == 3 && w.done == 1, what);
	else
		check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done, what);
	finish(&w, name);
}

static void deadline(void)
{
	deadline_case("deadline - the fake hangs", "run hang\n",
		"podman rm NAME ran, and ended before on_done");
	deadline_case("deadline - rm takes 1 s", "run hang\nrm slow\n",
		"on_done waits for podman rm's end");
	/* sandbox.c says on stderr that it could not remove the container. */
	deadline_case("deadline - rm fails", "run hang\nrm fails\n",
		"podman rm is tried 3 times (REMOVE_TRIES), then done all the same");
	if (!getenv("UNIT_SANDBOX_SLOW")) {
		skip("deadline - rm hangs: done within REMOVE_TIMEOUT_MS x REMOVE_TRIES",
			"takes 47 s (3 tries of 15 s, REMOVE_TIMEOUT_MS); set UNIT_SANDBOX_SLOW=1");
		return;
	}
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "rm-hangs", "run hang\nrm hang\n");
	struct program p = make_program("print(1)", 0);
	start(&w, &f, false, &err);
	w.at_ready = &p;
	w.at_ready_ms = 500;
	int64_t began = loop_now_ms();
	settle(&w, 60000);
	struct run_result *r = sandbox_result(w.sb);
	check(w.done == 1 && r->timed_out && r->exit_code == EXIT_TIMEOUT &&
		loop_now_ms() - began < 3 * 15000 + 2 * 1000 + 5000 &&
		fake_count(&f, "rm", sandbox_name(w.sb)) == 3,
		"deadline - rm hangs: done after 3 tries of REMOVE_TIMEOUT_MS, each killed");
	finish(&w, "deadline - rm hangs");
}

static void output_limit(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "flood", "run flood 5 600\n");
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	p.output_limit = 1000;
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	check(!r->failed && r->output_limit_exceeded && r->out_truncated &&
		r->exit_code == EXIT_OUTPUT_LIMIT && r->signal == SIGKILL,
		"limit - 3000 bytes past a limit of 1000: output_limit_exceeded, exit 123");
	check(r->out.len == 1000 && w.streamed[0].len == 1000,
		"limit - exactly the limit kept, and exactly the limit given to on_output");
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 && w.rm_over_at_done,
		"limit - the container is removed before on_done");
	finish(&w, "limit - flood");
}

static void serial_calls(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "serial", "run serial 1\n");
	struct program one = make_program("1", loop_now_ms() + 30000);
	struct program two = make_program("2", loop_now_ms() + 30000);
	start(&w, &f, true, &err);
	w.then = &two;
	sandbox_submit(w.sb, &one);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	check(!w.first.failed && w.first.exit_code == 0 && w.first.after == AFTER_NEXT &&
		strcmp(w.first_out, "out:1") == 0 && w.state_at_done[0] == SANDBOX_READY,
		"serial - first call: exit 0, X next, its output; READY for the next at on_done");
	check(w.done == 2 && !r->failed && r->exit_code == 5 && r->after == AFTER_ENDS,
		"serial - second call, submitted at the first's on_done: its own exit 5, X ends");
	check(strcmp(r->ends_why, "/tmp could not be put back") == 0,
		"serial - ends_why carries the X trailer's why");
	check(same(&r->out, "out:2"), "serial - the second result holds only its own output");
	check(fake_count(&f, "run", NULL) == 1 && fake_count(&f, "call", NULL) == 2 &&
		fake_count(&f, "rm", NULL) == 0, "serial - one container served both calls");
	finish(&w, "serial");

	/* Its client killed while it waits for a call (its container may
	 * live on): no call is given to it, and it is removed before it is
	 * let go. */
	fake_new(&f, "serial-killed", "run serial 1 killed\n");
	one = make_program("1", loop_now_ms() + 30000);
	start(&w, &f, true, &err);
	sandbox_submit(w.sb, &one);
	turn_until(w.loop, &w.released, 1, 20000);
	check(w.done == 1 && w.state_at_done[0] == SANDBOX_READY && w.released == 1 &&
		sandbox_state(w.sb) == SANDBOX_DONE,
		"serial - its client killed while idle: DONE, not READY, when let go");
	check(fake_count(&f, "rm", sandbox_name(w.sb)) == 1 &&
		fake_count(&f, "rm-end", sandbox_name(w.sb)) == 1,
		"serial - ... its container removed before it is let go");
	finish(&w, "serial - killed while idle");
}

static void start_race(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	char first[128] = "", second[128] = "", third[128] = "";
	fake_new(&f, "race", "run race 2\n");
	struct program p = make_program("print(2)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	struct run_result *r = sandbox_result(w.sb);
	fake_lines(&f, "run", NULL, 0, first, sizeof first);
	fake_lines(&f, "run", NULL, 1, second, sizeof second);
	check(!r->failed && r->exit_code == 0 && same(&r->out, "out:print(2)") &&
		same(&w.streamed[0], "out:print(2)"),
		"race - the first two starts lose podman's start races (runc's, its client's), the "
		"third runs the call: ok");
	fake_lines(&f, "run", NULL, 2, third, sizeof third);
	check(fake_count(&f, "run", NULL) == 3 && strcmp(first, second) != 0 &&
		strcmp(second, third) != 0 && strcmp(sandbox_name(w.sb), third) == 0,
		"race - three starts, under three names");
	check(fake_count(&f, "call", NULL) == 1, "race - the call ran once");
	check(fake_count(&f, "rm", first) == 1 && fake_count(&f, "rm", second) == 1,
		"race - the lost containers are removed");
	finish(&w, "race");

	fake_new(&f, "race-always", "run race 9\n");
	p = make_program("print(2)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	settle(&w, 20000);
	r = sandbox_result(w.sb);
	check(fake_count(&f, "run", NULL) == 3 && r->failed && r->failure.status == EXIT_REFUSED &&
		has(r->failure.message, "start 63dec14` failed: exit status 1; before it: ") &&
		has(r->failure.message, "container process is already dead"),
		"race - lost every time: 3 starts (START_TRIES), then failed 125 with podman's words "
		"and runc's before them");
	check(fake_count(&f, "rm", NULL) == 3, "race - ... and each lost container removed, the last too");
	finish(&w, "race - always");

	/* A byte of the code's stdin went to the lost container: that
	 * container may have read it, so the run is not started again. */
	fake_new(&f, "race-input", "run race 1\n");
	p = make_program("print(input())", loop_now_ms() + 30000);
	p.input_follows = true;
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	size_t sent = sandbox_input(w.sb, "x\n", 2);
	settle(&w, 20000);
	r = sandbox_result(w.sb);
	check(sent == 2 && fake_count(&f, "run", NULL) == 1 && r->failed &&
		r->failure.status == EXIT_REFUSED && has(r->failure.message, "exit status 1"),
		"race - lost after stdin was handed over: not started again, failed 125");
	check(fake_count(&f, "rm", NULL) == 1, "race - ... and its container removed");
	finish(&w, "race - input");
}

/* Whether a sandbox of this host holds the claim on the host uid that
 * container uid uid maps to on ranged_host: its abstract name (uidclaim.c)
 * is bound. */
static bool uid_claimed(long uid)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int n = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "sage-sandbox-uid-%ld",
		host_uid_of(&ranged_host, (unsigned long)uid));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool taken = fd >= 0 &&
		bind(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + 1 + n) < 0 &&
		errno == EADDRINUSE;
	if (fd >= 0)
		close(fd);
	return taken;
}

/* The uid the fake's nth run was given (its --user), or -1. */
static long fake_run_uid(const struct fake *f, int nth)
{
	char line[160] = "";
	long uid = -1;
	fake_lines(f, "user", NULL, nth, line, sizeof line);
	const char *space = strrchr(line, ' ');
	if (space)
		uid = strtol(space + 1, NULL, 10);
	return uid;
}

/* As root: a process of the host uid that container uid uid maps to on
 * ranged_host, as what a container left would be; 0 elsewhere. */
static pid_t left_as(long uid)
{
	if (geteuid() != 0)
		return 0;
	uid_t host = (uid_t)host_uid_of(&ranged_host, (unsigned long)uid);
	pid_t pid = fork();
	if (pid == 0) {
		/* Not the test's descriptors: its claims' sockets among them. */
		close_range(3, ~0U, 0);
		if (setresgid(host, host, host) == 0 && setresuid(host, host, host) == 0)
			sleep(30);
		_exit(1);
	}
	/* Only once it is of that uid (its descriptors closed before). */
	char proc[48];
	struct stat st;
	snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
	for (int64_t until = loop_now_ms() + 5000; pid > 0 && loop_now_ms() < until &&
	     !(stat(proc, &st) == 0 && st.st_uid == host);)
		usleep(1000);
	return pid < 0 ? 0 : pid;
}

/* Whether left_as's process was killed (by SIGKILL) within 2 s; reaped
 * either way. */
static bool was_killed(pid_t pid)
{
	int status = 0;
	pid_t got = 0;
	for (int64_t until = loop_now_ms() + 2000; got == 0 && loop_now_ms() < until;
	     usleep(10 * 1000))
		got = waitpid(pid, &status, WNOHANG);
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return got == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/* The check that left_as's process was killed; skipped where none could
 * be made. */
static void check_killed(pid_t left, const char *what)
{
	if (left)
		check(was_killed(left), what);
	else
		skip(what, "not root: no process of another uid can be made");
}

/* Turns the loop until the fake has started n containers. */
static void turn_until_starts(struct watch *w, const struct fake *f, int n)
{
	for (int64_t until = loop_now_ms() + 20000;
	     fake_count(f, "user", NULL) < n && loop_now_ms() < until;)
		turn_for(w->loop, 20);
}

/* After sandbox_free of a case whose podman rm still runs: its loop let
 * go, what the fake still runs ended, and nothing left. */
static void end_freed_case(struct watch *w, const struct fake *f, const char *what)
{
	loop_free(w->loop);
	buffer_free(&w->streamed[0]);
	buffer_free(&w->streamed[1]);
	case_processes(f, true);
	reap_abandoned(f);
	check(nothing_left(f), what);
}

/* A lost start's uid stays claimed while its container's removal runs, so
 * that no sandbox draws it while something of that container may still
 * run as it (the next start draws another); it is let go once the removal
 * is over, or when the sandbox is freed during it. */
static void start_race_claims(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "race-claims", "run race 1\nrm slow 3000\n");
	struct program p = make_program("print(3)", loop_now_ms() + 30000);
	start_on(&w, &f, &ranged_host, 0, &err);
	sandbox_submit(w.sb, &p);
	turn_until_starts(&w, &f, 2);
	long lost = fake_run_uid(&f, 0), second = fake_run_uid(&f, 1);
	bool removing = fake_count(&f, "rm-end", NULL) == 0;
	check(lost >= SANDBOX_UID_MIN && second >= SANDBOX_UID_MIN && lost != second &&
		removing && uid_claimed(lost) && uid_claimed(second),
		"race claims - while the lost container's removal runs, its uid and the new start's "
		"are both claimed, and differ");
	pid_t left = left_as(lost);
	settle(&w, 20000);
	check(!uid_claimed(lost) && uid_claimed(second) && !sandbox_result(w.sb)->failed,
		"race claims - the removal over, the lost uid is let go; the sandbox's own is held");
	check_killed(left, "race claims - ... what ran as the lost uid is killed then");
	finish(&w, "race claims");
	check(!uid_claimed(second), "race claims - freed, the sandbox's uid is let go");

	fake_new(&f, "race-claims-free", "run race 1\nrm hang\n");
	start_on(&w, &f, &ranged_host, 0, &err);
	turn_until_starts(&w, &f, 2);
	lost = fake_run_uid(&f, 0);
	second = fake_run_uid(&f, 1);
	bool held = lost >= SANDBOX_UID_MIN && second >= SANDBOX_UID_MIN && uid_claimed(lost) &&
		fake_count(&f, "rm-end", NULL) == 0;
	left = left_as(lost);
	sandbox_free(w.sb);
	check(held && !uid_claimed(lost) && !uid_claimed(second),
		"race claims - freed while the lost container's removal runs: both uids let go");
	check_killed(left, "race claims - ... and what ran as the lost uid is killed");
	end_freed_case(&w, &f, "race claims - freed during the removal: nothing left running");
}

/* A stop's removal cut short by sandbox_free: what runs as the run's uid
 * is killed before its claim goes, as at a removal's end. */
static void stop_claim_free(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	fake_new(&f, "stop-claim-free", "run hang\nrm hang\n");
	struct program p = make_program("print(4)", loop_now_ms() + 30000);
	start_on(&w, &f, &ranged_host, 0, &err);
	sandbox_submit(w.sb, &p);
	for (int64_t until = loop_now_ms() + 20000; !w.streamed[0].len && loop_now_ms() < until;)
		turn_for(w.loop, 20);
	long uid = fake_run_uid(&f, 0);
	sandbox_stop(w.sb, STOP_SIGNAL, SIGTERM);
	bool removing = wait_for_fake(&f, "rm", NULL, 1, 5000) && uid_claimed(uid);
	pid_t left = left_as(uid);
	sandbox_free(w.sb);
	check(removing && !uid_claimed(uid),
		"stop claim - freed while the stop's removal runs: the uid is let go");
	check_killed(left, "stop claim - ... and what ran as it is killed");
	end_freed_case(&w, &f, "stop claim - freed during the removal: nothing left running");
}

/* sandbox_free while a `podman rm` it started runs (the stop's, or the
 * removal of a container a start race left): the rm is let go of and still
 * removes the container, and nothing of it calls back into the freed
 * sandbox, nor holds a handle on the loop (loop_strict aborts in
 * loop_free). Sharpest under -fsanitize=address. */
/* sandbox_free() while the fake's `podman rm` of container name runs
 * (what: which removal): no callback after it, the loop turning on; the
 * removal runs on to its end; nothing of the case is left running. */
static void free_during_removal(struct watch *w, const struct fake *f, const char *name,
		const char *what)
{
	char said[160];
	bool in_flight = wait_for_fake(f, "rm", name, 1, 5000) &&
		fake_count(f, "rm-end", name) == 0;
	sandbox_free(w->sb);
	/* The loop turns on while the rm ends, and a while after. */
	for (int64_t until = loop_now_ms() + 5000;
	     fake_count(f, "rm-end", name) == 0 && loop_now_ms() < until;)
		turn_for(w->loop, 50);
	turn_for(w->loop, 200);
	snprintf(said, sizeof said, "free - sandbox_free during %s: no callback after it", what);
	check(in_flight && w->done == 0 && w->released == 0, said);
	loop_free(w->loop);
	buffer_free(&w->streamed[0]);
	buffer_free(&w->streamed[1]);
	snprintf(said, sizeof said, "free - ... %s ran on to its end: the container is removed",
		what);
	check(fake_count(f, "rm-end", name) == 1, said);
	reap_abandoned(f);
	snprintf(said, sizeof said, "free - during %s: nothing left running", what);
	check(nothing_left(f), said);
}

static void free_while_removing(void)
{
	struct fake f;
	struct watch w;
	struct error err;
	char name[64];
	fake_new(&f, "free-while-rm", "run hang\nrm slow\n");
	struct program p = make_program("print(1)", loop_now_ms() + 30000);
	start(&w, &f, false, &err);
	sandbox_submit(w.sb, &p);
	for (int64_t until = loop_now_ms() + 20000; !w.streamed[0].len && loop_now_ms() < until;)
		turn_for(w.loop, 50);
	snprintf(name, sizeof name, "%s", sandbox_name(w.sb));
	sandbox_stop(w.sb, STOP_SIGNAL, SIGTERM);
	free_during_removal(&w, &f, name, "the stop's podman rm");

	fake_new(&f, "free-while-discard", "run race 1\nrm slow\n");
	start(&w, &f, false, &err);
	for (int64_t until = loop_now_ms() + 20000;
	     fake_count(&f, "run", NULL) < 2 && loop_now_ms() < until;)
		turn_for(w.loop, 50);
	fake_lines(&f, "run", NULL, 0, name, sizeof name);
	free_during_removal(&w, &f, name, "a start race's removal");
}

/* ---- the runner --------------------------------------------------------------- */

struct front {
	struct loop *loop;
	int done, outputs, drained;
	struct run_result result; /* at on_done, its buffers left out */
	char out[128], err[128];
	int attempts;
	bool warm;
	bool free_in_done;
};

static void front_output(struct call *c, int stream, const char *bytes, size_t len, void *data)
{
	struct front *fr = data;
	fr->outputs++;
	loop_quit(fr->loop);
}

static void front_done(struct call *c, void *data)
{
	struct front *fr = data;
	const struct run_result *r = call_result(c);
	fr->done++;
	fr->result = *r;
	fr->result.out = fr->result.err = (struct buffer){0};
	snprintf(fr->out, sizeof fr->out, "%s", r->out.data ? r->out.data : "");
	snprintf(fr->err, sizeof fr->err, "%s", r->err.data ? r->err.data : "");
	fr->attempts = call_attempts(c);
	fr->warm = call_warm(c);
	if (fr->free_in_done)
		call_free(c);
	loop_quit(fr->loop);
}

static void front_drained(void *data)
{
	struct front *fr = data;
	fr->drained++;
	loop_quit(fr->loop);
}

static struct runner *runner_for(struct loop *loop, struct host *h, const char *podman,
		int serial)
{
	*h = (struct host){.image = fake_image, .image_checked = true};
	snprintf(h->podman, sizeof h->podman, "%.*s", (int)sizeof h->podman - 1, podman);
	struct runner_options o = {.loop = loop, .host = h, .cfg = &cfg, .who = "unit",
		.running_max = 1, .serial = serial};
	return runner_new(&o);
}

static struct call_spec make_spec(struct front *fr, const char *code, bool retry)
{
	return (struct call_spec){.program = make_program(code, 0), .timeout_ms = 30000,
		.retry = retry, .keep_output = true, .on_output = front_output,
		.on_done = front_done, .data = fr};
}

/* Drains and frees the runner: true when everything ended. */
static bool drain(struct runner *r, struct front *fr)
{
	runner_drain(r, SIGTERM, "the test is over", front_drained, fr);
	bool drained = turn_until(fr->loop, &fr->drained, 1, 20000);
	runner_free(r);
	if (drained)
		loop_free(fr->loop);
	return drained;
}

static void runner_retry(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop};
	fake_new(&f, "runner-retry", "run die-then-normal\n");
	struct runner *r = runner_for(loop, &h, f.podman, 0);
	struct call_spec spec = make_spec(&fr, "print(3)", true);
	struct call *c = runner_submit(r, &spec);
	turn_until(loop, &fr.done, 1, 20000);
	check(fr.done == 1 && fr.attempts == 2,
		"runner - retry: the sandbox broke under the call, which ran once more "
		"(call_attempts 2)");
	check(!fr.result.failed && !fr.result.sandbox_broke && fr.result.exit_code == 0 &&
		strcmp(fr.out, "out:print(3)") == 0,
		"runner - retry: the result is the second sandbox's, whole");
	check(fake_count(&f, "run", NULL) == 2 && fake_count(&f, "call", "print(3)") == 2,
		"runner - retry: in two containers");
	call_free(c);
	check(drain(r, &fr) && nothing_left(&f), "runner - retry: drained, nothing left running");

	loop = loop_new();
	fr = (struct front){.loop = loop};
	fake_new(&f, "runner-no-retry", "run die-then-normal\n");
	r = runner_for(loop, &h, f.podman, 0);
	spec = make_spec(&fr, "print(3)", false);
	c = runner_submit(r, &spec);
	turn_until(loop, &fr.done, 1, 20000);
	check(fr.done == 1 && fr.attempts == 1 && fr.result.sandbox_broke &&
		fr.result.exit_code == 1 && strcmp(fr.out, "partial output\n") == 0 &&
		has(fr.err, "fake launcher died"),
		"runner - no retry asked: one attempt, sandbox_broke, exit 1, its output");
	call_free(c);
	check(drain(r, &fr) && nothing_left(&f), "runner - no retry: drained, nothing left running");
}

/* A serial container whose podman dies while it waits for a call: a call
 * that comes while its removal runs is not given to it, but to a new one. */
static void runner_serial_killed_idle(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop};
	fake_new(&f, "runner-serial-killed", "run serial 1 killed\nrm slow 1000\n");
	struct runner *r = runner_for(loop, &h, f.podman, 1);
	struct call_spec one = make_spec(&fr, "print(3)", false);
	struct call *c1 = runner_submit(r, &one);
	turn_until(loop, &fr.done, 1, 20000);
	for (int64_t until = loop_now_ms() + 20000;
	     !fake_count(&f, "rm", NULL) && loop_now_ms() < until;)
		turn_for(loop, 20);
	struct call_spec two = make_spec(&fr, "print(4)", false);
	struct call *c2 = runner_submit(r, &two);
	turn_until(loop, &fr.done, 2, 20000);
	check(fr.done == 2 && !fr.result.sandbox_broke && fr.result.exit_code == 0 &&
		strcmp(fr.out, "out:print(4)") == 0 && fr.attempts == 1,
		"runner - serial killed while idle: the next call, come during its removal, "
		"runs whole in a new container");
	check(fake_count(&f, "run", NULL) == 2 && fake_count(&f, "rm", NULL) == 1,
		"runner - ... two containers; the dead one removed");
	call_free(c1);
	call_free(c2);
	check(drain(r, &fr) && nothing_left(&f),
		"runner - serial killed while idle: drained, nothing left running");
}

/* A session ended while its first call still waits for its turn: the call
 * is refused, nothing of it run, and no session starts after. */
static void runner_end_waiting_session(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop};
	fake_new(&f, "runner-end-waiting", "run launcher\n");
	h = (struct host){.image = fake_image, .image_checked = true};
	snprintf(h.podman, sizeof h.podman, "%.*s", (int)sizeof h.podman - 1, f.podman);
	struct runner_options o = {.loop = loop, .host = &h, .cfg = &cfg, .who = "unit",
		.running_max = 1, .sessions_max = 1};
	struct runner *r = runner_new(&o);
	struct call_spec busy = make_spec(&fr, "#sleep 1500", false);
	struct call *c1 = runner_submit(r, &busy);
	struct call_spec cell = make_spec(&fr, "print(5)", false);
	cell.session = "s1";
	struct call *c2 = runner_submit(r, &cell);
	check(runner_waiting(r) == 1 && runner_end_session(r, "s1") == 0 &&
		runner_end_session(r, "s1") == -1,
		"runner - a session ended before its first call's turn: ended (0 calls), then gone");
	turn_until(loop, &fr.done, 1, 20000);
	check(fr.done == 1 && fr.result.failed && fr.result.exit_code == 143 &&
		has(fr.result.failure.message, "session s1 was ended") &&
		has(fr.result.failure.message, "nothing was run"),
		"runner - ... its waiting call refused, 143, said so");
	turn_until(loop, &fr.done, 2, 20000);
	check(fr.done == 2 && fake_count(&f, "call", "print(5)") == 0 &&
		fake_count(&f, "run", NULL) == 1,
		"runner - ... and it never runs: one container, the other call's");
	call_free(c1);
	call_free(c2);
	check(drain(r, &fr) && nothing_left(&f), "runner - end waiting session: nothing left");
}

static void runner_cannot_start(void)
{
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop};
	struct runner *r = runner_for(loop, &h, "/nonexistent/podman", 0);
	struct call_spec spec = make_spec(&fr, "print(1)", true);
	struct call *c = runner_submit(r, &spec);
	turn_until(loop, &fr.done, 1, 5000);
	check(fr.done == 1 && fr.result.failed && fr.result.failure.status == EXIT_REFUSED &&
		fr.result.exit_code == EXIT_REFUSED &&
		has(fr.result.failure.message, "cannot execute podman"),
		"runner - podman cannot be executed: on_done, failed 125, podman named");
	call_free(c);
	runner_drain(r, SIGTERM, "the test is over", front_drained, &fr);
	check(fr.drained == 1, "runner - ... and the drain of nothing is done at once");
	runner_free(r);
	loop_free(loop);
}

/* Synchronous refusals: runner_submit returns a live call, and its on_done
 * comes from the loop, after runner_submit returned (a front end that
 * stores the call, or frees it in on_done, is then never wrong). */
static void runner_refusals(void)
{
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop, .free_in_done = true};
	struct runner *r = runner_for(loop, &h, "/nonexistent/podman", 0);
	struct call_spec spec = make_spec(&fr, "print(1)", false);
	struct call *c = runner_submit(r, &spec);
	check(c && fr.done == 0 && call_result(c)->failed &&
		call_result(c)->failure.status == EXIT_REFUSED,
		"refusal - podman cannot start: runner_submit returns the live call, refused; "
		"no on_done inside it");
	turn_until(loop, &fr.done, 1, 5000);
	check(fr.done == 1 && fr.result.podman_failed &&
		has(fr.result.failure.message, "cannot execute podman"),
		"refusal - ... on_done on the next turn (and the call freed there)");

	struct front fs = {.loop = loop, .free_in_done = true};
	spec = make_spec(&fs, "x = 1", false);
	spec.session = "s1";
	c = runner_submit(r, &spec);
	check(c && fs.done == 0 && call_result(c)->failed &&
		has(call_result(c)->failure.message, "session s1 was not started"),
		"refusal - past sessions_max: runner_submit returns the live call, refused; "
		"no on_done inside it");
	turn_until(loop, &fs.done, 1, 5000);
	check(fs.done == 1 && fs.result.failure.status == EXIT_REFUSED,
		"refusal - ... on_done on the next turn, status 125");

	/* A drain waits for an on_done on its way, unless the call is freed
	 * first: then it never comes, and the drain is done from the loop. */
	struct front fd = {.loop = loop};
	spec = make_spec(&fd, "print(2)", false);
	c = runner_submit(r, &spec);
	runner_drain(r, SIGTERM, "the test is over", front_drained, &fd);
	check(fd.drained == 0, "refusal - a drain waits for the on_done on its way");
	call_free(c);
	check(fd.drained == 0, "refusal - ... the call freed first: the drain is not done inside "
		"call_free");
	turn_until(loop, &fd.drained, 1, 5000);
	check(fd.drained == 1 && fd.done == 0,
		"refusal - ... but on the next turn, and the freed call's on_done never comes");
	runner_free(r);
	loop_free(loop);
}

/* call_free of a running call: the sandbox, stopping, lets go of the
 * program's code, files in and out, which the front end frees at once.
 * Sharpest under -fsanitize=address. */
static void runner_free_running(void)
{
	struct fake f;
	struct host h;
	struct error err;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop};
	fake_new(&f, "runner-free-running", "run hang\n");
	struct runner *r = runner_for(loop, &h, f.podman, 0);
	char *code = strdup("print('files')");
	struct infiles *in = calloc(1, sizeof *in);
	struct outfiles *out = calloc(1, sizeof *out);
	if (!code || !in || !out || infiles_add_bytes(in, "data.txt", "hello", 5, &err) < 0 ||
	    outfiles_open(out, f.dir, false, &cfg, &err) < 0) {
		printf("Bail out! cannot make the call's files: %s\n", err.message);
		exit(2);
	}
	struct call_spec spec = make_spec(&fr, code, false);
	spec.program.in = in;
	spec.program.out = out;
	struct call *c = runner_submit(r, &spec);
	turn_until(loop, &fr.outputs, 1, 20000);
	check(fr.outputs == 1 && runner_running(r) == 1, "free - a call with files runs");
	call_free(c);
	outfiles_close(out);
	free(out);
	infiles_free(in);
	free(in);
	free(code);
	check(drain(r, &fr) && fr.done == 0 && fake_count(&f, "rm", NULL) == 1 && nothing_left(&f),
		"free - call_free while it runs: stopped and removed, nothing of the call touched "
		"after (its files freed), no on_done");
}

static void runner_drains(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop};
	fake_new(&f, "runner-drain", "run hang\n");
	struct runner *r = runner_for(loop, &h, f.podman, 0);
	struct call_spec sa = make_spec(&a, "print('a')", false);
	struct call_spec sb = make_spec(&b, "print('b')", false);
	struct call *ca = runner_submit(r, &sa), *cb = runner_submit(r, &sb);
	check(runner_running(r) == 1 && runner_waiting(r) == 1,
		"runner - running_max 1: one call runs, the next waits");
	turn_until(loop, &a.outputs, 1, 20000);
	runner_drain(r, SIGTERM, "the server is stopping", front_drained, &a);
	check(b.done == 0 && call_result(cb)->failed,
		"runner - drain: the waiting call ends at once, its on_done not inside runner_drain");
	turn_until(loop, &b.done, 1, 5000);
	check(b.done == 1 && b.result.failed && b.result.failure.status == 128 + SIGTERM &&
		b.result.exit_code == 128 + SIGTERM &&
		has(b.result.failure.message, "the server is stopping"),
		"runner - drain: ... and on_done on the next turn: failed, status 143, with the why");
	turn_until(loop, &a.drained, 1, 20000);
	check(a.done == 1 && !a.result.failed && a.result.interrupted_by == SIGTERM &&
		a.result.exit_code == 128 + SIGTERM,
		"runner - drain: the running call is stopped, interrupted_by SIGTERM, exit 143");
	check(a.drained == 1 && fake_count(&f, "run", NULL) == 1 &&
		fake_count(&f, "rm", NULL) == 1 && fake_count(&f, "call", "print('b')") == 0,
		"runner - drain: done once its container is removed; the waiting call never ran");
	call_free(ca);
	call_free(cb);
	runner_free(r);
	if (a.drained)
		loop_free(loop);
	check(nothing_left(&f), "runner - drain: nothing left running");
}

/* A front end frees its call in on_done (runner_drain's walk allows it):
 * nothing in the runner may touch the call after. Sharpest under
 * -fsanitize=address. */
static void runner_free_in_done(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front fr = {.loop = loop, .free_in_done = true};
	fake_new(&f, "runner-free", "run normal\n");
	struct runner *r = runner_for(loop, &h, f.podman, 0);
	struct call_spec spec = make_spec(&fr, "print(4)", false);
	runner_submit(r, &spec);
	turn_until(loop, &fr.done, 1, 20000);
	check(fr.done == 1 && fr.result.exit_code == 0 && strcmp(fr.out, "out:print(4)") == 0,
		"runner - a call freed in its on_done (its sandbox not yet released): its result was whole");
	check(runner_running(r) == 0 && runner_waiting(r) == 0,
		"runner - ... and the runner holds no call");
	check(drain(r, &fr) && nothing_left(&f),
		"runner - ... its sandbox is released later without it; drained");

	/* A waiting call cancelled, and freed in its on_done. */
	loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop, .free_in_done = true};
	fake_new(&f, "runner-cancel", "run hang\n");
	r = runner_for(loop, &h, f.podman, 0);
	struct call_spec sa = make_spec(&a, "print('a')", false);
	struct call_spec sb = make_spec(&b, "print('b')", false);
	struct call *ca = runner_submit(r, &sa), *cb = runner_submit(r, &sb);
	call_cancel(cb, SIGINT);
	check(b.done == 0 && call_result(cb)->interrupted_by == SIGINT && runner_waiting(r) == 0,
		"runner - a waiting call cancelled: ended at once, but no on_done inside call_cancel");
	turn_until(loop, &b.done, 1, 5000);
	check(b.done == 1 && b.result.interrupted_by == SIGINT && b.result.exit_code == 128 + SIGINT,
		"runner - ... on_done on the next turn: interrupted_by SIGINT, exit 130");
	check(runner_waiting(r) == 0 && runner_running(r) == 1,
		"runner - ... freed in its on_done, it is gone from the runner");
	/* A waiting call refused: the same. */
	struct front c3 = {.loop = loop};
	struct call_spec s3 = make_spec(&c3, "print('c')", false);
	struct call *cc = runner_submit(r, &s3);
	struct error why;
	error_set(&why, EXIT_REFUSED, NULL, "%s", "refused by the test");
	check(call_refuse_waiting(cc, &why) && c3.done == 0 && call_result(cc)->failed,
		"runner - a waiting call refused: ended at once, no on_done inside call_refuse_waiting");
	turn_until(loop, &c3.done, 1, 5000);
	check(c3.done == 1 && c3.result.failed && has(c3.result.failure.message, "by the test"),
		"runner - ... on_done on the next turn, with the refusal");
	call_free(cc);
	turn_until(loop, &a.outputs, 1, 20000);
	call_cancel(ca, SIGINT);
	turn_until(loop, &a.done, 1, 20000);
	check(a.done == 1 && a.result.interrupted_by == SIGINT && a.result.exit_code == 128 + SIGINT &&
		fake_count(&f, "rm", NULL) == 1,
		"runner - a running call cancelled: stopped, exit 130, its container removed");
	call_free(ca);
	check(drain(r, &a) && nothing_left(&f), "runner - cancel: drained, nothing left running");
}

static void runner_serial(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop};
	fake_new(&f, "runner-serial", "run serial 5\n");
	struct runner *r = runner_for(loop, &h, f.podman, 1);
	struct call_spec sa = make_spec(&a, "5", false);
	struct call_spec sb = make_spec(&b, "6", false);
	struct call *ca = runner_submit(r, &sa), *cb = runner_submit(r, &sb);
	turn_until(loop, &b.done, 1, 20000);
	check(a.done == 1 && b.done == 1 && a.result.exit_code == 0 && b.result.exit_code == 0 &&
		strcmp(a.out, "out:5") == 0 && strcmp(b.out, "out:6") == 0,
		"runner - serial: two calls, each its own result");
	check(fake_count(&f, "run", NULL) == 1 && !a.warm && b.warm,
		"runner - serial: one container, the second call ran warm in it");
	call_free(ca);
	call_free(cb);
	check(drain(r, &a) && fake_count(&f, "rm", NULL) == 1 && nothing_left(&f),
		"runner - serial: the drain removes the waiting container; nothing left running");
}

/* A runner of one serial sandbox, started ahead and ready (its start
 * time known), for the overflow cases. */
static struct runner *ready_serial(struct loop *loop, struct host *h, const struct fake *f,
		bool overflow)
{
	*h = (struct host){.image = fake_image, .image_checked = true};
	snprintf(h->podman, sizeof h->podman, "%.*s", (int)sizeof h->podman - 1, f->podman);
	struct runner *r = runner_new(&(struct runner_options){.loop = loop, .host = h,
		.cfg = &cfg, .who = "unit", .running_max = 1, .warm = 1, .serial = 1,
		.overflow = overflow});
	for (int i = 0; i < 500 && runner_ready(r) < 1; i++)
		turn_for(loop, 20);
	return r;
}

/* opt.overflow: behind the serial sandbox busy with a long call, b waits
 * as long as that sandbox took to start, then gets a one-call container
 * of its own and ends first; without overflow it waits its turn. With
 * overflow, p ahead of b, whose deadline comes before a container could
 * start, is passed over (not given one, and b is not held by it), and is
 * refused at its deadline as a front end does. */
static void overflow_case(bool overflow)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop}, p = {.loop = loop};
	const char *name = overflow ? "runner-overflow" : "runner-no-overflow";
	char what[200];
	fake_new(&f, name, "run launcher\n");
	struct runner *r = ready_serial(loop, &h, &f, overflow);
	struct call_spec sa = make_spec(&a, "#sleep 5000", false);
	struct call_spec sb = make_spec(&b, "7", false);
	struct call_spec sp = make_spec(&p, "8", false);
	sp.program.deadline = loop_now_ms() + 1;
	struct call *ca = runner_submit(r, &sa);
	struct call *cp = overflow ? runner_submit(r, &sp) : NULL;
	struct call *cb = runner_submit(r, &sb);
	turn_until(loop, &b.done, 1, 20000);
	snprintf(what, sizeof what, "runner - %s: the second call %s", name,
		overflow ? "ends first, cold, in a container of its own" :
		"waits for the first, and runs warm after it");
	check(b.done == 1 && strcmp(b.out, "out:7") == 0 && a.done == (overflow ? 0 : 1) &&
		b.warm == !overflow && fake_count(&f, "run", NULL) == (overflow ? 2 : 1), what);
	if (cp) {
		check(p.done == 0 && call_refuse_waiting(cp, &(struct error){.status = EXIT_TIMEOUT}),
			"runner - runner-overflow: a call whose deadline comes first is passed over, "
			"still waiting");
		turn_until(loop, &p.done, 1, 20000);
		check(p.done == 1 && p.result.exit_code == EXIT_TIMEOUT && p.out[0] == '\0' &&
			fake_count(&f, "call", "8") == 0,
			"runner - runner-overflow: refused at its deadline, nothing run");
	}
	turn_until(loop, &a.done, 1, 20000);
	snprintf(what, sizeof what, "runner - %s: the first call's own result", name);
	check(a.done == 1 && a.result.exit_code == 0 && strcmp(a.out, "out:#sleep 5000") == 0, what);
	call_free(ca);
	call_free(cb);
	call_free(cp);
	snprintf(what, sizeof what, "runner - %s: drained, nothing left running", name);
	check(drain(r, &a) && nothing_left(&f), what);
}

/* opt.overflow: a call whose serial sandbox broke is retried in an
 * overflow container, outside the turn: the serial sandbox started in
 * place of the broken one serves the next call at once, warm, while the
 * retry runs. */
static void overflow_retry(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front j = {.loop = loop}, c = {.loop = loop};
	fake_new(&f, "runner-overflow-retry", "run die-then-launcher\n");
	struct runner *r = ready_serial(loop, &h, &f, true);
	struct call_spec sj = make_spec(&j, "#sleep 3000", true);
	struct call *cj = runner_submit(r, &sj);
	for (int i = 0; i < 500 && !(call_attempts(cj) == 2 && runner_ready(r) == 1); i++)
		turn_for(loop, 20);
	struct call_spec sc = make_spec(&c, "9", false);
	struct call *cc = runner_submit(r, &sc);
	turn_until(loop, &c.done, 1, 20000);
	check(c.done == 1 && strcmp(c.out, "out:9") == 0 && c.warm && j.done == 0,
		"runner - runner-overflow-retry: the next call runs at once, warm, while the retry runs");
	turn_until(loop, &j.done, 1, 20000);
	check(j.done == 1 && j.attempts == 2 && j.result.exit_code == 0 &&
		strcmp(j.out, "out:#sleep 3000") == 0 && fake_count(&f, "run", NULL) == 3,
		"runner - runner-overflow-retry: the retry's own result, in a container of its own");
	call_free(cj);
	call_free(cc);
	check(drain(r, &j) && nothing_left(&f),
		"runner - runner-overflow-retry: drained, nothing left running");
}

/* opt.overflow: a call whose serial sandbox never got ready (podman
 * refused it), before any sandbox of the runner did: its retry needs no
 * start time to get a container of its own at once. */
static void overflow_retry_first(void)
{
	struct fake f;
	struct host h = {.image = fake_image, .image_checked = true};
	struct loop *loop = loop_new();
	struct front j = {.loop = loop};
	fake_new(&f, "runner-overflow-retry-first", "run early-then-launcher\n");
	snprintf(h.podman, sizeof h.podman, "%.*s", (int)sizeof h.podman - 1, f.podman);
	struct runner *r = runner_new(&(struct runner_options){.loop = loop, .host = &h,
		.cfg = &cfg, .who = "unit", .running_max = 1, .serial = 1, .overflow = true});
	struct call_spec sj = make_spec(&j, "4", true);
	struct call *cj = runner_submit(r, &sj);
	turn_until(loop, &j.done, 1, 20000);
	check(j.done == 1 && j.attempts == 2 && strcmp(j.out, "out:4") == 0 &&
		fake_count(&f, "run", NULL) == 2,
		"runner - runner-overflow-retry-first: retried at once, in a container of its own");
	call_free(cj);
	check(drain(r, &j) && nothing_left(&f),
		"runner - runner-overflow-retry-first: drained, nothing left running");
}

/* opt.overflow: where podman cannot be spawned as a waiting call's
 * overflow container would start, the start is tried again a second
 * later (not at every pump, nor only as the busy sandbox ends): once
 * podman is back, the call gets its container and ends first. */
static void overflow_start_fails(void)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop};
	char away[PATH_MAX + 32];
	fake_new(&f, "runner-overflow-podman-gone", "run launcher\n");
	struct runner *r = ready_serial(loop, &h, &f, true);
	snprintf(away, sizeof away, "%s.away", f.podman);
	struct call_spec sa = make_spec(&a, "#sleep 5000", false);
	struct call_spec sb = make_spec(&b, "7", false);
	struct call *ca = runner_submit(r, &sa);
	turn_for(loop, 100);
	bool moved = rename(f.podman, away) == 0;
	struct call *cb = runner_submit(r, &sb);
	turn_for(loop, 1500); /* past the sandbox's start: the overflow start fails */
	bool back = moved && rename(away, f.podman) == 0;
	turn_until(loop, &b.done, 1, 20000);
	check(back && b.done == 1 && strcmp(b.out, "out:7") == 0 && !b.warm && a.done == 0 &&
		fake_count(&f, "run", NULL) == 2,
		"runner - runner-overflow-podman-gone: tried again once podman is back, and ends first");
	turn_until(loop, &a.done, 1, 20000);
	call_free(ca);
	call_free(cb);
	check(a.done == 1 && a.result.exit_code == 0 && drain(r, &a) && nothing_left(&f),
		"runner - runner-overflow-podman-gone: drained, nothing left running");
}

static void runner_overflow(void)
{
	overflow_case(true);
	overflow_case(false);
	overflow_retry();
	overflow_retry_first();
	overflow_start_fails();
}

/* Runs of the fake (mode warm-crash) that were granted a warm-up. */
static int warm_runs(const struct fake *f)
{
	char line[300];
	int warm = 0;
	for (int i = 0; i < fake_count(f, "run", NULL); i++) {
		fake_lines(f, "run", NULL, i, line, sizeof line);
		size_t len = strlen(line);
		warm += len > 5 && strcmp(line + len - 5, " warm") == 0;
	}
	return warm;
}

/* A serial container's launcher dies by SIGSEGV at its second call. Before
 * its warm-up ended (no W frame), that is the warm-up's doing: the call
 * runs once more, and no container the runner starts after it is granted
 * a warm-up. After a W frame it is not, nor a SIGKILL (an OOM killer's,
 * podman's) before it: the next serial one is. */
static void warm_crash_case(const char *name, const char *mode, bool goes_cold)
{
	struct fake f;
	struct host h;
	struct loop *loop = loop_new();
	struct front a = {.loop = loop}, b = {.loop = loop}, c = {.loop = loop};
	char what[200];
	fake_new(&f, name, mode);
	struct runner *r = runner_for(loop, &h, f.podman, 1);
	struct call_spec sa = make_spec(&a, "1", true), sb = make_spec(&b, "2", true);
	struct call_spec sc = make_spec(&c, "3", true);
	struct call *ca = runner_submit(r, &sa), *cb = runner_submit(r, &sb);
	struct call *cc = runner_submit(r, &sc);
	turn_until(loop, &c.done, 1, 20000);
	turn_until(loop, &b.done, 1, 20000);
	snprintf(what, sizeof what, "runner - %s: three calls, each its output; the second "
		"in two containers", name);
	check(a.done == 1 && b.done == 1 && c.done == 1 && strcmp(a.out, "out:1") == 0 &&
		strcmp(b.out, "out:2") == 0 && strcmp(c.out, "out:3") == 0 &&
		a.attempts == 1 && b.attempts == 2 && c.attempts == 1 && !b.result.sandbox_broke,
		what);
	/* Three runs: the first serial one (granted), the retry's one-call
	 * container (never granted), the next serial one. */
	snprintf(what, sizeof what, "runner - %s: the next serial container is granted %s", name,
		goes_cold ? "no warm-up" : "a warm-up");
	check(fake_count(&f, "run", NULL) == 3 && warm_runs(&f) == (goes_cold ? 1 : 2), what);
	call_free(ca);
	call_free(cb);
	call_free(cc);
	snprintf(what, sizeof what, "runner - %s: drained, nothing left running", name);
	check(drain(r, &c) && nothing_left(&f), what);
}

static void runner_warm_crash(void)
{
	warm_crash_case("warm-crash", "run warm-crash\n", true);
	warm_crash_case("crash-after-warm-up", "run warm-crash warmed\n", false);
	warm_crash_case("killed-while-warming", "run warm-crash killed\n", false);
}

/* ---- main ------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* ---- the host check ---------------------------------------------------------- */

struct host_seen {
	struct loop *loop;
	int answers;
	bool inside; /* host_check() had not returned yet */
	bool answered_inside;
};

static void host_answered(struct host *h, void *data)
{
	struct host_seen *seen = data;
	seen->answers++;
	seen->answered_inside = seen->inside;
}

/* Answers come from the loop, never inside host_check(); a check cancelled
 * while podman is asked is never answered, and nothing of it is left on
 * the loop (a strict loop_free() would abort). */
static void host_check_answers_later_and_cancels(void)
{
	struct loop *loop = loop_new();
	struct host h;
	struct host_check *pending = NULL;
	struct host_seen seen = {.loop = loop};
	char cache[PATH_MAX + 16], why[256];
	/* Nothing cached: podman info is asked. */
	snprintf(cache, sizeof cache, "%s/host-cache", scratch);
	setenv("XDG_CACHE_HOME", cache, 1);

	static char missing[] = "/nonexistent/podman";
	setting_set(&cfg, SET_PODMAN, missing, FROM_FLAG, why, sizeof why);
	seen.inside = true;
	host_check(loop, &pending, &cfg, loop_now_ms() + 5000, true, &h, host_answered, &seen);
	seen.inside = false;
	turn_for(loop, 50);
	check(seen.answers == 1 && !seen.answered_inside && !pending,
		"host check: a refusal known at once is answered from the loop, not inside the call");

	if (geteuid() == 0) {
		/* As root the rootless check refuses before podman is asked. */
		skip("host check: cancelled while podman info runs", "root is refused before podman");
		loop_free(loop);
		unsetenv("XDG_CACHE_HOME");
		return;
	}
	struct fake f;
	fake_new(&f, "host-slow", "info slow 3000\n");
	seen = (struct host_seen){.loop = loop};
	int64_t began = loop_now_ms();
	host_check(loop, &pending, &cfg, loop_now_ms() + 10000, true, &h, host_answered, &seen);
	/* podman info's start (a Python fake) is under a second. */
	turn_for(loop, 1000);
	host_check_cancel(&pending);
	check(!pending && loop_now_ms() - began < 2000 && seen.answers == 0,
		"host check: cancelled while podman info runs, at once, the slot cleared");
	turn_for(loop, 200);
	check(seen.answers == 0, "host check: ... and never answered");
	loop_free(loop);
	unsetenv("XDG_CACHE_HOME");
	/* The abandoned podman info runs on to its end: reaped here. */
	reap_abandoned(&f);
}


/* Every case, in order; the command line may name some to run alone. */
static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{"normal", normal_call},
	{"not-executable", podman_not_executable},
	{"exits-early", podman_exits_early},
	{"protocol", protocol_broken},
	{"dies-mid-output", podman_dies_mid_output},
	{"throttled-at-its-end", throttled_at_its_end},
	{"deadline", deadline},
	{"session-cell-late", session_cells_late},
	{"output-limit", output_limit},
	{"serial", serial_calls},
	{"race", start_race},
	{"race-claims", start_race_claims},
	{"stop-claim-free", stop_claim_free},
	{"free-while-removing", free_while_removing},
	{"runner-retry", runner_retry},
	{"runner-serial-killed-idle", runner_serial_killed_idle},
	{"runner-end-waiting-session", runner_end_waiting_session},
	{"runner-cannot-start", runner_cannot_start},
	{"runner-refusals", runner_refusals},
	{"runner-free-running", runner_free_running},
	{"runner-drain", runner_drains},
	{"runner-free-in-done", runner_free_in_done},
	{"runner-serial", runner_serial},
	{"runner-warm-crash", runner_warm_crash},
	{"runner-overflow", runner_overflow},
	{"host-check", host_check_answers_later_and_cancels},
};

static bool chosen(const char *name, int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return argc < 2;
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX], why[256];
	/* A timer or watch left held at loop_free() aborts the case. */
	loop_strict = true;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Only what the cases set: none of the caller's SAGE_SANDBOX_*. */
	for (int id = 0; id < SETTING_COUNT; id++)
		unsetenv(settings[id].env);
	if (config_init(&cfg, (const char *[SETTING_COUNT]){0}, false, why, sizeof why) < 0) {
		printf("Bail out! %s\n", why);
		return 2;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(fake_script, sizeof fake_script, "%s/fake-podman", dirname(exe));
	if (access(fake_script, X_OK) < 0) {
		printf("Bail out! %s is not executable: %s\n", fake_script, strerror(errno));
		return 2;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof scratch, "%s/unit-sandbox-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		printf("Bail out! cannot make a scratch directory %s: %s\n", scratch, strerror(errno));
		return 2;
	}
	int64_t began = loop_now_ms();

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (!chosen(cases[i].name, argc, argv))
			continue;
		int64_t case_began = loop_now_ms();
		cases[i].run();
		printf("# %s: %lld ms\n", cases[i].name, (long long)(loop_now_ms() - case_began));
	}

	printf("# all: %lld ms\n", (long long)(loop_now_ms() - began));
	if (failures)
		printf("# the cases' directories are kept in %s\n", scratch);
	else
		nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	printf("1..%d\n", test_number);
	return failures ? 1 : 0;
}
