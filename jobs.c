/* jobs.c: a batch's jobs, read one line at a time from JSON Lines files,
 * stdin or .sage files (waiting, on the loop, for an input that is not all
 * there yet), each checked whole before it may run. */
#include "jobs.h"
#include "buffer.h"
#include "loop.h"
#include "names.h"
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (64 * 1024)
#define JOB_ARGS_MAX 256

static const char line_hint[] = "write one JSON object per line: {\"id\": ..., \"code\": ...}; "
	"see sage-sandbox(1), BATCH";

struct job_source {
	char *const *files;
	const int *fds; /* each input's descriptor, opened ahead (borrowed), or NULL */
	int count, at; /* at: the input being read */
	const struct config *cfg;
	long long shard_index, shard_count;
	long long ordinal, seq, total;
	int fd;        /* of the JSON Lines input being read, or -1 */
	bool at_eof;   /* its end was read; what is buffered is its last line */
	bool skipping; /* the rest of an over-long line is dropped */
	long line;
	struct buffer buf;
	size_t scanned; /* bytes of buf known to hold no newline */
	/* The wait for more input (job_source_wait): a watch of fd, which
	 * this source owns and so unwatches before it closes fd. The scope
	 * begins at the first wait (a source read to its end without one,
	 * from regular files, never needs the loop) and ends in
	 * job_source_close. */
	struct loop_scope scope;
	struct loop_watch *watch;
	struct loop_timer *soon; /* a wait that could not watch: ready on the next turn */
	int wait_errno;          /* why it could not, for the next job_source_next */
	bool waiting;
	void (*ready)(void *data);
	void *ready_data;
};

bool is_sage_file(const char *name)
{
	size_t n = strlen(name);
	return n > 5 && strcmp(name + n - 5, ".sage") == 0;
}

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
			return false;
	return true;
}

/* Non-blank lines of a regular file, read with pread: its offset stays. */
static long long count_lines(int fd)
{
	char chunk[READ_CHUNK];
	long long lines = 0;
	bool filled = false;
	off_t at = 0;
	ssize_t n;
	while ((n = pread(fd, chunk, sizeof chunk, at)) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i] == '\n') {
				lines += filled;
				filled = false;
			} else if (chunk[i] != ' ' && chunk[i] != '\t' && chunk[i] != '\r') {
				filled = true;
			}
		}
		at += n;
	}
	return n < 0 ? -1 : lines + filled;
}

/* The decimal at text (a sign first where sign_allowed): its value, and
 * *end after it; false without a digit first, which strtoll would take
 * after blanks, or past 64 bits (errno ERANGE, and only then). */
static bool decimal(const char *text, bool sign_allowed, long long *value, char **end)
{
	const char *digits = text + (sign_allowed && (*text == '-' || *text == '+'));
	errno = 0;
	*end = (char *)text;
	if (!isdigit((unsigned char)*digits))
		return false;
	*value = strtoll(text, end, 10);
	return errno != ERANGE;
}

/* The whole number in environment variable name, where it is set: 0, or
 * -1 with err naming the variable (not atoll's 0 for anything else). */
static int shard_variable(const char *name, long long *value, const char *text,
		const char *hint, struct error *err)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return 0;
	char *end;
	long long n;
	if (!decimal(v, true, &n, &end) || *end) {
		bool too_large = errno == ERANGE && !*end; /* digits alone, too many */
		char *shown = printable_name(v, strlen(v), 64);
		error_set(err, EXIT_REFUSED, hint, "--shard %s: %s='%s' is not a whole number%s",
			text, name, shown, too_large ? " of 64 bits" : "");
		free(shown);
		return -1;
	}
	*value = n;
	return 0;
}

