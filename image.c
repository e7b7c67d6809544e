/* image.c: Sage's own Python, found in the image itself.
 *
 * Images lay Sage out differently. Debian's sagemath package imports from
 * /usr/bin/python3. The official sagemath/sagemath images build Sage under
 * /home/sage/sage with a venv of their own and have no python3 on PATH (up
 * to 10.8), or a system python3 that cannot import Sage (10.9), under a
 * home that only the image's user and group can enter. So no run assumes a
 * python3: one probe container asks the image, as the image's user, with
 * Sage's own `sage -python` (or the interpreter --python names), for the
 * interpreter's path, the PATH Sage's script gives its programs, Sage's
 * version and the user's ids. Runs then start the launcher under that
 * interpreter directly (no shell, no `sage` script: 70-100 ms saved a run),
 * with that PATH and the user's group.
 *
 * The probe costs a container and `sage -python` (about a second); its
 * answer is cached (cache.c) under podman's key, the image reference,
 * --python and the identity of the storage's image index, which any pull,
 * build, tag or removal rewrites. A run that finds the cached interpreter
 * missing or unable to import Sage forgets the answer (image_forget), so
 * the next run asks again. */
#include "image.h"
#include "cache.h"
#include "process.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CACHE_MAX_AGE_SECONDS (24 * 3600)
#define PROBE_TIMEOUT_MS ((IMAGE_PROBE_SECONDS + 10) * 1000)

/* Run by the image's /bin/sh with $1 the --python setting. Prints "KEY
 * VALUE" lines: user, python, python_version, path, sage; or error. */
static const char probe_script[] =
	"mkdir -p \"$HOME\" \"$DOT_SAGE\" 2>/dev/null\n"
	"echo \"user $(id -un 2>/dev/null || echo -) $(id -u) $(id -g)\"\n"
	"info='import os, sys\n"
	"print(\"python\", sys.executable)\n"
	"print(\"python_version\", \"%d.%d.%d\" % sys.version_info[:3])\n"
	"print(\"path\", os.environ.get(\"PATH\", \"\"))\n"
	"try:\n"
	"    import sage.version\n"
	"    print(\"sage\", sage.version.version)\n"
	"except BaseException as e:\n"
	"    print(\"error\", \"%s cannot import Sage: %s: %s\" % (sys.executable or \"python\",\n"
	"          type(e).__name__, \" \".join(str(e).split())))'\n"
	"if [ \"$1\" = auto ]; then\n"
	"    if ! command -v sage >/dev/null 2>&1; then\n"
	"        echo \"error no sage on the image's PATH ($PATH), so Sage's Python is unknown\"\n"
	"        exit 0\n"
	"    fi\n"
	"    set -- sage -python\n"
	"elif [ ! -x \"$1\" ] || [ -d \"$1\" ]; then\n"
	"    echo \"error $1 is not an executable file in the image\"\n"
	"    exit 0\n"
	"fi\n"
	"\"$@\" -c \"$info\" 2>/tmp/probe-errors ||\n"
	"    echo \"error $* failed: $(tail -n 3 /tmp/probe-errors | tr '\\n' ' ')\"\n";

static const char image_fix[] =
	"name Sage's Python in the image with --python PATH (SAGE_SANDBOX_PYTHON), or use an "
	"image whose 'sage -python' imports Sage (see IMAGES in sage-sandbox(1))";

void image_refusal(struct error *err, const struct config *cfg, const char *why)
{
	error_set(err, EXIT_REFUSED, image_fix, "image '%s' cannot run Sage: %s",
		cfg->value[SET_IMAGE], why);
}

/* Copies value into out when it fits and has no control byte. */
static bool take_value(const char *value, size_t len, char *out, size_t size)
{
	if (len >= size)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return false;
	memcpy(out, value, len);
	out[len] = '\0';
	return true;
}

