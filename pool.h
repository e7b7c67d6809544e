/* pool.h: warm sandboxes, started ahead with Sage imported, each handed to
 * exactly one call and then destroyed, a replacement starting once the
 * call has its answer. */
#ifndef SAGE_SANDBOX_POOL_H
#define SAGE_SANDBOX_POOL_H

#include "sandbox.h"

#include <stdbool.h>

/* A warm sandbox older than this is retired and replaced, so that no
 * container lives for long on one start; podman's --timeout backstop of a
 * warm sandbox adds it (see podman_run_args). */
#define POOL_MAX_IDLE_SECONDS 600
#define POOL_MAX_SIZE 8

struct pool;

struct pool_options {
	struct loop *loop;
	const struct config *cfg; /* the sandboxes' settings, --timeout the longest call */
	const struct podman_host *host;
	const struct sage_image *image;
	const char *podman;
	int size;                 /* warm sandboxes kept: 0 to POOL_MAX_SIZE */
	bool log;                 /* a line on stderr when one is ready, or fails */
};

struct pool *pool_new(const struct pool_options *opt);
/* A sandbox for one call, cb hearing of it from now on: a ready warm one
 * if there is one (*warm set), else one started now for this call alone,
 * with deadline as its own. NULL with err set when podman could not be
 * started. The caller submits the program and frees the sandbox after
 * on_released. */
struct sandbox *pool_take(struct pool *p, const struct sandbox_callbacks *cb, int64_t deadline,
		bool *warm, struct error *err);
/* A call has its answer: the pool is brought back to its size now. */
void pool_call_ended(struct pool *p);
/* Warm sandboxes ready now. */
int pool_ready(const struct pool *p);
/* Stops every waiting sandbox and starts no more; done is called once all
 * of them are removed (at once when there are none). */
void pool_drain(struct pool *p, void (*done)(void *data), void *data);
/* Only after pool_drain's done, or to abandon what is left to podman's
 * backstop. */
void pool_free(struct pool *p);

#endif
