/* sandbox.c: the settings table, the podman command line, the I/O loop that
 * runs a child against a deadline, and the result of a run. */

#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the settings table ---------------------------------------------- */

static const char *const memory_choices[] = {"256m", "512m", "1g", "2g", "4g", "8g", NULL};

const struct setting settings[SETTING_COUNT] = {
	[SET_IMAGE] = {"--image", "SAGE_SANDBOX_IMAGE", "IMAGE", "image", KIND_IMAGE, 0, 0, NULL,
		"an image reference, not starting with '-', no white space",
		"localhost/sagemath-debian:bookworm", "container image with /usr/bin/sage and a user sage"},
	[SET_PODMAN] = {"--podman", "SAGE_SANDBOX_PODMAN", "PATH", "podman", KIND_PATH, 0, 0, NULL,
		"an executable name or path", "podman", "podman executable"},
	[SET_TIMEOUT] = {"--timeout", "SAGE_SANDBOX_TIMEOUT", "SECONDS", "timeout_seconds",
		KIND_INTEGER, 1, 600, NULL, "an integer from 1 to 600", "60",
		"wall-clock limit for the whole run, container start included"},
	[SET_MEMORY] = {"--memory", "SAGE_SANDBOX_MEMORY", "SIZE", "memory", KIND_CHOICE, 0, 0,
		memory_choices, "256m, 512m, 1g, 2g, 4g or 8g", "1g", "memory limit"},
	[SET_CPUS] = {"--cpus", "SAGE_SANDBOX_CPUS", "N", "cpus", KIND_MILLI, 100, 4000, NULL,
		"a number from 0.1 to 4, at most 3 decimals", "1", "CPU share"},
	[SET_PIDS_LIMIT] = {"--pids-limit", "SAGE_SANDBOX_PIDS_LIMIT", "N", "pids_limit",
		KIND_INTEGER, 16, 512, NULL, "an integer from 16 to 512", "96",
		"processes and threads"},
	[SET_OUTPUT_LIMIT] = {"--output-limit", "SAGE_SANDBOX_OUTPUT_LIMIT", "KIB",
		"output_limit_kib", KIND_INTEGER, 16, 2048, NULL, "an integer from 16 to 2048", "256",
		"KiB of stdout and of stderr each, past which the run is stopped"},
	[SET_SECCOMP_PROFILE] = {"--seccomp-profile", "SAGE_SANDBOX_SECCOMP_PROFILE", "PATH",
		"seccomp_profile", KIND_PROFILE, 0, 0, NULL,
		"builtin, or a seccomp profile file in podman's JSON format", "builtin",
		"seccomp profile"},
};

const char *setting_source_name(enum setting_source source)
{
	switch (source) {
	case FROM_FLAG: return "flag";
	case FROM_ENVIRONMENT: return "environment";
	default: return "default";
	}
}

static bool parse_integer(const char *text, long *out)
{
	long value = 0;
	if (*text == '\0')
		return false;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9' || value > 100000000)
			return false;
		value = value * 10 + (*p - '0');
	}
	*out = value;
	return true;
}

/* "0.25" -> 250; no floating point, no locale, no "1e3" or "inf". */
static bool parse_milli(const char *text, long *out)
{
	const char *dot = strchr(text, '.');
	char whole[16];
	long units, fraction = 0;
	size_t whole_len = dot ? (size_t)(dot - text) : strlen(text);
	if (whole_len == 0 || whole_len >= sizeof whole)
		return false;
	memcpy(whole, text, whole_len);
	whole[whole_len] = '\0';
	if (!parse_integer(whole, &units))
		return false;
	if (dot) {
		size_t places = strlen(dot + 1);
		if (places == 0 || places > 3 || !parse_integer(dot + 1, &fraction))
			return false;
		for (; places < 3; places++)
			fraction *= 10;
	}
	*out = units * 1000 + fraction;
	return true;
}

static bool has_space_or_control(const char *text)
{
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return true;
	return false;
}

int setting_set(struct config *cfg, enum setting_id id, const char *text,
		enum setting_source source, char *why, size_t why_size)
{
	const struct setting *s = &settings[id];
	long number = 0;
	bool valid = false;

	switch (s->kind) {
	case KIND_IMAGE:
		valid = *text != '\0' && *text != '-' && !has_space_or_control(text);
		break;
	case KIND_PATH:
	case KIND_PROFILE:
		valid = *text != '\0' && !has_space_or_control(text);
		break;
	case KIND_INTEGER:
		valid = parse_integer(text, &number) && number >= s->min && number <= s->max;
		break;
	case KIND_MILLI:
		valid = parse_milli(text, &number) && number >= s->min && number <= s->max;
		break;
	case KIND_CHOICE:
		for (const char *const *c = s->choices; *c; c++)
			if (strcmp(text, *c) == 0)
				valid = true;
		break;
	}
	if (!valid) {
		const char *origin = source == FROM_ENVIRONMENT ? s->env : s->flag;
		snprintf(why, why_size, "invalid %s '%s': allowed is %s", origin, text, s->allowed);
		return -1;
	}
	cfg->value[id] = text;
	cfg->source[id] = source;
	cfg->number[id] = number;
	return 0;
}

