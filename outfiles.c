/* outfiles.c: receiving the files a run left in SAGE_SANDBOX_OUT. The
 * sender shares its container with the code, so every byte is hostile:
 * names are checked part by part, nothing is followed (each directory is
 * opened with O_NOFOLLOW from its parent's descriptor), a file is written
 * under a temporary name and renamed into place only when whole, and the
 * caps hold while the bytes arrive. Nothing is held in memory but a
 * file's first SNIFF_BYTES. */
#include "outfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEMP_PREFIX ".sage-sandbox-partial-"

struct incoming {
	bool skip;      /* dropped: its bytes are read and let go */
	char *name;
	int parent;     /* the directory it goes in */
	char leaf[NAMES_MAX_PART_BYTES + 1];
	char temp[64];
	int fd;
	uint64_t size;
	struct sha256_ctx sha;
	unsigned char head[SNIFF_BYTES];
	size_t head_len;
	/* Directories made for it, removed again if it is dropped (each
	 * relative to the descriptor before it). */
	int made_in[OUTFILES_MAX_DEPTH];
	char *made[OUTFILES_MAX_DEPTH];
	int made_count;
};

static void outfiles_init(struct outfiles *o, const char *dir, bool overwrite,
		const struct config *cfg)
{
	*o = (struct outfiles){.dir = dir, .overwrite = overwrite, .dirfd = -1,
		.max_files = cfg->number[SET_OUTPUT_FILES],
		.max_file_bytes = (uint64_t)cfg->number[SET_OUTPUT_FILE_SIZE],
		.max_total_bytes = (uint64_t)cfg->number[SET_OUTPUT_SIZE]};
	o->umask = umask(022);
	umask(o->umask);
}

int outfiles_open(struct outfiles *o, const char *dir, bool overwrite, const struct config *cfg,
		struct error *err)
{
	outfiles_init(o, dir, overwrite, cfg);
	o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		int e = errno;
		if (e == ENOENT)
			error_set(err, EXIT_REFUSED, "create it first (mkdir -p DIR), or name another",
				"output directory %s does not exist", dir);
		else if (e == ENOTDIR)
			error_set(err, EXIT_REFUSED, "name a directory for --output-dir",
				"output directory %s is not a directory", dir);
		else
			error_set(err, EXIT_REFUSED, "name a directory you can write",
				"cannot open output directory %s: %s", dir, strerror(e));
		return -1;
	}
	if (faccessat(o->dirfd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		error_set(err, EXIT_REFUSED, "name a directory you can write, or change its permissions",
			"output directory %s is not writable: %s", dir, strerror(errno));
		close(o->dirfd);
		o->dirfd = -1;
		return -1;
	}
	return 0;
}

int outfiles_adopt(struct outfiles *o, const char *dir, int dirfd, bool overwrite,
		unsigned creation_mask, const struct config *cfg)
{
	struct stat st;
	outfiles_init(o, dir, overwrite, cfg);
	o->umask = creation_mask & 0777;
	if (fstat(dirfd, &st) < 0 || !S_ISDIR(st.st_mode))
		return -1;
	o->dirfd = dirfd;
	return 0;
}

/* ---- names -------------------------------------------------------------- */

