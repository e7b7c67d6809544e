/* mcp.c: `sage-sandbox mcp`: JSON-RPC 2.0 on stdio, one message a line,
 * parsed with jansson; the MCP methods; the three tools; calls served at
 * once up to --concurrency, the rest waiting in order; cancellation,
 * progress, and a shutdown that leaves no container behind.
 *
 * Everything is on one loop: the request reader, the answer queue, the
 * warm pool and every call's sandbox. Nothing a client sends ends the
 * server: each bad message gets the JSON-RPC error the specification gives
 * it, and the next line is read. */
#include "mcp.h"
#include "base64.h"
#include "embedded.h"
#include "json.h"
#include "pool.h"
#include "process.h"
#include "result.h"
#include "rootless.h"
#include "selftest.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* The longest message read: code is at most 50000 bytes, at most 6 bytes
 * each once escaped, so this is far beyond any valid call. A longer line is
 * discarded as it streams in, never held whole, and answered. */
#define MAX_MESSAGE_BYTES (4u << 20)
/* Answers waiting for a client that does not read them: past this, no more
 * requests are read until it catches up. */
#define OUT_PAUSE_BYTES (8u << 20)
#define PROGRESS_INTERVAL_MS 1000
/* Of the output so far, what a progress message shows. */
#define PROGRESS_TAIL_BYTES 400
/* From a shutdown's start to the exit, whatever is still pending. */
#define SHUTDOWN_LIMIT_MS 15000
#define STATUS_TIMEOUT_MS 60000
#define HOST_CHECK_TIMEOUT_MS 30000
/* Calls waiting for their turn: past this a call is refused, so that a
 * client cannot make the server hold an unbounded queue. Each holds at most
 * MAX_CODE_BYTES of code (longer code is refused as it arrives). */
#define MAX_WAITING_CALLS 64
/* An image file is sent back as image content up to this size, and while
 * the whole answer stays under ANSWER_BUDGET_BYTES: the official SDK's
 * stdio clients drop a message past 10 MiB. */
#define IMAGE_MAX_BYTES (2u << 20)
#define ANSWER_BUDGET_BYTES (9u << 20)
/* _meta keys a client (never a model) may set on tools/call: keep the
 * files the code saves in this existing directory, replacing same-named
 * ones or not. Without it they go to a private directory removed after
 * the answer, and only images come back. */
#define META_OUTPUT_DIR "sage-sandbox/output-dir"
#define META_OUTPUT_OVERWRITE "sage-sandbox/output-overwrite"

/* JSON-RPC's error codes. */
enum { PARSE_ERROR = -32700, INVALID_REQUEST = -32600, METHOD_NOT_FOUND = -32601,
	INVALID_PARAMS = -32602, INTERNAL_ERROR = -32603 };

/* Newest first: a client's version we support is echoed, any other gets
 * the newest. */
static const char *const protocol_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

static const char server_instructions[] =
	"run_sagemath runs SageMath code in a fresh, isolated sandbox for each call and "
	"returns what it printed; print every value you want to see. Nothing persists "
	"between calls, unless they name the same session: then they run in one Sage, one "
	"after another, and its variables and files stay until sage_sandbox_end_session or "
	"its idle end. sage_sandbox_status and sage_sandbox_self_test diagnose the sandbox.";

enum tool { TOOL_RUN, TOOL_SELF_TEST, TOOL_STATUS, TOOL_END_SESSION, TOOL_COUNT };
static const char *const tool_names[TOOL_COUNT] = {"run_sagemath", "sage_sandbox_self_test",
	"sage_sandbox_status", "sage_sandbox_end_session"};

#define SESSION_NAME_MAX 64

struct server;

struct call {
	struct server *srv;
	json_t *id;
	json_t *progress_token; /* or NULL */
	enum tool tool;
	char *code;
	size_t code_len;
	struct buffer self_test_code;
	struct config cfg;      /* the server's, with this call's timeout */
	char timeout_text[16];
	struct sandbox *sb;
	bool warm;
	bool started, answered, cancelled, capturing;
	int64_t started_at;
	struct loop_timer *progress_timer;
	struct argv_builder status_args;
	struct infiles in;      /* arguments.files */
	struct outfiles out;    /* $SAGE_SANDBOX_OUT's files, once it ran */
	bool out_open;
	char *out_dir;          /* the client's directory, or NULL */
	bool out_overwrite;
	char *temp_dir;         /* else a private one, removed with the call */
	char session_name[SESSION_NAME_MAX + 1]; /* arguments.session, or "" */
	struct session *session; /* the one it runs in, once started */
	struct call *next;
};

/* A session: one sandbox whose Sage runs its calls one after another
 * (sandbox_options.session), ended by sage_sandbox_end_session, its idle
 * timer, the server's end, or a call that loses its state. */
struct session {
	struct server *srv;
	char name[SESSION_NAME_MAX + 1];
	struct sandbox *sb;
	long calls;             /* served, the running one included */
	struct call *busy;      /* the call running in it, or NULL */
	struct loop_timer *idle_timer;
	bool ending;            /* no more calls: gone once its sandbox is */
	struct session *next;
};

struct server {
	struct loop *loop;
	const struct config *cfg;
	const char *self;
	char *podman;
	struct podman_host host;
	struct sage_image image; /* once known, with the pool */
	bool host_known;        /* the rootless check answered */
	bool image_checking;    /* image.c is asked; calls that need a sandbox wait */
	bool refused;           /* no sandbox can run here: refusal says why */
	struct error refusal;
	struct pool *pool;
	struct queue *out;
	int in_fd;
	struct loop_watch *in_watch;
	struct buffer line;
	bool discarding;        /* of a line past MAX_MESSAGE_BYTES */
	int signal_fd;
	struct loop_watch *signal_watch;
	int signals_seen;
	struct call *calls;     /* waiting and running, in the order they came */
	struct session *sessions; /* open and ending */
	int running;
	json_t *tools;
	bool stopping, pool_drained;
	bool pumping, pump_again;
	struct loop_timer *shutdown_timer;
};

static void pump(struct server *s);
static void maybe_quit(struct server *s);
static void shut_down(struct server *s, const char *why);

/* ---- sending ------------------------------------------------------------ */

/* Text from the code, valid UTF-8 for the wire: each invalid byte becomes
 * U+FFFD, as in `run --json`. */
static json_t *text_value(const char *bytes, size_t len)
{
	struct buffer clean = {0};
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence_length((const unsigned char *)bytes + i, len - i);
		if (n == 0) {
			buffer_append(&clean, "\xef\xbf\xbd", 3);
			i++;
		} else {
			buffer_append(&clean, bytes + i, n);
			i += n;
		}
	}
	json_t *v = json_stringn(clean.data ? clean.data : "", clean.len);
	buffer_free(&clean);
	return v ? v : json_string("");
}