int config_init(struct config *cfg, const char *const flag_value[SETTING_COUNT], char *why,
		size_t why_size)
{
	for (int id = 0; id < SETTING_COUNT; id++) {
		const char *env = getenv(settings[id].env);
		int rc;
		if (flag_value[id])
			rc = setting_set(cfg, id, flag_value[id], FROM_FLAG, why, why_size);
		else if (env && *env)
			rc = setting_set(cfg, id, env, FROM_ENVIRONMENT, why, why_size);
		else
			rc = setting_set(cfg, id, settings[id].fallback, FROM_DEFAULT, why, why_size);
		if (rc < 0)
			return -1;
	}
	return 0;
}

uint64_t config_memory_bytes(const struct config *cfg)
{
	const char *v = cfg->value[SET_MEMORY];
	uint64_t n = strtoull(v, NULL, 10);
	return v[strlen(v) - 1] == 'g' ? n << 30 : n << 20;
}

void sandbox_rlimits(const struct config *cfg, struct rlimit_value out[RLIMIT_COUNT])
{
	/* CPU seconds one process may use: what --cpus allows over the whole
	 * timeout, so that the rlimit bounds a spinning process where no cgroup
	 * does. At least 1: 0 would mean no limit. */
	uint64_t cpu = ((uint64_t)cfg->number[SET_TIMEOUT] * cfg->number[SET_CPUS] + 999) / 1000;
	out[RL_DATA] = (struct rlimit_value){"data", config_memory_bytes(cfg)};
	out[RL_CPU] = (struct rlimit_value){"cpu", cpu ? cpu : 1};
	out[RL_NPROC] = (struct rlimit_value){"nproc", (uint64_t)cfg->number[SET_PIDS_LIMIT]};
	/* Enough for Sage and its pexpect children; not enough to exhaust the
	 * kernel's file table. */
	out[RL_NOFILE] = (struct rlimit_value){"nofile", 1024};
	/* No single file beyond 128 MiB, whatever the tmpfs has left. */
	out[RL_FSIZE] = (struct rlimit_value){"fsize", 128ull << 20};
	/* No core dumps: a crashing 1 GiB process would fill /tmp. */
	out[RL_CORE] = (struct rlimit_value){"core", 0};
	/* No bytes for POSIX message queues: kernel memory outside any limit
	 * above, and nothing Sage uses. */
	out[RL_MSGQUEUE] = (struct rlimit_value){"msgqueue", 0};
}

/* ---- errors and buffers ------------------------------------------------ */

void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
{
	va_list ap;
	err->status = status;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
}

void buffer_append(struct buffer *b, const char *data, size_t len)
{
	if (len > SIZE_MAX - b->len - 1)
		abort();
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len + 1)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		char *p = realloc(b->data, cap);
		if (!p)
			abort();
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void buffer_free(struct buffer *b)
{
	free(b->data);
	*b = (struct buffer){0};
}

const char *next_line(const char **cursor, size_t *len)
{
	const char *line = *cursor;
	if (!line || !*line)
		return NULL;
	*len = strcspn(line, "\n");
	*cursor = line + *len + (line[*len] == '\n');
	return line;
}

int read_file(const char *path, size_t max, struct buffer *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char chunk[65536];
	ssize_t n;
	if (fd < 0)
		return -1;
	while ((n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || out->len + (size_t)n > max) {
			int saved = n < 0 ? errno : EFBIG;
			close(fd);
			buffer_free(out);
			errno = saved;
			return -1;
		}
		buffer_append(out, chunk, (size_t)n);
	}
	close(fd);
	if (!out->data)
		buffer_append(out, "", 0);
	return 0;
}

/* ---- children ---------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* SIGINT, SIGTERM and SIGHUP arrive as readable data on this descriptor, so
 * the one poll loop sees them like any other event and can remove the
 * container before sage-sandbox exits. */
static int signal_fd = -1;
static sigset_t terminating_signals;

