/* mcp.c: `sage-sandbox mcp`: JSON-RPC 2.0 on stdio, one message a line,
 * parsed with jansson; the MCP methods; the three tools; calls served at
 * once up to --concurrency, the rest waiting in order; cancellation,
 * progress, and a shutdown that leaves no container behind.
 *
 * Everything is on one loop: the request reader, the answer queue, the
 * warm pool and every call's sandbox. Nothing a client sends ends the
 * server: each bad message gets the JSON-RPC error the specification gives
 * it, and the next line is read. The end of input ends it as a Unix filter
 * ends: every request already read is run and answered first. */
#include "mcp.h"
#include "names.h"
#include "base64.h"
#include "embedded.h"
#include "host.h"
#include "json.h"
#include "process.h"
#include "result.h"
#include "runner.h"
#include "selftest.h"
#include "signals.h"
#include "status.h"

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
#define HOST_CHECK_TIMEOUT_MS 30000
/* Calls waiting for their turn: past this a call is refused, so that a
 * client cannot make the server hold an unbounded queue. Each holds at most
 * MAX_CODE_BYTES of code (longer code is refused as it arrives). */
#define MAX_WAITING_CALLS 64
/* An image file is sent back as image content up to this size, and while
 * the whole answer stays under ANSWER_BUDGET_BYTES: the official SDK's
 * stdio clients drop a message past 10 MiB. */
#define IMAGE_MAX_BYTES (2u << 20)
/* A .tex file this short comes back as its text too (show()'s LaTeX). */
#define LATEX_MAX_BYTES 4096
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


struct server;

struct mcp_call {
	struct server *srv;
	struct loop_scope scope; /* its progress timer; ended by free_call */
	json_t *id;
	json_t *progress_token; /* or NULL */
	enum tool tool;
	char *code;
	size_t code_len;
	struct buffer self_test_code;
	struct config cfg;      /* the server's, with this call's timeout */
	char timeout_text[16], seed_text[24];
	/* The runner's call, from its submission until its answer: owned
	 * (call_free), and freed before this call is. */
	struct call *run;
	bool answered, cancelled;
	/* free_call was called: out of the server's list, its memory freed
	 * at the end of the loop's turn (loop_release), so that a caller up
	 * the stack that still holds it sees this. */
	bool ended;
	struct loop_timer *progress_timer;
	struct infiles in;      /* arguments.files */
	struct outfiles out;    /* $SAGE_SANDBOX_OUT's files, once it ran */
	bool out_open;
	char *out_dir;          /* the client's directory, or NULL */
	bool out_overwrite;
	char *temp_dir;         /* else a private one, removed with the call */
	char session_name[SESSION_NAME_MAX + 1]; /* arguments.session, or "" */
	struct mcp_call *next;
};

struct server {
	struct loop *loop;
	struct loop_scope scope; /* the stdin watch and the shutdown's timer */
	const struct config *cfg;
	/* What the host check found: owned; asked at the start, and again
	 * by the next call after a refusal (an image built meanwhile is
	 * found). Calls that need a sandbox wait for it. */
	struct host host;
	struct host_check *host_check; /* while podman is asked */
	struct runner *runner;  /* owned, once the host can run sandboxes */
	struct queue *out;
	int in_fd;
	struct loop_watch *in_watch;
	struct buffer line;
	bool discarding;        /* of a line past MAX_MESSAGE_BYTES */
	struct stop_signals *signals;
	struct mcp_call *calls; /* every call not yet answered, in the order they came */
	json_t *tools;
	/* input_ended: stdin is over, and the calls already read are being
	 * answered; stopping: the shutdown began (after the last of them, or
	 * at once for a signal or a closed stdout). */
	bool input_ended, stopping, drained;
	struct loop_timer *shutdown_timer;
};

static void pump(struct server *s);
static void maybe_quit(struct server *s);
static void shut_down(struct server *s, int sig, const char *why);

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
	/* The client's own strings (a tool's or a method's name) shown as an
	 * error's are: escaped, cut with "…" (attack helper 166). */
	char message[1024];
	va_list ap;
	va_start(ap, fmt);
	size_t shown = printable_vformat(message, sizeof message, fmt, ap);
	va_end(ap);
	send_message(s, json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0", "id",
		id ? id : json_null(), "error", "code", code, "message",
		text_value(message, shown)));
}

/* ---- calls -------------------------------------------------------------- */

static void destroy_call(void *data)
{
	struct mcp_call *c = data;
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
	free(c);
}

/* The one end of every call: its timers and its runner's call go now, its
 * memory at the end of the turn. */
static void free_call(struct mcp_call *c)
{
	struct server *s = c->srv;
	if (c->ended)
		return;
	c->ended = true;
	loop_scope_end(&c->scope);
	call_free(c->run);
	c->run = NULL;
	for (struct mcp_call **at = &s->calls; *at; at = &(*at)->next)
		if (*at == c) {
			*at = c->next;
			break;
		}
	loop_release(s->loop, destroy_call, c);
	maybe_quit(s);
}