/* Long: the three forms of --shard, each checked for its own mistakes. */
int parse_shard(const char *text, long long *index, long long *count, struct error *err)
{
	const char *hint = "give --shard K/N (0 <= K < N), auto (in a Slurm array job) or "
		"auto/N (with SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX set)";
	char *end;
	if (strncmp(text, "auto", 4) == 0 && (text[4] == '\0' || text[4] == '/')) {
		const char *id = getenv("SLURM_ARRAY_TASK_ID");
		const char *k8s = getenv("JOB_COMPLETION_INDEX");
		long long n = 0, k = 0;
		if (text[4] == '/') {
			if (!decimal(text + 5, false, &n, &end) || *end || n < 1) {
				error_set(err, EXIT_REFUSED, hint, "--shard %s: N is not a count", text);
				return -1;
			}
		}
		if (id && *id) {
			/* An array of --array=MIN-MAX[:STEP] has tasks MIN, MIN+STEP, ... */
			long long task = 0, min = 0, step = 1, tasks = 0;
			const char *count_set = getenv("SLURM_ARRAY_TASK_COUNT");
			if (shard_variable("SLURM_ARRAY_TASK_ID", &task, text, hint, err) < 0 ||
			    shard_variable("SLURM_ARRAY_TASK_MIN", &min, text, hint, err) < 0 ||
			    shard_variable("SLURM_ARRAY_TASK_STEP", &step, text, hint, err) < 0 ||
			    (!n && shard_variable("SLURM_ARRAY_TASK_COUNT", &tasks, text, hint,
				    err) < 0))
				return -1;
			if (step < 1) {
				error_set(err, EXIT_REFUSED, hint, "--shard %s: SLURM_ARRAY_TASK_STEP %lld "
					"is not a step of 1 or more", text, step);
				return -1;
			}
			long long offset;
			if (__builtin_sub_overflow(task, min, &offset) || offset < 0 || offset % step) {
				error_set(err, EXIT_REFUSED, hint, "--shard %s: SLURM_ARRAY_TASK_ID %lld "
					"is not an array task from SLURM_ARRAY_TASK_MIN %lld by "
					"SLURM_ARRAY_TASK_STEP %lld", text, task, min, step);
				return -1;
			}
			k = offset / step;
			if (!n && (!count_set || !*count_set)) {
				error_set(err, EXIT_REFUSED, hint, "--shard auto: SLURM_ARRAY_TASK_COUNT "
					"is not set");
				return -1;
			}
			if (!n && tasks < 1) {
				error_set(err, EXIT_REFUSED, hint, "--shard auto: SLURM_ARRAY_TASK_COUNT "
					"%lld is not a count of 1 or more", tasks);
				return -1;
			}
			if (!n)
				n = tasks;
		} else if (k8s && *k8s && n) {
			if (shard_variable("JOB_COMPLETION_INDEX", &k, text, hint, err) < 0)
				return -1;
			if (k < 0) {
				error_set(err, EXIT_REFUSED, hint, "--shard %s: JOB_COMPLETION_INDEX %lld "
					"is not an index from 0", text, k);
				return -1;
			}
		} else {
			error_set(err, EXIT_REFUSED, hint, "--shard %s: %s", text, n ?
				"neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set" :
				"SLURM_ARRAY_TASK_ID is not set (not a Slurm array task)");
			return -1;
		}
		if (k < 0 || k >= n) {
			error_set(err, EXIT_REFUSED, hint, "--shard %s: task index %lld is not below "
				"the task count %lld", text, k, n);
			return -1;
		}
		*index = k;
		*count = n;
		return 0;
	}
	long long k, n;
	bool k_read = decimal(text, false, &k, &end);
	if (!k_read || *end != '/') {
		error_set(err, EXIT_REFUSED, hint, "--shard '%s' is not K/N%s", text,
			errno == ERANGE ? " (K is past 64 bits)" : "");
		return -1;
	}
	bool n_read = decimal(end + 1, false, &n, &end);
	if (!n_read || *end || n < 1 || k < 0 || k >= n) {
		error_set(err, EXIT_REFUSED, hint, "--shard '%s' is not K/N with 0 <= K < N%s", text,
			!n_read && errno == ERANGE ? " (N is past 64 bits)" : "");
		return -1;
	}
	*index = k;
	*count = n;
	return 0;
}

/* Input i, JSON Lines, non-blocking: a file, or "-" for stdin; or the
 * descriptor opened for it ahead (batch_open_inputs). */
static int open_jobs_file(const struct job_source *s, int i, struct error *err)
{
	const char *name = s->files[i];
	int fd = s->fds ? reopen_nonblocking(s->fds[i], O_RDONLY) :
		strcmp(name, "-") == 0 ? reopen_nonblocking(0, O_RDONLY) :
		open(name, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	/* A directory opens, and fails only at its first read: refused here,
	 * before any job runs, as a missing file is (attack helper 146). */
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		fd = -1;
		errno = EISDIR;
	}
	if (fd < 0)
		error_set(err, EXIT_REFUSED, "name a readable JSON Lines file, or - for stdin",
			"cannot read jobs from %s: %s", strcmp(name, "-") ? name : "standard input",
			strerror(errno));
	return fd;
}

