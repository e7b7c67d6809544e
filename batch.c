/* batch.c: `sage-sandbox batch` as a front end: jobs read as they are
 * needed and submitted to the runner (serial sandboxes that serve job after
 * job, each as good as fresh; --fresh: one each), one JSON line of result
 * each; --resume, --shard, --order, the progress line and the summary. The
 * same whether the batch is on its own (a loop, a runner and descriptors
 * 0, 1, 2 of its own) or hosted by the server (its loop, its fleets, the
 * client's descriptors). */
#include "batch.h"
#include "buffer.h"
#include "host.h"
#include "jobs.h"
#include "json.h"
#include "loop.h"
#include "result.h"
#include "runner.h"
#include "signals.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_CHECK_TIMEOUT_MS 30000
/* Results waiting for stdout: past this, no job starts until they drain;
 * and no line is read past a quarter of it, so that a run of refused lines
 * (answered without a sandbox) yields to the loop that writes them. */
#define OUT_QUEUE_BYTES (4u << 20)
#define READ_OUT_BYTES (OUT_QUEUE_BYTES / 4)
#define PROGRESS_INTERVAL_MS 500
/* After SIGINT or SIGTERM, what is not removed by then is left to
 * podman's backstop. */
#define SHUTDOWN_LIMIT_MS 15000
/* Jobs read ahead of the runner, per --jobs: enough to keep every
 * sandbox busy, never the whole input. */
#define READ_AHEAD_PER_SANDBOX 2
/* Lines read in one turn of the loop at most (skipped by --resume, bad, or
 * submitted): a long run of them yields, so that a hosted batch never
 * holds the server's loop, and its other clients, for long. */
#define READ_LINES_PER_TURN 256

struct batch;

/* A set of ids (their JSON texts), each with where it was first seen.
 * Every record (its where, then the id and a NUL) is in one block, found
 * through a table of offsets: a batch of a million short ids holds some
 * 40 MB, not a million allocations. */
struct id_where {
	const char *source; /* a job's (the FILE argument), or NULL */
	long line;
};

struct idset {
	size_t *slot; /* 1 + the offset of a record in records; 0: free */
	size_t size, used;
	struct buffer records;
};

struct batch {
	const struct batch_options *o;
	const struct hosting *hosting; /* the server's, or NULL for a batch of its own */
	void (*on_finished)(void *owner, int status); /* a hosted batch's */
	const int *fds;           /* the inputs opened ahead (hosting's, or o's), or NULL */
	struct loop *loop;        /* owned unless hosted */
	struct loop_scope scope; /* the progress line's and the shutdown's timers */
	struct host host;      /* owned: what the host check found */
	struct host_check *host_check; /* while podman is asked */
	bool host_ok;
	struct runner *runner; /* once the host is known: owned unless hosted */
	struct job *running;   /* jobs submitted and not yet done: each holds its call */
	struct job_source *src; /* owns its descriptors and their watch */
	bool input_done;
	long long read_seq; /* jobs read so far */
	int jobs;
	struct queue *out;     /* owns the stdout descriptor */
	bool out_failed;
	int err_fd;            /* stderr: 2, or (hosted, owned) the client's, non-blocking */
	bool mute;             /* nothing more is written: the client is gone */
	/* --order input: lines held until those before them are out. */
	char **held;
	size_t *held_len;
	long long window, next_seq;
	struct idset done_ids; /* done by an earlier run (--resume) */
	struct idset seen_ids; /* of the jobs read: a later job may not take one */
	long long total, finished, ok, failed, bad, not_run, skipped, retried;
	/* Serial containers that could not be made as good as fresh after a
	 * job (launcher/calls.py) and were replaced. */
	long long replaced;
	int64_t began;
	struct rusage cpu_at_start; /* hosted: the server's, to count the batch's share */
	int stop_signal; /* the signal that stops the batch, or 0 */
	bool refused;
	struct error refusal;
	struct stop_signals *signals;
	struct loop_timer *progress_timer, *shutdown_timer, *end_timer, *more_timer;
	bool quitting, drained, over;
	int status; /* once over */
};