int image_parse(const char *said, const struct config *cfg, struct sage_image *image,
		struct error *err)
{
	const char *cursor = said ? said : "", *line;
	size_t len;
	char error_text[400] = "";
	*image = (struct sage_image){.uid = -1, .gid = -1};
	while ((line = next_line(&cursor, &len))) {
		const char *space = memchr(line, ' ', len);
		if (!space)
			continue;
		size_t key_len = (size_t)(space - line), value_len = len - key_len - 1;
		const char *value = space + 1;
#define IS(word) (key_len == strlen(word) && memcmp(line, word, key_len) == 0)
		if (IS("error"))
			snprintf(error_text, sizeof error_text, "%.*s", (int)value_len, value);
		else if (IS("python"))
			take_value(value, value_len, image->python, sizeof image->python);
		else if (IS("python_version"))
			take_value(value, value_len, image->python_version, sizeof image->python_version);
		else if (IS("path"))
			take_value(value, value_len, image->path, sizeof image->path);
		else if (IS("sage"))
			take_value(value, value_len, image->sage_version, sizeof image->sage_version);
		else if (IS("user")) {
			char name[64];
			long uid, gid;
			char text[256];
			if (take_value(value, value_len, text, sizeof text) &&
			    sscanf(text, "%63s %ld %ld", name, &uid, &gid) == 3) {
				snprintf(image->user, sizeof image->user, "%s", name);
				image->uid = uid;
				image->gid = gid;
			}
		}
#undef IS
	}
	if (error_text[0]) {
		image_refusal(err, cfg, error_text);
		return -1;
	}
	if (image->python[0] != '/' || !image->sage_version[0]) {
		image_refusal(err, cfg, "the image probe found no Python that imports Sage");
		return -1;
	}
	return 0;
}

static void image_cache_name(const struct config *cfg, char *name, size_t size)
{
	/* FNV-1a of the reference and --python: the key holds both whole. */
	uint64_t h = 0xcbf29ce484222325ull;
	for (int id = 0; id < 2; id++)
		for (const unsigned char *p =
			(const unsigned char *)cfg->value[id == 0 ? SET_IMAGE : SET_PYTHON]; ; p++) {
			h = (h ^ *p) * 0x100000001b3ull;
			if (!*p)
				break;
		}
	snprintf(name, size, "image-%016llx", (unsigned long long)h);
}

void image_cache_key(const char *podman, const struct config *cfg,
		const struct podman_host *host, struct buffer *key)
{
	char index[1200];
	cache_key_podman(key, podman);
	cache_key_text(key, cfg->value[SET_IMAGE]);
	cache_key_text(key, cfg->value[SET_PYTHON]);
	/* containers/storage's image index: rewritten whenever an image is
	 * added, removed or tagged. Without a known graph root the key still
	 * holds, and the answer lives out its maximum age. */
	snprintf(index, sizeof index, "%s/%s-images/images.json", host->graph_root,
		host->storage_driver);
	cache_key_file(key, index);
}

void image_forget(const struct config *cfg)
{
	char name[64];
	image_cache_name(cfg, name, sizeof name);
	cache_forget(name);
}

/* The probe's answer from podman's: podman's own refusals (no image) in
 * the same words a run gives. */
static int probe_answer(const struct capture *cap, int64_t waited_ms,
		const struct config *cfg, struct sage_image *image, struct error *err)
{
	const char *errors = cap->err.data ? cap->err.data : "";
	/* The probe's first line is /bin/sh's: without it podman never ran the
	 * image's shell, and a failure is podman's own, whatever the image
	 * holds (a podman that fails without a word was reported as the
	 * image's failure, with --python as the fix). So is a success
	 * without it: the shell prints that line whatever else fails (a podman
	 * that exits 0 and runs nothing, attack helper 138). So is a wait
	 * for it that timed out (a podman that hangs, attack helper 157). */
	bool shell_ran = cap->out.data && strncmp(cap->out.data, "user ", 5) == 0;
	int waited_s = waited_ms < 1500 ? 1 : (int)((waited_ms + 500) / 1000);
	char hint[512];
	if (cap->timed_out && !shell_ran) {
		podman_silent_hint(hint, sizeof hint, cfg->value[SET_PODMAN], cfg->value[SET_IMAGE]);
		error_set(err, EXIT_REFUSED, hint,
			"podman did not start a container of image '%s' within %d s",
			cfg->value[SET_IMAGE], waited_s);
		return -1;
	}
	if (cap->timed_out) {
		char why[96];
		snprintf(why, sizeof why, "the image probe did not answer within %d s",
			waited_s);
		image_refusal(err, cfg, why);
		return -1;
	}
	if (cap->status != 0 && podman_said_no_image(errors)) {
		error_set(err, EXIT_REFUSED, image_hint,
			"image '%s' is not present locally (runs never pull)", cfg->value[SET_IMAGE]);
		return -1;
	}
	if (!shell_ran) {
		size_t len;
		const char *last = last_line(errors, strlen(errors), &len);
		if (len) {
			/* Not "check sage-sandbox status": status says this
			 * itself (attack helper 157). */
			podman_silent_hint(hint, sizeof hint, cfg->value[SET_PODMAN],
				cfg->value[SET_IMAGE]);
			error_set(err, EXIT_REFUSED, podman_failed_hint(errors, hint),
				"podman could not run a container of image '%s' (status %d): %.*s",
				cfg->value[SET_IMAGE], cap->status, (int)len, last);
		} else if (cap->status == 0) {
			podman_try_hint(hint, sizeof hint, cfg->value[SET_PODMAN],
				cfg->value[SET_IMAGE], "/bin/sh -c id", "to see what it does");
			error_set(err, EXIT_REFUSED, hint,
				"podman exited 0 without running the image's /bin/sh (the image "
				"probe's first line is missing)");
		} else {
			podman_silent_hint(hint, sizeof hint, cfg->value[SET_PODMAN],
				cfg->value[SET_IMAGE]);
			error_set(err, EXIT_REFUSED, hint,
				"podman failed to start a container (status %d) and said nothing",
				cap->status);
		}
		return -1;
	}
	if (cap->status != 0) {
		char why[400];
		size_t len;
		const char *last = last_line(errors, strlen(errors), &len);
		snprintf(why, sizeof why, "the image probe (/bin/sh in the image) failed with "
			"status %d: %.*s", cap->status, len ? (int)len : 10, len ? last : "no message");
		image_refusal(err, cfg, why);
		return -1;
	}
	return image_parse(cap->out.data, cfg, image, err);
}

