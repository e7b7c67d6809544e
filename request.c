/* request.c: a run's request to the server, as bytes: "SSR1", its kind,
 * then fields, each a tag byte, a 32-bit little-endian length and that
 * many bytes. Strings are raw bytes (arguments and file names need not be
 * UTF-8) without NUL; numbers are little-endian. Decoding trusts nothing
 * (the peer is this user, but fuzz-request feeds it anything): every length
 * is checked against what is left, and every field's count. */
#include "request.h"
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "SSR1"
#define MAGIC_LEN 4

enum tag {
	TAG_BUILD = 1,
	TAG_ENVIRONMENT,
	TAG_UMASK,    /* 4 bytes */
	TAG_STARTED,  /* 8 bytes */
	TAG_SETTING,  /* a byte of id, a byte of source, the value */
	TAG_FILE,
	TAG_ARG,      /* repeated, in order */
	TAG_FLAGS,    /* a byte: FLAG_* */
	TAG_OUTPUT_DIR,
	TAG_INPUT,    /* 8 bytes of size, the name; repeated, in order */
	TAG_BATCH,    /* 8 bytes each of jobs, shard index, shard count; a byte: BATCH_* */
	TAG_RESUME,
	TAG_COUNT
};

enum { FLAG_JSON = 1, FLAG_SHOW_CONTROL_CHARS = 2, FLAG_OUTPUT_OVERWRITE = 4 };
enum { BATCH_INPUT_ORDER = 1, BATCH_PROGRESS = 2 };

size_t request_fd_count(const struct request *req)
{
	if (req->kind == REQUEST_BATCH)
		return 3 + (size_t)req->argc + (req->resume != NULL);
	return 3 + (req->file != NULL) + (req->output_dir != NULL) + req->input_count;
}

int64_t request_started_at(const struct request *req, int64_t now)
{
	return req->started_at < now ? req->started_at : now;
}

static void put_le(struct buffer *out, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++) {
		char b = (char)(v >> (8 * i));
		buffer_append(out, &b, 1);
	}
}

static void put_field(struct buffer *out, enum tag tag, const void *head, size_t head_len,
		const char *text)
{
	size_t text_len = text ? strlen(text) : 0;
	char t = (char)tag;
	buffer_append(out, &t, 1);
	put_le(out, head_len + text_len, 4);
	if (head_len)
		buffer_append(out, head, head_len);
	if (text_len)
		buffer_append(out, text, text_len);
}