/* The input being read is over: its watch goes first, then its
 * descriptor. */
static void close_input(struct job_source *s)
{
	loop_unwatch(&s->watch);
	loop_timer_cancel(&s->soon);
	s->waiting = false;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

static int open_input(struct job_source *s, struct error *err)
{
	s->line = 0;
	s->at_eof = s->skipping = false;
	s->wait_errno = 0;
	s->scanned = 0;
	s->buf.len = 0;
	s->fd = open_jobs_file(s, s->at, err);
	return s->fd < 0 ? -1 : 0;
}

/* Is the job of this ordinal this shard's? */
static bool in_shard(const struct job_source *s, long long ordinal)
{
	return s->shard_count == 0 || ordinal % s->shard_count == s->shard_index;
}

struct job_source *job_source_open(char *const *files, int count, const struct config *cfg,
		long long shard_index, long long shard_count, bool count_ahead, const int *fds,
		struct error *err)
{
	static char *const standard_input[] = {"-"};
	struct job_source *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	s->files = count ? files : standard_input;
	s->count = count ? count : 1;
	s->fds = fds;
	s->cfg = cfg;
	s->shard_index = shard_index;
	s->shard_count = shard_count;
	s->fd = -1;
	/* Every input is opened once here, so that a missing one is refused
	 * before anything runs; the count of jobs comes from the same look. */
	long long total = count_ahead ? 0 : -1;
	for (int i = 0; i < s->count; i++) {
		const char *name = s->files[i];
		struct stat st;
		if (is_sage_file(name)) {
			total += total >= 0;
			continue;
		}
		int fd = open_jobs_file(s, i, err);
		if (fd < 0) {
			free(s);
			return NULL;
		}
		if (total >= 0) {
			long long lines = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ?
				count_lines(fd) : -1;
			total = lines < 0 ? -1 : total + lines;
		}
		close(fd);
	}
	if (total >= 0 && shard_count > 0)
		total = total > shard_index ? (total - shard_index + shard_count - 1) / shard_count : 0;
	s->total = total;
	s->at = -1;
	return s;
}

/* A job of the input being read, at its line and ordinal; argv0: the
 * name its code goes by. */
static struct job *new_job(struct job_source *s, const char *argv0)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		abort();
	j->source = s->files[s->at];
	j->line = s->line;
	j->ordinal = s->ordinal;
	j->cfg = *s->cfg;
	j->argv = calloc(2, sizeof *j->argv);
	if (!j->argv || !(j->argv[0] = strdup(argv0)))
		abort();
	j->argc = 1;
	return j;
}

void job_where(const char *source, long line, char *buf, size_t size)
{
	const char *name = strcmp(source, "-") ? source : "standard input";
	if (line)
		snprintf(buf, size, "line %ld of %s", line, name);
	else
		snprintf(buf, size, "%s", name);
}

/* A number a job wrote as a string ("timeout": "5"), which would be
 * taken without its quotes (min to max): told to drop them. */
static const char quoted_hint[] = "write it as a JSON number, without quotes";

static bool quoted_number(json_t *value, long min, long max)
{
	const char *text = json_string_value(value);
	size_t len = json_string_length(value);
	if (!text || len == 0 || len > 10 || strspn(text, "0123456789") != len)
		return false;
	long long n = strtoll(text, NULL, 10);
	return n >= min && n <= max;
}

/* Limits a line may lower, never raise. */
static int take_limit(struct job *j, json_t *value, enum setting_id id, const char *key,
		const char *where, char *text, size_t text_size)
{
	long most = j->cfg.number[id];
	if (!json_is_integer(value) || json_integer_value(value) < 1 ||
	    json_integer_value(value) > most) {
		/* Only a number past the batch's is a raise: "5" is a number in
		 * quotes, 5.5 or 0 no limit at all. */
		char range[96];
		snprintf(range, sizeof range, "give a whole number from 1 to %ld%s", most,
			json_is_string(value) ? ", as a JSON number, not a string" : "");
		j->bad = true;
		error_set(&j->err, EXIT_REFUSED, quoted_number(value, 1, most) ? quoted_hint :
			json_is_integer(value) && json_integer_value(value) > most ?
			"a job may lower the batch's limits, never raise them: lower the job's, "
			"or raise the batch's" : range,
			"%s: %s must be an integer from 1 to %ld (the batch's %s)", where, key, most,
			settings[id].flag);
		return -1;
	}
	j->cfg.number[id] = (long)json_integer_value(value);
	snprintf(text, text_size, "%ld", j->cfg.number[id]);
	j->cfg.value[id] = text;
	return 0;
}