struct image_query {
	struct image_query **slot; /* the caller's, cleared at the end */
	struct capture_run *probe; /* the probe container, until it answers */
	struct argv_builder args;
	const char *podman;
	const struct config *cfg;
	const struct podman_host *host;
	image_callback *done;
	void *data;
	int64_t started; /* when the probe did (loop_now_ms()) */
};

/* The one end of a query: answered, cancelled or never started. */
static void query_free(struct image_query *q)
{
	capture_abandon(&q->probe);
	if (q->slot)
		*q->slot = NULL;
	args_free(&q->args);
	free(q);
}

void image_cancel(struct image_query **slot)
{
	if (*slot)
		query_free(*slot);
}

/* The probe's answer, cached when positive. */
static int probe_answer_cached(const struct capture *cap, int64_t waited_ms, const char *podman,
		const struct config *cfg, const struct podman_host *host, struct sage_image *image,
		struct error *err)
{
	int rc = probe_answer(cap, waited_ms, cfg, image, err);
	if (rc == 0) {
		struct buffer key = {0};
		char name[64];
		image_cache_key(podman, cfg, host, &key);
		image_cache_name(cfg, name, sizeof name);
		cache_write(name, &key, cap->out.data);
		buffer_free(&key);
	}
	return rc;
}

static void probe_answered(struct capture *cap, void *data)
{
	struct image_query *q = data;
	struct sage_image image;
	struct error err;
	int rc = probe_answer_cached(cap, loop_now_ms() - q->started, q->podman, q->cfg, q->host,
		&image, &err);
	capture_free(cap);
	image_callback *done = q->done;
	void *done_data = q->data;
	query_free(q);
	done(rc == 0 ? &image : NULL, rc == 0 ? NULL : &err, done_data);
}

static void probe_args(struct argv_builder *a, const char *podman, const struct config *cfg)
{
	char name[64], owner[128];
	container_name(name, sizeof name);
	process_identity(getpid(), owner, sizeof owner);
	podman_probe_args(a, cfg, podman, name, owner, probe_script);
}

int image_check(struct loop *loop, struct image_query **slot, const char *podman,
		const struct config *cfg, const struct podman_host *host, int64_t deadline,
		image_callback *done, void *data)
{
	*slot = NULL;
	struct buffer key = {0}, cached = {0};
	char name[64];
	image_cache_key(podman, cfg, host, &key);
	image_cache_name(cfg, name, sizeof name);
	int found = cache_read(name, &key, CACHE_MAX_AGE_SECONDS, &cached);
	buffer_free(&key);
	if (found == 0) {
		struct sage_image image;
		struct error err;
		int rc = image_parse(cached.data, cfg, &image, &err);
		buffer_free(&cached);
		if (rc == 0) {
			done(&image, NULL, data);
			return 0;
		}
	}
	struct image_query *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	q->podman = podman;
	q->host = host;
	q->cfg = cfg;
	q->done = done;
	q->data = data;
	probe_args(&q->args, podman, cfg);
	q->started = loop_now_ms();
	int64_t limit = q->started + PROBE_TIMEOUT_MS;
	if (capture_start(loop, &q->probe, q->args.arg, podman_environment(),
		    deadline < limit ? deadline : limit, probe_answered, q) < 0) {
		int saved = errno;
		query_free(q);
		errno = saved;
		return -1;
	}
	q->slot = slot;
	*slot = q;
	return 0;
}
