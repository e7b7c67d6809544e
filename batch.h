/* batch.h: `sage-sandbox batch`: many jobs through warm sandboxes that
 * serve one job after another, one JSON line of result each. */
#ifndef SAGE_SANDBOX_BATCH_H
#define SAGE_SANDBOX_BATCH_H

#include "settings.h"

#include <stdbool.h>
#include <stddef.h>

/* Sandboxes a batch may keep at once (--jobs). */
#define BATCH_MAX_JOBS 64
/* FILE arguments opened ahead (batch_open_inputs); past this many, each is
 * opened by name as it is read, and the batch runs on its own. */
#define BATCH_OPEN_FILES_MAX 100
/* The descriptors of a batch's inputs: stdin, stdout, stderr, the FILEs,
 * --resume. */
#define BATCH_FDS_MAX (BATCH_OPEN_FILES_MAX + 4)
/* A sandbox serves at most this many jobs, or this long, then another
 * replaces it: what any one container accumulates stays bounded. */
#define BATCH_CALLS_PER_SANDBOX 1000
#define BATCH_SANDBOX_AGE_SECONDS 3600

/* The exit statuses of batch besides 125 (refused: nothing ran) and
 * 128+N (stopped by signal N). */
enum { BATCH_EXIT_ALL_RAN = 0, BATCH_EXIT_SOME_NOT_RUN = 1 };

struct batch_options {
	const struct config *cfg;
	char *const *files; /* FILE arguments; none: stdin */
	int file_count;
	long jobs;         /* sandboxes at once; 0: batch_default_jobs */
	bool fresh;        /* a container of its own for each job */
	bool input_order;  /* results in the input's order, not as they end */
	const char *resume; /* results of an earlier run: its done ids are skipped */
	long long shard_index, shard_count; /* count 0: every job */
	bool progress;     /* the progress line on stderr (a terminal) */
	/* Its inputs, opened once by batch_open_inputs (borrowed), or NULL:
	 * each is opened by name when it is read. */
	const int *fds;
};

/* Opens the inputs once, for whichever way the batch runs: fds gets 0, 1,
 * 2, a descriptor for each FILE ("-": 0 again) and --resume's, *nfds their
 * count. Non-blocking, never a controlling terminal; a .sage FILE and
 * --resume must be regular files. -1, with nothing left open, when one
 * cannot be opened so, or past BATCH_OPEN_FILES_MAX FILEs: the batch then
 * opens them by name, and says why, as it always has. */
int batch_open_inputs(const struct batch_options *o, int fds[BATCH_FDS_MAX], size_t *nfds);
/* Closes what batch_open_inputs opened (never 0, 1 or 2). */
void batch_close_inputs(const int *fds, size_t nfds);

/* Runs the batch to its end, on a loop and runner of its own; returns the
 * exit status. */
int batch_run(const struct batch_options *o);

struct batch;
struct hosting;

/* Starts the batch o (borrowed until batch_free): on a loop and runner of
 * its own where hosting is NULL, else the server's (runner.h), with the
 * client's descriptors laid out as batch_open_inputs lays them out.
 * on_finished(hosting->owner, status), required when hosted, is called
 * once, from the loop, when every line is out, or the batch was refused
 * (an input that cannot be read: its line on the client's stderr) or
 * stopped: the batch is then the caller's to free. A hosted batch hands
 * the runner, which other clients' runs share, no more jobs than --jobs at
 * a time, and does not count its input ahead for the progress line (a
 * long read on the server's loop would hold every client up). */
struct batch *batch_start(const struct batch_options *o, const struct hosting *hosting,
		void (*on_finished)(void *owner, int status));
/* A stop signal, as the batch's own would be (the server forwards a
 * client's): running jobs stop and get no line; mute: nothing more is
 * written (the client is gone). */
void batch_signal(struct batch *b, int sig, bool mute);
/* Frees the batch: a job still running is dropped (its call freed). */
void batch_free(struct batch *b);
/* --jobs when not given: the cores, or what the host's available memory
 * holds at --memory each, the fewer; why says which (for status). */
long batch_default_jobs(const struct config *cfg, char *why, size_t why_size);

#endif
