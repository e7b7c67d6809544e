/* rootless.h: whether podman runs rootless here, asked on every run and
 * answered from a per-user cache while nothing that could change it has. */
#ifndef SAGE_SANDBOX_ROOTLESS_H
#define SAGE_SANDBOX_ROOTLESS_H

#include "error.h"
#include "loop.h"
#include "podman.h"

#include <stdint.h>

/* The answer is in host; rootless_verdict() turns it into a refusal. */
typedef void rootless_callback(const struct podman_host *host, void *data);

struct rootless_query;

/* Asks, on the loop: refused at once as root or with a remote podman
 * configured in the environment; answered from the cache when its key
 * matches (no process started); otherwise by one `podman info` killed at
 * deadline, whose positive answer is cached. done may be called before
 * this returns; else *slot holds the query until done is called, and
 * rootless_cancel() ends it without an answer (podman info is let go
 * of, and reaped once it ends). -1 with errno when podman could not be started. */
int rootless_check(struct loop *loop, struct rootless_query **slot, const char *podman,
		int64_t deadline, rootless_callback *done, void *data);
void rootless_cancel(struct rootless_query **slot);
/* 0 when host is rootless and local; else -1 with the refusal in err. */
int rootless_verdict(const struct podman_host *host, const char *podman, struct error *err);
/* The same question without reading the cache (status): one `podman
 * info`, whose positive answer is cached for the runs after it. */
void rootless_query_now(const char *podman, struct podman_host *host);

#endif
