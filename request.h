/* request.h: the messages between `run` (or `batch`) and the server
 * (docs/protocol.md, "run, batch and the server"): a run's or a batch's
 * request, encoded for the socket and decoded from it, and the short
 * messages that follow it.
 *
 * The socket is SOCK_SEQPACKET: one send is one message, whole. The first
 * message of a connection says what it wants: a run (with the run's
 * descriptors attached), the server's status, or its stop. */
#ifndef SAGE_SANDBOX_REQUEST_H
#define SAGE_SANDBOX_REQUEST_H

#include "batch.h"
#include "buffer.h"
#include "infiles.h"
#include "settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request is at most this long (a run's settings, names and arguments;
 * the code and files come as descriptors). */
#define REQUEST_MAX_BYTES (128 * 1024)
/* stdin, stdout, stderr, the code's file, the output directory, inputs;
 * or a batch's stdin, stdout, stderr, FILEs and --resume. */
#define REQUEST_MAX_FDS (5 + INFILES_MAX_FILES)
#define REQUEST_MAX_ARGS 4096
/* A batch through the server takes at most this many FILE arguments (one
 * descriptor each); more, and it runs on its own. */
#define REQUEST_MAX_BATCH_FILES BATCH_OPEN_FILES_MAX
/* A build's identity: its ELF build id in hex (buildid.c). */
#define BUILD_ID_MAX 128

enum request_kind {
	REQUEST_RUN = 'R', REQUEST_BATCH = 'B', REQUEST_STATUS = 'S', REQUEST_STOP = 'Q'
};

struct request_input {
	const char *name;
	uint64_t size;
};

struct request {
	enum request_kind kind;
	/* A run's and a batch's: */
	char build[BUILD_ID_MAX + 1];  /* the client's build */
	char environment[65];          /* what podman reads of it (client.c), sha256 */
	unsigned umask;                /* the client's: files brought back get its modes */
	int64_t started_at;            /* loop_now_ms() when the client started */
	const char *value[SETTING_COUNT];
	enum setting_source source[SETTING_COUNT];
	const char *file;              /* NULL: the code is read from stdin */
	const char **args;             /* the code's arguments after its name; a batch's FILEs */
	int argc;
	bool json, show_control_chars, output_overwrite;
	const char *output_dir;        /* as named, or NULL */
	struct request_input *inputs;
	size_t input_count;
	/* A batch's (its settings, start and FILEs above): */
	long jobs;                     /* sandboxes at once: --jobs, or its default */
	long long shard_index, shard_count;
	bool input_order, progress;
	const char *resume;            /* --resume as named, or NULL */
	/* private: every string above points into it */
	char *storage;
	size_t storage_used, storage_size;
};

/* The descriptors that come with a run, in this order: stdin, stdout,
 * stderr, the code's file (file set), the output directory (output_dir
 * set), then each input's. With a batch: stdin, stdout, stderr, one for
 * each FILE ("-": stdin again), then --resume's (resume set). */
size_t request_fd_count(const struct request *req);

/* When the run started, as its deadline (start + --timeout) counts: the
 * client's start, but never later than now, so that a start time from the
 * future buys no time past --timeout (nor a deadline past INT64_MAX). A
 * start long gone is kept: the deadline has passed, and the run times out
 * with nothing run, as the client's own would have. */
int64_t request_started_at(const struct request *req, int64_t now);

/* Encodes req (kind and, for a run, every field) into out. */
void request_encode(const struct request *req, struct buffer *out);
/* Decodes a message; -1 with why set on anything malformed: an unknown
 * tag or kind, a field out of bounds or missing or twice, a NUL in a
 * string, a setting of an unknown id. The strings are req's own. */
int request_decode(const char *msg, size_t len, struct request *req, char *why, size_t why_size);
void request_free(struct request *req);

#endif