/* Every message the server writes goes out here: one line, U+2028 and
 * U+2029 escaped for JavaScript clients (json.h). */
static void send_message(struct server *s, json_t *msg)
{
	char *text = json_escape_separators(json_dumps(msg, JSON_COMPACT));
	json_decref(msg);
	if (!text)
		abort(); /* only valid JSON values are ever built */
	if (s->out && !queue_closed(s->out)) {
		queue_put_all(s->out, text, strlen(text));
		queue_put_all(s->out, "\n", 1);
		if (queue_pending(s->out) > OUT_PAUSE_BYTES && s->in_watch)
			loop_watch_events(s->in_watch, 0);
	}
	free(text);
}

static void send_result(struct server *s, json_t *id, json_t *result)
{
	send_message(s, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
		result));
}

static void send_error(struct server *s, json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void send_error(struct server *s, json_t *id, int code, const char *fmt, ...)
{
	char message[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	send_message(s, json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0", "id",
		id ? id : json_null(), "error", "code", code, "message",
		text_value(message, strlen(message))));
}

/* ---- calls -------------------------------------------------------------- */

static void free_call(struct call *c)
{
	struct server *s = c->srv;
	for (struct call **at = &s->calls; *at; at = &(*at)->next)
		if (*at == c) {
			*at = c->next;
			break;
		}
	loop_timer_cancel(c->progress_timer);
	if (c->out_open)
		outfiles_close(&c->out);
	if (c->temp_dir) {
		outfiles_remove_dir(c->temp_dir);
		free(c->temp_dir);
	}
	free(c->out_dir);
	infiles_free(&c->in);
	json_decref(c->id);
	json_decref(c->progress_token);
	free(c->code);
	buffer_free(&c->self_test_code);
	args_free(&c->status_args);
	free(c);
	maybe_quit(s);
}

/* The end of a call: its answer (unless cancelled), and room for the next. */
static void answer(struct call *c, json_t *content_text, json_t *structured, bool is_error,
		json_t *more_content)
{
	struct server *s = c->srv;
	loop_timer_cancel(c->progress_timer);
	c->progress_timer = NULL;
	c->answered = true;
	if (c->started)
		s->running--;
	if (!c->cancelled) {
		json_t *result = json_pack("{s:[{s:s, s:o}], s:o, s:b}", "content", "type", "text",
			"text", content_text, "structuredContent", structured, "isError", is_error);
		if (more_content)
			json_array_extend(json_object_get(result, "content"), more_content);
		if (c->tool == TOOL_RUN)
			json_object_set_new(result, "_meta", json_pack("{s:b}", "warm", c->warm));
		send_result(s, c->id, result);
	} else {
		json_decref(content_text);
		json_decref(structured);
	}
	json_decref(more_content);
	pump(s);
}

static json_t *parsed(const char *text, size_t len)
{
	json_t *v = json_loadb(text, len, 0, NULL);
	return v ? v : json_object();
}

/* Nothing ran: the refusal's object, and its sentence for the model. */
static void answer_refusal(struct call *c, const struct error *err)
{
	struct printed p = {.err = err, .cfg = &c->cfg};
	size_t len;
	char *text = print_to_memory(print_error_object, &p, &len);
	char sentence[1200];
	snprintf(sentence, sizeof sentence, "sage-sandbox did not run the code: %s%s%s",
		err->message, err->hint[0] ? "; " : "", err->hint);
	answer(c, text_value(sentence, strlen(sentence)), parsed(text, len), true, NULL);
	free(text);
}

/* stdout, then stderr if any, then the line that says why the run was
 * stopped; all from the same object as structuredContent. */
static json_t *run_text(const struct printed *p, json_t *object)
{
	const char *out = json_string_value(json_object_get(object, "stdout"));
	const char *err = json_string_value(json_object_get(object, "stderr"));
	struct buffer text = {0};
	size_t len;
	out = out ? out : "";
	err = err ? err : "";
	buffer_append(&text, out, strlen(out));
	if (*err) {
		if (text.len && text.data[text.len - 1] != '\n')
			buffer_append(&text, "\n", 1);
		buffer_append(&text, err, strlen(err));
	}
	char *stop = print_to_memory(print_stop_line, p, &len);
	if (len && text.len && text.data[text.len - 1] != '\n')
		buffer_append(&text, "\n", 1);
	buffer_append(&text, stop, len);
	free(stop);
	if (text.len == 0) {
		static const char nothing[] = "(the code printed nothing: only printed output "
			"comes back; end with print(...))";
		buffer_append(&text, nothing, sizeof nothing - 1);
	}
	json_t *v = text_value(text.data, text.len);
	buffer_free(&text);
	return v;
}

bool mcp_image_fits(const struct sniffed *k, struct not_shown *r)
{
	if (!k->is_image || strcmp(k->media_type, "image/svg+xml") == 0)
		return true;
	if (!k->width || !k->height) {
		snprintf(r->why, sizeof r->why, "its header gives no pixel size, so it could be "
			"any size once decoded");
		r->fix = "save it as PNG to see it";
		return false;
	}
	/* Each is 32 bits at most (PNG's): the product fits 64. */
	if ((unsigned long long)k->width * k->height > MCP_IMAGE_MAX_PIXELS) {
		snprintf(r->why, sizeof r->why, "%ux%u pixels, more than the %llu megapixels an "
			"answer shows", k->width, k->height, MCP_IMAGE_MAX_PIXELS / 1000000);
		r->fix = "save it smaller to see it";
		return false;
	}
	return true;
}

/* An image the code saved, as MCP image content; NULL when it is not one
 * MCP shows, is too large, or cannot be read back. When its pixel size
 * is what keeps it out, *r says so (else r->why is ""). */
static json_t *image_content(struct call *c, const struct outfile *f, size_t *size,
		struct not_shown *r)
{
	static const char *const shown[] = {"image/png", "image/jpeg", "image/gif", "image/webp",
		"image/svg+xml", NULL};
	const char *const *type = shown;
	r->why[0] = '\0';
	while (*type && strcmp(*type, f->kind.media_type) != 0)
		type++;
	if (!*type || f->size > IMAGE_MAX_BYTES)
		return NULL;
	/* Read back from the directory it was received into, by the same
	 * descriptor, never following a link; the size checked again. */
	int fd = openat(c->out.dirfd, f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	struct buffer bytes = {0}, encoded = {0};
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size ||
	    read_fd(fd, IMAGE_MAX_BYTES, &bytes) < 0 || bytes.len != f->size) {
		if (fd >= 0)
			close(fd);
		buffer_free(&bytes);
		return NULL;
	}
	close(fd);
	/* The pixel size is read from the bytes that would be sent, the
	 * whole file: a JPEG's frame header may lie past the head that the
	 * listing sniffed. Another type now is not the file that was listed. */
	struct sniffed whole;
	sniff((const unsigned char *)bytes.data, bytes.len, true, &whole);
	if (strcmp(whole.media_type, *type) != 0 || !mcp_image_fits(&whole, r)) {
		buffer_free(&bytes);
		return NULL;
	}
	base64_encode((const unsigned char *)bytes.data, bytes.len, &encoded);
	buffer_free(&bytes);
	*size = encoded.len;
	json_t *v = json_pack("{s:s, s:s%, s:s}", "type", "image", "data", encoded.data, encoded.len,
		"mimeType", *type);
	buffer_free(&encoded);
	return v;
}

/* What came back from $SAGE_SANDBOX_OUT: one text item naming every file
 * (hosts that do not pass images on to the model still tell it what there
 * is), then the images, while the answer stays within its budget. */
static json_t *file_content(struct call *c, json_t *object)
{
	const struct outfiles *o = &c->out;
	if (!c->out_open || (o->count == 0 && o->dropped_count == 0))
		return NULL;
	json_t *items = json_array();
	struct buffer text = {0};
	char line[2048], about[128], reason[320];
	char *dumped = json_dumps(object, JSON_COMPACT);
	size_t used = (dumped ? strlen(dumped) : 0) * 2 + 4096;
	free(dumped);
	static const char intro[] = "Files the code saved in SAGE_SANDBOX_OUT:\n";
	buffer_append(&text, intro, sizeof intro - 1);
	for (size_t i = 0; i < o->count; i++) {
		const struct outfile *f = &o->files[i];
		size_t size = 0;
		struct not_shown ns = {.why = ""};
		json_t *image = used < ANSWER_BUDGET_BYTES ? image_content(c, f, &size, &ns) : NULL;
		if (image && used + size > ANSWER_BUDGET_BYTES) {
			json_decref(image);
			image = NULL;
		}
		describe_file(f, about, sizeof about);
		if (ns.why[0])
			snprintf(reason, sizeof reason, "; not shown: %s; %s", ns.why, c->out_dir ?
				"open it from the output directory" : ns.fix);
		const char *where = image ? "; the image follows" : ns.why[0] ? reason :
			c->out_dir ? "" :
			f->kind.is_image ? "; not shown: larger than the image cap or the answer's budget" :
			"; not kept: this server returns images only";
		if (c->out_dir)
			snprintf(line, sizeof line, "- %s (%s), saved as %s/%s%s\n", f->name, about,
				c->out_dir, f->name, where);
		else
			snprintf(line, sizeof line, "- %s (%s)%s\n", f->name, about, where);
		buffer_append(&text, line, strlen(line));
		if (image) {
			json_array_append_new(items, image);
			used += size;
		}
	}
	for (size_t i = 0; i < o->dropped_count && i < OUTFILES_DROPPED_LISTED; i++) {
		snprintf(line, sizeof line, "- not saved: %s: %s\n", o->dropped[i].name,
			o->dropped[i].reason);
		buffer_append(&text, line, strlen(line));
	}
	if (o->dropped_count > OUTFILES_DROPPED_LISTED) {
		snprintf(line, sizeof line, "- not saved: %zu more\n",
			o->dropped_count - OUTFILES_DROPPED_LISTED);
		buffer_append(&text, line, strlen(line));
	}
	json_array_insert_new(items, 0, json_pack("{s:s, s:o}", "type", "text", "text",
		text_value(text.data, text.len)));
	buffer_free(&text);
	return items;
}

/* A session's call: its name, calls and whether its Sage lives on, in
 * the object and, when it does not, in the text the model reads. */
static void add_session(struct call *c, const struct run_result *r, json_t *object,
		json_t **content)
{
	const struct session *x = c->session;
	json_object_set_new(object, "session", json_pack("{s:s, s:I, s:b, s:b}", "name", x->name,
		"calls", (json_int_t)x->calls, "state_kept", r->after == AFTER_KEPT, "interrupted",
		r->after == AFTER_KEPT && r->cell_interrupted));
	if (r->after == AFTER_KEPT)
		return;
	char note[256];
	snprintf(note, sizeof note, "%s(session %s ended with this call, its %ld%s: its state is "
		"lost; the next call that names it starts a new, empty session)",
		json_string_length(*content) ? "\n" : "", x->name, x->calls,
		x->calls % 10 == 1 && x->calls % 100 != 11 ? "st" :
		x->calls % 10 == 2 && x->calls % 100 != 12 ? "nd" :
		x->calls % 10 == 3 && x->calls % 100 != 13 ? "rd" : "th");
	struct buffer text = {0};
	buffer_append(&text, json_string_value(*content), json_string_length(*content));
	buffer_append(&text, note, strlen(note));
	json_decref(*content);
	*content = json_stringn(text.data, text.len);
	buffer_free(&text);
}

static void answer_sandbox(struct call *c)
{
	struct run_result *r = sandbox_result(c->sb);
	size_t len;
	if (r->failed) {
		answer_refusal(c, &r->failure);
		return;
	}
	if (c->tool == TOOL_RUN) {
		struct printed p = {.result = r, .cfg = &c->cfg};
		char *text = print_to_memory(print_run_object, &p, &len);
		json_t *object = parsed(text, len);
		free(text);
		json_t *content = run_text(&p, object);
		if (c->session)
			add_session(c, r, object, &content);
		answer(c, content, object, r->exit_code != 0, file_content(c, object));
		return;
	}
	struct self_test t;
	self_test_parse(r->out.data ? r->out.data : "", r->exit_code, &t);
	int status = r->interrupted_by ? r->exit_code : t.failed ? 1 : 0;
	struct printed_self_test p = {&t, r, &c->cfg, true, status};
	char *object = print_to_memory(print_self_test, &p, &len);
	json_t *structured = parsed(object, len);
	free(object);
	p.json = false;
	char *table = print_to_memory(print_self_test, &p, &len);
	answer(c, text_value(table, len), structured, status != 0, NULL);
	free(table);
}

static void on_call_done(struct sandbox *sb, void *data)
{
	struct call *c = data;
	struct server *s = c->srv;
	answer_sandbox(c);
	/* The answer leaves before the warm sandbox that replaces this one
	 * starts: a fork and exec of podman cost milliseconds. */
	if (s->out)
		queue_flush_now(s->out);
	pool_call_ended(s->pool);
}

static void on_call_released(struct sandbox *sb, void *data)
{
	struct call *c = data;
	sandbox_free(sb);
	c->sb = NULL;
	free_call(c);
}

/* ---- sessions -------------------------------------------------------------- */

static struct session *find_session(struct server *s, const char *name)
{
	for (struct session *x = s->sessions; x; x = x->next)
		if (!x->ending && strcmp(x->name, name) == 0)
			return x;
	return NULL;
}

static int open_sessions(const struct server *s)
{
	int n = 0;
	for (const struct session *x = s->sessions; x; x = x->next)
		n += !x->ending;
	return n;
}

/* Stops its sandbox: a running call is answered as stopped, and the
 * session is freed once the container is removed. */
static void end_session(struct session *x)
{
	x->ending = true;
	loop_timer_cancel(x->idle_timer);
	x->idle_timer = NULL;
	sandbox_stop(x->sb, STOP_SIGNAL, SIGTERM);
}

static void on_session_idle(struct loop_timer *t, void *data)
{
	struct session *x = data;
	x->idle_timer = NULL;
	fprintf(stderr, "sage-sandbox mcp: session %s ended after %ld s without a call\n", x->name,
		x->srv->cfg->number[SET_SESSION_IDLE]);
	end_session(x);
}

static void on_session_released(struct sandbox *sb, void *data)
{
	struct session *x = data;
	struct server *s = x->srv;
	for (struct session **at = &s->sessions; *at; at = &(*at)->next)
		if (*at == x) {
			*at = x->next;
			break;
		}
	loop_timer_cancel(x->idle_timer);
	sandbox_free(sb);
	free(x);
	maybe_quit(s);
	pump(s);
}

static void on_session_call_done(struct sandbox *sb, void *data)
{
	struct session *x = data;
	struct server *s = x->srv;
	struct call *c = x->busy;
	x->busy = NULL;
	if (sandbox_result(sb)->after != AFTER_KEPT)
		x->ending = true;
	else if (!x->ending)
		x->idle_timer = loop_timer(s->loop, loop_now_ms() +
			s->cfg->number[SET_SESSION_IDLE] * 1000ll, on_session_idle, x);
	answer_sandbox(c);
	c->sb = NULL;
	free_call(c);
	pump(s); /* the session's next call, if one waits */
}

/* The call's session: its own, or one started for it. NULL with err set
 * when there is no room for one more. */
static struct session *call_session(struct call *c, int64_t deadline, struct error *err)
{
	struct server *s = c->srv;
	struct session *x = find_session(s, c->session_name);
	if (x)
		return x;
	long most = s->cfg->number[SET_SESSIONS];
	if (open_sessions(s) >= most) {
		error_set(err, EXIT_REFUSED, most ? "end one with sage_sandbox_end_session, or run "
				"without session" : "run without session, or start the server with "
				"--sessions N",
			"%ld session%s open, this server's most (--sessions %ld); session %s was not "
			"started", most, most == 1 ? " is" : "s are", most, c->session_name);
		return NULL;
	}
	x = calloc(1, sizeof *x);
	if (!x)
		abort();
	x->srv = s;
	snprintf(x->name, sizeof x->name, "%s", c->session_name);
	/* A session's sandbox is started for it: a warm one's container was
	 * made for one call (its CPU rlimit, its backstop). */
	struct sandbox_options so = {.cfg = s->cfg, .host = &s->host, .image = &s->image,
		.podman = s->podman, .deadline = deadline, .session = true,
		.cb = {.keep_output = true, .on_done = on_session_call_done,
			.on_released = on_session_released, .data = x}};
	x->sb = sandbox_start(s->loop, &so, err);
	if (!x->sb) {
		free(x);
		return NULL;
	}
	x->next = s->sessions;
	s->sessions = x;
	return x;
}

/* ---- progress ------------------------------------------------------------- */

static void on_progress(struct loop_timer *t, void *data)
{
	struct call *c = data;
	struct server *s = c->srv;
	char message[128];
	int64_t elapsed = loop_now_ms() - c->started_at;
	c->progress_timer = loop_timer(s->loop, loop_now_ms() + PROGRESS_INTERVAL_MS, on_progress,
		c);
	snprintf(message, sizeof message, "running for %lld s", (long long)(elapsed / 1000));
	struct buffer text = {0};
	buffer_append(&text, message, strlen(message));
	const struct run_result *r = c->sb ? sandbox_result(c->sb) : NULL;
	if (r && r->out.len) {
		/* The last lines printed, whole where they fit. */
		size_t from = r->out.len > PROGRESS_TAIL_BYTES ? r->out.len - PROGRESS_TAIL_BYTES : 0;
		const char *nl = from ? memchr(r->out.data + from, '\n', r->out.len - from) : NULL;
		if (nl && nl + 1 < r->out.data + r->out.len)
			from = (size_t)(nl + 1 - r->out.data);
		static const char intro[] = "; output so far ends with:\n";
		buffer_append(&text, intro, sizeof intro - 1);
		buffer_append(&text, r->out.data + from, r->out.len - from);
	}
	send_message(s, json_pack("{s:s, s:s, s:{s:O, s:f, s:o}}", "jsonrpc", "2.0", "method",
		"notifications/progress", "params", "progressToken", c->progress_token, "progress",
		elapsed / 1000.0, "message", text_value(text.data, text.len)));
	buffer_free(&text);
}

/* ---- the tools -------------------------------------------------------------- */

static void on_status_done(struct capture *cap, void *data)
{
	struct call *c = data;
	json_t *object = json_loadb(cap->out.data ? cap->out.data : "", cap->out.len, 0, NULL);
	c->capturing = false;
	if (!json_is_object(object)) {
		struct error err;
		json_decref(object);
		error_set(&err, EXIT_REFUSED, "run 'sage-sandbox status' in a terminal",
			"sage-sandbox status %s", cap->timed_out ? "did not finish in time" :
			"printed no JSON object");
		answer_refusal(c, &err);
	} else {
		char *text = json_dumps(object, JSON_INDENT(2));
		answer(c, json_string(text), object, false, NULL);
		free(text);
	}
	capture_free(cap);
	free_call(c);
}

/* status is this executable's own `status --json`, run on the loop: the
 * same report as in a terminal, with no podman query blocking the calls. */
static void start_status(struct call *c)
{
	struct server *s = c->srv;
	struct argv_builder *a = &c->status_args;
	char value[64];
	extern char **environ;
	arg_add(a, "%s", s->self);
	arg_add(a, "status");
	arg_add(a, "--json");
	for (int id = 0; id < SETTING_COUNT; id++)
		if (!settings[id].server && s->cfg->source[id] == FROM_FLAG)
			arg_add(a, "%s=%s", settings[id].flag,
				setting_text(s->cfg, id, value, sizeof value));
	if (capture_start(s->loop, a->arg, environ, loop_now_ms() + STATUS_TIMEOUT_MS,
		    on_status_done, c) < 0) {
		struct error err;
		error_set(&err, EXIT_REFUSED, NULL, "cannot run %s status: %s", s->self,
			strerror(errno));
		answer_refusal(c, &err);
		free_call(c);
		return;
	}
	c->capturing = true;
}

/* Where the call's files go: the client's directory, or a private one. */
static int open_output(struct call *c, struct error *err)
{
	const char *dir = c->out_dir;
	if (!dir) {
		const char *base = getenv("XDG_RUNTIME_DIR");
		char *path = NULL;
		if (asprintf(&path, "%s/sage-sandbox-mcp-XXXXXX", base && *base == '/' ? base : "/tmp") < 0)
			abort();
		if (!mkdtemp(path)) {
			error_set(err, EXIT_REFUSED, "check that /tmp or $XDG_RUNTIME_DIR is writable",
				"cannot make a directory for the call's files: %s", strerror(errno));
			free(path);
			return -1;
		}
		c->temp_dir = path;
		dir = path;
	}
	if (outfiles_open(&c->out, dir, c->out_overwrite, &c->cfg, err) < 0)
		return -1;
	c->out_open = true;
	return 0;
}

static void start_call(struct call *c)
{
	struct server *s = c->srv;
	struct error err;
	c->started = true;
	c->started_at = loop_now_ms();
	s->running++;
	if (c->progress_token)
		c->progress_timer = loop_timer(s->loop, c->started_at + PROGRESS_INTERVAL_MS,
			on_progress, c);
	if (c->tool == TOOL_STATUS) {
		start_status(c);
		return;
	}
	if (s->refused) {
		answer_refusal(c, &s->refusal);
		free_call(c);
		return;
	}
	if (c->tool == TOOL_RUN) {
		if (sandbox_check_code(c->code, c->code_len, "arguments.code", &err) < 0 ||
		    open_output(c, &err) < 0) {
			answer_refusal(c, &err);
			free_call(c);
			return;
		}
	} else {
		self_test_code(&c->cfg, &s->host, &c->self_test_code);
	}
	struct sandbox_callbacks cb = {.keep_output = true, .on_done = on_call_done,
		.on_released = on_call_released, .data = c};
	int64_t deadline = c->started_at + c->cfg.number[SET_TIMEOUT] * 1000ll;
	if (c->session_name[0]) {
		struct session *x = call_session(c, deadline, &err);
		if (!x) {
			answer_refusal(c, &err);
			free_call(c);
			return;
		}
		loop_timer_cancel(x->idle_timer);
		x->idle_timer = NULL;
		x->busy = c;
		x->calls++;
		c->session = x;
		c->sb = x->sb;
		c->warm = x->calls > 1;
	} else {
		c->sb = pool_take(s->pool, &cb, deadline, &c->warm, &err);
	}
	if (!c->sb) {
		answer_refusal(c, &err);
		free_call(c);
		return;
	}
	struct rlimit_value rl[RLIMIT_COUNT];
	sandbox_rlimits(&c->cfg, rl);
	const char *argv[] = {"-"};
	bool self_test = c->tool == TOOL_SELF_TEST;
	struct program program = {
		.code = self_test ? c->self_test_code.data : c->code,
		.code_len = self_test ? c->self_test_code.len : c->code_len,
		.argv = argv, .argc = 1, .deadline = deadline,
		.cpu_seconds = (long)rl[RL_CPU].value,
		.in = c->in.count ? &c->in : NULL, .out = c->out_open ? &c->out : NULL};
	sandbox_submit(c->sb, &program);
}

static void check_image(struct server *s);

/* Starts waiting calls, in order, while there is room. A call can end as
 * it starts (a refusal), which pumps again: that is noted and done here,
 * so that no caller's walk of the list outlives a call it holds. */
static void pump(struct server *s)
{
	if (s->pumping) {
		s->pump_again = true;
		return;
	}
	s->pumping = true;
	do {
		s->pump_again = false;
		if (!s->host_known || s->stopping)
			break;
		for (struct call *c = s->calls; c; c = c->next) {
			if (s->running >= s->cfg->number[SET_CONCURRENCY])
				break;
			if (!c->started && c->tool != TOOL_STATUS && !s->refused && !s->pool) {
				/* In order: this call waits for the image's answer. */
				if (!s->image_checking)
					check_image(s);
				break;
			}
			if (!c->started && c->session_name[0]) {
				/* One call at a time in a session, in order. */
				const struct session *x = find_session(s, c->session_name);
				if (x && x->busy)
					continue;
			}
			if (!c->started) {
				start_call(c);
				s->pump_again = true;
				break;
			}
		}
	} while (s->pump_again);
	s->pumping = false;
}

static void cancel_call(struct call *c)
{
	if (c->cancelled || c->answered)
		return;
	c->cancelled = true;
	if (!c->started) {
		free_call(c);
		return;
	}
	/* The container is removed at once; its result is not sent. */
	if (c->sb)
		sandbox_stop(c->sb, STOP_SIGNAL, SIGTERM);
}

static struct call *find_call(struct server *s, json_t *id)
{
	for (struct call *c = s->calls; c; c = c->next)
		if (!c->answered && json_equal(c->id, id))
			return c;
	return NULL;
}

/* arguments.files: each value text, or {"base64": "..."}; checked as
 * --input's files are (names, count, size), each held in a memory file. */
static int take_files(json_t *files, struct infiles *in, struct server *s, json_t *id)
{
	struct error err;
	if (infiles_add_json(in, files, &err) == 0)
		return 0;
	send_error(s, id, INVALID_PARAMS, "files: %s; %s", err.message, err.hint);
	return -1;
}

/* sage_sandbox_end_session: answered at once; a call running in the
 * session is stopped and answered as such. */
static void end_session_tool(struct server *s, json_t *id, const char *name)
{
	char text[256];
	if (!*name) {
		send_error(s, id, INVALID_PARAMS, "sage_sandbox_end_session needs arguments.session, "
			"the session's name");
		return;
	}
	struct session *x = find_session(s, name);
	long calls = x ? x->calls : 0;
	if (x) {
		snprintf(text, sizeof text, "session %s ended after %ld call%s; its state is gone",
			name, calls, calls == 1 ? "" : "s");
		fprintf(stderr, "sage-sandbox mcp: session %s ended by sage_sandbox_end_session\n",
			name);
		end_session(x);
	} else {
		snprintf(text, sizeof text, "no session named %s is open (it may have ended "
			"already: idle, at a limit, or ended before)", name);
	}
	send_result(s, id, json_pack("{s:[{s:s, s:s}], s:{s:s, s:b, s:I}, s:b}", "content", "type",
		"text", "text", text, "structuredContent", "session", name, "ended", x != NULL,
		"calls", (json_int_t)calls, "isError", 0));
}

/* tools/call: checked whole before anything runs. */
static void call_tool(struct server *s, json_t *id, json_t *params)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *meta = json_object_get(params, "_meta");
	json_t *token = json_is_object(meta) ? json_object_get(meta, "progressToken") : NULL;
	const char *key;
	json_t *value;
	int tool;

	if (!json_is_string(name)) {
		send_error(s, id, INVALID_PARAMS, "tools/call needs params.name, a tool's name");
		return;
	}
	for (tool = 0; tool < TOOL_COUNT; tool++)
		if (strcmp(json_string_value(name), tool_names[tool]) == 0)
			break;
	if (tool == TOOL_COUNT) {
		send_error(s, id, INVALID_PARAMS, "unknown tool '%s'; tools/list lists them",
			json_string_value(name));
		return;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		send_error(s, id, INVALID_PARAMS, "params.arguments must be an object");
		return;
	}
	if (token && !json_is_string(token) && !json_is_integer(token)) {
		send_error(s, id, INVALID_PARAMS, "a progressToken is a string or an integer");
		return;
	}
	json_t *out_dir = json_is_object(meta) ? json_object_get(meta, META_OUTPUT_DIR) : NULL;
	json_t *overwrite = json_is_object(meta) ? json_object_get(meta, META_OUTPUT_OVERWRITE) : NULL;
	if (out_dir && (!json_is_string(out_dir) || json_string_value(out_dir)[0] != '/')) {
		send_error(s, id, INVALID_PARAMS, "_meta." META_OUTPUT_DIR " is an absolute path");
		return;
	}
	if (overwrite && !json_is_boolean(overwrite)) {
		send_error(s, id, INVALID_PARAMS, "_meta." META_OUTPUT_OVERWRITE " is true or false");
		return;
	}
	long timeout = s->cfg->number[SET_TIMEOUT];
	json_t *code = NULL, *files = NULL;
	const char *session = "";
	json_object_foreach(json_is_object(args) ? args : NULL, key, value) {
		if ((tool == TOOL_RUN || tool == TOOL_END_SESSION) && strcmp(key, "session") == 0) {
			session = json_is_string(value) ? json_string_value(value) : NULL;
			size_t n = session ? strlen(session) : 0;
			if (n == 0 || n > SESSION_NAME_MAX || n != json_string_length(value) ||
			    strspn(session, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				    "0123456789-_") != n) {
				send_error(s, id, INVALID_PARAMS, "session is a name of 1 to %d letters, "
					"digits, - and _", SESSION_NAME_MAX);
				return;
			}
		} else if (tool == TOOL_RUN && strcmp(key, "code") == 0) {
			code = value;
		} else if (tool == TOOL_RUN && strcmp(key, "files") == 0) {
			if (!json_is_object(value)) {
				send_error(s, id, INVALID_PARAMS, "files is an object: {\"name\": \"text\"} "
					"or {\"name\": {\"base64\": \"...\"}}");
				return;
			}
			files = value;
		} else if (tool == TOOL_RUN && strcmp(key, "timeout_seconds") == 0) {
			double t = json_is_integer(value) ? (double)json_integer_value(value) :
				json_is_real(value) ? json_real_value(value) : -1;
			if (t != (long)t || t < 1 || t > s->cfg->number[SET_TIMEOUT]) {
				send_error(s, id, INVALID_PARAMS, "timeout_seconds must be an integer from "
					"1 to %ld (this server's --timeout)", s->cfg->number[SET_TIMEOUT]);
				return;
			}
			timeout = (long)t;
		} else {
			send_error(s, id, INVALID_PARAMS, "%s takes %s; unknown argument '%s'",
				tool_names[tool], tool == TOOL_RUN ?
				"code, timeout_seconds, files and session" :
				tool == TOOL_END_SESSION ? "session" : "no arguments", key);
			return;
		}
	}
	if (tool == TOOL_END_SESSION) {
		end_session_tool(s, id, session);
		return;
	}
	if (tool == TOOL_RUN && !json_is_string(code)) {
		send_error(s, id, INVALID_PARAMS, "run_sagemath needs arguments.code, a string of "
			"Sage code");
		return;
	}
	if (find_call(s, id)) {
		send_error(s, id, INVALID_REQUEST, "id already names a call in progress");
		return;
	}
	int waiting = 0;
	for (struct call *c = s->calls; c; c = c->next)
		waiting += !c->started;
	if (waiting >= MAX_WAITING_CALLS) {
		send_error(s, id, INTERNAL_ERROR, "%d calls are already waiting for their turn; "
			"send more once some are answered", MAX_WAITING_CALLS);
		return;
	}

	struct infiles in = {0};
	if (files && take_files(files, &in, s, id) < 0) {
		infiles_free(&in);
		return;
	}
	struct call *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	c->in = in;
	c->out_dir = out_dir ? strdup(json_string_value(out_dir)) : NULL;
	c->out_overwrite = json_is_true(overwrite);
	c->srv = s;
	c->id = json_incref(id);
	c->progress_token = json_incref(token);
	c->tool = (enum tool)tool;
	snprintf(c->session_name, sizeof c->session_name, "%s", session);
	c->cfg = *s->cfg;
	c->cfg.number[SET_TIMEOUT] = timeout;
	c->cfg.call_timeout_max = s->cfg->number[SET_TIMEOUT];
	snprintf(c->timeout_text, sizeof c->timeout_text, "%ld", timeout);
	c->cfg.value[SET_TIMEOUT] = c->timeout_text;
	if (code) {
		/* Longer code is refused when the call starts, with its size: only
		 * one byte past the limit is kept to say so. */
		c->code_len = json_string_length(code);
		if (c->code_len > MAX_CODE_BYTES + 1)
			c->code_len = MAX_CODE_BYTES + 1;
		c->code = malloc(c->code_len + 1);
		if (!c->code)
			abort();
		memcpy(c->code, json_string_value(code), c->code_len);
		c->code[c->code_len] = '\0';
	}
	struct call **end = &s->calls;
	while (*end)
		end = &(*end)->next;
	*end = c;
	pump(s);
}

