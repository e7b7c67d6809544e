/* outfiles.h: receiving the files a run left in SAGE_SANDBOX_OUT into a
 * directory on the host, from a sender that is treated as hostile. */
#ifndef SAGE_SANDBOX_OUTFILES_H
#define SAGE_SANDBOX_OUTFILES_H

#include "error.h"
#include "names.h"
#include "settings.h"
#include "sniff.h"

#include <nettle/sha2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Directories below the output directory a file may be in. */
#define OUTFILES_MAX_DEPTH NAMES_MAX_DEPTH
/* Dropped paths listed one by one; the rest are only counted. */
#define OUTFILES_DROPPED_LISTED 32

struct outfile {
	char *name; /* below the directory: printable UTF-8, no "." or ".." part */
	uint64_t size;
	char sha256[2 * SHA256_DIGEST_SIZE + 1];
	struct sniffed kind;
};

struct dropped_file {
	char *name;       /* as sent, made printable (\xNN for other bytes) */
	char reason[160]; /* a sentence that says why, and what to change */
};

struct outfiles {
	/* in */
	const char *dir; /* as the caller named it */
	bool overwrite;  /* replace existing files; else they are kept */
	long max_files;
	uint64_t max_file_bytes, max_total_bytes;

	/* out */
	struct outfile *files;
	size_t count;
	struct dropped_file dropped[OUTFILES_DROPPED_LISTED];
	size_t dropped_count; /* all of them, listed or not */
	uint64_t total_bytes;

	/* private */
	int dirfd;
	unsigned umask; /* the creating process's: files are 0666, directories 0777 less it */
	struct incoming *in; /* the file being received, or NULL */
};

/* Opens dir for a run: it must exist and be a directory the caller can
 * write; -1 with err set (nothing run) otherwise. Caps from cfg. */
int outfiles_open(struct outfiles *o, const char *dir, bool overwrite, const struct config *cfg,
		struct error *err);
/* The same for a directory the client of the server opened and checked
 * (server.c): dirfd becomes o's; creation_mask is the client's umask. -1
 * when dirfd is not a directory. */
int outfiles_adopt(struct outfiles *o, const char *dir, int dirfd, bool overwrite,
		unsigned creation_mask, const struct config *cfg);
/* The number of the next image show() makes (launcher/display.py names
 * them show-N.png, ...): one past the highest show-N already in the
 * directory, so that an earlier run's are kept; 1 with overwrite. */
unsigned outfiles_first_show(const struct outfiles *o);
/* The launcher's F, D, G and Z frames, in order (see launcher.py). */
void outfiles_frame(struct outfiles *o, char type, const char *payload, size_t len);
/* The run was stopped: a file half received is dropped, never kept. */
void outfiles_stopped(struct outfiles *o);
void outfiles_close(struct outfiles *o);
/* Removes a directory and everything in it, following no link: for a
 * private directory that received a run's files. */
void outfiles_remove_dir(const char *path);

#endif