static void drop(struct outfiles *o, const char *name, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void drop(struct outfiles *o, const char *name, size_t len, const char *fmt, ...)
{
	if (o->dropped_count++ >= OUTFILES_DROPPED_LISTED)
		return;
	struct dropped_file *d = &o->dropped[o->dropped_count - 1];
	va_list ap;
	d->name = printable_name(name, len, 200);
	va_start(ap, fmt);
	/* It may name DIR and the file: escaped as its name is (review
	 * helper 167). */
	printable_vformat(d->reason, sizeof d->reason, fmt, ap);
	va_end(ap);
}

/* Why a path is not saved, from the launcher's word for it (a Z frame) or
 * this side's own checks, as one sentence that says what to change. */
static void drop_because(struct outfiles *o, const char *name, size_t len, const char *why)
{
	char size[32];
	if (strcmp(why, "symlink") == 0)
		drop(o, name, len, "a symbolic link: only regular files come back");
	else if (strcmp(why, "hardlink") == 0)
		drop(o, name, len, "a hard link: only files with one name come back");
	else if (strcmp(why, "special") == 0)
		drop(o, name, len, "not a regular file (a FIFO, socket or device)");
	else if (strcmp(why, "depth") == 0)
		drop(o, name, len, "more than %d directories deep", OUTFILES_MAX_DEPTH);
	else if (strcmp(why, "name") == 0)
		drop(o, name, len, "its name is not printable UTF-8, or has an empty, '.' or '..' "
			"part, or is too long or too deep");
	else if (strcmp(why, "count") == 0)
		drop(o, name, len, "past the cap of %ld files; raise --output-files", o->max_files);
	else if (strcmp(why, "size") == 0) {
		size_text((long)o->max_file_bytes, size, sizeof size);
		drop(o, name, len, "larger than the cap of %s a file; raise --output-file-size", size);
	} else if (strcmp(why, "total") == 0) {
		size_text((long)o->max_total_bytes, size, sizeof size);
		drop(o, name, len, "the files together would pass %s; raise --output-size", size);
	} else if (strcmp(why, "exists") == 0)
		drop(o, name, len, "%s/%.*s exists; remove it or use --output-overwrite", o->dir,
			(int)len, name);
	else if (strcmp(why, "twice") == 0)
		drop(o, name, len, "sent twice; the first one is kept");
	else if (strcmp(why, "cut") == 0)
		drop(o, name, len, "the sandbox could not read all of it");
	else if (strcmp(why, "stopped") == 0)
		drop(o, name, len, "the run was stopped before all of it came back");
	else
		drop(o, name, len, "the sandbox could not read it");
}

/* A Z frame: "REASON\0PATH". */
static void drop_reported(struct outfiles *o, const char *payload, size_t len)
{
	const char *nul = memchr(payload, '\0', len);
	size_t reason_len = nul ? (size_t)(nul - payload) : 0;
	char reason[16];
	snprintf(reason, sizeof reason, "%.*s", (int)(reason_len < 15 ? reason_len : 15), payload);
	if (nul)
		drop_because(o, nul + 1, len - reason_len - 1, reason);
	else
		drop_because(o, payload, len, "");
}

/* ---- one file ----------------------------------------------------------- */

static void incoming_free(struct incoming *in)
{
	if (in->fd >= 0)
		close(in->fd);
	for (int i = 0; i < in->made_count; i++) {
		free(in->made[i]);
		if (in->made_in[i] >= 0)
			close(in->made_in[i]);
	}
	if (in->parent >= 0)
		close(in->parent);
	free(in->name);
	free(in);
}

/* Lets go of a file that is not kept: its temporary file and the
 * directories made for it go. */
static void discard(struct incoming *in)
{
	if (in->fd >= 0) {
		unlinkat(in->parent, in->temp, 0);
		close(in->fd);
		in->fd = -1;
	}
	for (int i = in->made_count - 1; i >= 0; i--)
		unlinkat(in->made_in[i], in->made[i], AT_REMOVEDIR); /* only if empty */
}

/* Opens, making where missing, the directories of in->name, each from its
 * parent's descriptor without following a link; in->parent is the last. */
static const char *open_directories(struct outfiles *o, struct incoming *in)
{
	in->parent = dup(o->dirfd);
	if (in->parent < 0)
		return strerror(errno);
	const char *part = in->name, *slash;
	while ((slash = strchr(part, '/'))) {
		char dir[NAMES_MAX_PART_BYTES + 1];
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - part), part);
		if (mkdirat(in->parent, dir, 0777) == 0 && in->made_count < OUTFILES_MAX_DEPTH) {
			in->made_in[in->made_count] = dup(in->parent);
			in->made[in->made_count++] = strdup(dir);
		}
		int next = openat(in->parent, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return "a directory on its path is a symbolic link or not a directory";
		close(in->parent);
		in->parent = next;
		part = slash + 1;
	}
	snprintf(in->leaf, sizeof in->leaf, "%s", part);
	return NULL;
}

/* The file coming in is not saved: said why, and whatever was made for
 * it goes; the rest of its bytes are let go. */
static void give_up(struct outfiles *o, struct incoming *in, const char *why)
{
	drop_because(o, in->name, strlen(in->name), why);
	in->skip = true;
	discard(in);
}