int signals_watch(void)
{
	static const int watched[] = {SIGINT, SIGTERM, SIGHUP};
	sigemptyset(&terminating_signals);
	for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++) {
		/* A signal the caller ignores (nohup, a background job) stays
		 * ignored: that was the caller's choice. */
		struct sigaction old;
		if (sigaction(watched[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaddset(&terminating_signals, watched[i]);
	}
	if (sigprocmask(SIG_BLOCK, &terminating_signals, NULL) < 0)
		return -1;
	signal_fd = signalfd(-1, &terminating_signals, SFD_CLOEXEC | SFD_NONBLOCK);
	/* A closed pipe is an error from write(), not a death. */
	signal(SIGPIPE, SIG_IGN);
	return signal_fd < 0 ? -1 : 0;
}

/* Reads a pending terminating signal, or returns 0. */
static int pending_signal(void)
{
	struct signalfd_siginfo info;
	if (signal_fd >= 0 && read(signal_fd, &info, sizeof info) == sizeof info)
		return (int)info.ssi_signo;
	return 0;
}

char **podman_environment(void)
{
	/* Podman needs these to find its binaries, its per-user storage and
	 * runtime directory; nothing else of the caller's (API keys, tokens)
	 * may reach the container through `--env NAME` or a careless image. */
	static const char *const keep[] = {"PATH", "HOME", "XDG_RUNTIME_DIR",
		"DBUS_SESSION_BUS_ADDRESS", "TMPDIR"};
	static char *env[sizeof keep / sizeof keep[0] + 1];
	static bool built;
	size_t n = 0;
	if (built)
		return env;
	built = true;
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
		const char *v = getenv(keep[i]);
		if (!v)
			continue;
		if (asprintf(&env[n], "%s=%s", keep[i], v) < 0)
			abort();
		n++;
	}
	env[n] = NULL;
	return env;
}

char *find_executable(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *dir = path; *dir;) {
		size_t len = strcspn(dir, ":");
		char *candidate;
		if (asprintf(&candidate, "%.*s/%s", (int)(len ? len : 1), len ? dir : ".", name) < 0)
			abort();
		if (access(candidate, X_OK) == 0)
			return candidate;
		free(candidate);
		dir += len + (dir[len] == ':');
	}
	return NULL;
}

enum stop_reason { STOP_NONE, STOP_TIMEOUT, STOP_OUTPUT_LIMIT, STOP_SIGNAL, STOP_OUTPUT_CLOSED };

/* One child and everything the loop needs to drive it. */
struct child {
	char *const *argv;
	const char *input; /* written to its stdin, then closed; NULL: /dev/null */
	size_t input_len;
	size_t limit;       /* bytes kept per stream */
	bool stop_on_limit; /* passing the limit ends the run */
	int echo[2];        /* copy stdout/stderr live to these fds, or -1 */
	int64_t deadline;   /* CLOCK_MONOTONIC ms */
	bool watch_signals;
	int pass_fd;        /* given to the child as fd 3, or -1 */
	void (*stop)(struct child *c); /* ends the run early; default: SIGKILL */
	void *stop_context;

	pid_t pid;
	int stream_fd[2]; /* our ends of its stdout and stderr, or -1 */
	int status; /* exit code, or 128+N */
	int killed_by;
	enum stop_reason stopped;
	int stop_signal;
	struct buffer out[2]; /* what it printed, up to limit per stream; kept even when echoed,
			     * so that a podman failure can be explained from it */
	size_t seen[2];
	bool truncated[2];
};

/* The child side of fork: no stdio, no malloc, no exit(), nothing but dup2
 * and exec. */
static __attribute__((noreturn)) void child_exec(struct child *c, char **env, int in_fd,
		int out_fd, int err_fd)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Its own process group: a terminal's ^C reaches sage-sandbox only, which
	 * then stops the container by name (podman would only forward it). */
	setpgid(0, 0);
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(127);
	/* main() keeps 0-2 open, so pass_fd is never one of them. */
	if (c->pass_fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : c->pass_fd >= 0 && dup2(c->pass_fd, 3) < 0)
		_exit(127);
	close_range(c->pass_fd >= 0 ? 4 : 3, ~0U, 0);
	execve(c->argv[0], c->argv, env);
	_exit(127);
}

static void stop_by_killing(struct child *c)
{
	kill(c->pid, SIGKILL);
}

static void request_stop(struct child *c, enum stop_reason reason, int64_t *grace)
{
	if (c->stopped != STOP_NONE)
		return;
	c->stopped = reason;
	/* Nothing printed after a stop is kept. */
	for (int s = 0; s < 2; s++) {
		if (c->stream_fd[s] >= 0)
			close(c->stream_fd[s]);
		c->stream_fd[s] = -1;
	}
	(c->stop ? c->stop : stop_by_killing)(c);
	*grace = now_ms() + 10000;
}

static bool write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			poll(&p, 1, 100);
			continue;
		}
		if (n < 0)
			return false;
		data += n;
		len -= (size_t)n;
	}
	return true;
}

/* Takes a chunk of output: keeps and echoes what fits under the limit. */
static void take_output(struct child *c, int stream, const char *data, size_t len,
		int64_t *grace)
{
	size_t room = c->seen[stream] < c->limit ? c->limit - c->seen[stream] : 0;
	size_t used = len < room ? len : room;
	c->seen[stream] += len;
	if (c->stopped == STOP_NONE || c->stopped == STOP_OUTPUT_LIMIT) {
		buffer_append(&c->out[stream], data, used);
		if (c->echo[stream] >= 0 && used && !write_all(c->echo[stream], data, used))
			request_stop(c, STOP_OUTPUT_CLOSED, grace);
	}
	if (len > room) {
		c->truncated[stream] = true;
		if (c->stop_on_limit)
			request_stop(c, STOP_OUTPUT_LIMIT, grace);
	}
}

