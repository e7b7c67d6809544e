/* host.h: what this host can run, asked once before anything runs: podman
 * (found, local or remote), the rootless verdict with the cgroup facts,
 * and the image with its Sage, as a value with one-line errors. Every front
 * end asks it; status prints it. */
#ifndef SAGE_SANDBOX_HOST_H
#define SAGE_SANDBOX_HOST_H

#include "error.h"
#include "image.h"
#include "loop.h"
#include "podman.h"
#include "settings.h"

#include <stdbool.h>
#include <stdint.h>

struct host {
	char podman[4096];              /* podman's path; "" when not found */
	/* Where a remote podman would run containers (CONTAINER_HOST,
	 * CONTAINER_CONNECTION or podman's own configuration), or "". */
	char remote[512];
	struct podman_host podman_host; /* what podman info said */
	bool image_checked;
	struct sage_image image;        /* the image's Sage, once checked */
	struct error refusal;           /* status 0: sandboxes can run here */
};

typedef void host_callback(struct host *host, void *data);

struct host_check;

/* Fills *h on the loop, from the per-user caches where they hold: podman,
 * the rootless verdict, and (with_image) the image. done is called once,
 * from the loop, never inside this call; h->refusal says why nothing can
 * run, in one line with its fix. The deadline bounds podman's answers.
 * *slot holds the check until done is called: host_check_cancel() ends it
 * without an answer (a run stopped meanwhile goes at once; the podman it
 * asked is let go of, and reaped once it ends). */
void host_check(struct loop *loop, struct host_check **slot, const struct config *cfg,
		int64_t deadline, bool with_image, struct host *h, host_callback *done, void *data);
void host_check_cancel(struct host_check **slot);
/* The same to its end, on a loop of its own. */
void host_check_now(const struct config *cfg, bool with_image, struct host *h);

#endif