/* ---- messages -------------------------------------------------------------- */

static void initialize(struct server *s, json_t *id, json_t *params)
{
	json_t *asked = json_object_get(params, "protocolVersion");
	const char *version = protocol_versions[0];
	if (!json_is_string(asked)) {
		send_error(s, id, INVALID_PARAMS, "initialize needs params.protocolVersion, a string");
		return;
	}
	for (size_t i = 0; i < sizeof protocol_versions / sizeof protocol_versions[0]; i++)
		if (strcmp(json_string_value(asked), protocol_versions[i]) == 0)
			version = protocol_versions[i];
	send_result(s, id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
		"protocolVersion", version, "capabilities", "tools", "listChanged", 0,
		"serverInfo", "name", "sage-sandbox", "title", "SageMath sandbox", "version",
		SAGE_SANDBOX_VERSION, "instructions", server_instructions));
}

static void take_notification(struct server *s, const char *method, json_t *params)
{
	if (strcmp(method, "notifications/cancelled") == 0) {
		json_t *id = json_object_get(params, "requestId");
		struct call *c = id ? find_call(s, id) : NULL;
		if (c) {
			fprintf(stderr, "sage-sandbox mcp: a call was cancelled%s\n",
				c->sb ? "; its container is being removed" : " before it started");
			cancel_call(c);
		}
	}
	/* notifications/initialized and any other: nothing to do. */
}

