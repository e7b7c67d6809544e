/* host.c: the host check, written once: podman found, its rootless answer
 * and verdict (rootless.c), then the image's Sage (image.c), each from the
 * per-user cache where its key still holds; one refusal in one line when a
 * step fails, and the steps after it not asked. */
#include "host.h"
#include "rootless.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct host_query {
	struct loop *loop;
	const struct config *cfg;
	int64_t deadline;
	bool with_image;
	struct host *h;
	host_callback *done;
	void *data;
};

static void finish(struct host_query *q)
{
	host_callback *done = q->done;
	struct host *h = q->h;
	void *data = q->data;
	free(q);
	done(h, data);
}

static void cannot_execute(struct host_query *q)
{
	error_set(&q->h->refusal, EXIT_REFUSED, podman_install_hint, "cannot execute podman %s: %s",
		q->h->podman, strerror(errno));
	finish(q);
}

static void on_image(const struct sage_image *image, const struct error *refusal, void *data)
{
	struct host_query *q = data;
	q->h->image_checked = true;
	if (refusal)
		q->h->refusal = *refusal;
	else
		q->h->image = *image;
	finish(q);
}

static void on_rootless(const struct podman_host *answer, void *data)
{
	struct host_query *q = data;
	struct host *h = q->h;
	h->podman_host = *answer;
	if (answer->remote && !h->remote[0])
		snprintf(h->remote, sizeof h->remote, "podman's configuration (its service is remote)");
	if (rootless_verdict(answer, &h->refusal) < 0 || !q->with_image) {
		finish(q);
		return;
	}
	if (image_check(q->loop, h->podman, q->cfg, &h->podman_host, q->deadline, on_image, q) < 0)
		cannot_execute(q);
}

void host_check(struct loop *loop, const struct config *cfg, int64_t deadline, bool with_image,
		struct host *h, host_callback *done, void *data)
{
	*h = (struct host){.podman_host.rootless = ROOTLESS_UNKNOWN};
	/* A remote podman runs containers elsewhere: their processes are not
	 * this host's to watch or count. Named here, refused by the verdict. */
	static const char *const remote_variables[] = {"CONTAINER_HOST", "CONTAINER_CONNECTION"};
	for (size_t i = 0; i < 2 && !h->remote[0]; i++) {
		const char *v = getenv(remote_variables[i]);
		if (v && *v)
			snprintf(h->remote, sizeof h->remote, "%s=%s", remote_variables[i], v);
	}
	char *podman = find_executable(cfg->value[SET_PODMAN]);
	const char *named = cfg->value[SET_PODMAN];
	if (!podman && strchr(named, '/') && access(named, F_OK) == 0) {
		/* There, but not a program this user may run. */
		error_set(&h->refusal, EXIT_REFUSED, podman_install_hint,
			"cannot execute podman %s: %s", named, strerror(EACCES));
		done(h, data);
		return;
	}
	if (!podman) {
		error_set(&h->refusal, EXIT_REFUSED, podman_install_hint,
			"podman executable '%s' not found", named);
		done(h, data);
		return;
	}
	snprintf(h->podman, sizeof h->podman, "%s", podman);
	free(podman);
	struct host_query *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	*q = (struct host_query){.loop = loop, .cfg = cfg, .deadline = deadline,
		.with_image = with_image, .h = h, .done = done, .data = data};
	if (rootless_check(loop, h->podman, deadline, on_rootless, q) < 0)
		cannot_execute(q);
}

static void stop_loop(struct host *h, void *data)
{
	*(bool *)data = true;
}

void host_check_now(const struct config *cfg, bool with_image, struct host *h)
{
	struct loop *loop = loop_new();
	bool answered = false;
	if (!loop) {
		*h = (struct host){0};
		error_set(&h->refusal, EXIT_REFUSED, NULL, "cannot create an event loop: %s",
			strerror(errno));
		return;
	}
	host_check(loop, cfg, INT64_MAX, with_image, h, stop_loop, &answered);
	/* It turns until podman's answers are in: nothing else is watched. */
	if (!answered && (loop_run(loop) < 0 || !answered))
		error_set(&h->refusal, EXIT_REFUSED, NULL, "the event loop failed: %s",
			strerror(errno));
	loop_free(loop);
}