static void refuse(struct job *j, const char *where, const char *hint, const char *what)
{
	j->bad = true;
	error_set(&j->err, EXIT_REFUSED, hint, "%s: %s", where, what);
}

/* A job's own seed, over the batch's --seed: any seed or null (fresh random
 * state), as --seed takes them. */
static void take_seed(struct job *j, json_t *value, const char *where)
{
	if (json_is_null(value)) {
		j->cfg.number[SET_SEED] = -1;
		j->cfg.value[SET_SEED] = "none";
		return;
	}
	if (!json_is_integer(value) || json_integer_value(value) < 0 ||
	    json_integer_value(value) > SEED_MAX) {
		refuse(j, where, quoted_number(value, 0, SEED_MAX) ? quoted_hint :
			"give a seed from 0 to 4294967295, or null for fresh random state",
			"seed must be an integer from 0 to 4294967295 or null");
		return;
	}
	j->cfg.number[SET_SEED] = (long)json_integer_value(value);
	snprintf(j->seed_text, sizeof j->seed_text, "%ld", j->cfg.number[SET_SEED]);
	j->cfg.value[SET_SEED] = j->seed_text;
}

/* One line, checked whole: a bad line is a job with its reason. Long: one
 * check per field of a job. */
static void parse_line(struct job *j, const char *line, size_t len)
{
	char where[600], what[700];
	json_error_t jerr;
	job_where(j->source, j->line, where, sizeof where);
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!o) {
		snprintf(what, sizeof what, "not JSON (%s, at column %d)", jerr.text, jerr.column);
		refuse(j, where, line_hint, what);
		return;
	}
	if (!json_is_object(o)) {
		refuse(j, where, line_hint, "not a JSON object");
		json_decref(o);
		return;
	}
	json_t *id = json_object_get(o, "id");
	if (json_is_string(id) || json_is_integer(id)) {
		char *text = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
		if (text && strlen(text) <= JOB_ID_MAX && (!json_is_string(id) || json_string_length(id)))
			snprintf(j->id, sizeof j->id, "%s", text);
		free(text);
	}
	const char *key;
	json_t *value, *code = NULL;
	json_object_foreach(o, key, value) {
		if (j->bad)
			break;
		if (strcmp(key, "id") == 0) {
			if (!j->id[0])
				refuse(j, where, "give each job an id of its own",
					"id must be a non-empty string or an integer, at most 256 characters "
					"as JSON");
		} else if (strcmp(key, "code") == 0) {
			if (!json_is_string(value))
				refuse(j, where, line_hint, "code must be a string of Sage code");
			code = value;
		} else if (strcmp(key, "stdin") == 0) {
			if (!json_is_string(value)) {
				refuse(j, where, line_hint, "stdin must be a string, the code's standard input");
				continue;
			}
			j->input_len = json_string_length(value);
			j->input = malloc(j->input_len + 1);
			if (!j->input)
				abort();
			memcpy(j->input, json_string_value(value), j->input_len);
		} else if (strcmp(key, "args") == 0) {
			size_t n = json_is_array(value) ? json_array_size(value) : 0;
			if (!json_is_array(value) || n > JOB_ARGS_MAX) {
				refuse(j, where, line_hint, "args must be an array of at most 256 strings");
				continue;
			}
			j->argv = realloc(j->argv, (n + 2) * sizeof *j->argv);
			if (!j->argv)
				abort();
			for (size_t i = 0; i < n && !j->bad; i++) {
				json_t *a = json_array_get(value, i);
				if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
					refuse(j, where, line_hint, "args must be strings without NUL bytes");
					break;
				}
				if (!(j->argv[j->argc++] = strdup(json_string_value(a))))
					abort();
			}
			j->argv[j->argc] = NULL;
		} else if (strcmp(key, "files") == 0) {
			struct error err;
			if (infiles_add_json(&j->in, value, &err) < 0) {
				snprintf(what, sizeof what, "files: %s", err.message);
				refuse(j, where, err.hint, what);
			}
		} else if (strcmp(key, "timeout") == 0) {
			take_limit(j, value, SET_TIMEOUT, "timeout", where, j->timeout_text,
				sizeof j->timeout_text);
		} else if (strcmp(key, "output_limit") == 0) {
			take_limit(j, value, SET_OUTPUT_LIMIT, "output_limit", where,
				j->output_limit_text, sizeof j->output_limit_text);
		} else if (strcmp(key, "seed") == 0) {
			take_seed(j, value, where);
		} else {
			snprintf(what, sizeof what, "unknown key '%.100s'", key);
			refuse(j, where, "a job takes id, code, stdin, args, files, timeout, "
				"output_limit and seed", what);
		}
	}
	if (!j->bad && !j->id[0])
		refuse(j, where, "give each job an id of its own: --resume finds jobs by it",
			"the job has no id");
	if (!j->bad && !code)
		refuse(j, where, line_hint, "the job has no code");
	if (!j->bad) {
		j->code_len = json_string_length(code);
		j->code = malloc(j->code_len + 1);
		if (!j->code)
			abort();
		memcpy(j->code, json_string_value(code), j->code_len);
		j->code[j->code_len] = '\0';
		if (sandbox_check_code(j->code, j->code_len, where, &j->err) < 0)
			j->bad = true;
	}
	json_decref(o);
}