static void take_message(struct server *s, json_t *msg)
{
	if (json_is_array(msg)) {
		send_error(s, NULL, INVALID_REQUEST, json_array_size(msg) ?
			"batches are not supported: send one JSON-RPC message per line" :
			"an empty batch");
		return;
	}
	if (!json_is_object(msg)) {
		send_error(s, NULL, INVALID_REQUEST, "a JSON-RPC message is a JSON object");
		return;
	}
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	json_t *version = json_object_get(msg, "jsonrpc");
	json_t *params = json_object_get(msg, "params");
	if (id && !json_is_string(id) && !json_is_integer(id)) {
		send_error(s, NULL, INVALID_REQUEST, "id must be a string or an integer");
		return;
	}
	if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0) {
		send_error(s, id, INVALID_REQUEST, "jsonrpc must be \"2.0\"");
		return;
	}
	if (!method) {
		/* A response: we send no requests, so there is nothing to match. */
		if (id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
			return;
		send_error(s, id, INVALID_REQUEST, "a request needs a method");
		return;
	}
	if (!json_is_string(method)) {
		send_error(s, id, INVALID_REQUEST, "method must be a string");
		return;
	}
	const char *name = json_string_value(method);
	if (!id) {
		take_notification(s, name, json_is_object(params) ? params : NULL);
		return;
	}
	if (params && !json_is_object(params)) {
		send_error(s, id, INVALID_PARAMS, "params must be an object");
		return;
	}
	if (strcmp(name, "initialize") == 0)
		initialize(s, id, params);
	else if (strcmp(name, "ping") == 0)
		send_result(s, id, json_object());
	else if (strcmp(name, "tools/list") == 0)
		send_result(s, id, json_pack("{s:O}", "tools", s->tools));
	else if (strcmp(name, "tools/call") == 0)
		call_tool(s, id, params);
	else
		send_error(s, id, METHOD_NOT_FOUND, "method not found: %s", name);
}

