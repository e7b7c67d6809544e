/* batch.h: `sage-sandbox batch`: many jobs through warm sandboxes that
 * serve one job after another, one JSON line of result each. */
#ifndef SAGE_SANDBOX_BATCH_H
#define SAGE_SANDBOX_BATCH_H

#include "settings.h"

#include <stdbool.h>
#include <stddef.h>

/* Sandboxes a batch may keep at once (--jobs). */
#define BATCH_MAX_JOBS 64
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
};

/* Runs the batch to its end; returns the exit status. */
int batch_run(const struct batch_options *o);
/* --jobs when not given: the cores, or what the host's available memory
 * holds at --memory each, the fewer; why says which (for status). */
long batch_default_jobs(const struct config *cfg, char *why, size_t why_size);

#endif