void request_encode(const struct request *req, struct buffer *out)
{
	char kind = (char)req->kind;
	buffer_append(out, MAGIC, MAGIC_LEN);
	buffer_append(out, &kind, 1);
	if (req->kind != REQUEST_RUN && req->kind != REQUEST_BATCH)
		return;
	char number[8];
	put_field(out, TAG_BUILD, NULL, 0, req->build);
	put_field(out, TAG_ENVIRONMENT, NULL, 0, req->environment);
	for (int i = 0; i < 4; i++)
		number[i] = (char)(req->umask >> (8 * i));
	put_field(out, TAG_UMASK, number, 4, NULL);
	for (int i = 0; i < 8; i++)
		number[i] = (char)((uint64_t)req->started_at >> (8 * i));
	put_field(out, TAG_STARTED, number, 8, NULL);
	for (int id = 0; id < SETTING_COUNT; id++) {
		char head[2] = {(char)id, (char)req->source[id]};
		put_field(out, TAG_SETTING, head, 2, req->value[id]);
	}
	if (req->file)
		put_field(out, TAG_FILE, NULL, 0, req->file);
	for (int i = 0; i < req->argc; i++)
		put_field(out, TAG_ARG, NULL, 0, req->args[i]);
	char flags = (char)((req->json ? FLAG_JSON : 0) |
		(req->show_control_chars ? FLAG_SHOW_CONTROL_CHARS : 0) |
		(req->output_overwrite ? FLAG_OUTPUT_OVERWRITE : 0));
	put_field(out, TAG_FLAGS, &flags, 1, NULL);
	if (req->output_dir)
		put_field(out, TAG_OUTPUT_DIR, NULL, 0, req->output_dir);
	for (size_t i = 0; i < req->input_count; i++) {
		for (int b = 0; b < 8; b++)
			number[b] = (char)(req->inputs[i].size >> (8 * b));
		put_field(out, TAG_INPUT, number, 8, req->inputs[i].name);
	}
	if (req->kind != REQUEST_BATCH)
		return;
	char head[25];
	uint64_t numbers[3] = {(uint64_t)req->jobs, (uint64_t)req->shard_index,
		(uint64_t)req->shard_count};
	for (int n = 0; n < 3; n++)
		for (int b = 0; b < 8; b++)
			head[8 * n + b] = (char)(numbers[n] >> (8 * b));
	head[24] = (char)((req->input_order ? BATCH_INPUT_ORDER : 0) |
		(req->progress ? BATCH_PROGRESS : 0));
	put_field(out, TAG_BATCH, head, sizeof head, NULL);
	if (req->resume)
		put_field(out, TAG_RESUME, NULL, 0, req->resume);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A string field's bytes as a NUL-ended string in req's storage; NULL
 * when they hold a NUL. The storage was sized for the whole message. */
static const char *take_string(struct request *req, const char *bytes, size_t len)
{
	if (memchr(bytes, '\0', len))
		return NULL;
	char *s = req->storage + req->storage_used;
	memcpy(s, bytes, len);
	s[len] = '\0';
	req->storage_used += len + 1;
	return s;
}

#define FAIL(...) do { snprintf(why, why_size, __VA_ARGS__); request_free(req); return -1; } while (0)

/* Long: one case per field, each checked in place; a table of parsers
 * would hide the checks that make it safe. */
int request_decode(const char *msg, size_t len, struct request *req, char *why, size_t why_size)
{
	*req = (struct request){0};
	if (len < MAGIC_LEN + 1 || memcmp(msg, MAGIC, MAGIC_LEN) != 0)
		FAIL("not a sage-sandbox request");
	if (len > REQUEST_MAX_BYTES)
		FAIL("a request of %zu bytes, more than %d", len, REQUEST_MAX_BYTES);
	req->kind = (enum request_kind)msg[MAGIC_LEN];
	if (req->kind != REQUEST_RUN && req->kind != REQUEST_BATCH) {
		if ((req->kind != REQUEST_STATUS && req->kind != REQUEST_STOP) || len != MAGIC_LEN + 1)
			FAIL("an unknown request");
		return 0;
	}
	/* Every string is shorter than its field, plus its NUL: a field is at
	 * least 5 bytes, so the message's length twice is room enough. */
	req->storage_size = 2 * len;
	req->storage = malloc(req->storage_size);
	size_t args_room = 16, inputs_room = 4;
	req->args = malloc(args_room * sizeof *req->args);
	req->inputs = malloc(inputs_room * sizeof *req->inputs);
	if (!req->storage || !req->args || !req->inputs)
		abort();
	int seen[TAG_COUNT] = {0};
	bool setting_seen[SETTING_COUNT] = {0};
	const unsigned char *p = (const unsigned char *)msg + MAGIC_LEN + 1;
	const unsigned char *end = (const unsigned char *)msg + len;
	while (p < end) {
		if (end - p < 5)
			FAIL("a field cut short");
		enum tag tag = (enum tag)p[0];
		uint64_t field_len = get_le(p + 1, 4);
		p += 5;
		if (field_len > (uint64_t)(end - p))
			FAIL("a field longer than the request");
		const char *field = (const char *)p;
		p += field_len;
		if (tag < TAG_BUILD || tag >= TAG_COUNT)
			FAIL("a field of unknown tag %d", (int)tag);
		bool repeats = tag == TAG_SETTING || tag == TAG_ARG || tag == TAG_INPUT;
		if (seen[tag]++ && !repeats)
			FAIL("field %d given twice", (int)tag);
		const char *text;
		switch (tag) {
		case TAG_BUILD:
			if (field_len > BUILD_ID_MAX || !(text = take_string(req, field, field_len)))
				FAIL("a malformed build");
			memcpy(req->build, text, field_len + 1);
			break;
		case TAG_ENVIRONMENT:
			if (field_len >= sizeof req->environment ||
			    !(text = take_string(req, field, field_len)))
				FAIL("a malformed environment");
			memcpy(req->environment, text, field_len + 1);
			break;
		case TAG_UMASK:
			if (field_len != 4 || get_le((const unsigned char *)field, 4) > 0777)
				FAIL("a malformed umask");
			req->umask = (unsigned)get_le((const unsigned char *)field, 4);
			break;
		case TAG_STARTED:
			if (field_len != 8 || get_le((const unsigned char *)field, 8) > INT64_MAX)
				FAIL("a malformed start time");
			req->started_at = (int64_t)get_le((const unsigned char *)field, 8);
			break;
		case TAG_SETTING: {
			if (field_len < 2)
				FAIL("a malformed setting");
			int id = (unsigned char)field[0], source = (unsigned char)field[1];
			if (id >= SETTING_COUNT || setting_seen[id] || source > FROM_FLAG)
				FAIL("a setting of id %d, source %d, or twice", id, source);
			setting_seen[id] = true;
			if (!(req->value[id] = take_string(req, field + 2, field_len - 2)))
				FAIL("a setting with a NUL byte");
			req->source[id] = (enum setting_source)source;
			break;
		}
		case TAG_FILE:
			if (!(req->file = take_string(req, field, field_len)) || !field_len)
				FAIL("a malformed file name");
			break;
		case TAG_ARG:
			if (req->argc >= REQUEST_MAX_ARGS)
				FAIL("more than %d arguments", REQUEST_MAX_ARGS);
			if ((size_t)req->argc == args_room) {
				args_room *= 2;
				req->args = realloc(req->args, args_room * sizeof *req->args);
				if (!req->args)
					abort();
			}
			if (!(req->args[req->argc++] = take_string(req, field, field_len)))
				FAIL("an argument with a NUL byte");
			break;
		case TAG_FLAGS:
			if (field_len != 1 || ((unsigned char)field[0] & ~7u))
				FAIL("malformed flags");
			req->json = field[0] & FLAG_JSON;
			req->show_control_chars = field[0] & FLAG_SHOW_CONTROL_CHARS;
			req->output_overwrite = field[0] & FLAG_OUTPUT_OVERWRITE;
			break;
		case TAG_OUTPUT_DIR:
			if (!(req->output_dir = take_string(req, field, field_len)) || !field_len)
				FAIL("a malformed output directory");
			break;
		case TAG_INPUT:
			if (req->input_count >= INFILES_MAX_FILES || field_len < 9)
				FAIL("more than %d inputs, or one malformed", INFILES_MAX_FILES);
			if (req->input_count == inputs_room) {
				inputs_room *= 2;
				req->inputs = realloc(req->inputs, inputs_room * sizeof *req->inputs);
				if (!req->inputs)
					abort();
			}
			req->inputs[req->input_count].size = get_le((const unsigned char *)field, 8);
			if (!(req->inputs[req->input_count].name =
					take_string(req, field + 8, field_len - 8)))
				FAIL("an input name with a NUL byte");
			req->input_count++;
			break;
		case TAG_BATCH: {
			if (field_len != 25 || ((unsigned char)field[24] & ~3u))
				FAIL("a malformed batch");
			const unsigned char *u = (const unsigned char *)field;
			uint64_t jobs = get_le(u, 8), index = get_le(u + 8, 8), count = get_le(u + 16, 8);
			/* The client checked them; bounds keep the server's arithmetic safe. */
			if (!jobs || jobs > BATCH_MAX_JOBS || count > INT64_MAX / 2 ||
			    (count && index >= count) ||
			    (!count && index))
				FAIL("a batch's --jobs or --shard out of bounds");
			req->jobs = (long)jobs;
			req->shard_index = (long long)index;
			req->shard_count = (long long)count;
			req->input_order = field[24] & BATCH_INPUT_ORDER;
			req->progress = field[24] & BATCH_PROGRESS;
			break;
		}
		case TAG_RESUME:
			if (!(req->resume = take_string(req, field, field_len)) || !field_len)
				FAIL("a malformed --resume");
			break;
		default:
			FAIL("a field of unknown tag %d", (int)tag);
		}
	}
	for (int id = 0; id < SETTING_COUNT; id++)
		if (!setting_seen[id])
			FAIL("setting %s missing", settings[id].flag);
	if (!seen[TAG_BUILD] || !seen[TAG_ENVIRONMENT] || !seen[TAG_UMASK] || !seen[TAG_STARTED] ||
	    !seen[TAG_FLAGS])
		FAIL("a run without its build, environment, umask, start or flags");
	bool batch = req->kind == REQUEST_BATCH;
	if (batch != (bool)seen[TAG_BATCH] || (!batch && seen[TAG_RESUME]) ||
	    (batch && (seen[TAG_FILE] || seen[TAG_OUTPUT_DIR] || seen[TAG_INPUT])))
		FAIL("a field of a run in a batch, or of a batch in a run");
	if (batch && (size_t)req->argc > REQUEST_MAX_BATCH_FILES)
		FAIL("a batch of more than %d files", REQUEST_MAX_BATCH_FILES);
	return 0;
}

void request_free(struct request *req)
{
	free(req->storage);
	free(req->args);
	free(req->inputs);
	*req = (struct request){0};
}