static void take_line(struct server *s, const char *line, size_t len)
{
	json_error_t e;
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len == 0)
		return;
	/* Any value, so that `3` is answered as a request that is not an
	 * object; NUL allowed in strings, so that code with one is refused by
	 * the sandbox's own check, with its offset. */
	json_t *msg = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!msg) {
		send_error(s, NULL, PARSE_ERROR, "not JSON: %s (at byte %d)", e.text, e.position);
		return;
	}
	take_message(s, msg);
	json_decref(msg);
}

static void on_request_bytes(struct loop_watch *w, int fd, unsigned events, void *data)
{
	struct server *s = data;
	char chunk[65536];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof chunk)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		if (s->line.len && !s->discarding)
			take_line(s, s->line.data, s->line.len);
		shut_down(s, n < 0 ? "cannot read stdin" : "end of input");
		return;
	}
	for (const char *p = chunk, *end = chunk + n; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		if (!s->discarding && s->line.len + len > MAX_MESSAGE_BYTES) {
			s->discarding = true;
			buffer_free(&s->line);
		}
		if (!s->discarding)
			buffer_append(&s->line, p, len);
		if (!nl)
			break;
		if (s->discarding)
			send_error(s, NULL, INVALID_REQUEST, "message longer than %u bytes: discarded",
				MAX_MESSAGE_BYTES);
		else if (s->line.len)
			take_line(s, s->line.data, s->line.len);
		s->discarding = false;
		s->line.len = 0;
		p = nl + 1;
		if (s->stopping)
			return;
	}
}

