/* server.c: `sage-sandbox serve`: the fifth front end on the runner (see
 * client.c for the other side, docs/protocol.md for the messages).
 *
 * A server is a cache of warm sandboxes, never a shared Sage: each run is
 * a oneshot (oneshot.c), exactly as a cold run's, on the client's own
 * descriptors, and only its call goes to a warm serial sandbox, whose
 * launcher forks a fresh child for it and puts /tmp and itself back as
 * they were after it (launcher/calls.py): what one run leaves, the next
 * does not see. Sandboxes are kept in fleets, one runner each, keyed on
 * everything that shapes a container: every setting's value, the
 * seccomp profile's file, podman and its configuration, and the image as
 * the storage's index has it. A run whose key has no fleet makes one; a
 * rebuilt image or a changed profile is another key, so a sandbox of the
 * old one never serves. Fleets past SERVER_FLEETS_MAX go once idle.
 *
 * Only this uid gets in: the directory is 0700 (rundir.c), and every
 * connection's peer is checked (SO_PEERCRED) before a byte of it is read.
 * A request must come whole, within REQUEST_WAIT_MS, as one message; a
 * client of another build or another podman environment is declined, and
 * runs cold. */
#include "server.h"
#include "batch.h"
#include "buildid.h"
#include "cache.h"
#include "oneshot.h"
#include "request.h"
#include "rundir.h"
#include "signals.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A connection has this long to send its request. */
#define REQUEST_WAIT_MS 5000
/* Connections at once (each holds the descriptors of its run): past this,
 * a client is declined and runs cold. */
#define CLIENTS_MAX 128
/* After accept() failed for want of descriptors, the next try. */
#define ACCEPT_RETRY_MS 100
/* Its own settings' host check at start: podman info and the image probe. */
#define HOST_CHECK_MS ((IMAGE_PROBE_SECONDS + 30) * 1000LL)

struct server;

/* The sandboxes of one key of settings: owned by the server, freed once
 * drained. */
struct fleet {
	struct server *srv;
	struct buffer key;
	struct config cfg;          /* its values point into values */
	char *values[SETTING_COUNT];
	struct host host;           /* the host check it was made for */
	struct runner *runner;      /* owned */
	int users;                  /* runs on it now */
	int64_t last_used;
	bool draining;
	struct fleet *next;
};

/* One connection, and its run: owned by the server from accept to
 * client_free, which ends its handles at once; its memory goes at the end
 * of that turn (connection_destroy). */
struct connection {
	struct server *srv;
	struct loop_scope scope;    /* its watch and timer, ended by client_free */
	int sock;
	pid_t pid;
	struct loop_watch *watch;
	struct loop_timer *wait_timer;
	int fds[REQUEST_MAX_FDS];   /* received; -1 once given to in or out */
	size_t nfds;
	struct request req;         /* kind 0 until it came */
	struct config cfg;          /* its values point into req */
	struct infiles in;
	struct outfiles out;
	bool has_out;
	struct oneshot run;
	struct batch *batch;        /* owned: a batch's, in place of run */
	struct batch_options batch_opt; /* its options; strings point into req */
	struct hosting hosting;     /* where its run or batch runs: the server's loop,
				     * fds, take_fleet and the connection */
	bool running, gone;
	struct fleet *fleet;        /* counted in its users while the run is on it */
	int status;
	struct connection *next;
};