/* The end of a call: its answer (unless cancelled), and room for the next. */
static void answer(struct mcp_call *c, json_t *content_text, json_t *structured, bool is_error,
		json_t *more_content)
{
	struct server *s = c->srv;
	loop_timer_cancel(&c->progress_timer);
	c->answered = true;
	if (!c->cancelled) {
		if (!structured) {
			/* parsed() could not read our own result back: said, after
			 * the text there is, as an error with no structuredContent
			 * (which a tool's schema does not ask of an error), never
			 * an empty result that reads as "the code printed nothing"
			 * (review helper 148). */
			static const char unread[] = "sage-sandbox could not read back its own "
				"result (an internal error, logged on the server's stderr); try "
				"again, and report it";
			struct buffer text = {0};
			if (json_string_length(content_text)) {
				buffer_append(&text, json_string_value(content_text),
					json_string_length(content_text));
				buffer_append(&text, "\n", 1);
			}
			buffer_append(&text, unread, sizeof unread - 1);
			json_decref(content_text);
			content_text = text_value(text.data, text.len);
			buffer_free(&text);
			is_error = true;
		}
		json_t *result = structured ?
			json_pack("{s:[{s:s, s:o}], s:o, s:b}", "content", "type", "text", "text",
				content_text, "structuredContent", structured, "isError", is_error) :
			json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text",
				content_text, "isError", is_error);
		json_t *content = json_object_get(result, "content");
		/* Nothing printed, and files came back: they are the answer. */
		if (more_content && json_array_size(more_content) &&
		    json_string_length(content_text) == 0)
			json_array_remove(content, 0);
		if (more_content)
			json_array_extend(content, more_content);
		if (c->tool == TOOL_RUN)
			json_object_set_new(result, "_meta", json_pack("{s:b}", "warm",
				c->run && call_warm(c->run)));
		send_result(s, c->id, result);
	} else {
		json_decref(content_text);
		json_decref(structured);
	}
	json_decref(more_content);
}

/* The object `run --json` prints, parsed back: a NUL the code printed is
 * in it as \u0000, which jansson refuses without JSON_ALLOW_NUL (attack
 * helper 146: the whole answer was lost). NULL where it cannot be read
 * (a bug of ours, logged): answer() says so. */
static json_t *parsed(const char *text, size_t len)
{
	json_error_t why;
	json_t *v = json_loadb(text, len, JSON_ALLOW_NUL, &why);
	if (!v) /* (where, not jansson's words: they may quote the code's output) */
		fprintf(stderr, "sage-sandbox mcp: internal error: a result that is not JSON (at "
			"byte %d); please report it\n", why.position);
	return v;
}

/* Nothing ran: the refusal's object, and its sentence for the model. */
static void answer_refusal(struct mcp_call *c, const struct error *err)
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
 * stopped; all from the same object as structuredContent. Where nothing
 * of that and no file came back, a sentence says so. */