/* ---- start and end ---------------------------------------------------------- */

static void maybe_quit(struct server *s)
{
	if (s->stopping && s->pool_drained && !s->calls && !s->sessions &&
	    (!s->out || queue_closed(s->out) || queue_pending(s->out) == 0))
		loop_quit(s->loop);
}

static void on_pool_drained(void *data)
{
	struct server *s = data;
	s->pool_drained = true;
	maybe_quit(s);
}

static void on_shutdown_limit(struct loop_timer *t, void *data)
{
	struct server *s = data;
	s->shutdown_timer = NULL;
	fprintf(stderr, "sage-sandbox mcp: stopping took too long; leaving the rest to "
			"podman's --timeout and 'sage-sandbox cleanup'\n");
	loop_quit(s->loop);
}

/* Stops reading, stops every call and every warm sandbox, and quits once
 * their containers are removed and the answers are written. */
static void shut_down(struct server *s, const char *why)
{
	struct call *next;
	if (s->stopping)
		return;
	s->stopping = true;
	fprintf(stderr, "sage-sandbox mcp: %s; stopping\n", why);
	loop_unwatch(s->in_watch);
	s->in_watch = NULL;
	s->shutdown_timer = loop_timer(s->loop, loop_now_ms() + SHUTDOWN_LIMIT_MS,
		on_shutdown_limit, s);
	for (struct call *c = s->calls; c; c = next) {
		next = c->next;
		if (!c->started) {
			send_error(s, c->id, INTERNAL_ERROR, "the server is shutting down (%s)", why);
			free_call(c);
		} else if (c->sb) {
			sandbox_stop(c->sb, STOP_SIGNAL, SIGTERM);
		}
	}
	for (struct session *x = s->sessions; x; x = x->next)
		if (!x->ending)
			end_session(x);
	if (s->pool)
		pool_drain(s->pool, on_pool_drained, s);
	else
		s->pool_drained = true;
	maybe_quit(s);
}