struct server {
	struct server_options opt;
	struct loop *loop;
	struct rundir dir;
	int listen_fd, lock_fd;
	bool activated;             /* the socket came from LISTEN_FDS */
	struct stat socket_stat;    /* ours, to remove only ours at the end */
	struct loop_scope scope;    /* its own watch and timers, ended as server_run ends */
	struct loop_watch *listen_watch;
	struct loop_timer *accept_timer, *idle_timer;
	struct stop_signals *signals;
	struct host host;           /* its own settings', checked at start */
	struct host_check *host_check; /* that check, while it asks podman */
	struct fleet *fleets;
	struct connection *clients;
	char environment[65];
	long served;
	int64_t started;
	bool stopping, draining, done;
	int exit_status;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;
	fputs("sage-sandbox serve: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void check_finished(struct server *srv);
static void stop(struct server *srv, int sig, int status, const char *why);

static int count_clients(const struct server *srv)
{
	int n = 0;
	for (const struct connection *c = srv->clients; c; c = c->next)
		n++;
	return n;
}

/* ---- fleets ---------------------------------------------------------------- */
/* The fleet's sandboxes: the calls of one kind of settings at once. */
static int fleet_size(const struct server *srv)
{
	return srv->opt.warm > 0 ? srv->opt.warm : 1;
}


static void fleet_free(void *data)
{
	struct fleet *f = data;
	runner_free(f->runner);
	for (int id = 0; id < SETTING_COUNT; id++)
		free(f->values[id]);
	buffer_free(&f->key);
	free(f);
}

static void on_fleet_drained(void *data)
{
	struct fleet *f = data;
	struct server *srv = f->srv;
	for (struct fleet **at = &srv->fleets; *at; at = &(*at)->next)
		if (*at == f) {
			*at = f->next;
			break;
		}
	/* Its runner called: freed once the runner's own code has returned. */
	loop_release(srv->loop, fleet_free, f);
	check_finished(srv);
}

static void fleet_drain(struct fleet *f, int sig, const char *why)
{
	if (f->draining)
		return;
	f->draining = true;
	runner_drain(f->runner, sig, why, on_fleet_drained, f);
}

/* Fleets past the bound go, the longest unused first, once no run is on
 * them. */
static void trim_fleets(struct server *srv)
{
	for (;;) {
		int kept = 0;
		struct fleet *oldest = NULL;
		for (struct fleet *f = srv->fleets; f; f = f->next) {
			if (f->draining)
				continue;
			kept++;
			if (!f->users && (!oldest || f->last_used < oldest->last_used))
				oldest = f;
		}
		if (kept <= SERVER_FLEETS_MAX || !oldest)
			return;
		say("the sandboxes of settings unused the longest go: %d kinds at most",
			SERVER_FLEETS_MAX);
		fleet_drain(oldest, SIGTERM, "replaced by sandboxes of other settings");
	}
}

/* What shapes a container: every setting a run has (not mcp's own, which
 * no run reads), the seccomp profile's file, podman with its
 * configuration, the image as the storage has it. */
static void fleet_key(const struct config *cfg, const struct host *h, struct buffer *key)
{
	/* The seed is a call's, sent with its code: any sandbox serves it. */
	for (int id = 0; id < SETTING_COUNT; id++)
		if (!settings[id].server && id != SET_SEED)
			cache_key_text(key, cfg->value[id]);
	if (strcmp(cfg->value[SET_SECCOMP_PROFILE], "builtin") != 0)
		cache_key_file(key, cfg->value[SET_SECCOMP_PROFILE]);
	image_cache_key(h->podman, cfg, &h->podman_host, key);
}

static struct fleet *fleet_for(struct server *srv, const struct config *cfg, const struct host *h)
{
	struct buffer key = {0};
	fleet_key(cfg, h, &key);
	for (struct fleet *f = srv->fleets; f; f = f->next)
		if (!f->draining && f->key.len == key.len && memcmp(f->key.data, key.data, key.len) == 0) {
			buffer_free(&key);
			return f;
		}
	struct fleet *f = calloc(1, sizeof *f);
	if (!f)
		abort();
	f->srv = srv;
	f->key = key;
	f->host = *h;
	f->cfg = *cfg;
	for (int id = 0; id < SETTING_COUNT; id++) {
		f->values[id] = strdup(cfg->value[id]);
		if (!f->values[id])
			abort();
		f->cfg.value[id] = f->values[id];
	}
	/* Runs past the warm ones wait for one, in order; none warm, one at
	 * a time, in a container that still serves run after run. A run that
	 * has waited behind busy ones as long as a container takes to start
	 * gets one of its own (overflow): a client's run is held up by
	 * another's for about two starts at most. */
	int serial = fleet_size(srv);
	struct runner_options ro = {.loop = srv->loop, .host = &f->host, .cfg = &f->cfg,
		.who = "serve", .log = true, .running_max = serial, .warm = srv->opt.warm,
		.serial = serial, .overflow = true};
	f->runner = runner_new(&ro);
	f->last_used = loop_now_ms();
	f->next = srv->fleets;
	srv->fleets = f;
	say("%d warm sandbox%s for %s%s", srv->opt.warm, srv->opt.warm == 1 ? "" : "es",
		cfg == srv->opt.cfg ? "its own settings" : "the settings of a run",
		srv->fleets->next ? " (another kind)" : "");
	return f;
}

/* The runner of a client's run or batch (its hosting's runner_for): its
 * settings' fleet, made where there is none. */
static struct runner *take_fleet(void *owner, const struct config *cfg, const struct host *h)
{
	struct connection *c = owner;
	c->fleet = fleet_for(c->srv, cfg, h);
	c->fleet->users++;
	/* Only now: a new fleet is in use, never the one trimmed. */
	trim_fleets(c->srv);
	return c->fleet->runner;
}


/* ---- clients ---------------------------------------------------------------- */

static void on_idle(void *data)
{
	struct server *srv = data;
	char why[64];
	snprintf(why, sizeof why, "no client for %ld s", srv->opt.idle_seconds);
	stop(srv, 0, 0, why);
}

static void rearm_idle(struct server *srv)
{
	if (!srv->clients && !srv->stopping && srv->opt.idle_seconds > 0)
		loop_timer_arm(&srv->scope, &srv->idle_timer,
			loop_now_ms() + srv->opt.idle_seconds * 1000, on_idle, srv);
	else
		loop_timer_cancel(&srv->idle_timer);
}

/* What writer prints, onto a client's descriptor: what fits now (a line
 * or one object), never waiting for a reader that does not read. */
static void write_printed(int client_fd, printer *writer, const void *arg)
{
	int fd = reopen_nonblocking(client_fd, O_WRONLY);
	size_t len;
	char *text = print_to_memory(writer, arg, &len);
	write_what_fits(fd, text, len);
	free(text);
	if (fd >= 0)
		close(fd);
}

static void send_text(struct connection *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void send_text(struct connection *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->gone || len < 0)
		return;
	if (send(c->sock, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1,
			MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		c->gone = true;
}

static void connection_destroy(void *data)
{
	struct connection *c = data;
	close(c->sock);
	for (size_t i = 0; i < c->nfds; i++)
		if (c->fds[i] >= 0)
			close(c->fds[i]);
	infiles_free(&c->in);
	if (c->has_out)
		outfiles_close(&c->out);
	request_free(&c->req);
	free(c);
}

/* The connection is over: out of the list, its watch and timer gone (no
 * callback of it runs again, not even later in this turn), its run's
 * handles too where the run never closed (a loop that failed). Its memory
 * and descriptors go at the end of the loop's turn: this is called from
 * deep inside its own callbacks (its run's close, a request answered, a
 * decline), whose callers may still hold it. */
static void client_free(struct connection *c)
{
	struct server *srv = c->srv;
	for (struct connection **at = &srv->clients; *at; at = &(*at)->next)
		if (*at == c) {
			*at = c->next;
			break;
		}
	loop_scope_end(&c->scope);
	/* A batch is freed here, from inside its own on_finished (which does
	 * nothing after it), or with a loop that failed; a batch's calls are
	 * dropped with it. */
	batch_free(c->batch);
	c->batch = NULL;
	if (c->running && c->req.kind == REQUEST_RUN)
		oneshot_discard(&c->run);
	if (c->fleet) {
		c->fleet->users--;
		c->fleet->last_used = loop_now_ms();
		c->fleet = NULL;
	}
	loop_release(srv->loop, connection_destroy, c);
	trim_fleets(srv);
	rearm_idle(srv);
	check_finished(srv);
}

static void on_run_closed(struct oneshot *o)
{
	struct connection *c = o->hosting->owner;
	struct server *srv = c->srv;
	srv->served++;
	send_text(c, "exit %d", c->status);
	say("run %ld for pid %ld: exit %d after %lld ms%s", srv->served, (long)c->pid, c->status,
		(long long)(loop_now_ms() - c->run.started_at), c->gone ? " (its client was gone)" : "");
	client_free(c);
}

static void on_run_finished(struct oneshot *o)
{
	struct connection *c = o->hosting->owner;
	c->status = oneshot_report_run(o, c->req.json);
	oneshot_close(o, on_run_closed);
}

static void on_batch_finished(void *owner, int status)
{
	struct connection *c = owner;
	struct server *srv = c->srv;
	srv->served++;
	send_text(c, "exit %d", status);
	say("batch %ld for pid %ld: exit %d after %lld ms%s", srv->served, (long)c->pid, status,
		(long long)(loop_now_ms() - request_started_at(&c->req, loop_now_ms())),
		c->gone ? " (its client was gone)" : "");
	client_free(c);
}

/* A stop signal to the client's run or batch, as its own would be. */
static void signal_client(struct connection *c, int sig, bool mute)
{
	if (c->batch) {
		batch_signal(c->batch, sig, mute);
		return;
	}
	if (mute)
		c->run.mute = true;
	oneshot_signal(&c->run, sig);
}

/* The client is gone (its connection ended): its run stops as by SIGHUP,
 * its terminal's. */
static void client_gone(struct connection *c)
{
	c->gone = true;
	loop_unwatch(&c->watch);
	if (c->running)
		signal_client(c, SIGHUP, true);
	else
		client_free(c);
}

static void decline(struct connection *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Says "cold WHY" and closes: the client runs the run itself. */
static void decline(struct connection *c, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	send_text(c, "cold %s", why);
	say("declined a %s of pid %ld: %s", c->req.kind == REQUEST_BATCH ? "batch" : "run",
		(long)c->pid, why);
	client_free(c);
}

/* The request's settings as a config; -1 with why when one is refused
 * (the client checked them: only another build's would be). */
static int request_config(struct connection *c, char *why, size_t why_size)
{
	for (int id = 0; id < SETTING_COUNT; id++)
		if (setting_set(&c->cfg, id, c->req.value[id], c->req.source[id], why, why_size) < 0)
			return -1;
	/* A relative path is the client's cwd's, which the server does not
	 * share: such a run goes cold. */
	const char *podman = c->cfg.value[SET_PODMAN];
	const char *profile = c->cfg.value[SET_SECCOMP_PROFILE];
	if ((strchr(podman, '/') && podman[0] != '/') ||
	    (strcmp(profile, "builtin") != 0 && profile[0] != '/')) {
		snprintf(why, why_size, "a relative --podman or --seccomp-profile");
		return -1;
	}
	return 0;
}

/* The descriptors of the request, given to the run's parts. */
static int adopt_files(struct connection *c, char *why, size_t why_size)
{
	size_t next = 3 + (c->req.file != NULL);
	struct error err;
	if (c->req.output_dir) {
		if (outfiles_adopt(&c->out, c->req.output_dir, c->fds[next], c->req.output_overwrite,
				c->req.umask, &c->cfg) < 0) {
			snprintf(why, why_size, "its output directory is not a directory");
			return -1;
		}
		c->has_out = true;
		c->fds[next++] = -1;
	}
	for (size_t i = 0; i < c->req.input_count; i++, next++) {
		if (infiles_add_fd(&c->in, c->req.inputs[i].name, c->fds[next], c->req.inputs[i].size,
				&err) < 0) {
			snprintf(why, why_size, "%s", err.message);
			return -1;
		}
		c->fds[next] = -1;
	}
	return 0;
}

/* Says "ok": the run (or batch) is the server's from here on, hosted on
 * its loop and fleets. false when the client went meanwhile (and the
 * connection was freed). */
static bool take_request(struct connection *c)
{
	send_text(c, "ok %ld", (long)getpid());
	if (c->gone) {
		client_free(c);
		return false;
	}
	c->hosting = (struct hosting){.loop = c->srv->loop, .fds = c->fds, .runner_for = take_fleet,
		.owner = c};
	return true;
}

/* What every run and batch passes before the server takes it: false once
 * it was declined (and the connection freed). */
static bool admit(struct connection *c)
{
	struct server *srv = c->srv;
	char why[512];
	if (srv->stopping) {
		decline(c, "stopping");
		return false;
	}
	if (strcmp(c->req.build, build_id()) != 0) {
		send_text(c, "cold another build of sage-sandbox (the server's %.12s, the run's %.12s)",
			build_id(), c->req.build);
		say("a client of another build (%.12s; this one %.12s): exiting once the runs "
			"going on end", c->req.build, build_id());
		client_free(c);
		stop(srv, 0, 0, "a client of another build came");
		return false;
	}
	if (strcmp(c->req.environment, srv->environment) != 0) {
		decline(c, "another environment for podman (PATH, HOME, XDG_*, CONTAINERS_*, "
			"TMPDIR, DBUS_SESSION_BUS_ADDRESS, CONTAINER_HOST) than the server's");
		return false;
	}
	if (c->nfds != request_fd_count(&c->req)) {
		decline(c, "%zu descriptors where %zu are due", c->nfds, request_fd_count(&c->req));
		return false;
	}
	if (request_config(c, why, sizeof why) < 0) {
		decline(c, "%s", why);
		return false;
	}
	return true;
}

static void start_run(struct connection *c)
{
	char why[512];
	if (!admit(c))
		return;
	if (adopt_files(c, why, sizeof why) < 0) {
		decline(c, "%s", why);
		return;
	}
	if (!take_request(c))
		return;
	c->run = (struct oneshot){.cfg = &c->cfg,
		.started_at = request_started_at(&c->req, loop_now_ms()),
		.stream = !c->req.json, .show_control_chars = c->req.show_control_chars,
		.file = c->req.file, .code_fd = c->req.file ? c->fds[3] : -1,
		.args = c->req.args, .argc = c->req.argc, .in = c->in.count ? &c->in : NULL,
		.out = c->has_out ? &c->out : NULL, .hosting = &c->hosting,
		.on_finished = on_run_finished};
	if (oneshot_begin(&c->run) < 0) {
		/* As a cold run's refusal: the line, and with --json the object. */
		struct printed p = {.err = &c->run.err, .cfg = &c->cfg};
		write_printed(c->fds[2], print_error_line, &p);
		if (c->req.json)
			write_printed(c->fds[1], print_error_object, &p);
		c->status = c->run.err.status;
		c->running = true;
		oneshot_close(&c->run, on_run_closed);
		return;
	}
	c->running = true;
	oneshot_start(&c->run);
}

/* A batch on the fleet of its settings: as many jobs at once as the
 * fleet has sandboxes (a --jobs above that goes on its own, with its own
 * containers, as asked). */
static void start_batch(struct connection *c)
{
	struct server *srv = c->srv;
	if (!admit(c))
		return;
	/* Fewer at once than on its own would make a long batch slower. */
	if (c->req.jobs > fleet_size(srv)) {
		decline(c, "--jobs %ld is more than the %d sandbox%s the server keeps", c->req.jobs,
			fleet_size(srv), fleet_size(srv) == 1 ? "" : "es");
		return;
	}
	if (!take_request(c))
		return;
	c->batch_opt = (struct batch_options){.cfg = &c->cfg,
		.files = (char *const *)c->req.args, .file_count = c->req.argc, .jobs = c->req.jobs,
		.input_order = c->req.input_order, .resume = c->req.resume,
		.shard_index = c->req.shard_index, .shard_count = c->req.shard_count,
		.progress = c->req.progress};
	c->running = true;
	c->batch = batch_start(&c->batch_opt, &c->hosting, on_batch_finished);
}

static void answer_status(struct connection *c)
{
	struct server *srv = c->srv;
	int warm = 0, running = 0, queued = 0, fleets = 0;
	for (struct fleet *f = srv->fleets; f; f = f->next) {
		fleets++;
		warm += runner_ready(f->runner);
		running += runner_running(f->runner);
		queued += runner_waiting(f->runner);
	}
	long rss_kib = 0, descriptors = 0;
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &rss_kib) == 1)
			break;
	if (f)
		fclose(f);
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		descriptors++;
	if (d)
		closedir(d);
	json_t *j = json_pack("{s:I, s:s, s:s, s:s, s:I, s:b, s:i, s:i, s:i, s:i, s:i, s:I, s:i, "
			"s:I, s:I, s:I, s:s}",
		"pid", (json_int_t)getpid(), "version", SAGE_SANDBOX_VERSION, "build", build_id(),
		"environment", srv->environment,
		"uptime_seconds", (json_int_t)((loop_now_ms() - srv->started) / 1000),
		"socket_activated", srv->activated, "warm", warm, "running", running, "queued", queued,
		"kinds_of_settings", fleets, "warm_per_kind", srv->opt.warm,
		"served", (json_int_t)srv->served, "clients", count_clients(srv) - 1,
		"idle_seconds", (json_int_t)srv->opt.idle_seconds, "rss_kib", (json_int_t)rss_kib,
		"descriptors", (json_int_t)(descriptors - 3), "log", srv->dir.log);
	char *text = json_dumps(j, JSON_COMPACT);
	send_text(c, "status %s", text);
	free(text);
	json_decref(j);
	client_free(c);
}

static void on_wait_timeout(void *data)
{
	struct connection *c = data;
	say("closed the connection of pid %ld: no request within %d s", (long)c->pid,
		REQUEST_WAIT_MS / 1000);
	client_free(c);
}

/* The request: one message, its descriptors with it. */
static void read_request(struct connection *c)
{
	static char buf[REQUEST_MAX_BYTES + 1];
	union {
		char space[CMSG_SPACE(REQUEST_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
		.msg_controllen = sizeof control.space};
	ssize_t n;
	while ((n = recvmsg(c->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		/* The control buffer was not written: nothing in it is ours. */
		client_free(c);
		return;
	}
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
			if (c->nfds < REQUEST_MAX_FDS)
				c->fds[c->nfds++] = fd;
			else
				close(fd);
		}
	}
	loop_timer_cancel(&c->wait_timer);
	if (n == 0) {
		client_free(c); /* it left without a word */
		return;
	}
	char why[256];
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		say("closed the connection of pid %ld: a request longer than %d bytes or with "
			"more than %d descriptors", (long)c->pid, REQUEST_MAX_BYTES, REQUEST_MAX_FDS);
		client_free(c);
		return;
	}
	if (request_decode(buf, (size_t)n, &c->req, why, sizeof why) < 0) {
		say("closed the connection of pid %ld: %s", (long)c->pid, why);
		client_free(c);
		return;
	}
	if (c->req.kind == REQUEST_STATUS) {
		answer_status(c);
	} else if (c->req.kind == REQUEST_STOP) {
		struct server *srv = c->srv;
		send_text(c, "stopping %ld", (long)getpid());
		say("asked to stop by pid %ld", (long)c->pid);
		client_free(c);
		stop(srv, SIGTERM, 0, "asked to stop");
	} else if (c->req.kind == REQUEST_BATCH) {
		start_batch(c);
	} else {
		start_run(c);
	}
}

static void on_client(int fd, unsigned events, void *data)
{
	struct connection *c = data;
	if (!c->req.kind) {
		read_request(c);
		return;
	}
	/* After the request: the client's signals, or its end. */
	char buf[64];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		client_gone(c);
		return;
	}
	buf[n] = '\0';
	int sig;
	if (sscanf(buf, "signal %d", &sig) == 1 && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP))
		signal_client(c, sig, false);
}

static void on_accept_retry(void *data)
{
	struct server *srv = data;
	loop_watch_events(srv->listen_watch, LOOP_READ);
}

static void on_listen(int fd, unsigned events, void *data)
{
	struct server *srv = data;
	for (;;) {
		int s = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: look again in a while, not on
				 * every turn. */
				loop_watch_events(srv->listen_watch, 0);
				if (!loop_timer_armed(&srv->accept_timer))
					loop_timer_arm(&srv->scope, &srv->accept_timer,
						loop_now_ms() + ACCEPT_RETRY_MS, on_accept_retry, srv);
			}
			return;
		}
		struct ucred peer;
		socklen_t len = sizeof peer;
		if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 ||
		    peer.uid != geteuid()) {
			say("refused a connection of uid %ld (pid %ld): only uid %ld may use this server",
				len == sizeof peer ? (long)peer.uid : -1L, len == sizeof peer ?
				(long)peer.pid : -1L, (long)geteuid());
			close(s);
			continue;
		}
		struct connection *c = calloc(1, sizeof *c);
		if (!c)
			abort();
		*c = (struct connection){.srv = srv, .sock = s, .pid = peer.pid};
		loop_scope_init(&c->scope, srv->loop, "a server's client");
		c->next = srv->clients;
		srv->clients = c;
		loop_timer_cancel(&srv->idle_timer);
		if (count_clients(srv) > CLIENTS_MAX) {
			decline(c, "%d clients at once already", CLIENTS_MAX);
			continue;
		}
		if (loop_watch(&c->scope, &c->watch, s, LOOP_READ, on_client, c) < 0) {
			client_free(c);
			continue;
		}
		loop_timer_arm(&c->scope, &c->wait_timer, loop_now_ms() + REQUEST_WAIT_MS,
			on_wait_timeout, c);
	}
}