static void begin_file(struct outfiles *o, const char *name, size_t len)
{
	struct incoming *in = calloc(1, sizeof *in);
	if (!in)
		abort();
	in->fd = -1;
	in->parent = -1;
	o->in = in;
	if (!relative_path_allowed(name, len)) {
		drop_because(o, name, len, "name");
		in->skip = true;
		return;
	}
	in->name = strndup(name, len);
	if (o->count >= (size_t)o->max_files) {
		give_up(o, in, "count");
		return;
	}
	for (size_t i = 0; i < o->count; i++)
		if (strcmp(o->files[i].name, in->name) == 0) {
			give_up(o, in, "twice");
			return;
		}
	const char *why = open_directories(o, in);
	struct stat st;
	if (!why && !o->overwrite && fstatat(in->parent, in->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		give_up(o, in, "exists");
		return;
	}
	for (int tries = 0; !why && in->fd < 0 && tries < 8; tries++) {
		uint64_t r;
		if (getrandom(&r, sizeof r, 0) != sizeof r)
			abort();
		snprintf(in->temp, sizeof in->temp, TEMP_PREFIX "%016llx", (unsigned long long)r);
		in->fd = openat(in->parent, in->temp,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (in->fd < 0 && errno != EEXIST)
			why = strerror(errno);
	}
	if (!why && in->fd < 0)
		why = "no temporary name was free";
	if (why) {
		drop(o, name, len, "cannot write it: %s", why);
		in->skip = true;
		discard(in);
		return;
	}
	sha256_init(&in->sha);
}

static void take_bytes(struct outfiles *o, const char *data, size_t len)
{
	struct incoming *in = o->in;
	if (!in || in->skip)
		return;
	if (in->size + len > o->max_file_bytes) {
		give_up(o, in, "size");
		return;
	}
	if (o->total_bytes + in->size + len > o->max_total_bytes) {
		give_up(o, in, "total");
		return;
	}
	for (size_t done = 0; done < len;) {
		ssize_t n = write(in->fd, data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			drop(o, in->name, strlen(in->name), "cannot write it: %s",
				strerror(n < 0 ? errno : EIO));
			in->skip = true;
			discard(in);
			return;
		}
		done += (size_t)n;
	}
	sha256_update(&in->sha, len, (const uint8_t *)data);
	size_t head_room = SNIFF_BYTES - in->head_len;
	memcpy(in->head + in->head_len, data, len < head_room ? len : head_room);
	in->head_len += len < head_room ? len : head_room;
	in->size += len;
}

static void end_file(struct outfiles *o, const char *why, size_t why_len)
{
	struct incoming *in = o->in;
	o->in = NULL;
	if (!in)
		return;
	if (!in->skip && why_len)
		give_up(o, in, "cut");
	if (!in->skip) {
		unsigned flags = o->overwrite ? 0 : RENAME_NOREPLACE;
		if (renameat2(in->parent, in->temp, in->parent, in->leaf, flags) < 0) {
			if (errno == EEXIST) {
				give_up(o, in, "exists");
			} else {
				drop(o, in->name, strlen(in->name), "cannot put it in place: %s",
					strerror(errno));
				discard(in);
			}
		} else {
			uint8_t digest[SHA256_DIGEST_SIZE];
			o->files = realloc(o->files, (o->count + 1) * sizeof *o->files);
			if (!o->files)
				abort();
			struct outfile *f = &o->files[o->count++];
			f->name = in->name;
			in->name = NULL;
			f->size = in->size;
			sha256_digest(&in->sha, sizeof digest, digest);
			for (size_t i = 0; i < sizeof digest; i++)
				snprintf(f->sha256 + 2 * i, 3, "%02x", digest[i]);
			sniff(in->head, in->head_len, in->head_len == in->size, &f->kind);
			o->total_bytes += in->size;
		}
	}
	incoming_free(in);
}

void outfiles_frame(struct outfiles *o, char type, const char *payload, size_t len)
{
	/* Files and directories get the modes the run's own process would
	 * give them (0666 and 0777 less its umask), in the server too. */
	mode_t before = umask(o->umask);
	switch (type) {
	case 'F':
		end_file(o, "cut", 3); /* a sender that never ended the last one */
		begin_file(o, payload, len);
		break;
	case 'D':
		take_bytes(o, payload, len);
		break;
	case 'G':
		end_file(o, payload, len);
		break;
	case 'Z':
		drop_reported(o, payload, len);
		break;
	}
	umask(before);
}

void outfiles_stopped(struct outfiles *o)
{
	struct incoming *in = o->in;
	if (!in)
		return;
	o->in = NULL;
	if (!in->skip)
		give_up(o, in, "stopped");
	incoming_free(in);
}

void outfiles_close(struct outfiles *o)
{
	outfiles_stopped(o);
	for (size_t i = 0; i < o->count; i++)
		free(o->files[i].name);
	free(o->files);
	o->files = NULL;
	o->count = 0;
	for (size_t i = 0; i < o->dropped_count && i < OUTFILES_DROPPED_LISTED; i++)
		free(o->dropped[i].name);
	o->dropped_count = 0;
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
}

/* Empties the directory dirfd (which it closes), depth first. */
static void empty_dir(int dirfd, int depth)
{
	DIR *dir = fdopendir(dirfd);
	struct dirent *e;
	if (!dir) {
		close(dirfd);
		return;
	}
	while ((e = readdir(dir))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd, e->d_name, 0) == 0 || errno != EISDIR || depth > OUTFILES_MAX_DEPTH)
			continue;
		int inner = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (inner >= 0)
			empty_dir(inner, depth + 1);
		unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
	}
	closedir(dir);
}

void outfiles_remove_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		empty_dir(fd, 0);
	rmdir(path);
}

unsigned outfiles_first_show(const struct outfiles *o)
{
	unsigned last = 0;
	int fd = o->overwrite ? -1 : dup(o->dirfd);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 1;
	}
	/* The copy shares the directory's offset: from its start, each time. */
	rewinddir(dir);
	/* show-N.ANYTHING, N digits only: the names launcher/display.py
	 * counts as taken. */
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "show-", 5) != 0)
			continue;
		const char *digits = e->d_name + 5, *end = digits;
		unsigned long n = 0;
		while (*end >= '0' && *end <= '9' && n < 1000000)
			n = n * 10 + (unsigned long)(*end++ - '0');
		if (end > digits && *end == '.' && n < 1000000 && n > last)
			last = (unsigned)n;
	}
	closedir(dir);
	return last + 1;
}