static void on_signal(struct loop_watch *w, int fd, unsigned events, void *data)
{
	struct server *s = data;
	struct signalfd_siginfo info;
	char why[64];
	if (read(fd, &info, sizeof info) != sizeof info)
		return;
	if (++s->signals_seen > 1)
		_exit(128 + (int)info.ssi_signo); /* asked twice: now */
	snprintf(why, sizeof why, "signal %d", (int)info.ssi_signo);
	shut_down(s, why);
}

static void on_out_drained(struct queue *q, void *data)
{
	struct server *s = data;
	if (s->in_watch && queue_pending(q) < OUT_PAUSE_BYTES / 2)
		loop_watch_events(s->in_watch, LOOP_READ);
	maybe_quit(s);
}

static void on_out_error(struct queue *q, void *data)
{
	shut_down(data, "stdout was closed");
}

static void refuse_every_call(struct server *s)
{
	s->host_known = s->refused = true;
	fprintf(stderr, "sage-sandbox mcp: no sandbox can run: %s; %s\n", s->refusal.message,
		s->refusal.hint);
	pump(s);
}

static struct call *first_waiting_for_sandbox(struct server *s)
{
	for (struct call *c = s->calls; c; c = c->next)
		if (!c->started && c->tool != TOOL_STATUS)
			return c;
	return NULL;
}