static int set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);
	return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Runs the child to its end: one poll over its stdin, stdout, stderr, its
 * exit (a pidfd) and our terminating signals, against a monotonic deadline.
 * Nothing blocks before the loop: a child that never reads its input cannot
 * hang us. Returns -1 with errno set if the child could not be started. */
static int child_run(struct child *c)
{
	int in[2] = {-1, -1}, out[2][2] = {{-1, -1}, {-1, -1}};
	int pidfd = -1, saved;
	char **env = podman_environment();

	if (c->input ? pipe2(in, O_CLOEXEC) < 0 :
		       (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (pipe2(out[0], O_CLOEXEC) < 0 || pipe2(out[1], O_CLOEXEC) < 0)
		goto fail;
	c->pid = fork();
	if (c->pid < 0)
		goto fail;
	if (c->pid == 0)
		child_exec(c, env, in[0], out[0][1], out[1][1]);
	pidfd = pidfd_open(c->pid, 0);
	close(in[0]);
	close(out[0][1]);
	close(out[1][1]);
	if (pidfd < 0) {
		saved = errno;
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		errno = saved;
		return -1;
	}

	int input_fd = in[1];
	int *stream_fd = c->stream_fd;
	stream_fd[0] = out[0][0];
	stream_fd[1] = out[1][0];
	size_t written = 0;
	bool exited = false;
	int64_t grace = 0, exited_at = 0;
	if (input_fd >= 0)
		set_nonblocking(input_fd);
	set_nonblocking(stream_fd[0]);
	set_nonblocking(stream_fd[1]);
	if (input_fd >= 0 && c->input_len == 0) {
		close(input_fd);
		input_fd = -1;
	}

	while (!exited || stream_fd[0] >= 0 || stream_fd[1] >= 0) {
		struct pollfd p[5];
		int n = 0, input_at = -1, stream_at[2] = {-1, -1}, signal_at = -1, exit_at = -1;
		int64_t now = now_ms(), until;

		if (c->stopped == STOP_NONE && now >= c->deadline)
			request_stop(c, STOP_TIMEOUT, &grace);
		if (c->stopped != STOP_NONE && !exited && now >= grace) {
			/* The polite stop did not end it: force it, then try again. */
			kill(c->pid, SIGKILL);
			(c->stop ? c->stop : stop_by_killing)(c);
			grace = now + 10000;
		}
		/* Once the child is gone, its pipes should close with it; a
		 * descendant that kept them open gets one second, no more. */
		if (exited && now - exited_at > 1000)
			break;
		until = exited ? exited_at + 1000 : c->stopped != STOP_NONE ? grace : c->deadline;

		if (input_fd >= 0)
			p[input_at = n++] = (struct pollfd){.fd = input_fd, .events = POLLOUT};
		for (int s = 0; s < 2; s++)
			if (stream_fd[s] >= 0)
				p[stream_at[s] = n++] = (struct pollfd){.fd = stream_fd[s], .events = POLLIN};
		if (c->watch_signals && signal_fd >= 0)
			p[signal_at = n++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
		if (!exited)
			p[exit_at = n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};

		int wait = until - now < 0 ? 0 : until - now > INT_MAX ? INT_MAX : (int)(until - now);
		if (poll(p, (nfds_t)n, wait) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}

		if (input_at >= 0 && p[input_at].revents) {
			ssize_t w = write(input_fd, c->input + written, c->input_len - written);
			if (w > 0)
				written += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == c->input_len) {
				close(input_fd);
				input_fd = -1;
			}
		}
		for (int s = 0; s < 2; s++) {
			if (stream_at[s] < 0 || stream_fd[s] < 0 || !p[stream_at[s]].revents)
				continue;
			char chunk[65536];
			ssize_t r = read(stream_fd[s], chunk, sizeof chunk);
			if (r > 0) {
				take_output(c, s, chunk, (size_t)r, &grace);
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				close(stream_fd[s]);
				stream_fd[s] = -1;
			}
		}
		if (signal_at >= 0 && p[signal_at].revents) {
			int sig = pending_signal();
			if (sig && c->stopped == STOP_NONE) {
				c->stop_signal = sig;
				request_stop(c, STOP_SIGNAL, &grace);
			}
		}
		if (exit_at >= 0 && p[exit_at].revents) {
			int status;
			if (waitpid(c->pid, &status, 0) == c->pid) {
				exited = true;
				exited_at = now_ms();
				c->killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
				c->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + c->killed_by;
			}
		}
	}
	if (input_fd >= 0)
		close(input_fd);
	for (int s = 0; s < 2; s++)
		if (stream_fd[s] >= 0)
			close(stream_fd[s]);
	close(pidfd);
	return 0;

fail:
	saved = errno;
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[0][i] >= 0)
			close(out[0][i]);
		if (out[1][i] >= 0)
			close(out[1][i]);
	}
	errno = saved;
	return -1;
}

