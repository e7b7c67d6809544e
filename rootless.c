/* rootless.c: the rootless check, run before every sandbox and never
 * skipped.
 *
 * Rootful podman maps the container's root to the host's root: a container
 * escape is then a host compromise. sage-sandbox runs nothing unless podman
 * itself says it is rootless and local. It refuses outright as root (sudo
 * included), and when CONTAINER_HOST or CONTAINER_CONNECTION would send
 * podman to a service whose rootlessness is not this user's.
 *
 * Asking `podman info` costs 0.35-0.45 s, a third of a run. Its positive
 * answer is cached (cache.c) under a key of everything that can change it:
 * the uid, the podman executable's identity (device, inode, size, change
 * time), the variables podman is given, the boot id, and the identity of
 * every containers.conf, storage.conf, their drop-in directories and
 * /etc/subuid and /etc/subgid. Any difference, or an answer older than ten
 * minutes, asks podman again. Refusals are never cached.
 *
 * The controllers matter too: rootless podman silently drops --memory,
 * --cpus and --pids-limit when the user has no delegated cgroup controller
 * for them, so podman.c passes each only where it is enforced. */
#include "rootless.h"
#include "cache.h"
#include "process.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first podman call after boot sets up its user namespace and storage:
 * seconds, not milliseconds, on a slow disk. */
#define PODMAN_INFO_TIMEOUT_MS 20000
#define CACHE_MAX_AGE_SECONDS 600
/* Changed whenever what podman info is asked for changes. */
#define CACHE_NAME "podman-host-4"

/* The cached podman info answer for key, or -1. */
static int cached_answer(const struct buffer *key, struct podman_host *host)
{
	struct buffer answer = {0};
	int rc = -1;
	if (cache_read(CACHE_NAME, key, CACHE_MAX_AGE_SECONDS, &answer) == 0) {
		podman_info_parse(answer.data, 0, false, NULL, host);
		if (host->rootless == ROOTLESS_TRUE && !host->remote)
			rc = 0;
	}
	buffer_free(&answer);
	return rc;
}

/* Refusals that need no podman at all. */
static bool refused_early(struct podman_host *host)
{
	*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
	if (geteuid() == 0) {
		host->rootless = ROOTLESS_FALSE;
		host->as_root = true;
		snprintf(host->detail, sizeof host->detail, "running as root");
		return true;
	}
	static const char *const remote_vars[] = {"CONTAINER_HOST", "CONTAINER_CONNECTION"};
	for (size_t i = 0; i < 2; i++) {
		const char *v = getenv(remote_vars[i]);
		if (v && *v) {
			host->remote = true;
			snprintf(host->detail, sizeof host->detail,
				"%s is set: podman would run containers through a service", remote_vars[i]);
			return true;
		}
	}
	return false;
}

/* podman info's answer into host; a positive one is cached under key. */
static void parse_and_cache(const struct capture *cap, const struct buffer *key,
		struct podman_host *host)
{
	podman_info_parse(cap->out.data, cap->status, cap->timed_out, cap->err.data, host);
	if (host->rootless == ROOTLESS_TRUE && !host->remote && key->data)
		cache_write(CACHE_NAME, key, cap->out.data ? cap->out.data : "");
}

struct rootless_query {
	struct rootless_query **slot; /* the caller's, cleared at the end */
	struct capture_run *info;     /* podman info, until it answers */
	struct buffer key;
	struct argv_builder args;
	rootless_callback *done;
	void *data;
};

/* The one end of a query: answered, cancelled or never started. */
static void query_free(struct rootless_query *q)
{
	capture_abandon(&q->info);
	if (q->slot)
		*q->slot = NULL;
	buffer_free(&q->key);
	args_free(&q->args);
	free(q);
}

static void info_answered(struct capture *cap, void *data)
{
	struct rootless_query *q = data;
	struct podman_host host;
	parse_and_cache(cap, &q->key, &host);
	capture_free(cap);
	rootless_callback *done = q->done;
	void *done_data = q->data;
	query_free(q);
	done(&host, done_data);
}

void rootless_cancel(struct rootless_query **slot)
{
	if (*slot)
		query_free(*slot);
}

int rootless_check(struct loop *loop, struct rootless_query **slot, const char *podman,
		int64_t deadline, rootless_callback *done, void *data)
{
	*slot = NULL;
	struct podman_host host;
	if (refused_early(&host)) {
		done(&host, data);
		return 0;
	}
	struct rootless_query *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	cache_key_podman(&q->key, podman);
	if (cached_answer(&q->key, &host) == 0) {
		buffer_free(&q->key);
		free(q);
		done(&host, data);
		return 0;
	}
	q->done = done;
	q->data = data;
	podman_info_args(&q->args, podman);
	int64_t limit = loop_now_ms() + PODMAN_INFO_TIMEOUT_MS;
	if (capture_start(loop, &q->info, q->args.arg, podman_environment(),
		    deadline < limit ? deadline : limit, info_answered, q) < 0) {
		int saved = errno;
		query_free(q);
		errno = saved;
		return -1;
	}
	q->slot = slot;
	*slot = q;
	return 0;
}

void rootless_query_now(const char *podman, struct podman_host *host)
{
	struct argv_builder args = {0};
	struct capture cap;
	if (refused_early(host))
		return;
	podman_info_args(&args, podman);
	if (capture_command(args.arg, podman_environment(), PODMAN_INFO_TIMEOUT_MS, &cap) < 0) {
		*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
		snprintf(host->detail, sizeof host->detail, "cannot start %s: %s", podman,
			strerror(cap.exec_errno));
	} else {
		struct buffer key = {0};
		cache_key_podman(&key, podman);
		parse_and_cache(&cap, &key, host);
		buffer_free(&key);
	}
	capture_free(&cap);
	args_free(&args);
}

int rootless_verdict(const struct podman_host *host, const char *podman, struct error *err)
{
	if (host->remote) {
		error_set(err, EXIT_REFUSED,
			"unset CONTAINER_HOST and CONTAINER_CONNECTION, and use a local rootless podman "
			"(no remote = true in containers.conf)",
			"refusing to run: podman is remote (%s)",
			host->detail[0] ? host->detail : "it reports a remote service");
		return -1;
	}
	switch (host->rootless) {
	case ROOTLESS_TRUE:
		return 0;
	case ROOTLESS_FALSE: {
		char check[512];
		if (host->as_root) {
			error_set(err, EXIT_REFUSED,
				"run it as the account setup.sh made (sudo -iu sage-sandbox sage-sandbox "
				"run FILE), or as your own user after './setup.sh image'",
				"refusing to run as root: rootless podman needs an unprivileged user");
			return -1;
		}
		podman_command_hint(check, sizeof check, "run sage-sandbox as an unprivileged user "
			"(not root, not sudo) with rootless podman; check with", podman,
			"info --format '{{.Host.Security.Rootless}}'");
		error_set(err, EXIT_REFUSED, check, "refusing to run: podman is not rootless (%s)",
			host->detail[0] ? host->detail : "it runs as root");
		return -1;
	}
	default: {
		char works[512];
		podman_works_hint(works, sizeof works, podman, "info", NULL);
		error_set(err, EXIT_REFUSED, podman_failed_hint(host->detail, works),
			"refusing to run: cannot confirm podman is rootless: %s", host->detail);
		return -1;
	}
	}
}
