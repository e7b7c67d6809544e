/* infiles.c: the host files a run gets: each opened once, without
 * following links below what was named, checked as a regular file, and
 * kept open until it is sent, so that what is sent is what was checked. */
#include "infiles.h"
#include "base64.h"
#include "buffer.h"
#include "names.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names the launcher makes for itself in the working directory. */
static const char *const reserved[] = {"sage-home", "dot-sage", "sage-sandbox-out", NULL};

static const char input_hint[] = "name regular files and directories of them";

static int add_file(struct infiles *in, const char *name, int fd, uint64_t size,
		const char *shown, struct error *err)
{
	/* The same name twice, or a file where another needs a directory ("a"
	 * and "a/b"), would fail inside the sandbox: refused here. */
	size_t len = strlen(name);
	for (size_t i = 0; i < in->count; i++) {
		const char *other = in->files[i].name;
		size_t n = strlen(other);
		size_t shorter = n < len ? n : len;
		if (strncmp(name, other, shorter) != 0 ||
		    (n != len && (n < len ? name[n] : other[len]) != '/'))
			continue;
		/* Each named as it was given, and the sandbox's path they share. */
		if (n == len)
			error_set(err, EXIT_REFUSED, "give each input its own name",
				"inputs %s and %s would both be %s in the sandbox",
				in->files[i].shown, shown, name);
		else
			error_set(err, EXIT_REFUSED, "give each input its own name",
				"inputs %s and %s cannot both be in the sandbox: %.*s would be "
				"a file and a directory", in->files[i].shown, shown, (int)shorter, name);
		return -1;
	}
	if (in->count >= INFILES_MAX_FILES) {
		error_set(err, EXIT_REFUSED, "name fewer files, or pack them into one",
			"more than %d input files (at %s)", INFILES_MAX_FILES, shown);
		return -1;
	}
	if (size > INFILES_MAX_BYTES - in->total) {
		error_set(err, EXIT_REFUSED, "name less data, or compress it",
			"the input files pass %llu MiB in all (at %s)", INFILES_MAX_BYTES >> 20, shown);
		return -1;
	}
	in->files = realloc(in->files, (in->count + 1) * sizeof *in->files);
	if (!in->files)
		abort();
	struct infile *file = &in->files[in->count++];
	*file = (struct infile){.name = strdup(name), .shown = strdup(shown), .fd = fd, .size = size};
	if (!file->name || !file->shown)
		abort();
	in->total += size;
	return 0;
}

/* The tree below the open directory tree_fd, named name inside the sandbox
 * and shown as shown on the host. Long: each entry's kind (link,
 * directory, file, other) is refused or taken in place. */
