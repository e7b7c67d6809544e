/* jobs.h: a batch's jobs, read one at a time from JSON Lines or .sage
 * files and checked line by line, in memory bounded by one line. */
#ifndef SAGE_SANDBOX_JOBS_H
#define SAGE_SANDBOX_JOBS_H

#include "error.h"
#include "infiles.h"
#include "loop.h"
#include "settings.h"

#include <stdbool.h>
#include <stddef.h>

/* A line of JSON Lines is at most this long: a job's code (50,000 bytes),
 * stdin and files must fit in it. */
#define JOB_LINE_MAX (16u << 20)
/* A job's id, as JSON text, at most this long. */
#define JOB_ID_MAX 256

struct job {
	char id[JOB_ID_MAX + 1]; /* as JSON ("\"a\"", "12"); "" when the line has none */
	const char *source;      /* its file as named, "-" for stdin */
	long line;               /* in its source, from 1; 0 for a .sage file */
	long long ordinal;       /* among every job of the input, from 0 */
	long long seq;           /* among the jobs this batch takes (shard, resume) */
	bool bad;                /* refused: err says why; nothing runs */
	struct error err;
	char *code;
	size_t code_len;
	char *input; /* its stdin, or NULL for none */
	size_t input_len, input_sent;
	bool input_ended;     /* its end was sent, this attempt */
	struct batch *batch;  /* the batch that runs it */
	char **argv; /* argv[0]: the name the code goes by */
	int argc;
	struct infiles in;
	/* Its limits: the batch's, or lower where the line asks. */
	struct config cfg;
	char timeout_text[24], output_limit_text[24], seed_text[24];
	int attempts;
	struct call *call;    /* the runner's, while the job is submitted (batch.c) */
	struct job *next;     /* in the batch's list of those */
};

struct job_source;

/* A FILE argument that is one job (a name ending in .sage), not JSON Lines. */
bool is_sage_file(const char *name);

/* Opens the inputs: FILE arguments (a name ending in .sage is one job,
 * anything else JSON Lines; "-" is stdin), or stdin when there are none;
 * fds: NULL, or a descriptor for each of them, opened once
 * (batch_open_inputs; for stdin's alone when there are none), read in
 * place of the names: a .sage file's must be a regular file.
 * shard_count > 0: only jobs whose ordinal is shard_index modulo it.
 * count_ahead: count the jobs first (a second read of every regular file,
 * for the progress line's total). NULL with err set when a JSON Lines file
 * cannot be opened. */
struct job_source *job_source_open(char *const *files, int count, const struct config *cfg,
		long long shard_index, long long shard_count, bool count_ahead, const int *fds,
		struct error *err);
/* The next job: 1 with *out (bad or not), 0 when the input has no whole
 * line yet (job_source_wait()), -1 at its end. A read error is a bad job
 * that ends its source. */
int job_source_next(struct job_source *s, struct job **out);
/* After a 0: calls ready once, from the loop, when the input being read
 * has more (or ended). The source watches its own descriptor and stops
 * watching it before it closes it, at the input's end or in
 * job_source_close(). */
void job_source_wait(struct job_source *s, struct loop *loop, void (*ready)(void *data),
		void *data);
/* How many jobs the input holds for this shard, counted ahead where the
 * inputs are regular files; -1 when a pipe makes it unknown, or when not
 * counted. */
long long job_source_total(const struct job_source *s);
/* Ends the wait, if any, and closes the input being read. */
void job_source_close(struct job_source *s);
void job_free(struct job *j);
/* Where a job came from, for its messages: "line N of FILE" ("standard
 * input" for -), or for line 0 a .sage file's name. */
void job_where(const char *source, long line, char *buf, size_t size);

/* --shard's value: "K/N", "auto" (Slurm's array task) or "auto/N" (an
 * index from Slurm or a Kubernetes indexed Job, N tasks). -1 with err. */
int parse_shard(const char *text, long long *index, long long *count, struct error *err);

#endif