/* A .sage file named as an argument: one job, its id the name. */
static struct job *sage_file_job(struct job_source *s)
{
	const char *name = s->files[s->at];
	struct job *j = new_job(s, name);
	struct buffer code = {0};
	json_t *id = json_string(name);
	char *text = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	snprintf(j->id, sizeof j->id, "%s", text && strlen(text) <= JOB_ID_MAX ? text : "");
	free(text);
	json_decref(id);
	if (!j->id[0]) {
		j->bad = true;
		error_set(&j->err, EXIT_REFUSED, "use a shorter path", "%s: the name is longer than "
			"an id may be (%d characters as JSON)", name, JOB_ID_MAX);
	} else if ((s->fds ? read_fd(s->fds[s->at], MAX_CODE_BYTES + 1, &code) :
			read_file(name, MAX_CODE_BYTES + 1, &code)) < 0) {
		j->bad = true;
		error_set(&j->err, EXIT_REFUSED, "name a readable .sage file",
			"cannot read %s: %s", name, strerror(errno));
	} else if (sandbox_check_code(code.data ? code.data : "", code.len, name, &j->err) < 0) {
		j->bad = true;
	} else {
		j->code = code.data ? code.data : strdup("");
		j->code_len = code.len;
		code.data = NULL;
	}
	buffer_free(&code);
	return j;
}

/* Takes the next line of the input being read: 1 with it, 0 when none is
 * whole yet, -1 at the input's end. Long: a line's reading, its bounds
 * and its end-of-input cases. */
