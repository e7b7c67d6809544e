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

/* One check in flight; the caller's slot points at it until done is
 * called or the check is cancelled. */
struct host_check {
	struct host_check **slot;
	struct loop_scope scope;         /* the answer's timer */
	struct loop_timer *answer;
	struct rootless_query *rootless; /* podman info, while asked */
	struct image_query *image;       /* the image probe, while asked */
	struct loop *loop;
	const struct config *cfg;
	int64_t deadline;
	bool with_image;
	struct host *h;
	host_callback *done;
	void *data;
};

/* The one end of a check: answered or cancelled. What it asked podman
 * is let go of (process_abandon). */
static void check_free(struct host_check *q)
{
	loop_scope_end(&q->scope);
	rootless_cancel(&q->rootless);
	image_cancel(&q->image);
	if (*q->slot == q)
		*q->slot = NULL;
	free(q);
}

static void answer(void *data)
{
	struct host_check *q = data;
	host_callback *done = q->done;
	struct host *h = q->h;
	void *done_data = q->data;
	check_free(q);
	done(h, done_data);
}

/* The answer is in h: told from the loop, never inside host_check(). */
static void finish(struct host_check *q)
{
	loop_timer_arm(&q->scope, &q->answer, 0, answer, q);
}

static void cannot_execute(struct host_check *q)
{
	int exec_errno = errno;
	podman_start_error(&q->h->refusal, q->h->podman, exec_errno);
	finish(q);
}

static void on_image(const struct sage_image *image, const struct error *refusal, void *data)
{
	struct host_check *q = data;
	q->h->image_checked = true;
	if (refusal)
		q->h->refusal = *refusal;
	else
		q->h->image = *image;
	finish(q);
}

static void on_rootless(const struct podman_host *podman_answer, void *data)
{
	struct host_check *q = data;
	struct host *h = q->h;
	h->podman_host = *podman_answer;
	if (podman_answer->remote && !h->remote[0])
		snprintf(h->remote, sizeof h->remote, "podman's configuration (its service is remote)");
	if (rootless_verdict(podman_answer, h->podman, &h->refusal) < 0 || !q->with_image) {
		finish(q);
		return;
	}
	if (image_check(q->loop, &q->image, h->podman, q->cfg, &h->podman_host, q->deadline,
		    on_image, q) < 0)
		cannot_execute(q);
}

/* Where podman is, or why there is none to run: the steps asked of podman
 * then. */
static void find_podman(struct host_check *q)
{
	struct host *h = q->h;
	/* A remote podman runs containers elsewhere: their processes are not
	 * this host's to watch or count. Named here, refused by the verdict. */
	static const char *const remote_variables[] = {"CONTAINER_HOST", "CONTAINER_CONNECTION"};
	for (size_t i = 0; i < 2 && !h->remote[0]; i++) {
		const char *v = getenv(remote_variables[i]);
		if (v && *v)
			snprintf(h->remote, sizeof h->remote, "%s=%s", remote_variables[i], v);
	}
	char *podman = podman_executable(q->cfg->value[SET_PODMAN], &h->refusal);
	if (!podman) {
		finish(q);
		return;
	}
	snprintf(h->podman, sizeof h->podman, "%s", podman);
	free(podman);
	if (rootless_check(q->loop, &q->rootless, h->podman, q->deadline, on_rootless, q) < 0)
		cannot_execute(q);
}

void host_check(struct loop *loop, struct host_check **slot, const struct config *cfg,
		int64_t deadline, bool with_image, struct host *h, host_callback *done, void *data)
{
	host_check_cancel(slot);
	*h = (struct host){.podman_host.rootless = ROOTLESS_UNKNOWN};
	struct host_check *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	*q = (struct host_check){.slot = slot, .loop = loop, .cfg = cfg, .deadline = deadline,
		.with_image = with_image, .h = h, .done = done, .data = data};
	loop_scope_init(&q->scope, loop, "a host check");
	*slot = q;
	find_podman(q);
}

void host_check_cancel(struct host_check **slot)
{
	if (*slot)
		check_free(*slot);
}

static void stop_loop(struct host *h, void *data)
{
	*(bool *)data = true;
}

void host_check_now(const struct config *cfg, bool with_image, struct host *h)
{
	struct loop *loop = loop_new();
	struct host_check *check = NULL;
	bool answered = false;
	if (!loop) {
		*h = (struct host){0};
		error_set(&h->refusal, EXIT_REFUSED, NULL, "cannot create an event loop: %s",
			strerror(errno));
		return;
	}
	host_check(loop, &check, cfg, INT64_MAX, with_image, h, stop_loop, &answered);
	/* It turns until podman's answers are in: nothing else is watched. */
	if (loop_run(loop) < 0 || !answered) {
		error_set(&h->refusal, EXIT_REFUSED, NULL, "the event loop failed: %s",
			strerror(errno));
		host_check_cancel(&check);
	}
	loop_free(loop);
}
