/* client.c: `run` and `batch` through the server (docs/protocol.md,
 * "run, batch and the server").
 *
 * The client does everything a cold run does before the first container:
 * its options, settings (flags, environment, settings file), the FILE and
 * the inputs opened and checked, the output directory opened. Then it
 * hands the server the run as it stands: the resolved settings, the names,
 * and its descriptors (SCM_RIGHTS, as chg does): stdin, stdout, stderr,
 * the FILE, the output directory and each input. The server reads and
 * writes through them as the cold run would, and words the result with
 * the same code; the client forwards its signals and exits with the
 * status the server sends. Nothing of the run passes through the client
 * but a terminal's input: a server reading the client's terminal would
 * steal it from the shell's job control, so the client copies it into a
 * pipe, as the run's stdin, reading it as a cold run would.
 *
 * Until the server says "ok" the run is not the server's, and anything
 * that goes wrong sends it cold, as if no server were there; after, the
 * server's end (a crash, a kill) is the run's failure, said in one line,
 * exit 125: the run may have half happened, and is never run twice. */
#include "client.h"
#include "buildid.h"
#include "jobs.h"
#include "loop.h"
#include "podman.h"
#include "request.h"
#include "result.h"
#include "rundir.h"
#include "signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The server answers a request at once; this long without an answer, it
 * is taken for hung (the run is not sent anywhere else: it may have
 * started). */
#define ANSWER_MS 10000
/* Past the run's deadline the server still flushes output and removes a
 * container; this long past it, the client gives up on it. */
#define BACKSTOP_MS 60000
/* A stopped server lets go of its lock within this long. */
#define STOP_WAIT_MS 30000
/* The terminal's bytes on their way to the run. */
#define RELAY_BYTES (64 * 1024)
/* A background server's log is started again past this size. */
#define LOG_MAX_BYTES (1 << 20)

int server_use_from_environment(enum server_use *use, struct error *err)
{
	const char *v = getenv("SAGE_SANDBOX_SERVER");
	if (!v || !*v || strcmp(v, "auto") == 0)
		*use = SERVER_AUTO;
	else if (strcmp(v, "off") == 0)
		*use = SERVER_OFF;
	else if (strcmp(v, "start") == 0)
		*use = SERVER_START;
	else {
		error_set(err, EXIT_REFUSED, "set it to off, auto or start, or unset it",
			"SAGE_SANDBOX_SERVER=%s is not one of off, auto, start", v);
		return -1;
	}
	return 0;
}

static void warn(const struct error *e)
{
	fprintf(stderr, "sage-sandbox: warning: %s%s%s; running without the server\n", e->message,
		e->hint[0] ? "; " : "", e->hint);
}

/* Connects to the server at d: 1 with *fd and *pid, 0 when none answers,
 * -1 with err set when what is there may not be trusted. */
static int connect_server(const struct rundir *d, int *fd, pid_t *pid, struct error *err)
{
	int rc = rundir_check(d, false, err);
	if (rc <= 0)
		return rc;
	struct stat st;
	if (lstat(d->socket, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
		error_set(err, EXIT_REFUSED, "remove it", "%s is not a socket of this user's",
			d->socket);
		return -1;
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return 0;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	memcpy(addr.sun_path, d->socket, strlen(d->socket) + 1);
	/* Refused: a stale socket (its server died). EAGAIN: its queue of
	 * connections is full; cold is quicker than waiting. */
	if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
		close(s);
		return 0;
	}
	struct ucred peer;
	socklen_t len = sizeof peer;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || peer.uid != geteuid()) {
		error_set(err, EXIT_REFUSED, "remove it", "the server at %s is not this user's",
			d->socket);
		close(s);
		return -1;
	}
	int flags = fcntl(s, F_GETFL);
	fcntl(s, F_SETFL, flags & ~O_NONBLOCK);
	*fd = s;
	*pid = peer.pid;
	return 1;
}