int capture_command(char *const argv[], int timeout_ms, struct capture *cap)
{
	struct child c = {
		.argv = argv,
		.pass_fd = -1,
		.limit = 64 * 1024,
		.echo = {-1, -1},
		.deadline = now_ms() + timeout_ms,
	};
	*cap = (struct capture){.status = -1};
	if (child_run(&c) < 0)
		return -1;
	cap->status = c.status;
	cap->timed_out = c.stopped == STOP_TIMEOUT;
	cap->out = c.out[0];
	cap->err = c.out[1];
	return 0;
}

void capture_free(struct capture *cap)
{
	buffer_free(&cap->out);
	buffer_free(&cap->err);
}

/* ---- the sandbox ------------------------------------------------------- */

#define CONTAINER_LABEL "sage-sandbox=1"
#define OWNER_LABEL "sage-sandbox.owner"
#define PODMAN_BACKSTOP_SECONDS 5
#define MAX_PROFILE_BYTES (1u << 20)

/* Runs inside the container as its first process: Sage's directories under
 * /tmp (the only writable place), the code from stdin into a file, then the
 * launcher ($1, launcher.py) under Sage's Python. umask 077 keeps the code
 * and Sage's files private to the user. No exec: the shell stays PID 1, so
 * Sage is an ordinary process (the kernel ignores signals to a namespace's
 * init that it has no handler for, even its own SIGKILL), orphans are
 * reaped, and Sage's death by signal N comes back as status 128+N. */
static const char container_script[] =
	"umask 077 && mkdir -p /tmp/sage-home /tmp/dot-sage && "
	"cat >/tmp/code.sage && /usr/bin/sage -python -c \"$1\"";

struct argv_builder {
	char *arg[96];
	int n;
};

static void arg_add(struct argv_builder *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void arg_add(struct argv_builder *a, const char *fmt, ...)
{
	va_list ap;
	if (a->n + 1 >= (int)(sizeof a->arg / sizeof a->arg[0]))
		abort();
	va_start(ap, fmt);
	if (vasprintf(&a->arg[a->n], fmt, ap) < 0)
		abort();
	va_end(ap);
	a->arg[++a->n] = NULL;
}

static void args_free(struct argv_builder *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->arg[i]);
	a->n = 0;
}

/* "BOOT-ID:PID:START": who started a container. A process with that pid and
 * start time (in clock ticks since this boot) is its owner; a container
 * whose owner is gone is a stray of a killed sage-sandbox. */
static void process_identity(pid_t pid, char *out, size_t size)
{
	struct buffer boot = {0}, stat = {0};
	char path[64];
	unsigned long long start = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_file(path, 4096, &stat) == 0) {
		/* Field 22, counted after the command name, which may hold spaces. */
		const char *p = strrchr(stat.data, ')');
		for (int field = 2; p && field < 22; field++)
			p = strchr(p + 1, ' ');
		if (p)
			start = strtoull(p + 1, NULL, 10);
	}
	read_file("/proc/sys/kernel/random/boot_id", 64, &boot);
	snprintf(out, size, "%.*s:%d:%llu", boot.data ? (int)strcspn(boot.data, "\n") : 0,
		boot.data ? boot.data : "", (int)pid, start);
	buffer_free(&boot);
	buffer_free(&stat);
}

/* The podman command line. Each flag says which attack or accident it
 * closes; together they are the sandbox. */