/* ---- start and stop ------------------------------------------------------------ */

static void close_listener(struct server *srv)
{
	loop_unwatch(&srv->listen_watch);
	loop_timer_cancel(&srv->accept_timer);
	if (srv->listen_fd < 0)
		return;
	/* Ours is removed, not one a newer server put there since. */
	struct stat st;
	if (!srv->activated && lstat(srv->dir.socket, &st) == 0 &&
	    st.st_ino == srv->socket_stat.st_ino && st.st_dev == srv->socket_stat.st_dev)
		unlink(srv->dir.socket);
	close(srv->listen_fd);
	srv->listen_fd = -1;
}

/* Ends the server: no new client; with sig, the runs going on are stopped
 * as by that signal, else they end first; then every sandbox goes. */
static void stop(struct server *srv, int sig, int status, const char *why)
{
	if (srv->stopping) {
		if (sig)
			for (struct connection *c = srv->clients; c; c = c->next)
				if (c->running)
					signal_client(c, sig, false);
		return;
	}
	srv->stopping = true;
	srv->exit_status = status;
	say("stopping: %s", why);
	close_listener(srv);
	loop_timer_cancel(&srv->idle_timer);
	for (struct connection *c = srv->clients, *next; c; c = next) {
		next = c->next;
		if (c->running) {
			if (sig)
				signal_client(c, sig, false);
		} else {
			client_free(c); /* a request not yet in */
		}
	}
	check_finished(srv);
}