static json_t *run_text(const struct printed *p, json_t *object, bool files_came_back)
{
	/* By their lengths: a NUL the code printed is text like any other. */
	json_t *out = json_object_get(object, "stdout"), *err = json_object_get(object, "stderr");
	struct buffer text = {0};
	size_t len;
	buffer_append(&text, json_string_value(out), json_string_length(out));
	if (json_string_length(err)) {
		if (text.len && text.data[text.len - 1] != '\n')
			buffer_append(&text, "\n", 1);
		buffer_append(&text, json_string_value(err), json_string_length(err));
	}
	char *stop = print_to_memory(print_stop_line, p, &len);
	if (len && text.len && text.data[text.len - 1] != '\n')
		buffer_append(&text, "\n", 1);
	buffer_append(&text, stop, len);
	free(stop);
	if (text.len == 0 && !files_came_back) {
		static const char nothing[] = "(the code printed nothing, and its last line was "
			"no expression to show: print(...) what you want to see)";
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
static json_t *image_content(struct mcp_call *c, const struct outfile *f, size_t *size,
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

/* A short .tex file's LaTeX (what show() makes of a formula, show-N.tex),
 * after its line: for clients that render it. */
static bool is_latex(const struct outfile *f)
{
	size_t len = strlen(f->name);
	return len >= 4 && strcmp(f->name + len - 4, ".tex") == 0 && f->size <= LATEX_MAX_BYTES;
}

/* The LaTeX as it goes into the host's own line: its line breaks and tabs
 * as spaces (LaTeX reads them so: a matrix's has some), every other
 * character printable (names.c's rule), and no "$$". The file is the
 * code's: with a break or a "$$" its bytes could pass for lines of the
 * host's ("- x.png; the image follows", "sage-sandbox: ..."). False where
 * it cannot be shown so: the file is still listed, with no LaTeX line. */
static bool latex_line(const struct buffer *latex, struct buffer *line)
{
	for (size_t i = 0; i < latex->len;) {
		const unsigned char *u = (const unsigned char *)latex->data + i;
		if (*u == '\n' || *u == '\r' || *u == '\t') {
			buffer_append(line, " ", 1);
			i++;
			continue;
		}
		size_t n = printable_char_length(u, latex->len - i);
		if (n == 0)
			return false;
		buffer_append(line, latex->data + i, n);
		i += n;
	}
	return line->len > 0 && !memmem(line->data, line->len, "$$", 2);
}

static void append_latex(struct mcp_call *c, const struct outfile *f, struct buffer *text)
{
	if (!is_latex(f))
		return;
	int fd = openat(c->out.dirfd, f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct buffer latex = {0}, line = {0};
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    read_fd(fd, LATEX_MAX_BYTES, &latex) == 0 && latex_line(&latex, &line)) {
		static const char intro[] = "  LaTeX: $$";
		buffer_append(text, intro, sizeof intro - 1);
		buffer_append(text, line.data, line.len);
		buffer_append(text, "$$\n", 3);
	}
	if (fd >= 0)
		close(fd);
	buffer_free(&latex);
	buffer_free(&line);
}

/* What came back from $SAGE_SANDBOX_OUT: one text item naming every file
 * (hosts that do not pass images on to the model still tell it what there
 * is), then the images, while the answer stays within its budget. */
static json_t *file_content(struct mcp_call *c, json_t *object)
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
			c->out_dir || is_latex(f) ? "" :
			f->kind.is_image ? "; not shown: larger than the image cap or the answer's budget" :
			"; not kept: this server returns images only";
		/* Shown escaped: a tag character is text the model reads and
		 * its user never sees (attack helper 166). */
		char *name = printable_whole(f->name);
		char *dir = c->out_dir ? printable_whole(c->out_dir) : NULL;
		/* Appended whole: a line of two names and DIR has no fixed size. */
		const char *parts[] = {"- ", name, " (", about, ")", dir ? ", saved as " : "",
			dir ? dir : "", dir ? "/" : "", dir ? name : "", where, "\n"};
		for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
			buffer_append(&text, parts[k], strlen(parts[k]));
		free(dir);
		free(name);
		append_latex(c, f, &text);
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
static void add_session(struct mcp_call *c, const struct run_result *r, json_t *object,
		json_t **content)
{
	const char *name = c->session_name;
	long calls = call_session_calls(c->run);
	json_object_set_new(object, "session", json_pack("{s:s, s:I, s:b, s:b}", "name", name,
		"calls", (json_int_t)calls, "state_kept", r->after == AFTER_KEPT, "interrupted",
		r->after == AFTER_KEPT && r->cell_interrupted));
	if (r->after == AFTER_KEPT)
		return;
	char note[256];
	snprintf(note, sizeof note, "%s(session %s ended with this call, its %ld%s: its state is "
		"lost; the next call that names it starts a new, empty session)",
		json_string_length(*content) ? "\n" : "", name, calls,
		calls % 10 == 1 && calls % 100 != 11 ? "st" :
		calls % 10 == 2 && calls % 100 != 12 ? "nd" :
		calls % 10 == 3 && calls % 100 != 13 ? "rd" : "th");
	struct buffer text = {0};
	buffer_append(&text, json_string_value(*content), json_string_length(*content));
	buffer_append(&text, note, strlen(note));
	json_decref(*content);
	*content = json_stringn(text.data, text.len);
	buffer_free(&text);
}

static void answer_run(struct mcp_call *c)
{
	const struct run_result *r = call_result(c->run);
	size_t len;
	if (r->failed) {
		answer_refusal(c, &r->failure);
		return;
	}
	if (c->tool == TOOL_RUN) {
		struct timeout_knob knob = {"timeout_seconds", c->srv->cfg->number[SET_TIMEOUT]};
		struct printed p = {.result = r, .cfg = &c->cfg, .knob = &knob};
		char *text = print_to_memory(print_run_object, &p, &len);
		json_t *object = parsed(text, len);
		free(text);
		json_t *content = NULL; /* none to tell where it is not read back: answer() says so */
		if (object) {
			content = run_text(&p, object, c->out_open && c->out.count > 0);
			if (c->session_name[0] && call_session_calls(c->run))
				add_session(c, r, object, &content);
		}
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

static void on_progress(void *data);

/* The call has a sandbox: its progress is told from now on. */
static void on_run_start(struct call *run, void *data)
{
	struct mcp_call *c = data;
	c->run = run;
	if (c->progress_token && !loop_timer_armed(&c->progress_timer))
		loop_timer_arm(&c->scope, &c->progress_timer, loop_now_ms() + PROGRESS_INTERVAL_MS,
			on_progress, c);
}

/* The runner says the call is over: its answer (unless cancelled) leaves
 * at once, before the warm sandbox that replaces its own starts (a fork
 * and an exec of podman cost milliseconds). After the end of input, the
 * last call's end begins the shutdown from here (free_call), before the
 * runner could start that sandbox. */
static void on_run_done(struct call *run, void *data)
{
	struct mcp_call *c = data;
	struct server *s = c->srv;
	c->run = run;
	answer_run(c);
	if (s->out)
		queue_flush_now(s->out);
	free_call(c);
}

/* ---- progress ------------------------------------------------------------- */

static void on_progress(void *data)
{
	struct mcp_call *c = data;
	struct server *s = c->srv;
	char message[128];
	int64_t elapsed = loop_now_ms() - call_started_at(c->run);
	loop_timer_arm(&c->scope, &c->progress_timer, loop_now_ms() + PROGRESS_INTERVAL_MS,
		on_progress, c);
	snprintf(message, sizeof message, "running for %lld s", (long long)(elapsed / 1000));
	struct buffer text = {0};
	buffer_append(&text, message, strlen(message));
	const struct run_result *r = call_result(c->run);
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

/* sage_sandbox_status: the host as the server checked it, and the
 * server's own counts, in-process (status.c): no podman is asked, nothing
 * waits. */
static void answer_status(struct mcp_call *c)
{
	struct server *s = c->srv;
	struct status_report report;
	size_t len;
	status_from_host(s->cfg, &s->host, &report);
	char *text = NULL;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		abort();
	status_print_json(f, &report);
	fclose(f);
	json_t *object = parsed(text, len);
	free(text);
	json_object_set_new(object, "server", json_pack("{s:i, s:i, s:i, s:i}", "warm_ready",
		s->runner ? runner_ready(s->runner) : 0, "running",
		s->runner ? runner_running(s->runner) : 0, "waiting",
		s->runner ? runner_waiting(s->runner) : 0, "sessions",
		s->runner ? runner_sessions(s->runner) : 0));
	char *pretty = object ? json_dumps(object, JSON_INDENT(2)) : NULL;
	answer(c, pretty ? text_value(pretty, strlen(pretty)) : NULL, object, false, NULL);
	free(pretty);
	free_call(c);
}

static int open_output(struct mcp_call *c, struct error *err)
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

/* Hands a call that needs a sandbox to the runner: its code checked, its
 * output directory open, its limits the server's with its own timeout. */
static void submit(struct mcp_call *c)
{
	struct server *s = c->srv;
	struct error err;
	if (c->tool == TOOL_RUN) {
		if (sandbox_check_code(c->code, c->code_len, "arguments.code", &err) < 0 ||
		    open_output(c, &err) < 0) {
			answer_refusal(c, &err);
			free_call(c);
			return;
		}
	} else {
		self_test_code(&c->cfg, &s->host.podman_host, &c->self_test_code);
	}
	struct rlimit_value rl[RLIMIT_COUNT];
	sandbox_rlimits(&c->cfg, rl);
	static const char *const argv[] = {"-"};
	bool self_test = c->tool == TOOL_SELF_TEST;
	struct call_spec spec = {.program = {
		.code = self_test ? c->self_test_code.data : c->code,
		.code_len = self_test ? c->self_test_code.len : c->code_len,
		.argv = argv, .argc = 1, .cpu_seconds = (long)rl[RL_CPU].value,
		.in = c->in.count ? &c->in : NULL, .out = c->out_open ? &c->out : NULL,
		/* mcp's default is last (cmd_mcp). */
		.display_last = !self_test && strcmp(c->cfg.value[SET_DISPLAY], "last") == 0,
		.display_latex = !self_test,
		.seeded = !self_test && c->cfg.number[SET_SEED] >= 0,
		.seed = (uint32_t)c->cfg.number[SET_SEED]},
		.timeout_ms = c->cfg.number[SET_TIMEOUT] * 1000L,
		.session = c->session_name[0] ? c->session_name : NULL, .keep_output = true,
		.on_start = on_run_start, .on_done = on_run_done, .data = c};
	/* Its on_done comes on a later turn, never inside runner_submit
	 * (runner.h): c is still ours here. */
	c->run = runner_submit(s->runner, &spec);
}

static void check_host(struct server *s);

/* The first call that waits for the runner: not yet handed to it. */
static struct mcp_call *first_waiting(struct server *s)
{
	for (struct mcp_call *c = s->calls; c; c = c->next)
		if (!c->run && c->tool != TOOL_STATUS)
			return c;
	return NULL;
}

/* Hands the calls that wait for the host to the runner, in order, once it
 * can run sandboxes; asks the host again when it could not. The list is
 * looked at again after each: a submission may answer and end calls (its
 * own refused, or every waiting one when stdout fails meanwhile). */
static void pump(struct server *s)
{
	struct mcp_call *c;
	while (!s->stopping && (c = first_waiting(s))) {
		if (!s->runner) {
			if (!s->host_check)
				check_host(s);
			return;
		}
		submit(c);
	}
}

static void cancel_call(struct mcp_call *c)
{
	if (c->cancelled || c->answered)
		return;
	c->cancelled = true;
	if (!c->run) {
		free_call(c);
		return;
	}
	/* The container is removed at once; its result is not sent. */
	call_cancel(c->run, SIGTERM);
}

static struct mcp_call *find_call(struct server *s, json_t *id)
{
	for (struct mcp_call *c = s->calls; c; c = c->next)
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
	/* Its calls not yet given to the runner (the host still being asked)
	 * are refused as the runner refuses its waiting ones; answered after
	 * this tool's own, as the runner's are on a later turn. */
	struct error ended;
	session_ended_error(&ended, name);
	struct mcp_call *refused[MAX_WAITING_CALLS];
	int n = 0;
	for (struct mcp_call *c = s->calls; c && n < MAX_WAITING_CALLS; c = c->next)
		if (!c->run && c->tool == TOOL_RUN && !c->answered && !c->cancelled &&
				strcmp(c->session_name, name) == 0)
			refused[n++] = c;
	long calls = s->runner ? runner_end_session(s->runner, name) : -1;
	if (calls < 0 && n)
		calls = 0;
	if (calls >= 0) {
		snprintf(text, sizeof text, "session %s ended after %ld call%s; its state is gone",
			name, calls, calls == 1 ? "" : "s");
		fprintf(stderr, "sage-sandbox mcp: session %s ended by sage_sandbox_end_session\n",
			name);
	} else {
		snprintf(text, sizeof text, "no session named %s is open (it may have ended "
			"already: idle, at a limit, or ended before)", name);
	}
	send_result(s, id, json_pack("{s:[{s:s, s:s}], s:{s:s, s:b, s:I}, s:b}", "content", "type",
		"text", "text", text, "structuredContent", "session", name, "ended", calls >= 0,
		"calls", (json_int_t)(calls >= 0 ? calls : 0), "isError", 0));
	for (int i = 0; i < n; i++) {
		answer_refusal(refused[i], &ended);
		free_call(refused[i]);
	}
}

/* What a tools/call names: its tool, arguments and _meta, checked. */
struct call_request {
	int tool;
	json_t *code, *files, *token, *out_dir, *overwrite;
	const char *session;
	long timeout;
	long seed; /* -1: the server's --seed */
};

/* The envelope: the tool's name, arguments an object, the progress token
 * and _meta's output directory. -1 once the error is sent. */
static int check_envelope(struct server *s, json_t *id, json_t *params, struct call_request *r)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *meta = json_object_get(params, "_meta");
	r->token = json_is_object(meta) ? json_object_get(meta, "progressToken") : NULL;
	if (!json_is_string(name)) {
		send_error(s, id, INVALID_PARAMS, "tools/call needs params.name, a tool's name");
		return -1;
	}
	/* (By length too: a NUL would end the name early for strcmp.) */
	for (r->tool = 0; r->tool < TOOL_COUNT; r->tool++)
		if (strcmp(json_string_value(name), tool_names[r->tool]) == 0 &&
		    json_string_length(name) == strlen(tool_names[r->tool]))
			break;
	if (r->tool == TOOL_COUNT) {
		send_error(s, id, INVALID_PARAMS, "unknown tool '%s'; tools/list lists them",
			json_string_value(name));
		return -1;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		send_error(s, id, INVALID_PARAMS, "params.arguments must be an object");
		return -1;
	}
	if (r->token && !json_is_string(r->token) && !json_is_integer(r->token)) {
		send_error(s, id, INVALID_PARAMS, "a progressToken is a string or an integer");
		return -1;
	}
	r->out_dir = json_is_object(meta) ? json_object_get(meta, META_OUTPUT_DIR) : NULL;
	r->overwrite = json_is_object(meta) ? json_object_get(meta, META_OUTPUT_OVERWRITE) : NULL;
	if (r->out_dir && (!json_is_string(r->out_dir) || json_string_value(r->out_dir)[0] != '/')) {
		send_error(s, id, INVALID_PARAMS, "_meta." META_OUTPUT_DIR " is an absolute path");
		return -1;
	}
	/* A NUL would cut the path short, to another directory (review 148). */
	if (r->out_dir && strlen(json_string_value(r->out_dir)) != json_string_length(r->out_dir)) {
		send_error(s, id, INVALID_PARAMS, "_meta." META_OUTPUT_DIR " contains a NUL byte");
		return -1;
	}
	if (r->overwrite && !json_is_boolean(r->overwrite)) {
		send_error(s, id, INVALID_PARAMS, "_meta." META_OUTPUT_OVERWRITE " is true or false");
		return -1;
	}
	return 0;
}

/* One argument of the tool's. -1 once the error is sent. */
static int take_argument(struct server *s, json_t *id, const char *key, json_t *value,
		struct call_request *r)
{
	int tool = r->tool;
	if ((tool == TOOL_RUN || tool == TOOL_END_SESSION) && strcmp(key, "session") == 0) {
		r->session = json_is_string(value) ? json_string_value(value) : NULL;
		size_t n = r->session ? strlen(r->session) : 0;
		if (n == 0 || n > SESSION_NAME_MAX || n != json_string_length(value) ||
		    strspn(r->session, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-_") != n) {
			send_error(s, id, INVALID_PARAMS, "session is a name of 1 to %d letters, "
				"digits, - and _", SESSION_NAME_MAX);
			return -1;
		}
	} else if (tool == TOOL_RUN && strcmp(key, "code") == 0) {
		r->code = value;
	} else if (tool == TOOL_RUN && strcmp(key, "files") == 0) {
		if (!json_is_object(value)) {
			send_error(s, id, INVALID_PARAMS, "files is an object: {\"name\": \"text\"} "
				"or {\"name\": {\"base64\": \"...\"}}");
			return -1;
		}
		r->files = value;
	} else if (tool == TOOL_RUN && strcmp(key, "timeout_seconds") == 0) {
		double t = json_is_integer(value) ? (double)json_integer_value(value) :
			json_is_real(value) ? json_real_value(value) : -1;
		if (t != (long)t || t < 1 || t > s->cfg->number[SET_TIMEOUT]) {
			send_error(s, id, INVALID_PARAMS, "timeout_seconds must be an integer from "
				"1 to %ld (this server's --timeout)", s->cfg->number[SET_TIMEOUT]);
			return -1;
		}
		r->timeout = (long)t;
	} else if (tool == TOOL_RUN && strcmp(key, "seed") == 0) {
		if (!json_is_integer(value) || json_integer_value(value) < 0 ||
		    json_integer_value(value) > SEED_MAX) {
			send_error(s, id, INVALID_PARAMS, "seed must be an integer from 0 to "
				"4294967295");
			return -1;
		}
		r->seed = (long)json_integer_value(value);
	} else {
		send_error(s, id, INVALID_PARAMS, "%s takes %s; unknown argument '%s'",
			tool_names[tool], tool == TOOL_RUN ? "code, timeout_seconds, files, seed and "
			"session" :
			tool == TOOL_END_SESSION ? "session" : "no arguments", key);
		return -1;
	}
	return 0;
}

/* The call, made from a checked request: the server's from here on. */
static struct mcp_call *make_call(struct server *s, json_t *id, const struct call_request *r,
		struct infiles *in)
{
	struct mcp_call *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	c->in = *in;
	c->out_dir = r->out_dir ? strdup(json_string_value(r->out_dir)) : NULL;
	c->out_overwrite = json_is_true(r->overwrite);
	c->srv = s;
	loop_scope_init(&c->scope, s->loop, "an MCP call");
	c->id = json_incref(id);
	c->progress_token = json_incref(r->token);
	c->tool = (enum tool)r->tool;
	snprintf(c->session_name, sizeof c->session_name, "%s", r->session);
	c->cfg = *s->cfg;
	c->cfg.number[SET_TIMEOUT] = r->timeout;
	snprintf(c->timeout_text, sizeof c->timeout_text, "%ld", r->timeout);
	c->cfg.value[SET_TIMEOUT] = c->timeout_text;
	if (r->seed >= 0) {
		c->cfg.number[SET_SEED] = r->seed;
		snprintf(c->seed_text, sizeof c->seed_text, "%ld", r->seed);
		c->cfg.value[SET_SEED] = c->seed_text;
	}
	if (r->code) {
		/* Longer code is refused when the call starts, with its size: only
		 * one byte past the limit is kept to say so. */
		c->code_len = json_string_length(r->code);
		if (c->code_len > MAX_CODE_BYTES + 1)
			c->code_len = MAX_CODE_BYTES + 1;
		c->code = malloc(c->code_len + 1);
		if (!c->code)
			abort();
		memcpy(c->code, json_string_value(r->code), c->code_len);
		c->code[c->code_len] = '\0';
	}
	return c;
}

/* tools/call: checked whole before anything runs. */
static void call_tool(struct server *s, json_t *id, json_t *params)
{
	struct call_request r = {.session = "", .timeout = s->cfg->number[SET_TIMEOUT], .seed = -1};
	json_t *args = json_object_get(params, "arguments");
	const char *key;
	json_t *value;
	if (check_envelope(s, id, params, &r) < 0)
		return;
	json_object_foreach(json_is_object(args) ? args : NULL, key, value)
		if (take_argument(s, id, key, value, &r) < 0)
			return;
	if (r.tool == TOOL_END_SESSION) {
		end_session_tool(s, id, r.session);
		return;
	}
	if (r.tool == TOOL_RUN && !json_is_string(r.code)) {
		send_error(s, id, INVALID_PARAMS, "run_sagemath needs arguments.code, a string of "
			"Sage code");
		return;
	}
	if (find_call(s, id)) {
		send_error(s, id, INVALID_REQUEST, "id already names a call in progress");
		return;
	}
	int waiting = 0;
	for (struct mcp_call *c = s->calls; c; c = c->next)
		waiting += !c->run || !call_started_at(c->run);
	if (waiting >= MAX_WAITING_CALLS) {
		send_error(s, id, INTERNAL_ERROR, "%d calls are already waiting for their turn; "
			"send more once some are answered", MAX_WAITING_CALLS);
		return;
	}
	struct infiles in = {0};
	if (r.files && take_files(r.files, &in, s, id) < 0) {
		infiles_free(&in);
		return;
	}
	struct mcp_call *c = make_call(s, id, &r, &in);
	struct mcp_call **end = &s->calls;
	while (*end)
		end = &(*end)->next;
	*end = c;
	if (c->tool == TOOL_STATUS)
		answer_status(c);
	else
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
		struct mcp_call *c = id ? find_call(s, id) : NULL;
		if (c) {
			fprintf(stderr, "sage-sandbox mcp: a call was cancelled%s\n",
				c->run && call_started_at(c->run) ? "; its container is being removed" :
				" before it started");
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

static void end_of_input(struct server *s, const char *why);

static void on_request_bytes(int fd, unsigned events, void *data)
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
		buffer_free(&s->line);
		end_of_input(s, n < 0 ? "cannot read stdin" : "end of input");
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
	/* After the end of input, the last call's answer begins the shutdown:
	 * nothing is left to run, only sandboxes to remove. */
	if (s->input_ended && !s->stopping && !s->calls) {
		shut_down(s, SIGTERM, "end of input");
		return;
	}
	/* Stopping, a host check on its way is not waited for: no call is
	 * left for its answer. */
	if (s->stopping && !s->calls)
		host_check_cancel(&s->host_check);
	if (s->stopping && (s->drained || !s->runner) && !s->calls &&
	    (!s->out || queue_closed(s->out) || queue_pending(s->out) == 0))
		loop_quit(s->loop);
}

static void on_drained(void *data)
{
	struct server *s = data;
	s->drained = true;
	maybe_quit(s);
}

static void on_shutdown_limit(void *data)
{
	struct server *s = data;
	fprintf(stderr, "sage-sandbox mcp: stopping took too long; leaving the rest to "
			"podman's --timeout and 'sage-sandbox cleanup'\n");
	loop_quit(s->loop);
}

/* Stops reading, stops every call (those that wait are answered as not
 * run) and every warm sandbox and session, and quits once their
 * containers are removed and the answers are written. From here on
 * nothing starts: the runner's drain starts no sandbox. */
static void shut_down(struct server *s, int sig, const char *why)
{
	if (s->stopping)
		return;
	s->stopping = true;
	fprintf(stderr, "sage-sandbox mcp: %s; stopping\n", why);
	loop_unwatch(&s->in_watch);
	loop_timer_arm(&s->scope, &s->shutdown_timer, loop_now_ms() + SHUTDOWN_LIMIT_MS,
		on_shutdown_limit, s);
	/* Calls that wait for the host never reach the runner. */
	struct mcp_call *c;
	while ((c = first_waiting(s))) {
		send_error(s, c->id, INTERNAL_ERROR, "the server is shutting down (%s)", why);
		free_call(c);
	}
	char reason[128];
	snprintf(reason, sizeof reason, "the server is shutting down (%s)", why);
	if (s->runner)
		runner_drain(s->runner, sig, reason, on_drained, s);
	maybe_quit(s);
}

/* The end of stdin: no more requests come. Those already read run to
 * their ends, each within its own timeout, and are answered; then the
 * shutdown (maybe_quit). A signal meanwhile still stops everything at
 * once. */
static void end_of_input(struct server *s, const char *why)
{
	loop_unwatch(&s->in_watch);
	if (s->input_ended || s->stopping)
		return;
	s->input_ended = true;
	/* Nothing is started for calls that will not come. */
	if (s->runner)
		runner_stop_warming(s->runner);
	int open = 0;
	for (struct mcp_call *c = s->calls; c; c = c->next)
		open++;
	if (open)
		fprintf(stderr, "sage-sandbox mcp: %s; answering the %d call%s already read, then "
			"stopping\n", why, open, open == 1 ? "" : "s");
	maybe_quit(s);
}

/* The first signal (signals.c: a second one exits at once). */
static void on_signal(int sig, void *data)
{
	struct server *s = data;
	char why[64];
	snprintf(why, sizeof why, "signal %d", sig);
	shut_down(s, sig, why);
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
	shut_down(data, SIGPIPE, "stdout was closed");
}

/* The host's answer. A refusal answers the calls waiting for it, and is
 * not final: the next call asks again, so that an image built or pulled
 * while the server runs is found. Sandboxes can run: the runner starts,
 * and with it the warm pool. */
static void on_host(struct host *h, void *data)
{
	struct server *s = data;
	if (s->stopping) {
		maybe_quit(s);
		return;
	}
	if (h->refusal.status) {
		fprintf(stderr, "sage-sandbox mcp: no sandbox can run yet: %s; %s\n",
			h->refusal.message, h->refusal.hint);
		struct mcp_call *c;
		while (!s->stopping && (c = first_waiting(s))) {
			answer_refusal(c, &h->refusal);
			free_call(c);
		}
		return;
	}
	/* After the end of input no call is coming for a warm sandbox: only
	 * the calls already read get theirs. */
	struct runner_options ro = {.loop = s->loop, .host = &s->host, .cfg = s->cfg,
		.who = "mcp", .log = true, .running_max = (int)s->cfg->number[SET_CONCURRENCY],
		.warm = s->input_ended ? 0 : (int)s->cfg->number[SET_WARM],
		.sessions_max = (int)s->cfg->number[SET_SESSIONS],
		.session_idle_seconds = s->cfg->number[SET_SESSION_IDLE]};
	s->runner = runner_new(&ro);
	pump(s);
}

static void check_host(struct server *s)
{
	host_check(s->loop, &s->host_check, s->cfg, loop_now_ms() + HOST_CHECK_TIMEOUT_MS, true,
		&s->host, on_host, s);
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

int mcp_serve(const struct config *cfg)
{
	struct server s = {.cfg = cfg};
	struct error err;
	s.loop = loop_new();
	if (s.loop)
		loop_scope_init(&s.scope, s.loop, "the MCP server");
	s.tools = tool_list(cfg);
	s.in_fd = reopen_nonblocking(0, O_RDONLY);
	int out_fd = reopen_nonblocking(1, O_WRONLY);
	s.signals = s.loop ? stop_signals_watch(s.loop, false, on_signal, &s, &err) : NULL;
	if (s.in_fd < 0 || out_fd < 0 || !s.signals) {
		fprintf(stderr, "sage-sandbox: mcp cannot use stdin, stdout or signals: %s\n",
			strerror(errno));
		return EXIT_REFUSED;
	}
	s.out = queue_new(s.loop, out_fd, OUT_PAUSE_BYTES, on_out_drained, on_out_error, &s);
	if (!s.out || loop_watch(&s.scope, &s.in_watch, s.in_fd, LOOP_READ, on_request_bytes,
			&s) < 0) {
		fprintf(stderr, "sage-sandbox: mcp cannot watch stdin or stdout: %s\n",
			strerror(errno));
		return EXIT_REFUSED;
	}
	fprintf(stderr, "sage-sandbox mcp %s: serving MCP on stdio; %ld warm, %ld at once\n",
		SAGE_SANDBOX_VERSION, cfg->number[SET_WARM], cfg->number[SET_CONCURRENCY]);
	/* Asked at once, so that the warm pool starts before the first call. */
	check_host(&s);
	if (loop_run(s.loop) < 0)
		fprintf(stderr, "sage-sandbox mcp: the event loop failed: %s\n", strerror(errno));
	queue_flush_now(s.out);

	/* What is left after the shutdown's limit is abandoned to podman's
	 * backstop: calls' sandboxes, warm ones. Nothing starts a shutdown
	 * from here. */
	s.stopping = true;
	while (s.calls)
		free_call(s.calls);
	runner_free(s.runner);
	loop_scope_end(&s.scope);
	host_check_cancel(&s.host_check);
	/* Stopped by a signal: 128+N, as every command of sage-sandbox. */
	int sig = stop_signals_first(s.signals);
	stop_signals_free(s.signals);
	queue_free(s.out);
	close(s.in_fd);
	buffer_free(&s.line);
	json_decref(s.tools);
	loop_free(s.loop);
	return sig ? 128 + sig : 0;
}

/* One message line to a server that can run nothing (its podman is
 * nowhere): what a client sends is parsed, checked and answered as it is
 * by mcp_serve, answers going to /dev/null. For tests/fuzz/fuzz-jsonrpc.c:
 * the server lives from the first line to the process's end. */
void mcp_take_line_offline(const char *line, size_t len)
{
	static struct server s;
	static struct config cfg;
	if (!s.loop) {
		const char *flags[SETTING_COUNT] = {[SET_PODMAN] = "/nonexistent/podman"};
		char why[256];
		if (config_init(&cfg, flags, true, why, sizeof why) < 0)
			abort();
		s.cfg = &cfg;
		s.loop = loop_new();
		if (!s.loop)
			abort();
		loop_scope_init(&s.scope, s.loop, "the offline MCP server");
		s.tools = tool_list(&cfg);
		int out = open("/dev/null", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		s.out = out < 0 ? NULL : queue_new(s.loop, out, OUT_PAUSE_BYTES, NULL, NULL, &s);
		if (!s.loop || !s.out)
			abort();
	}
	take_line(&s, line, len);
	queue_flush_now(s.out);
}