static void build_podman_args(struct argv_builder *a, const struct config *cfg,
		const struct podman_host *host, const char *podman, const char *name)
{
	long cpus = cfg->number[SET_CPUS];
	struct rlimit_value rlimits[RLIMIT_COUNT];
	char owner[128];

	sandbox_rlimits(cfg, rlimits);
	process_identity(getpid(), owner, sizeof owner);

	arg_add(a, "%s", podman);
	/* Podman's warnings (e.g. "/ is not a shared mount") would otherwise
	 * be mixed into Sage's stderr. */
	arg_add(a, "--log-level=error");
	arg_add(a, "run");
	/* The container and its writable layer go away with the run; -i feeds
	 * the code on stdin, so it is never on a command line or a host mount. */
	arg_add(a, "--rm");
	arg_add(a, "-i");
	/* A name to stop it by (killing the podman client does not stop it),
	 * a label to find strays by, and their owner to tell strays from the
	 * containers of runs still going (sage-sandbox cleanup). */
	arg_add(a, "--name=%s", name);
	arg_add(a, "--label=%s", CONTAINER_LABEL);
	arg_add(a, "--label=%s=%s", OWNER_LABEL, owner);
	/* Never fetch an image during a run: what runs is what the user
	 * built or pulled, not whatever a registry serves today. */
	arg_add(a, "--pull=never");
	/* No network interface but loopback: no exfiltration, no downloads,
	 * no attacks on the host's or the LAN's services. */
	arg_add(a, "--network=none");
	/* No /etc/hosts from the host: nothing about the host's names. */
	arg_add(a, "--no-hosts");
	/* No System V IPC or POSIX shared memory (/dev/shm) namespace at all:
	 * one more kernel interface, and a writable tmpfs, gone. */
	arg_add(a, "--ipc=none");
	/* --ipc=none still mounts a writable /dev/mqueue; cover it with a
	 * read-only empty directory. */
	arg_add(a, "--security-opt=mask=/dev/mqueue");
	/* The image cannot be modified: no trojaned sage for the next run.
	 * Without --read-only-tmpfs=false podman would also mount writable,
	 * uncapped tmpfs on /run, /var/tmp and /dev/shm. */
	arg_add(a, "--read-only");
	arg_add(a, "--read-only-tmpfs=false");
	/* The only writable place, in memory, capped, no setuid or devices. */
	arg_add(a, "--tmpfs=/tmp:rw,nosuid,nodev,size=%llu,mode=1777", TMPFS_BYTES);
	arg_add(a, "--workdir=/tmp");
	/* What Sage prints is returned, not also kept in a log on the host. */
	arg_add(a, "--log-driver=none");
	arg_add(a, "--env=HOME=/tmp/sage-home");
	arg_add(a, "--env=DOT_SAGE=/tmp/dot-sage");
	/* One thread each: the CPU and process limits mean what they say and
	 * BLAS does not spawn a thread per host core. */
	arg_add(a, "--env=SAGE_NUM_THREADS=1");
	arg_add(a, "--env=OPENBLAS_NUM_THREADS=1");
	arg_add(a, "--env=OMP_NUM_THREADS=1");
	arg_add(a, "--env=MKL_NUM_THREADS=1");
	/* No user site-packages to shadow Sage's modules. */
	arg_add(a, "--env=PYTHONNOUSERSITE=1");
	/* Printed progress reaches the caller as it happens, not at exit. */
	arg_add(a, "--env=PYTHONUNBUFFERED=1");
	/* PARI's stack within the memory limit (see launcher.py). */
	arg_add(a, "--env=SAGE_SANDBOX_PARI_SIZEMAX=%llu",
		(unsigned long long)rlimits[RL_DATA].value / 4);
	/* Not root inside, so a container escape starts without even the
	 * user namespace's root. */
	arg_add(a, "--user=sage");
	/* No capabilities, and no way to regain any through setuid files. */
	arg_add(a, "--cap-drop=all");
	arg_add(a, "--security-opt=no-new-privileges");
	/* Our seccomp profile, on fd 3 (see derive-seccomp.py): no new
	 * namespaces, mounts, keyrings, ptrace, bpf, perf or userfaultfd, the
	 * kernel interfaces most container escapes go through. */
	arg_add(a, "--security-opt=seccomp=/proc/self/fd/3");
	/* Resource limits against fork bombs, memory exhaustion and CPU
	 * hogging. The cgroup ones only where podman can apply them (elsewhere
	 * it drops them and prints a warning into Sage's stderr); the rlimits
	 * everywhere, as the line of defence that always holds. */
	if (host->controller[CONTROLLER_PIDS])
		arg_add(a, "--pids-limit=%ld", cfg->number[SET_PIDS_LIMIT]);
	if (host->controller[CONTROLLER_MEMORY])
		arg_add(a, "--memory=%s", cfg->value[SET_MEMORY]);
	if (host->controller[CONTROLLER_CPU])
		arg_add(a, "--cpus=%ld.%03ld", cpus / 1000, cpus % 1000);
	for (int i = 0; i < RLIMIT_COUNT; i++)
		arg_add(a, "--ulimit=%s=%llu:%llu", rlimits[i].name,
			(unsigned long long)rlimits[i].value, (unsigned long long)rlimits[i].value);
	/* A backstop run by conmon: if sage-sandbox itself is killed before
	 * it can stop the container, the container still dies. */
	arg_add(a, "--timeout=%ld", cfg->number[SET_TIMEOUT] + PODMAN_BACKSTOP_SECONDS);
	arg_add(a, "--entrypoint=/bin/sh");
	arg_add(a, "--");
	arg_add(a, "%s", cfg->value[SET_IMAGE]);
	arg_add(a, "-c");
	arg_add(a, "%s", container_script);
	arg_add(a, "sage-sandbox");
	arg_add(a, "%s", embedded_launcher_py);
}

int setting_enforcement(enum setting_id id, const struct podman_host *host,
		const char *by[MAX_ENFORCERS])
{
	int n = 0;
	switch (id) {
	case SET_TIMEOUT:
		by[n++] = "sage-sandbox";
		by[n++] = "podman --timeout";
		break;
	case SET_OUTPUT_LIMIT:
		by[n++] = "sage-sandbox";
		break;
	case SET_MEMORY:
		if (host->controller[CONTROLLER_MEMORY])
			by[n++] = "cgroup memory";
		by[n++] = "rlimit data (per process)";
		break;
	case SET_CPUS:
		if (host->controller[CONTROLLER_CPU])
			by[n++] = "cgroup cpu";
		by[n++] = "rlimit cpu (timeout x cpus seconds per process)";
		break;
	case SET_PIDS_LIMIT:
		if (host->controller[CONTROLLER_PIDS])
			by[n++] = "cgroup pids";
		by[n++] = "rlimit nproc";
		break;
	default:
		return -1;
	}
	return n;
}