/* Once the runs are over, the sandboxes go; once they are gone, so does
 * the server. */
static void check_finished(struct server *srv)
{
	if (!srv->stopping || srv->clients)
		return;
	/* Stopping: its own check is not waited for. */
	host_check_cancel(&srv->host_check);
	if (!srv->draining) {
		srv->draining = true;
		for (struct fleet *f = srv->fleets, *next; f; f = next) {
			next = f->next;
			fleet_drain(f, SIGTERM, "the server stopped");
		}
	}
	if (!srv->fleets && !srv->done) {
		srv->done = true;
		loop_quit(srv->loop);
	}
}

static void on_signal(int sig, void *data)
{
	struct server *srv = data;
	char why[32];
	snprintf(why, sizeof why, "signal %d", sig);
	stop(srv, sig, 128 + sig, why);
}

static void on_own_host(struct host *h, void *data)
{
	struct server *srv = data;
	if (h->refusal.status) {
		fprintf(stderr, "sage-sandbox serve: %s%s%s\n", h->refusal.message,
			h->refusal.hint[0] ? "; " : "", h->refusal.hint);
		stop(srv, SIGTERM, h->refusal.status, "this host cannot run its sandboxes");
		return;
	}
	if (srv->stopping) {
		check_finished(srv);
		return;
	}
	/* What a server killed before it left (this user's sandboxes whose
	 * owner is gone), as `cleanup` would. */
	struct buffer removed = {0};
	struct error err;
	int n = sandbox_cleanup(h->podman, &removed, &err);
	if (n > 0)
		say("removed %d containers that a killed sage-sandbox left", n);
	buffer_free(&removed);
	fleet_for(srv, srv->opt.cfg, h);
}

