/* image.h: what a run needs to know of its image (Sage's own Python, the
 * PATH Sage gives its programs, the image's user), asked of the image
 * itself once and cached per user. */
#ifndef SAGE_SANDBOX_IMAGE_H
#define SAGE_SANDBOX_IMAGE_H

#include "error.h"
#include "loop.h"
#include "podman.h"
#include "settings.h"

/* The probe container may take this long (a cold disk, a slow `sage`). */
#define IMAGE_PROBE_SECONDS 60

struct sage_image {
	char python[1024];        /* Sage's Python, an absolute path in the image */
	char python_version[32];
	char path[2048];          /* PATH as Sage's `sage` script sets it, or "" */
	char sage_version[64];
	char user[64];            /* the image's user, by name where it has one */
	long uid, gid;            /* its ids; gid becomes the runs' supplementary group */
};

/* The answer: image, or refusal (status 125, naming the image and the fix). */
typedef void image_callback(const struct sage_image *image, const struct error *refusal,
		void *data);

struct image_query;

/* Finds Sage's Python in cfg's image, on the loop: from the cache when its
 * key (podman's, the image's name, --python, the storage's image index)
 * matches, with no process started; else by one probe container as the
 * image's user, whose positive answer is cached. done may be called before
 * this returns; else *slot holds the query until done is called, and
 * image_cancel() ends it without an answer (the probe's podman client is
 * let go of: its container has podman's --rm and --timeout). -1 with errno
 * when podman could not be started. */
int image_check(struct loop *loop, struct image_query **slot, const char *podman,
		const struct config *cfg, const struct podman_host *host, int64_t deadline,
		image_callback *done, void *data);
void image_cancel(struct image_query **slot);
/* The cache's key of cfg's image: podman, its configuration, the image's
 * name, --python and the storage's image index (rewritten whenever an
 * image is added, removed or tagged). The server keys its warm sandboxes
 * on it too: a rebuilt image is never served by a sandbox of the old. */
void image_cache_key(const char *podman, const struct config *cfg,
		const struct podman_host *host, struct buffer *key);
/* What was cached for cfg's image did not start Sage: ask it again next time. */
void image_forget(const struct config *cfg);

/* The refusal for an image whose Sage did not start: why, in its words. */
void image_refusal(struct error *err, const struct config *cfg, const char *why);

/* Parses what the probe printed; 0, or -1 with the refusal in err. */
int image_parse(const char *said, const struct config *cfg, struct sage_image *image,
		struct error *err);

#endif