static int add_tree(struct infiles *in, int tree_fd, const char *name, const char *shown,
		int depth, struct error *err)
{
	if (depth > INFILES_MAX_DEPTH) {
		error_set(err, EXIT_REFUSED, "name a shallower tree",
			"input %s is more than %d directories deep", shown, INFILES_MAX_DEPTH);
		close(tree_fd);
		return -1;
	}
	DIR *dir = fdopendir(tree_fd);
	if (!dir) {
		error_set(err, EXIT_REFUSED, input_hint, "cannot read input directory %s: %s", shown,
			strerror(errno));
		close(tree_fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	errno = 0;
	while (rc == 0 && (e = readdir(dir))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char child[4096], child_shown[4096];
		snprintf(child, sizeof child, "%s/%s", name, e->d_name);
		size_t shown_len = strlen(shown); /* "data/" as given: data/a.txt, not data//a.txt */
		snprintf(child_shown, sizeof child_shown, "%s%s%s", shown,
			shown_len && shown[shown_len - 1] == '/' ? "" : "/", e->d_name);
		if (!name_part_allowed(e->d_name, strlen(e->d_name)) ||
		    strlen(child) > NAMES_MAX_PATH_BYTES) {
			error_set(err, EXIT_REFUSED, "rename it to printable UTF-8",
				"input %s has a name the sandbox does not take", child_shown);
			rc = -1;
			break;
		}
		/* Opened without following a link, and then looked at: a link
		 * is refused, never read, wherever it points. */
		int fd = openat(dirfd(dir), e->d_name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 && (errno == ELOOP || errno == EMLINK)) {
			error_set(err, EXIT_REFUSED, "copy the file it points to instead, or remove it",
				"input %s is a symbolic link; links inside an input directory are "
				"not followed", child_shown);
			rc = -1;
		} else if (fd < 0 || fstat(fd, &st) < 0) {
			error_set(err, EXIT_REFUSED, input_hint, "cannot read input %s: %s", child_shown,
				strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			rc = add_tree(in, fd, child, child_shown, depth + 1, err);
			fd = -1;
		} else if (S_ISREG(st.st_mode)) {
			rc = add_file(in, child, fd, (uint64_t)st.st_size, child_shown, err);
			if (rc == 0)
				fd = -1;
		} else {
			error_set(err, EXIT_REFUSED, input_hint,
				"input %s is not a regular file or a directory", child_shown);
			rc = -1;
		}
		if (fd >= 0)
			close(fd);
		errno = 0;
	}
	if (rc == 0 && errno) {
		error_set(err, EXIT_REFUSED, input_hint, "cannot read input directory %s: %s", shown,
			strerror(errno));
		rc = -1;
	}
	closedir(dir);
	return rc;
}

int infiles_add_path(struct infiles *in, const char *path, struct error *err)
{
	/* Its last name, as `cp -r PATH .` would: "data/" is "data". */
	char trimmed[4096];
	snprintf(trimmed, sizeof trimmed, "%s", path);
	size_t len = strlen(trimmed);
	while (len > 1 && trimmed[len - 1] == '/')
		trimmed[--len] = '\0';
	const char *slash = strrchr(trimmed, '/');
	const char *name = slash ? slash + 1 : trimmed;
	/* The named path itself may be a link: the caller chose it. Opened
	 * first: a path that is not there is told so, whatever its name. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		error_set(err, EXIT_REFUSED, input_hint, "cannot read input %s: %s", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!name_part_allowed(name, strlen(name))) {
		bool no_name = !*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
		error_set(err, EXIT_REFUSED, no_name ?
			"name a file or directory by a path that ends in its name" :
			"copy it to a name of printable UTF-8 (no control or line break, no "
			"bidirectional control, at most 255 bytes) and name that",
			"input %s has no name the sandbox can use", path);
		close(fd);
		return -1;
	}
	for (const char *const *r = reserved; *r; r++)
		if (strcmp(name, *r) == 0) {
			error_set(err, EXIT_REFUSED, "rename it or put it in a directory",
				"input %s has a name sage-sandbox uses itself", path);
			close(fd);
			return -1;
		}
	if (S_ISDIR(st.st_mode))
		return add_tree(in, fd, name, path, 1, err);
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		error_set(err, EXIT_REFUSED, input_hint, "input %s is not a regular file or a directory",
			path);
		return -1;
	}
	if (add_file(in, name, fd, (uint64_t)st.st_size, path, err) < 0) {
		close(fd);
		return -1;
	}
	return 0;
}

/* A path of allowed parts, the first not a reserved name. */
static int check_name(const char *name, struct error *err)
{
	size_t first = strcspn(name, "/");
	if (!relative_path_allowed(name, strlen(name))) {
		error_set(err, EXIT_REFUSED, "use a relative path of printable UTF-8 parts, no '..'",
			"file name '%s' is not allowed", name);
		return -1;
	}
	for (const char *const *r = reserved; *r; r++)
		if (strlen(*r) == first && strncmp(name, *r, first) == 0) {
			error_set(err, EXIT_REFUSED, "use another name",
				"file name '%s' is one sage-sandbox uses itself", name);
			return -1;
		}
	return 0;
}

int infiles_add_fd(struct infiles *in, const char *name, int fd, uint64_t size,
		struct error *err)
{
	struct stat st;
	if (check_name(name, err) < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		error_set(err, EXIT_REFUSED, input_hint, "input %s is not a regular file", name);
		return -1;
	}
	return add_file(in, name, fd, size, name, err);
}

int infiles_add_bytes(struct infiles *in, const char *name, const void *bytes, size_t len,
		struct error *err)
{
	if (check_name(name, err) < 0)
		return -1;
	int fd = memfd_create("sage-sandbox-input", MFD_CLOEXEC);
	size_t done = 0;
	while (fd >= 0 && done < len) {
		ssize_t n = write(fd, (const char *)bytes + done, len - done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (fd < 0 || done < len) {
		error_set(err, EXIT_REFUSED, NULL, "cannot hold file '%s' in memory: %s", name,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (add_file(in, name, fd, len, name, err) < 0) {
		close(fd);
		return -1;
	}
	return 0;
}

void infiles_free(struct infiles *in)
{
	for (size_t i = 0; i < in->count; i++) {
		free(in->files[i].name);
		free(in->files[i].shown);
		if (in->files[i].fd >= 0)
			close(in->files[i].fd);
	}
	free(in->files);
	*in = (struct infiles){0};
}

int infiles_add_json(struct infiles *in, json_t *files, struct error *err)
{
	const char *name;
	json_t *value;
	if (!json_is_object(files)) {
		error_set(err, EXIT_REFUSED, "give {\"name\": \"text\"} or "
			"{\"name\": {\"base64\": \"...\"}}", "files is not an object");
		return -1;
	}
	json_object_foreach(files, name, value) {
		struct buffer decoded = {0};
		const char *bytes;
		size_t len;
		json_t *b64 = json_is_object(value) ? json_object_get(value, "base64") : NULL;
		if (json_is_string(value)) {
			bytes = json_string_value(value);
			len = json_string_length(value);
		} else if (json_is_string(b64) && json_object_size(value) == 1 &&
			   base64_decode(json_string_value(b64), json_string_length(b64), &decoded)) {
			bytes = decoded.data;
			len = decoded.len;
		} else {
			buffer_free(&decoded); /* what was decoded before the bad byte */
			error_set(err, EXIT_REFUSED, "give the file's text, or {\"base64\": \"...\"} "
				"with valid base64", "files['%s'] is neither text nor base64", name);
			return -1;
		}
		int rc = infiles_add_bytes(in, name, bytes, len, err);
		buffer_free(&decoded);
		if (rc < 0)
			return -1;
	}
	return 0;
}