static void pump(struct batch *b);
static void stop_all(struct batch *b, int sig);

static void say(struct batch *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line (or the progress line) on stderr: the batch's own, blocking as a
 * filter's; a hosted batch's, the client's, whatever fits now, never
 * waiting on a reader that does not read. */
static void say(struct batch *b, const char *fmt, ...)
{
	char text[2048];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (!b->mute && len > 0)
		write_what_fits(b->err_fd, text, (size_t)len < sizeof text ? (size_t)len : sizeof text - 1);
}

static void say_error(struct batch *b, const struct error *err)
{
	size_t len;
	char *text = print_to_memory(print_error_line, &(struct printed){.err = err}, &len);
	if (!b->mute)
		write_what_fits(b->err_fd, text, len);
	free(text);
}

/* ---- ids ------------------------------------------------------------------ */

static size_t id_hash(const char *s)
{
	size_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* The id of the record a slot points to. */
static const char *slot_id(const struct idset *set, size_t slot)
{
	return set->records.data + slot - 1 + sizeof(struct id_where);
}

/* Whether id is in the set; where, if not NULL, gets where it was first. */
static bool idset_find(const struct idset *set, const char *id, struct id_where *where)
{
	if (!set->size)
		return false;
	for (size_t i = id_hash(id) & (set->size - 1); set->slot[i]; i = (i + 1) & (set->size - 1)) {
		if (strcmp(slot_id(set, set->slot[i]), id) == 0) {
			if (where) /* records are packed: copied out, never cast */
				memcpy(where, set->records.data + set->slot[i] - 1, sizeof *where);
			return true;
		}
	}
	return false;
}

/* Adds id, first seen at where; an id already in the set keeps its own. */
static void idset_add(struct idset *set, const char *id, const struct id_where *where)
{
	if (idset_find(set, id, NULL))
		return;
	if ((set->used + 1) * 2 > set->size) {
		size_t size = set->size ? set->size * 2 : 1024;
		size_t *bigger = calloc(size, sizeof *bigger);
		if (!bigger)
			abort();
		for (size_t i = 0; i < set->size; i++) {
			if (!set->slot[i])
				continue;
			size_t k = id_hash(slot_id(set, set->slot[i])) & (size - 1);
			while (bigger[k])
				k = (k + 1) & (size - 1);
			bigger[k] = set->slot[i];
		}
		free(set->slot);
		set->slot = bigger;
		set->size = size;
	}
	size_t i = id_hash(id) & (set->size - 1);
	while (set->slot[i])
		i = (i + 1) & (set->size - 1);
	set->slot[i] = set->records.len + 1;
	buffer_append(&set->records, (const char *)where, sizeof *where);
	buffer_append(&set->records, id, strlen(id) + 1);
	set->used++;
}

static void idset_free(struct idset *set)
{
	free(set->slot);
	buffer_free(&set->records);
}

/* The ids an earlier run finished: lines that parse whole, with an id,
 * whose job ran (its code's verdict or a limit's; a job refused before it
 * ran, exit_code 125 with an error, is done again). A torn last line does
 * not parse, so its job is done again. Where stdout appends to the same
 * file, a torn last line is ended first, so that the first new line is a
 * line of its own. */
static int read_done_ids(struct batch *b, struct error *err)
{
	/* Opened ahead (a regular file): read through a descriptor of its own. */
	int ahead = b->fds ? fcntl(b->fds[3 + b->o->file_count], F_DUPFD_CLOEXEC, 3) : -1;
	int out_fd = b->fds ? b->fds[1] : 1;
	FILE *f = !b->fds ? fopen(b->o->resume, "r") : ahead >= 0 ? fdopen(ahead, "r") : NULL;
	if (!f && ahead >= 0)
		close(ahead);
	char *line = NULL;
	size_t size = 0;
	ssize_t len;
	int last = '\n';
	if (!f) {
		error_set(err, EXIT_REFUSED, "give --resume the results file of an earlier batch",
			"cannot read --resume %s: %s", b->o->resume, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &size, f)) > 0) {
		last = line[len - 1];
		json_t *o = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
		json_t *id = json_object_get(o, "id");
		json_t *code = json_object_get(o, "exit_code");
		json_t *error = json_object_get(o, "error");
		/* A job whose sandbox broke under it twice did not run to its end. */
		json_t *stop = json_object_get(o, "stopped_by");
		bool broke = json_is_string(stop) && strcmp(json_string_value(stop), "sandbox_broke") == 0;
		bool ran = json_is_integer(code) && !broke &&
			(json_integer_value(code) != EXIT_REFUSED || json_is_null(error));
		/* Whole without its newline (cut just before it) is whole. */
		if ((json_is_string(id) || json_is_integer(id)) && ran) {
			char *text = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
			if (text)
				idset_add(&b->done_ids, text, &(struct id_where){0});
			free(text);
		}
		json_decref(o);
	}
	bool failed = ferror(f);
	free(line);
	struct stat out, in;
	if (!failed && last != '\n' && fstat(fileno(f), &in) == 0 && fstat(out_fd, &out) == 0 &&
	    in.st_dev == out.st_dev && in.st_ino == out.st_ino && write(out_fd, "\n", 1) != 1)
		failed = true;
	fclose(f);
	if (failed) {
		error_set(err, EXIT_REFUSED, "give --resume a readable results file",
			"cannot read --resume %s: %s", b->o->resume, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- results ------------------------------------------------------------- */

static void emit(struct batch *b, long long seq, char *line, size_t len)
{
	if (!b->o->input_order) {
		if (line && !b->out_failed)
			queue_put_all(b->out, line, len);
		free(line);
		return;
	}
	/* Held until every line before it is out; a skipped job holds "". */
	size_t at = (size_t)(seq % b->window);
	b->held[at] = line ? line : strdup("");
	b->held_len[at] = line ? len : 0;
	while (b->held[at = (size_t)(b->next_seq % b->window)]) {
		if (b->held_len[at] && !b->out_failed)
			queue_put_all(b->out, b->held[at], b->held_len[at]);
		free(b->held[at]);
		b->held[at] = NULL;
		b->next_seq++;
	}
}

/* The job's line: its id, the fields of `run --json`, where it came from
 * and how many sandboxes it took; or why it did not run. */
static void finish_job(struct batch *b, struct job *j, const struct run_result *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		abort();
	struct json w = {.out = f};
	jw_begin_object(&w);
	jw_key(&w, "id");
	if (j->id[0])
		jw_raw(&w, j->id);
	else
		jw_null(&w);
	/* Nothing ran: a bad line, or no sandbox could run the job. */
	const struct error *refusal = j->bad ? &j->err : r->failed ? &r->failure : NULL;
	if (refusal) {
		write_json_header(&w, false, refusal->status, refusal->message);
		jw_key(&w, "hint");
		jw_cstring(&w, refusal->hint);
	} else {
		write_run_fields(&w, r, &j->cfg, &(struct timeout_knob){"the job's timeout (at most the "
			"batch's --timeout) or the batch's --timeout", settings[SET_TIMEOUT].max});
	}
	jw_key(&w, "source");
	jw_cstring(&w, j->source);
	jw_key(&w, "line");
	if (j->line)
		jw_integer(&w, j->line);
	else
		jw_null(&w);
	jw_key(&w, "attempts");
	jw_integer(&w, j->attempts);
	jw_key(&w, "sandbox");
	write_sandbox_summary(&w, &j->cfg);
	jw_end_object(&w); /* and its newline */
	fclose(f);

	b->finished++;
	if (j->bad)
		b->bad++;
	else if (r->failed || r->sandbox_broke)
		b->not_run++;
	else if (r->exit_code == 0)
		b->ok++;
	else
		b->failed++;
	emit(b, j->seq, text, len);
	job_free(j);
}

/* ---- jobs as calls ---------------------------------------------------------------- */

/* The job's stdin, as the sandbox has room for it; from its start again
 * when it runs again in a fresh container. */
static void feed_input(struct call *c, struct job *j)
{
	while (j->input_sent < j->input_len) {
		size_t n = call_input(c, j->input + j->input_sent, j->input_len - j->input_sent);
		if (!n)
			return;
		j->input_sent += n;
	}
	if (!j->input_ended) {
		j->input_ended = true;
		call_input_end(c);
	}
}

static void on_job_start(struct call *c, void *data)
{
	struct job *j = data;
	j->input_sent = 0;
	j->input_ended = false;
	if (j->input)
		feed_input(c, j);
}

static void on_input_room(struct call *c, void *data)
{
	struct job *j = data;
	if (j->input)
		feed_input(c, j);
}

static void on_job_done(struct call *c, void *data)
{
	struct job *j = data;
	struct batch *b = j->batch;
	struct run_result *r = call_result_mutable(c);
	j->attempts = call_attempts(c);
	if (j->attempts > 1)
		b->retried++;
	for (struct job **at = &b->running; *at; at = &(*at)->next)
		if (*at == j) {
			*at = j->next;
			break;
		}
	j->call = NULL;
	if (r->ends_why[0]) {
		b->replaced++;
		say(b, "sage-sandbox batch: the container of job %s is replaced: %s\n",
			j->id[0] ? j->id : "(none)", r->ends_why);
	}
	if (r->podman_failed && !b->refused) {
		/* podman itself can no longer be started: nothing more runs. */
		b->refused = true;
		b->refusal = r->failure;
		stop_all(b, SIGTERM);
	}
	if (b->stop_signal) {
		job_free(j); /* stopped, not done: --resume runs it again */
	} else {
		if (!j->line)
			r->file = j->argv[0]; /* a .sage file's job, as run FILE says */
		finish_job(b, j, r);
	}
	call_free(c);
	pump(b);
}

/* A job to the runner: its own limits within the batch's (the container's
 * are the batch's), its stdin fed as it starts. */
static void submit(struct batch *b, struct job *j)
{
	struct rlimit_value rl[RLIMIT_COUNT];
	sandbox_rlimits(&j->cfg, rl);
	j->batch = b;
	struct call_spec spec = {.program = {.code = j->code, .code_len = j->code_len,
		.argv = (const char *const *)j->argv, .argc = j->argc,
		.input_follows = j->input != NULL, .cpu_seconds = (long)rl[RL_CPU].value,
		.output_limit = (size_t)j->cfg.number[SET_OUTPUT_LIMIT] * 1024,
		.in = j->in.count ? &j->in : NULL,
		.display_last = strcmp(j->cfg.value[SET_DISPLAY], "last") == 0,
		.seeded = j->cfg.number[SET_SEED] >= 0, .seed = (uint32_t)j->cfg.number[SET_SEED]},
		.timeout_ms = j->cfg.number[SET_TIMEOUT] * 1000L, .retry = true, .keep_output = true,
		.on_start = on_job_start, .on_input_room = on_input_room, .on_done = on_job_done,
		.data = j};
	j->next = b->running;
	b->running = j;
	j->call = runner_submit(b->runner, &spec);
}

static long count_running(const struct batch *b)
{
	long n = 0;
	for (const struct job *j = b->running; j; j = j->next)
		n++;
	return n;
}

/* ---- the input ---------------------------------------------------------------- */

/* The input has more: job_source_wait's call back. */
static void on_input(void *data)
{
	pump(data);
}

/* A job's id is its own: --resume finds a job by its id, and a result
 * line is told from another by it. The first job with an id takes it,
 * whether it runs or was refused for another reason; a later one, in
 * any input, is refused as a bad line that names both. */
static void check_id_unique(struct batch *b, struct job *j)
{
	struct id_where first;
	if (!idset_find(&b->seen_ids, j->id, &first)) {
		idset_add(&b->seen_ids, j->id, &(struct id_where){j->source, j->line});
		return;
	}
	if (j->bad)
		return; /* refused already, for its own reason */
	char where[300], before[300];
	job_where(j->source, j->line, where, sizeof where);
	job_where(first.source, first.line, before, sizeof before);
	j->bad = true;
	error_set(&j->err, EXIT_REFUSED, "give each job an id of its own: --resume finds jobs by it",
		"%s: id %s is already the id of %s", where, j->id, before);
}

/* Reads jobs while few wait: the input is never held whole, only the
 * set of ids read. */
static void read_jobs(struct batch *b)
{
	/* As many running as there are sandboxes, and on its own as many
	 * again per sandbox waiting; hosted, none waiting: the runner's queue
	 * is shared with other clients' runs, which would wait behind them. */
	long most = b->hosting ? b->jobs : (READ_AHEAD_PER_SANDBOX + 1) * b->jobs;
	for (int lines = 0; !b->input_done && count_running(b) < most &&
	       queue_pending(b->out) < READ_OUT_BYTES &&
	       (!b->o->input_order || b->read_seq - b->next_seq < b->window); lines++) {
		if (lines == READ_LINES_PER_TURN) {
			loop_timer_arm(&b->scope, &b->more_timer, 0, on_input, b);
			return;
		}
		struct job *j;
		int got = job_source_next(b->src, &j);
		if (got < 0) {
			b->input_done = true;
			return;
		}
		if (got == 0) {
			job_source_wait(b->src, b->loop, on_input, b);
			return;
		}
		b->read_seq++;
		if (!j->bad && j->id[0] && idset_find(&b->done_ids, j->id, NULL)) {
			/* Done before: skipped, however often its id comes. */
			b->skipped++;
			emit(b, j->seq, NULL, 0);
			job_free(j);
			continue;
		}
		if (j->id[0])
			check_id_unique(b, j);
		if (j->bad)
			finish_job(b, j, NULL);
		else
			submit(b, j);
	}
}

/* ---- progress and the end ------------------------------------------------------- */

static void progress_line(struct batch *b, bool final)
{
	double seconds = (double)(loop_now_ms() - b->began) / 1000;
	double rate = seconds > 0 ? (double)b->finished / seconds : 0;
	long long done = b->finished + b->skipped;
	char total[32] = "?", eta[32] = "";
	long long all = job_source_total(b->src);
	if (all >= 0) {
		snprintf(total, sizeof total, "%lld", all);
		if (rate > 0 && all > done) {
			long left = (long)((double)(all - done) / rate);
			snprintf(eta, sizeof eta, ", ETA %ld:%02ld", left / 60, left % 60);
		}
	}
	say(b, "\r\033[Ksage-sandbox batch: %lld/%s done, %lld ok, %lld failed, %.1f jobs/s%s%s",
		done, total, b->ok, b->failed + b->bad + b->not_run, rate, eta, final ? "\r\033[K" : "");
}

static void on_progress(void *data)
{
	struct batch *b = data;
	progress_line(b, false);
	loop_timer_arm(&b->scope, &b->progress_timer, loop_now_ms() + PROGRESS_INTERVAL_MS,
		on_progress, b);
}

static void report(struct batch *b);

static void on_end(void *data)
{
	struct batch *b = data;
	b->on_finished(b->hosting->owner, b->status);
}

/* Every line is out, or the batch gave up on them: a batch of its own
 * leaves its loop (batch_run reports); a hosted one reports now and tells
 * its host from the loop, never from inside a call into the batch. */
static void end(struct batch *b)
{
	if (!b->hosting) {
		loop_quit(b->loop);
		return;
	}
	if (b->over)
		return;
	report(b);
	loop_timer_arm(&b->scope, &b->end_timer, 0, on_end, b);
}

static void maybe_quit(struct batch *b)
{
	if (b->quitting || (b->runner && !b->drained))
		return;
	b->quitting = true;
	if (!b->out || b->out_failed || queue_pending(b->out) == 0)
		end(b);
	else
		queue_close_when_empty(b->out);
}

static void on_drained(void *data)
{
	struct batch *b = data;
	b->drained = true;
	maybe_quit(b);
}

static void on_shutdown_limit(void *data)
{
	end(data);
}

/* Everything stops: running jobs are not done (no line); a batch's own
 * containers are removed, a hosted batch's calls cancelled (the sandboxes
 * that ran them are replaced; the fleet's others serve on). No more jobs
 * are read: a wait for input still on calls pump, which does nothing now.
 * Whatever stopped it (a signal, SIGPIPE, podman gone), what is not over
 * within SHUTDOWN_LIMIT_MS is left to podman's backstop. */
static void stop_all(struct batch *b, int sig)
{
	if (b->stop_signal)
		return;
	b->stop_signal = sig;
	b->input_done = true;
	loop_timer_arm(&b->scope, &b->shutdown_timer, loop_now_ms() + SHUTDOWN_LIMIT_MS,
		on_shutdown_limit, b);
	host_check_cancel(&b->host_check);
	if (!b->runner) {
		maybe_quit(b);
	} else if (!b->hosting) {
		runner_drain(b->runner, sig, "the batch is stopping", on_drained, b);
	} else {
		for (struct job *j = b->running; j; j = j->next)
			call_cancel(j->call, sig);
		pump(b);
	}
}

void batch_signal(struct batch *b, int sig, bool mute)
{
	if (mute)
		b->mute = true;
	if (!b->over)
		stop_all(b, sig);
}

/* The first signal (signals.c: a second one exits at once). */
static void on_signal(int sig, void *data)
{
	batch_signal(data, sig, false);
}

static void on_out_drained(struct queue *q, void *data)
{
	struct batch *b = data;
	if (b->quitting && queue_closed(q))
		end(b);
	else
		pump(b);
}

static void on_out_error(struct queue *q, void *data)
{
	struct batch *b = data;
	/* Nobody reads the results (`| head`): the batch stops as if by
	 * SIGPIPE, and exits so. */
	b->out_failed = true;
	stop_all(b, SIGPIPE);
}

/* ---- the scheduler ------------------------------------------------------------- */

/* Reads jobs while few wait and the results drain; once the input is over
 * and every job has its line (or the batch stops and every job it ran is
 * over), a batch's own runner drains; a hosted batch is over. */
static void pump(struct batch *b)
{
	bool stopping = b->refused || b->stop_signal;
	if (!b->runner) {
		/* Refused, or stopped while podman and the image were asked:
		 * nothing was started, nothing is waited for. */
		if (stopping)
			maybe_quit(b);
		return;
	}
	if (!stopping && queue_pending(b->out) < OUT_QUEUE_BYTES)
		read_jobs(b);
	if (b->running || !(stopping || b->input_done))
		return;
	if (b->hosting) {
		b->drained = true;
		maybe_quit(b);
	} else if (!stopping) {
		runner_drain(b->runner, SIGTERM, "the batch is over", on_drained, b);
	}
}

/* ---- the host -------------------------------------------------------------------- */

static void refuse(struct batch *b, const struct error *err)
{
	b->refused = true;
	b->refusal = *err;
	pump(b);
}

static void on_host(struct host *h, void *data)
{
	struct batch *b = data;
	if (b->stop_signal)
		return;
	if (h->refusal.status) {
		refuse(b, &h->refusal);
		return;
	}
	b->host_ok = true;
	b->began = loop_now_ms();
	if (b->hosting) {
		b->runner = b->hosting->runner_for(b->hosting->owner, b->o->cfg, &b->host);
	} else {
		/* Serial sandboxes, one per --jobs; with --fresh, one container
		 * a job. */
		struct runner_options ro = {.loop = b->loop, .host = &b->host, .cfg = b->o->cfg,
			.who = "batch", .log = false, .running_max = b->jobs,
			.serial = b->o->fresh ? 0 : b->jobs};
		b->runner = runner_new(&ro);
	}
	pump(b);
}

long batch_default_jobs(const struct config *cfg, char *why, size_t why_size)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long available = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &available) == 1)
			break;
	if (f)
		fclose(f);
	available *= 1024;
	long by_memory = (long)(available / config_memory_bytes(cfg));
	long jobs = cores < 1 ? 1 : cores;
	if (available && by_memory < jobs)
		jobs = by_memory;
	if (jobs < 1)
		jobs = 1;
	if (jobs > BATCH_MAX_JOBS)
		jobs = BATCH_MAX_JOBS;
	if (why)
		snprintf(why, why_size, "%ld: %ld core%s, %.1f GiB available / --memory %s each", jobs,
			cores, cores == 1 ? "" : "s", (double)available / (1 << 30), cfg->value[SET_MEMORY]);
	return jobs;
}

static double cpu_seconds(const struct rusage *u)
{
	return (double)(u->ru_utime.tv_sec + u->ru_stime.tv_sec) +
		(double)(u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e6;
}

static void summary(struct batch *b)
{
	struct rusage self;
	char sig[32], cpu[128];
	double seconds = (double)(loop_now_ms() - b->began) / 1000;
	getrusage(RUSAGE_SELF, &self);
	/* A hosted batch's process is the server: what it spent meanwhile
	 * (other clients' runs included), and its peak. */
	if (b->hosting)
		snprintf(cpu, sizeof cpu, "the server's (pid %ld) CPU %.2f s meanwhile, max RSS %ld KiB",
			(long)getpid(), cpu_seconds(&self) - cpu_seconds(&b->cpu_at_start),
			self.ru_maxrss);
	else
		snprintf(cpu, sizeof cpu, "sage-sandbox's own CPU %.2f s, max RSS %ld KiB",
			cpu_seconds(&self), self.ru_maxrss);
	if (b->stop_signal && !b->refused)
		say(b, "sage-sandbox batch: stopped by %s; jobs still running have no line "
			"(--resume RESULTS runs them)\n", signal_name(b->stop_signal, sig, sizeof sig));
	say(b, "sage-sandbox batch: %lld jobs in %.1f s (%.2f jobs/s): %lld ok, %lld failed, "
		"%lld bad lines, %lld not run; %lld retried, %lld skipped (--resume); "
		"%lld container%s replaced after a job; %s\n",
		b->finished, seconds, seconds > 0 ? (double)b->finished / seconds : 0, b->ok, b->failed,
		b->bad, b->not_run, b->retried, b->skipped, b->replaced, b->replaced == 1 ? "" : "s",
		cpu);
}

/* The last words, once: what is queued goes out as far as it can, then
 * the summary (or the refusal) on stderr, and the exit status. */
static void report(struct batch *b)
{
	if (b->over)
		return;
	b->over = true;
	loop_timer_cancel(&b->progress_timer);
	if (b->out)
		queue_flush_now(b->out);
	if (b->o->progress && b->src)
		progress_line(b, true);
	if (b->refused && !b->finished) {
		say_error(b, &b->refusal);
		b->status = b->refusal.status;
		return;
	}
	summary(b);
	if (b->refused) /* podman could no longer be started, mid-batch */
		say_error(b, &b->refusal);
	b->status = b->refused ? EXIT_REFUSED : b->stop_signal ? 128 + b->stop_signal :
		b->bad || b->not_run ? BATCH_EXIT_SOME_NOT_RUN : BATCH_EXIT_ALL_RAN;
}

/* Long: the front end's start in order (inputs, output, signals, the host
 * check), each step a few lines. */
struct batch *batch_start(const struct batch_options *o, const struct hosting *hosting,
		void (*on_finished)(void *owner, int status))
{
	struct batch *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	b->o = o;
	b->err_fd = 2;
	b->fds = hosting ? hosting->fds : o->fds;
	if (hosting) {
		assert(on_finished);
		b->hosting = hosting;
		b->on_finished = on_finished;
		b->loop = hosting->loop;
		b->err_fd = reopen_nonblocking(hosting->fds[2], O_WRONLY);
		getrusage(RUSAGE_SELF, &b->cpu_at_start);
	} else {
		b->loop = loop_new();
	}
	loop_scope_init(&b->scope, b->loop, "batch");
	b->jobs = (int)(o->jobs ? o->jobs : batch_default_jobs(o->cfg, NULL, 0));
	b->window = 32LL * b->jobs;
	if (o->input_order) {
		b->held = calloc((size_t)b->window, sizeof *b->held);
		b->held_len = calloc((size_t)b->window, sizeof *b->held_len);
		if (!b->held || !b->held_len)
			abort();
	}
	b->began = loop_now_ms();
	struct error err;
	/* Inputs opened ahead: stdin's alone, or one for each FILE. */
	const int *input_fds = !b->fds ? NULL : o->file_count ? b->fds + 3 : b->fds;
	if (o->resume && read_done_ids(b, &err) < 0)
		goto refused;
	b->src = job_source_open(o->files, o->file_count, o->cfg, o->shard_index, o->shard_count,
		o->progress && !b->hosting, input_fds, &err);
	if (!b->src)
		goto refused;
	int out_fd = reopen_nonblocking(b->fds ? b->fds[1] : 1, O_WRONLY);
	if (out_fd < 0) {
		error_set(&err, EXIT_REFUSED, NULL, "batch cannot use stdout: %s", strerror(errno));
		goto refused;
	}
	b->out = queue_new(b->loop, out_fd, OUT_QUEUE_BYTES, on_out_drained, on_out_error, b);
	if (!b->out) {
		close(out_fd);
		error_set(&err, EXIT_REFUSED, NULL, "batch cannot watch stdout: %s", strerror(errno));
		goto refused;
	}
	if (!b->hosting) {
		b->signals = stop_signals_watch(b->loop, false, on_signal, b, &err);
		if (!b->signals)
			goto refused;
	}
	if (o->progress)
		loop_timer_arm(&b->scope, &b->progress_timer, loop_now_ms() + PROGRESS_INTERVAL_MS,
			on_progress, b);
	host_check(b->loop, &b->host_check, o->cfg, loop_now_ms() + HOST_CHECK_TIMEOUT_MS, true,
		&b->host, on_host, b);
	return b;

refused:
	b->refused = true;
	b->refusal = err;
	end(b);
	return b;
}

void batch_free(struct batch *b)
{
	if (!b)
		return;
	for (struct job *j = b->running, *next; j; j = next) {
		next = j->next;
		call_free(j->call);
		job_free(j);
	}
	if (!b->hosting)
		runner_free(b->runner);
	for (long long i = 0; b->held && i < b->window; i++)
		free(b->held[i]);
	free(b->held);
	free(b->held_len);
	loop_scope_end(&b->scope);
	host_check_cancel(&b->host_check);
	stop_signals_free(b->signals);
	queue_free(b->out);
	job_source_close(b->src);
	idset_free(&b->done_ids);
	idset_free(&b->seen_ids);
	if (b->hosting && b->err_fd >= 0)
		close(b->err_fd);
	if (!b->hosting)
		loop_free(b->loop);
	free(b);
}

int batch_open_inputs(const struct batch_options *o, int fds[BATCH_FDS_MAX], size_t *nfds)
{
	*nfds = 0;
	if (o->file_count > BATCH_OPEN_FILES_MAX)
		return -1;
	fds[(*nfds)++] = 0;
	fds[(*nfds)++] = 1;
	fds[(*nfds)++] = 2;
	for (int i = 0; i <= o->file_count; i++) {
		const char *name = i < o->file_count ? o->files[i] : o->resume;
		if (!name)
			break;
		bool whole = i == o->file_count || is_sage_file(name); /* read at once */
		if (i < o->file_count && strcmp(name, "-") == 0) {
			fds[(*nfds)++] = 0;
			continue;
		}
		int fd = open(name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && (!whole || (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)))) {
			fds[(*nfds)++] = fd;
			continue;
		}
		if (fd >= 0)
			close(fd);
		batch_close_inputs(fds, *nfds);
		*nfds = 0;
		return -1;
	}
	return 0;
}

void batch_close_inputs(const int *fds, size_t nfds)
{
	for (size_t i = 3; i < nfds; i++)
		if (fds[i] > 2)
			close(fds[i]);
}

int batch_run(const struct batch_options *o)
{
	struct batch *b = batch_start(o, NULL, NULL);
	if (!b->refused && loop_run(b->loop) < 0)
		say(b, "sage-sandbox batch: the event loop failed: %s\n", strerror(errno));
	/* What is left after the shutdown's limit goes to podman's backstop. */
	report(b);
	int status = b->status;
	batch_free(b);
	return status;
}
