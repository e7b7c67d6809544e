/* infiles.h: the host files a run gets in its working directory (run
 * --input, MCP's files), collected and checked before anything runs. */
#ifndef SAGE_SANDBOX_INFILES_H
#define SAGE_SANDBOX_INFILES_H

#include "error.h"
#include "names.h"

#include <stddef.h>
#include <stdint.h>

/* The caps on what goes in: files, bytes in all, directories deep. */
#define INFILES_MAX_FILES 100
#define INFILES_MAX_BYTES (64ull << 20)
#define INFILES_MAX_DEPTH NAMES_MAX_DEPTH

struct infile {
	char *name;    /* below the sandbox's working directory */
	char *shown;   /* as the user named it: a host path, or an MCP file's key */
	int fd;        /* open since it was checked: what was checked is sent */
	uint64_t size; /* as checked; no more than this is sent */
};

struct infiles {
	struct infile *files;
	size_t count;
	uint64_t total;
};

/* Adds a host file, or a directory's tree, under its last name. The named
 * path may be a symbolic link; inside a directory none is followed, and
 * one is refused, as is anything but regular files and directories. -1 with
 * err set (naming the path and the fix) when it cannot be sent whole. */
int infiles_add_path(struct infiles *in, const char *path, struct error *err);
/* Adds an open regular file under a name, at most size bytes of it (the
 * server: a client's input, opened and checked by the client). fd becomes
 * in's on success. -1 with err set. */
int infiles_add_fd(struct infiles *in, const char *name, int fd, uint64_t size,
		struct error *err);
/* Adds bytes under a name (MCP's files), held in an anonymous memory file. */
int infiles_add_bytes(struct infiles *in, const char *name, const void *bytes, size_t len,
		struct error *err);
/* Adds MCP's and batch's "files" object: each name's value is the file's
 * text, or {"base64": "..."}. -1 with err set naming the file and the fix. */
typedef struct json_t json_t;
int infiles_add_json(struct infiles *in, json_t *files, struct error *err);
void infiles_free(struct infiles *in);

#endif