/* A socket from the service manager (LISTEN_FDS, LISTEN_PID: systemd's
 * protocol, no library needed): its first, descriptor 3. -1 when there is
 * none, -2 (a line said why) when it is not a SOCK_SEQPACKET socket. */
static int activated_socket(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	if (!pid || !fds || atol(pid) != (long)getpid())
		return -1;
	int count = atoi(fds);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (count < 1)
		return -1;
	for (int fd = 4; fd < 3 + count; fd++)
		close(fd);
	int type = 0;
	socklen_t len = sizeof type;
	struct sockaddr_un addr;
	socklen_t addr_len = sizeof addr;
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET ||
	    getsockname(3, (struct sockaddr *)&addr, &addr_len) < 0 || addr.sun_family != AF_UNIX) {
		fprintf(stderr, "sage-sandbox serve: the socket it was given (LISTEN_FDS) is not a "
				"SOCK_SEQPACKET unix socket; use ListenSequentialPacket= in the socket unit\n");
		return -2;
	}
	fcntl(3, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
	return 3;
}

/* The lock that makes it the one server of this user; its pid in it. */
static int take_lock(struct server *srv)
{
	srv->lock_fd = open(srv->dir.lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (srv->lock_fd < 0) {
		fprintf(stderr, "sage-sandbox serve: cannot open %s: %s\n", srv->dir.lock,
			strerror(errno));
		return -1;
	}
	if (flock(srv->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		char pid[32] = "";
		ssize_t n = pread(srv->lock_fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		fprintf(stderr, "sage-sandbox serve: another server (pid %s) already serves at %s; "
				"stop it first with sage-sandbox serve --stop\n", pid[0] ? pid : "?",
			srv->dir.socket);
		return -1;
	}
	char pid[32];
	int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(srv->lock_fd, 0) < 0 || pwrite(srv->lock_fd, pid, (size_t)len, 0) < 0)
		return 0; /* only a message's detail */
	return 0;
}

static int listen_socket(struct server *srv)
{
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	memcpy(addr.sun_path, srv->dir.socket, strlen(srv->dir.socket) + 1);
	/* Whatever is there is a dead server's: the lock is ours. */
	unlink(srv->dir.socket);
	if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) < 0 ||
	    chmod(srv->dir.socket, 0600) < 0 || listen(s, 64) < 0 ||
	    lstat(srv->dir.socket, &srv->socket_stat) < 0) {
		fprintf(stderr, "sage-sandbox serve: cannot listen on %s: %s\n", srv->dir.socket,
			strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

static int open_server(struct server *srv)
{
	struct error err;
	if (geteuid() == 0) {
		fprintf(stderr, "sage-sandbox serve: refusing to run as root: rootful podman maps "
				"the container's root to the host's; run it as the user whose runs it "
				"serves\n");
		return -1;
	}
	int activated = activated_socket();
	if (activated == -2 || rundir_locate(&srv->dir, &err) < 0 ||
	    rundir_check(&srv->dir, true, &err) < 0) {
		if (activated != -2)
			fprintf(stderr, "sage-sandbox serve: %s; %s\n", err.message, err.hint);
		return -1;
	}
	if (take_lock(srv) < 0)
		return -1;
	srv->activated = activated >= 0;
	srv->listen_fd = srv->activated ? activated : listen_socket(srv);
	if (srv->listen_fd < 0)
		return -1;
	if (loop_watch(&srv->scope, &srv->listen_watch, srv->listen_fd, LOOP_READ, on_listen,
			srv) < 0)
		return -1;
	srv->signals = stop_signals_watch(srv->loop, false, on_signal, srv, &err);
	return srv->signals ? 0 : -1;
}

int server_run(const struct server_options *opt)
{
	struct server srv = {.opt = *opt, .listen_fd = -1, .lock_fd = -1,
		.started = loop_now_ms(), .exit_status = EXIT_REFUSED};
	/* Written to a client's terminal while a background job of it: never
	 * stopped for that (TOSTOP), nor for reading one. */
	signal(SIGTTOU, SIG_IGN);
	signal(SIGTTIN, SIG_IGN);
	if (chdir("/") < 0)
		return EXIT_REFUSED;
	podman_environment_digest(srv.environment);
	srv.loop = loop_new();
	if (!srv.loop)
		return EXIT_REFUSED;
	loop_scope_init(&srv.scope, srv.loop, "the server");
	if (open_server(&srv) == 0) {
		srv.exit_status = 0;
		char idle[48] = "never";
		if (opt->idle_seconds)
			snprintf(idle, sizeof idle, "after %ld s without a client", opt->idle_seconds);
		say("pid %ld serves at %s%s, %d warm sandbox%s per kind of settings, exits %s",
			(long)getpid(), srv.dir.socket, srv.activated ? " (socket activated)" : "",
			opt->warm, opt->warm == 1 ? "" : "es", idle);
		rearm_idle(&srv);
		host_check(srv.loop, &srv.host_check, opt->cfg, loop_now_ms() + HOST_CHECK_MS, true,
			&srv.host, on_own_host, &srv);
		while (!srv.done)
			if (loop_run(srv.loop) < 0) {
				say("the event loop failed: %s", strerror(errno));
				srv.exit_status = EXIT_REFUSED;
				break;
			}
		say("exited: %ld runs served", srv.served);
	}
	close_listener(&srv);
	/* Only a loop that failed leaves clients and fleets; outside
	 * loop_run, each goes at once. */
	while (srv.clients)
		client_free(srv.clients);
	while (srv.fleets) {
		struct fleet *f = srv.fleets;
		srv.fleets = f->next;
		fleet_free(f);
	}
	loop_scope_end(&srv.scope);
	host_check_cancel(&srv.host_check);
	stop_signals_free(srv.signals);
	if (srv.lock_fd >= 0)
		close(srv.lock_fd);
	loop_free(srv.loop);
	return srv.exit_status;
}