/* One message, with descriptors; -1 with errno. */
static int send_message(int s, const void *bytes, size_t len, const int *fds, size_t nfds)
{
	struct iovec iov = {.iov_base = (void *)bytes, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union {
		char space[CMSG_SPACE(REQUEST_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	if (nfds) {
		memset(&control, 0, sizeof control);
		msg.msg_control = control.space;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(s, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)len ? 0 : -1;
}

/* The server's next message, within ms: its length, 0 at the server's
 * end, -1 on a timeout or an error. */
static ssize_t receive(int s, char *buf, size_t size, int ms)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	int ready;
	while ((ready = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	if (ready <= 0)
		return -1;
	ssize_t n;
	while ((n = recv(s, buf, size - 1, 0)) < 0 && errno == EINTR)
		;
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* ---- starting a server in the background ----------------------------------- */

/* sage-sandbox serve, detached: a session of its own, no descriptor of
 * ours but its stderr into the log, our environment (its settings are its
 * warm sandboxes'). Two clients doing this at once leave one server: the
 * second finds the lock held and exits. */
static void start_server(const struct rundir *d)
{
	struct error err;
	if (rundir_check(d, true, &err) < 0) {
		warn(&err);
		return;
	}
	pid_t pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (setsid() < 0 || fork() != 0)
			_exit(0);
		struct stat st;
		int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
		if (lstat(d->log, &st) == 0 && st.st_size > LOG_MAX_BYTES)
			flags |= O_TRUNC;
		int log = open(d->log, flags, 0600);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
		    dup2(log >= 0 ? log : null, 2) < 0)
			_exit(1);
		close_range(3, ~0u, 0);
		if (chdir("/") < 0)
			_exit(1);
		/* This very build: a server of another would be refused. */
		execl("/proc/self/exe", "sage-sandbox", "serve", (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* ---- a run ------------------------------------------------------------------- */

struct client {
	struct loop *loop;
	struct loop_scope scope; /* its watches and backstop, ended by client_close */
	int sock;
	pid_t server;
	const struct rundir *dir;
	struct loop_watch *sock_watch, *tty_watch;
	int tty;              /* our own descriptor of the terminal, or -1 */
	struct queue *relay;  /* the terminal's bytes into the run's stdin pipe */
	struct stop_signals *signals;
	struct loop_timer *backstop;
	const struct client_run *run; /* or NULL: a batch */
	const char *what;             /* "run", "batch": in its failure's words */
	int status;
	bool over;
};

static void client_done(struct client *c, int status)
{
	c->status = status;
	c->over = true;
	loop_quit(c->loop);
}

/* The run's end when the server could not give it one: the line, and
 * with --json the object, as a cold run's refusal. */
static void say_failure(const struct client_run *run, const struct error *err)
{
	struct printed p = {.err = err, .cfg = run ? run->cfg : NULL};
	print_error_line(stderr, &p);
	if (run && run->json) {
		print_error_object(stdout, &p);
		fflush(stdout);
	}
}

static void server_gone(struct client *c, const char *how)
{
	struct error err;
	error_set(&err, EXIT_REFUSED, NULL, "the server (pid %ld) %s during the %s, whose output "
		"may be cut short", (long)c->server, how, c->what);
	snprintf(err.hint, sizeof err.hint, "see %s, and run again", c->dir->log);
	say_failure(c->run, &err);
	client_done(c, EXIT_REFUSED);
}

static void on_server(int fd, unsigned events, void *data)
{
	struct client *c = data;
	char buf[256];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		server_gone(c, "ended");
		return;
	}
	buf[n] = '\0';
	int status;
	if (sscanf(buf, "exit %d", &status) == 1 && status >= 0 && status <= 255)
		client_done(c, status);
}

static void on_backstop(void *data)
{
	struct client *c = data;
	server_gone(c, "did not finish a minute past the timeout");
}

static void on_first_signal(int sig, void *data)
{
	struct client *c = data;
	char msg[32];
	int len = snprintf(msg, sizeof msg, "signal %d", sig);
	if (send_message(c->sock, msg, (size_t)len, NULL, 0) < 0)
		server_gone(c, "ended");
}

static void stop_relay(struct client *c)
{
	loop_unwatch(&c->tty_watch);
	if (c->relay && !queue_closed(c->relay))
		queue_close_when_empty(c->relay);
}

static void on_tty(int fd, unsigned events, void *data)
{
	struct client *c = data;
	char chunk[4096];
	size_t room = queue_room(c->relay);
	if (room == 0) {
		loop_watch_events(c->tty_watch, 0);
		return;
	}
	ssize_t n;
	while ((n = read(fd, chunk, room < sizeof chunk ? room : sizeof chunk)) < 0 &&
	       errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		stop_relay(c); /* end of file; EIO: a background job's terminal */
		return;
	}
	queue_put(c->relay, chunk, (size_t)n);
}

static void on_relay_drained(struct queue *q, void *data)
{
	struct client *c = data;
	loop_watch_events(c->tty_watch, LOOP_READ);
}

static void on_relay_error(struct queue *q, void *data)
{
	struct client *c = data;
	/* The run reads no more: its stdin's end is closed. */
	loop_unwatch(&c->tty_watch);
}

/* What every run's and batch's request says: this build, podman's
 * environment, the umask and the settings. */
static void fill_common(struct request *req, const struct config *cfg)
{
	snprintf(req->build, sizeof req->build, "%s", build_id());
	podman_environment_digest(req->environment);
	req->umask = umask(022);
	umask(req->umask);
	for (int id = 0; id < SETTING_COUNT; id++) {
		req->value[id] = cfg->value[id];
		req->source[id] = cfg->source[id];
	}
}

/* Fills in the request's run fields. */
static void make_request(const struct client_run *run, struct request *req)
{
	*req = (struct request){.kind = REQUEST_RUN, .started_at = run->started_at,
		.file = run->file && strcmp(run->file, "-") != 0 ? run->file : NULL,
		.args = (const char **)run->args, .argc = run->argc, .json = run->json,
		.show_control_chars = run->show_control_chars,
		.output_dir = run->out ? run->out->dir : NULL,
		.output_overwrite = run->out && run->out->overwrite};
	fill_common(req, run->cfg);
	if (run->in) {
		req->input_count = run->in->count;
		req->inputs = calloc(run->in->count + 1, sizeof *req->inputs);
		if (!req->inputs)
			abort();
		for (size_t i = 0; i < run->in->count; i++)
			req->inputs[i] = (struct request_input){run->in->files[i].name,
				run->in->files[i].size};
	}
}

/* Hands the request over with its descriptors: 1 once the server said
 * ok, 0 when it declined (cold), -1 with err set when the run failed. */
static int hand_over(struct client *c, const struct request *req, const int *fds, size_t nfds,
		struct error *err)
{
	struct buffer msg = {0};
	request_encode(req, &msg);
	/* Too big for one message (EMSGSIZE: a huge argument list): cold. */
	int sent = send_message(c->sock, msg.data, msg.len, fds, nfds);
	buffer_free(&msg);
	if (sent < 0)
		return 0;
	char answer[512];
	ssize_t n = receive(c->sock, answer, sizeof answer, ANSWER_MS);
	if (n < 0) {
		error_set(err, EXIT_REFUSED, "see its log, or stop it with sage-sandbox serve --stop",
			"the server (pid %ld) at %s did not answer in %d s", (long)c->server,
			c->dir->socket, ANSWER_MS / 1000);
		return -1;
	}
	if (n >= 2 && strncmp(answer, "ok", 2) == 0)
		return 1;
	/* It declined: another build (it exits, and says so here), another
	 * environment, stopping; or it ended before it took the run. */
	if (strncmp(answer, "cold another build", 18) == 0)
		fprintf(stderr, "sage-sandbox: note: the server (pid %ld) is %s; it was asked to "
				"exit, and this %s goes without it\n", (long)c->server, answer + 5, c->what);
	return 0;
}

/* A run's request and its descriptors, handed over. */
static int hand_over_run(struct client *c, const struct client_run *run, int stdin_fd,
		struct error *err)
{
	struct request req;
	make_request(run, &req);
	int fds[REQUEST_MAX_FDS];
	size_t nfds = 0;
	fds[nfds++] = stdin_fd;
	fds[nfds++] = 1;
	fds[nfds++] = 2;
	if (req.file)
		fds[nfds++] = run->code_fd;
	if (req.output_dir)
		fds[nfds++] = run->out->dirfd;
	for (size_t i = 0; i < req.input_count; i++)
		fds[nfds++] = run->in->files[i].fd;
	int rc = hand_over(c, &req, fds, nfds, err);
	free(req.inputs);
	return rc;
}

/* Follows the run or batch the server took to its exit status; a run's
 * has a backstop (its timeout and a minute), a batch's ends with its
 * jobs. */
static int follow(struct client *c, int relay_fd)
{
	if (relay_fd >= 0) {
		c->relay = queue_new(c->loop, relay_fd, RELAY_BYTES, on_relay_drained, on_relay_error,
			c);
		c->tty = reopen_nonblocking(0, O_RDONLY);
		if (c->tty < 0 || loop_watch(&c->scope, &c->tty_watch, c->tty, LOOP_READ, on_tty, c) < 0)
			stop_relay(c);
	}
	if (loop_watch(&c->scope, &c->sock_watch, c->sock, LOOP_READ, on_server, c) < 0) {
		server_gone(c, "could not be followed");
		return c->status;
	}
	if (c->run)
		loop_timer_arm(&c->scope, &c->backstop, c->run->started_at +
			c->run->cfg->number[SET_TIMEOUT] * 1000 + BACKSTOP_MS, on_backstop, c);
	while (!c->over)
		if (loop_run(c->loop) < 0) {
			server_gone(c, "could not be followed");
			break;
		}
	return c->status;
}

static void client_close(struct client *c)
{
	loop_scope_end(&c->scope);
	queue_free(c->relay);
	stop_signals_free(c->signals);
	if (c->tty >= 0)
		close(c->tty);
	close(c->sock);
	loop_free(c->loop);
}

/* Connects to the server, with a loop for what follows: 1, or 0 (cold:
 * none answers, or one was started in the background for next time). */
static int client_open(struct client *c, const struct rundir *dir, enum server_use use)
{
	struct error err;
	int rc = connect_server(dir, &c->sock, &c->server, &err);
	if (rc < 0)
		warn(&err);
	if (rc <= 0) {
		if (rc == 0 && use == SERVER_START)
			start_server(dir);
		return 0;
	}
	c->loop = loop_new();
	if (!c->loop) {
		close(c->sock);
		return 0;
	}
	loop_scope_init(&c->scope, c->loop, "the client");
	/* Signals from here on wait for the server to hear of them (or for
	 * the cold run, whose own watch takes them over). */
	c->signals = stop_signals_watch(c->loop, true, on_first_signal, c, &err);
	return 1;
}

int client_run(const struct client_run *run, enum server_use use)
{
	struct rundir dir;
	struct error err;
	if (use == SERVER_OFF || rundir_locate(&dir, &err) < 0)
		return CLIENT_COLD;
	struct client c = {.sock = -1, .tty = -1, .dir = &dir, .run = run, .what = "run",
		.status = CLIENT_COLD};
	if (!client_open(&c, &dir, use))
		return CLIENT_COLD;
	int rc;
	/* A terminal is read here, into a pipe that is the run's stdin. */
	int pipe_fds[2] = {-1, -1};
	bool from_file = run->file && strcmp(run->file, "-") != 0;
	if (isatty(0)) {
		if (pipe2(pipe_fds, O_CLOEXEC) < 0)
			pipe_fds[0] = pipe_fds[1] = -1;
		else if (from_file)
			signal(SIGTTIN, SIG_IGN); /* as the cold run: EIO ends its input */
	}
	int status = CLIENT_COLD;
	if (c.signals && (!isatty(0) || pipe_fds[0] >= 0)) {
		rc = hand_over_run(&c, run, pipe_fds[0] >= 0 ? pipe_fds[0] : 0, &err);
		if (pipe_fds[0] >= 0)
			close(pipe_fds[0]);
		if (rc > 0) {
			status = follow(&c, pipe_fds[1]);
			pipe_fds[1] = -1; /* the relay's */
		} else if (rc < 0) {
			say_failure(run, &err);
			status = err.status;
		}
	} else if (pipe_fds[0] >= 0) {
		close(pipe_fds[0]);
	}
	if (pipe_fds[1] >= 0)
		close(pipe_fds[1]);
	client_close(&c);
	return status;
}

/* ---- a batch ------------------------------------------------------------------ */

/* Past this, --resume is read by the batch on its own: the server would
 * parse it on its one loop, holding up its other clients. */
#define SERVED_RESUME_MAX_BYTES (64 << 20)

/* Whether the server can use descriptor fd without ever blocking on it: a
 * pipe or a terminal it can reopen non-blocking through /proc, as it will
 * (reopen_nonblocking; one of another uid's, after sudo -u, it cannot, and
 * would share the client's blocking one). */
static bool reopens_nonblocking(int fd, int flags)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return false;
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return true;
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	int again = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (again < 0)
		return false;
	close(again);
	return true;
}

/* Whether the server may read the batch's inputs and write its output:
 * each JSON Lines input a file, a pipe, a socket or /dev/null, never a
 * terminal (a server reading the client's terminal would take it from the
 * shell's job control) or another device (/dev/zero would hold the
 * server's one loop in a line without end); stdin (when read), stdout and
 * stderr reopened non-blocking; --resume not too long; and not in a Slurm
 * job, whose tasks must run inside the job's own allocation, not in a
 * server's containers. */
static bool server_may_read(const struct client_batch *b)
{
	const char *slurm = getenv("SLURM_JOB_ID");
	struct stat st;
	if ((slurm && *slurm) || !reopens_nonblocking(1, O_WRONLY) ||
	    !reopens_nonblocking(2, O_WRONLY) ||
	    (b->resume && (fstat(b->fds[3 + b->file_count], &st) < 0 ||
			   st.st_size > SERVED_RESUME_MAX_BYTES)))
		return false;
	for (int i = 0; i < (b->file_count ? b->file_count : 1); i++) {
		int fd = b->fds[b->file_count ? 3 + i : 0];
		if (b->file_count && is_sage_file(b->files[i]))
			continue; /* a regular file (batch_open_inputs) */
		if (fstat(fd, &st) < 0 || isatty(fd) || !reopens_nonblocking(fd, O_RDONLY))
			return false;
		bool dev_null = S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
		if (!(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || dev_null))
			return false;
	}
	return true;
}

int client_batch(const struct client_batch *b, enum server_use use)
{
	struct rundir dir;
	struct error err;
	if (use == SERVER_OFF || !b->fds || !server_may_read(b) || rundir_locate(&dir, &err) < 0)
		return CLIENT_COLD;
	int status = CLIENT_COLD;
	struct client c = {.sock = -1, .tty = -1, .dir = &dir, .what = "batch",
		.status = CLIENT_COLD};
	if (client_open(&c, &dir, use)) {
		struct request req = {.kind = REQUEST_BATCH, .started_at = b->started_at,
			.args = (const char **)b->files, .argc = b->file_count, .jobs = b->jobs,
			.shard_index = b->shard_index, .shard_count = b->shard_count,
			.input_order = b->input_order, .progress = b->progress, .resume = b->resume};
		fill_common(&req, b->cfg);
		int rc = c.signals ? hand_over(&c, &req, b->fds, b->nfds, &err) : 0;
		if (rc > 0)
			status = follow(&c, -1);
		else if (rc < 0) {
			say_failure(NULL, &err);
			status = err.status;
		}
		client_close(&c);
	}
	return status;
}

/* ---- status and stop ------------------------------------------------------------ */

/* Sends a bare request; the answer in buf, or -1 (none answers: 0 from
 * connect_server). */
static int ask(const struct rundir *d, enum request_kind kind, char *buf, size_t size,
		pid_t *pid, struct error *err)
{
	int s;
	int rc = connect_server(d, &s, pid, err);
	if (rc <= 0)
		return rc;
	struct request req = {.kind = kind};
	struct buffer msg = {0};
	request_encode(&req, &msg);
	ssize_t n = send_message(s, msg.data, msg.len, NULL, 0) < 0 ? -1 :
		receive(s, buf, size, ANSWER_MS);
	buffer_free(&msg);
	close(s);
	if (n <= 0) {
		error_set(err, EXIT_REFUSED, "see its log, or stop it with sage-sandbox serve --stop",
			"the server (pid %ld) at %s did not answer", (long)*pid, d->socket);
		return -1;
	}
	return 1;
}

json_t *client_server_status(void)
{
	struct rundir d;
	struct error err;
	json_t *j = json_object();
	if (rundir_locate(&d, &err) < 0) {
		json_object_set_new(j, "answers", json_false());
		json_object_set_new(j, "problem", json_string(err.message));
		return j;
	}
	static char answer[65536];
	pid_t pid = 0;
	int rc = ask(&d, REQUEST_STATUS, answer, sizeof answer, &pid, &err);
	json_t *said = rc > 0 && strncmp(answer, "status ", 7) == 0 ?
		json_loads(answer + 7, 0, NULL) : NULL;
	if (json_is_object(said)) {
		json_decref(j);
		j = said;
	} else {
		json_decref(said);
	}
	json_object_set_new(j, "socket", json_string(d.socket));
	json_object_set_new(j, "answers", json_boolean(json_is_object(said)));
	if (rc < 0)
		json_object_set_new(j, "problem", json_string(err.message));
	return j;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int client_stop_server(struct error *err)
{
	struct rundir d;
	if (rundir_locate(&d, err) < 0)
		return EXIT_REFUSED;
	char answer[256];
	pid_t pid = 0;
	int rc = ask(&d, REQUEST_STOP, answer, sizeof answer, &pid, err);
	if (rc < 0)
		return EXIT_REFUSED;
	if (rc == 0)
		return 1;
	/* Stopped once it lets go of its lock. */
	int lock = open(d.lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	for (long waited = 0; lock >= 0 && waited < STOP_WAIT_MS; waited += 50) {
		if (flock(lock, LOCK_SH | LOCK_NB) == 0) {
			close(lock);
			return 0;
		}
		sleep_ms(50);
	}
	if (lock >= 0)
		close(lock);
	error_set(err, EXIT_REFUSED, "kill it (its pid is in the server log), then sage-sandbox "
			"cleanup", "the server (pid %ld) did not stop within %d s", (long)pid,
		STOP_WAIT_MS / 1000);
	return EXIT_REFUSED;
}