struct sandbox_run_context {
	char *podman;
	char name[64];
};

/* Ends a run early: kills the podman client, then removes the container by
 * name (the client's death alone leaves it running under conmon). The
 * client goes first because a live one, blocked writing output nobody
 * reads, holds up the removal by seconds. Repeated by the loop if needed:
 * the container may not have existed yet the first time. */
static void stop_container(struct child *c)
{
	struct sandbox_run_context *ctx = c->stop_context;
	kill(c->pid, SIGKILL);
	char *argv[] = {ctx->podman, "--log-level=error", "rm", "--force", "--time=0",
		ctx->name, NULL};
	struct capture cap;
	if (capture_command(argv, 15000, &cap) == 0)
		capture_free(&cap);
}

static void container_name(char *name, size_t size)
{
	unsigned char random[8];
	if (getrandom(random, sizeof random, 0) != sizeof random)
		abort();
	snprintf(name, size, "sage-sandbox-%02x%02x%02x%02x%02x%02x%02x%02x", random[0],
		random[1], random[2], random[3], random[4], random[5], random[6], random[7]);
}

const char podman_install_hint[] =
	"install podman (apt-get install podman runc uidmap) or name it with --podman PATH";
const char image_hint[] =
	"build it with 'sudo ./setup.sh image' in the sage-sandbox source tree, or pull one "
	"(podman pull docker.io/sagemath/sagemath:latest) and pass --image";

/* The podman executable to run (malloc'd), or NULL with err set. */
static char *podman_executable(const struct config *cfg, struct error *err)
{
	char *podman = find_executable(cfg->value[SET_PODMAN]);
	if (!podman)
		error_set(err, EXIT_REFUSED, podman_install_hint, "podman executable '%s' not found",
			cfg->value[SET_PODMAN]);
	return podman;
}

int sandbox_preflight(const struct config *cfg, struct podman_host *host, struct error *err)
{
	char *podman = podman_executable(cfg, err);
	if (!podman)
		return -1;
	podman_host_query(podman, host);
	switch (host->rootless) {
	case ROOTLESS_TRUE:
		break;
	case ROOTLESS_FALSE:
		error_set(err, EXIT_REFUSED,
			"run sage-sandbox as an unprivileged user (not root, not sudo) with rootless "
			"podman; check with: podman info --format '{{.Host.Security.Rootless}}'",
			"refusing to run: podman is not rootless (it runs as root)");
		free(podman);
		return -1;
	default:
		error_set(err, EXIT_REFUSED,
			"check that podman works for this user: podman info",
			"refusing to run: cannot confirm podman is rootless: %s", host->detail);
		free(podman);
		return -1;
	}

	char *argv[] = {podman, "image", "exists", (char *)cfg->value[SET_IMAGE], NULL};
	struct capture cap;
	int found = capture_command(argv, 30000, &cap) == 0 && cap.status == 0;
	if (cap.status != 0 && cap.status != 1) {
		error_set(err, EXIT_REFUSED, "check that podman works for this user: podman images",
			"podman image exists failed (status %d)", cap.status);
	} else if (!found) {
		error_set(err, EXIT_REFUSED, image_hint, "image '%s' is not present locally (runs never pull)", cfg->value[SET_IMAGE]);
	}
	capture_free(&cap);
	free(podman);
	return found ? 0 : -1;
}

/* The seccomp profile as an anonymous in-memory file, for podman to read as
 * /proc/self/fd/3: no temporary file to leave behind or to race on. */