static int next_line_of(struct job_source *s, struct job **out)
{
	for (;;) {
		char *nl = s->buf.len > s->scanned ?
			memchr(s->buf.data + s->scanned, '\n', s->buf.len - s->scanned) : NULL;
		if (!nl && s->at_eof && s->buf.len > 0 && !s->skipping)
			nl = s->buf.data + s->buf.len; /* a last line without its newline */
		if (nl) {
			size_t len = (size_t)(nl - s->buf.data);
			bool skipped = s->skipping;
			s->skipping = false;
			s->line++;
			struct job *j = NULL;
			if (!skipped && !blank(s->buf.data, len)) {
				if (in_shard(s, s->ordinal)) {
					j = new_job(s, "-");
					parse_line(j, s->buf.data, len);
				}
				s->ordinal++;
			}
			size_t used = len < s->buf.len ? len + 1 : len;
			memmove(s->buf.data, s->buf.data + used, s->buf.len - used);
			s->buf.len -= used;
			s->scanned = 0;
			if (j) {
				*out = j;
				return 1;
			}
			continue;
		}
		s->scanned = s->buf.len;
		if (s->at_eof)
			return -1;
		if (s->buf.len > JOB_LINE_MAX && !s->skipping) {
			/* Too long to be a job: refused, and the rest of it dropped
			 * as it comes, never held. */
			bool take = in_shard(s, s->ordinal);
			struct job *j = NULL;
			s->skipping = true;
			s->buf.len = s->scanned = 0;
			if (take) {
				char where[600];
				s->line++; /* counted again at its newline */
				j = new_job(s, "-");
				s->line--;
				job_where(j->source, j->line, where, sizeof where);
				refuse(j, where, "give large inputs as files of a smaller job, or "
					"split it", "longer than 16 MiB");
			}
			s->ordinal++;
			if (!take)
				continue;
			*out = j;
			return 1;
		}
		if (s->skipping)
			s->buf.len = s->scanned = 0;
		char chunk[READ_CHUNK];
		ssize_t n = read(s->fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !s->wait_errno)
			return 0;
		if (n < 0) {
			/* A wait that could not watch the input fails it as a
			 * read would: it could never be read on. */
			int e = errno == EAGAIN ? s->wait_errno : errno;
			struct job *j = new_job(s, "-");
			j->bad = true;
			error_set(&j->err, EXIT_REFUSED, "check the input file",
				"reading %s failed after line %ld: %s", j->source, s->line, strerror(e));
			s->at_eof = true;
			s->buf.len = s->scanned = 0;
			*out = j;
			return 1;
		}
		if (n == 0)
			s->at_eof = true;
		else
			buffer_append(&s->buf, chunk, (size_t)n);
	}
}

int job_source_next(struct job_source *s, struct job **out)
{
	for (;;) {
		if (s->at >= 0 && s->fd >= 0) {
			int got = next_line_of(s, out);
			if (got >= 0) {
				if (got == 1)
					(*out)->seq = s->seq++;
				return got;
			}
			close_input(s);
		}
		if (++s->at >= s->count)
			return -1;
		if (is_sage_file(s->files[s->at])) {
			bool take = in_shard(s, s->ordinal);
			if (take)
				*out = sage_file_job(s);
			s->ordinal++;
			if (!take)
				continue;
			(*out)->seq = s->seq++;
			return 1;
		}
		struct error err;
		if (open_input(s, &err) < 0) {
			struct job *j = new_job(s, "-");
			j->bad = true;
			j->err = err;
			*out = j;
			j->seq = s->seq++;
			return 1;
		}
	}
}

static void on_readable(int fd, unsigned events, void *data)
{
	struct job_source *s = data;
	/* Paused until the next wait: a reader that stops reading (the
	 * runner has enough jobs) is not woken on every turn. */
	loop_watch_events(s->watch, 0);
	if (!s->waiting)
		return; /* a hangup told to a paused watch */
	s->waiting = false;
	s->ready(s->ready_data);
}

static void on_cannot_watch(void *data)
{
	struct job_source *s = data;
	s->waiting = false;
	s->ready(s->ready_data);
}

void job_source_wait(struct job_source *s, struct loop *loop, void (*ready)(void *data),
		void *data)
{
	if (!s->scope.loop)
		loop_scope_init(&s->scope, loop, "a batch's input of jobs");
	s->ready = ready;
	s->ready_data = data;
	s->waiting = true;
	if (s->watch) {
		loop_watch_events(s->watch, LOOP_READ);
		return;
	}
	if (s->fd >= 0 && loop_watch(&s->scope, &s->watch, s->fd, LOOP_READ, on_readable, s) == 0)
		return;
	/* Called back anyway, never from inside this call: the next
	 * job_source_next ends the input with why. */
	s->wait_errno = s->fd >= 0 ? errno : EBADF;
	loop_timer_arm(&s->scope, &s->soon, 0, on_cannot_watch, s);
}

long long job_source_total(const struct job_source *s)
{
	return s->total;
}

void job_source_close(struct job_source *s)
{
	if (!s)
		return;
	loop_scope_end(&s->scope);
	close_input(s);
	buffer_free(&s->buf);
	free(s);
}

void job_free(struct job *j)
{
	if (!j)
		return;
	for (int i = 0; i < j->argc; i++)
		free(j->argv[i]);
	free(j->argv);
	free(j->code);
	free(j->input);
	infiles_free(&j->in);
	free(j);
}