/* The image's answer. A refusal answers the calls waiting for it, and is
 * not final: the next call asks again, so an image built or pulled while
 * the server runs is found. */
static void on_image(const struct sage_image *image, const struct error *refusal, void *data)
{
	struct server *s = data;
	if (s->stopping) {
		s->image_checking = false;
		return;
	}
	if (refusal) {
		struct call *c;
		fprintf(stderr, "sage-sandbox mcp: no sandbox can run yet: %s; %s\n",
			refusal->message, refusal->hint);
		/* Still "checking" while they are answered: no new check starts
		 * from the answers' pumps. */
		while ((c = first_waiting_for_sandbox(s))) {
			answer_refusal(c, refusal);
			free_call(c);
		}
		s->image_checking = false;
		return;
	}
	s->image_checking = false;
	s->image = *image;
	struct pool_options po = {.loop = s->loop, .cfg = s->cfg, .host = &s->host,
		.image = &s->image, .podman = s->podman, .size = (int)s->cfg->number[SET_WARM],
		.log = true};
	s->pool = pool_new(&po);
	pump(s);
}

static void check_image(struct server *s)
{
	struct error err;
	s->image_checking = true;
	if (image_check(s->loop, s->podman, s->cfg, &s->host, INT64_MAX, on_image, s) < 0) {
		error_set(&err, EXIT_REFUSED, podman_install_hint, "cannot execute podman %s: %s",
			s->podman, strerror(errno));
		on_image(NULL, &err, s);
	}
}

static void on_host(const struct podman_host *host, void *data)
{
	struct server *s = data;
	if (s->stopping)
		return;
	s->host = *host;
	if (rootless_verdict(host, &s->refusal) < 0) {
		refuse_every_call(s);
		return;
	}
	s->host_known = true;
	/* Asked at once, so that the warm pool starts before the first call. */
	if (!s->image_checking)
		check_image(s);
	pump(s);
}

/* The tools' descriptions and schemas, with this server's limits in. */
static json_t *tool_list(const struct config *cfg)
{
	json_t *tools = json_loads(embedded_mcp_tools_json, 0, NULL);
	char memory[32], limits[512];
	if (!tools)
		abort();
	json_t *run = json_array_get(tools, TOOL_RUN);
	snprintf(limits, sizeof limits, " Limits of this server: %ld s wall clock a call (the "
		"default and the most timeout_seconds may ask), %s of memory, %ld.%03ld CPUs, %ld "
		"processes, %ld KiB of output per stream, %d bytes of code, no network.",
		cfg->number[SET_TIMEOUT], setting_text(cfg, SET_MEMORY, memory, sizeof memory),
		cfg->number[SET_CPUS] / 1000, cfg->number[SET_CPUS] % 1000,
		cfg->number[SET_PIDS_LIMIT], cfg->number[SET_OUTPUT_LIMIT], MAX_CODE_BYTES);
	json_t *description = json_object_get(run, "description");
	char *text = NULL;
	if (asprintf(&text, "%s%s", json_string_value(description), limits) < 0)
		abort();
	json_object_set_new(run, "description", json_string(text));
	free(text);
	json_t *timeout = json_object_get(json_object_get(json_object_get(run, "inputSchema"),
		"properties"), "timeout_seconds");
	json_object_set_new(timeout, "maximum", json_integer(cfg->number[SET_TIMEOUT]));
	json_object_set_new(timeout, "default", json_integer(cfg->number[SET_TIMEOUT]));
	return tools;
}

static int watch_signals(struct server *s)
{
	s->signal_watch = loop_watch_stop_signals(s->loop, false, &s->signal_fd, on_signal, s);
	return s->signal_watch ? 0 : -1;
}

int mcp_serve(const struct config *cfg, const char *self)
{
	struct server s = {.cfg = cfg, .self = self, .signal_fd = -1};
	s.loop = loop_new();
	s.tools = tool_list(cfg);
	s.in_fd = reopen_nonblocking(0, O_RDONLY);
	int out_fd = reopen_nonblocking(1, O_WRONLY);
	if (s.in_fd < 0 || out_fd < 0 || watch_signals(&s) < 0) {
		fprintf(stderr, "sage-sandbox: mcp cannot use stdin, stdout or signals: %s\n",
			strerror(errno));
		return EXIT_REFUSED;
	}
	s.out = queue_new(s.loop, out_fd, OUT_PAUSE_BYTES, on_out_drained, on_out_error, &s);
	s.in_watch = loop_watch(s.loop, s.in_fd, LOOP_READ, on_request_bytes, &s);
	if (!s.out || !s.in_watch) {
		fprintf(stderr, "sage-sandbox: mcp cannot watch stdin or stdout: %s\n",
			strerror(errno));
		return EXIT_REFUSED;
	}
	fprintf(stderr, "sage-sandbox mcp %s: serving MCP on stdio; %ld warm, %ld at once\n",
		SAGE_SANDBOX_VERSION, cfg->number[SET_WARM], cfg->number[SET_CONCURRENCY]);

	s.podman = find_executable(cfg->value[SET_PODMAN]);
	if (!s.podman) {
		s.host_known = s.refused = true;
		error_set(&s.refusal, EXIT_REFUSED, podman_install_hint,
			"podman executable '%s' not found", cfg->value[SET_PODMAN]);
	} else if (rootless_check(s.loop, s.podman, loop_now_ms() + HOST_CHECK_TIMEOUT_MS,
			   on_host, &s) < 0) {
		s.host_known = s.refused = true;
		error_set(&s.refusal, EXIT_REFUSED, podman_install_hint,
			"cannot execute podman %s: %s", s.podman, strerror(errno));
	}
	if (s.refused)
		fprintf(stderr, "sage-sandbox mcp: no sandbox can run: %s; %s\n", s.refusal.message,
			s.refusal.hint);

	if (loop_run(s.loop) < 0)
		fprintf(stderr, "sage-sandbox mcp: the event loop failed: %s\n", strerror(errno));
	queue_flush_now(s.out);

	/* What is left after the shutdown's limit is abandoned to podman's
	 * backstop: calls' sandboxes, warm ones, captures. */
	while (s.calls) {
		if (s.calls->sb)
			sandbox_free(s.calls->sb);
		free_call(s.calls);
	}
	pool_free(s.pool);
	loop_timer_cancel(s.shutdown_timer);
	loop_unwatch(s.in_watch);
	loop_unwatch(s.signal_watch);
	queue_free(s.out);
	close(s.in_fd);
	close(s.signal_fd);
	buffer_free(&s.line);
	json_decref(s.tools);
	free(s.podman);
	/* Captures still running hold watches: the loop is left to the exit. */
	return 0;
}