static int seccomp_profile_fd(const struct config *cfg, struct error *err)
{
	const char *path = cfg->value[SET_SECCOMP_PROFILE];
	struct buffer file = {0};
	const char *text = embedded_seccomp_json;
	size_t len;

	if (strcmp(path, "builtin") != 0) {
		if (read_file(path, MAX_PROFILE_BYTES, &file) < 0) {
			error_set(err, EXIT_REFUSED,
				"give a readable seccomp profile of at most 1 MiB, or builtin",
				"cannot read seccomp profile %s: %s", path, strerror(errno));
			return -1;
		}
		text = file.data;
	}
	len = strlen(text);
	int fd = memfd_create("sage-sandbox-seccomp", MFD_CLOEXEC);
	if (fd < 0 || !write_all(fd, text, len)) {
		error_set(err, EXIT_REFUSED, NULL, "cannot hold the seccomp profile in memory: %s",
			strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	buffer_free(&file);
	return fd;
}

int sandbox_run(const struct config *cfg, const struct podman_host *host, const char *code,
		size_t code_len, enum output_mode mode, struct run_result *res, struct error *err)
{
	struct sandbox_run_context ctx = {.podman = podman_executable(cfg, err)};
	struct argv_builder args = {0};
	bool stream = mode == OUTPUT_STREAM;
	int64_t start = now_ms();

	*res = (struct run_result){0};
	if (!ctx.podman)
		return -1;
	int profile_fd = seccomp_profile_fd(cfg, err);
	if (profile_fd < 0) {
		free(ctx.podman);
		return -1;
	}
	container_name(ctx.name, sizeof ctx.name);
	build_podman_args(&args, cfg, host, ctx.podman, ctx.name);

	struct child c = {
		.argv = args.arg,
		.pass_fd = profile_fd,
		.input = code,
		.input_len = code_len,
		.limit = (size_t)cfg->number[SET_OUTPUT_LIMIT] * 1024,
		.stop_on_limit = true,
		.echo = {stream ? 1 : -1, stream ? 2 : -1},
		.deadline = start + cfg->number[SET_TIMEOUT] * 1000,
		.watch_signals = true,
		.stop = stop_container,
		.stop_context = &ctx,
	};
	int rc = child_run(&c);
	int saved = errno;
	close(profile_fd);
	args_free(&args);
	free(ctx.podman);
	if (rc < 0) {
		error_set(err, EXIT_REFUSED, podman_install_hint, "cannot start podman: %s", strerror(saved));
		return -1;
	}

	res->duration_ms = now_ms() - start;
	res->out = c.out[0];
	res->err = c.out[1];
	res->out_truncated = c.truncated[0];
	res->err_truncated = c.truncated[1];
	switch (c.stopped) {
	case STOP_TIMEOUT:
		res->timed_out = true;
		res->signal = SIGKILL;
		res->exit_code = EXIT_TIMEOUT;
		break;
	case STOP_OUTPUT_LIMIT:
		res->output_limit_exceeded = true;
		res->signal = SIGKILL;
		res->exit_code = EXIT_OUTPUT_LIMIT;
		break;
	case STOP_SIGNAL:
		res->interrupted_by = c.stop_signal;
		res->signal = SIGKILL;
		res->exit_code = 128 + c.stop_signal;
		break;
	case STOP_OUTPUT_CLOSED:
		res->interrupted_by = SIGPIPE;
		res->signal = SIGKILL;
		res->exit_code = 128 + SIGPIPE;
		break;
	case STOP_NONE:
		if (c.status == 125) {
			/* Podman's own failure: the container did not run. */
			const char *why = res->err.len ? res->err.data : "no message";
			error_set(err, EXIT_REFUSED, "see podman's message; check 'sage-sandbox status'",
				"podman could not run the container: %.*s", (int)strcspn(why, "\n"), why);
			run_result_free(res);
			return -1;
		}
		res->exit_code = c.status;
		/* Podman reports a container killed by signal N as 128+N. */
		if (c.status > 128 && c.status < 128 + 65)
			res->signal = c.status - 128;
		break;
	}
	return 0;
}

void run_result_free(struct run_result *res)
{
	buffer_free(&res->out);
	buffer_free(&res->err);
}

/* Is the process named by an owner label ("BOOT-ID:PID:START") alive? */
static bool owner_alive(const char *owner)
{
	int pid = 0;
	const char *colon = strchr(owner, ':');
	char now[128];
	if (!colon || sscanf(colon + 1, "%d", &pid) != 1 || pid <= 0)
		return false;
	process_identity(pid, now, sizeof now);
	return strcmp(now, owner) == 0;
}

int sandbox_cleanup(const struct config *cfg, struct buffer *removed, struct error *err)
{
	char *podman = podman_executable(cfg, err);
	struct capture cap;
	const char *cursor, *line;
	size_t len;
	int count = 0;

	if (!podman)
		return -1;
	char *list_argv[] = {podman, "ps", "--all", "--filter=label=" CONTAINER_LABEL,
		"--format={{.Names}} {{index .Labels \"" OWNER_LABEL "\"}}", NULL};
	if (capture_command(list_argv, 30000, &cap) < 0 || cap.status != 0) {
		error_set(err, EXIT_REFUSED, "check that podman works for this user: podman ps",
			"podman ps failed (status %d)", cap.status);
		capture_free(&cap);
		free(podman);
		return -1;
	}
	for (cursor = cap.out.data; (line = next_line(&cursor, &len));) {
		/* "NAME OWNER", parsed within its own line. */
		char text[512], name[128], owner[128] = "";
		snprintf(text, sizeof text, "%.*s", (int)len, line);
		if (sscanf(text, "%127s %127s", name, owner) >= 1 && !owner_alive(owner)) {
			char *rm_argv[] = {podman, "--log-level=error", "rm", "--force", "--time=0", name,
				NULL};
			struct capture rm;
			if (capture_command(rm_argv, 30000, &rm) == 0 && rm.status == 0) {
				buffer_append(removed, name, strlen(name));
				buffer_append(removed, "\n", 1);
				count++;
			}
			capture_free(&rm);
		}
	}
	capture_free(&cap);
	free(podman);
	return count;
}
