/* frames.c: the frame format between sage-sandbox and the launcher:
 * headers written, and whole frames read back from any cut of the stream. */
#include "frames.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

void frame_header(unsigned char header[FRAME_HEADER], char type, size_t len)
{
	header[0] = (unsigned char)type;
	header[1] = (unsigned char)(len >> 24);
	header[2] = (unsigned char)(len >> 16);
	header[3] = (unsigned char)(len >> 8);
	header[4] = (unsigned char)len;
}

char *frame_reader_space(struct frame_reader *r, size_t *room)
{
	/* What was taken makes room: the rest moves to the front. */
	if (r->at) {
		memmove(r->bytes, r->bytes + r->at, r->len - r->at);
		r->len -= r->at;
		r->at = 0;
	}
	*room = sizeof r->bytes - r->len;
	return r->bytes + r->len;
}

void frame_reader_filled(struct frame_reader *r, size_t n)
{
	r->len += n;
}

int frame_reader_next(struct frame_reader *r, char *type, const char **payload, size_t *len)
{
	/* Not whole yet; the buffer holds the longest frame, so more bytes
	 * always fit once what was taken is dropped (frame_reader_space). */
	if (r->len - r->at < FRAME_HEADER)
		return 0;
	const unsigned char *h = (const unsigned char *)r->bytes + r->at;
	size_t length = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
	if (length > FRAME_MAX)
		return -1;
	if (r->len - r->at < FRAME_HEADER + length)
		return 0;
	*type = (char)h[0];
	*payload = r->bytes + r->at + FRAME_HEADER;
	*len = length;
	r->at += FRAME_HEADER + length;
	return 1;
}

int frame_parse_trailer(const char *payload, size_t len, struct trailer *t)
{
	static const char *const afters[] = {[AFTER_ENDS] = "ends", [AFTER_NEXT] = "next",
		[AFTER_KEPT] = "kept", [AFTER_LOST] = "lost"};
	json_t *o = json_loadb(payload, len, 0, NULL);
	json_t *exit_code = json_object_get(o, "exit"), *signal = json_object_get(o, "signal");
	json_t *ended_at = json_object_get(o, "ended_at");
	const char *after = json_string_value(json_object_get(o, "container"));
	const char *interrupted = json_string_value(json_object_get(o, "interrupted"));
	const char *why = json_string_value(json_object_get(o, "why"));
	int a = AFTER_ENDS;
	while (after && a <= AFTER_LOST && strcmp(after, afters[a]) != 0)
		a++;
	bool exited = json_is_integer(exit_code) && json_integer_value(exit_code) >= 0 &&
		json_integer_value(exit_code) <= 255;
	bool killed = json_is_integer(signal) && json_integer_value(signal) > 0 &&
		json_integer_value(signal) < 65;
	int rc = -1;
	if (json_is_object(o) && exited != killed && json_is_integer(ended_at) && after &&
	    a <= AFTER_LOST) {
		*t = (struct trailer){.exited = exited, .after = (enum container_after)a,
			.status = (int)json_integer_value(exited ? exit_code : signal),
			.ended_at = json_integer_value(ended_at),
			.interrupted = interrupted != NULL,
			.cpu_limit = json_is_true(json_object_get(o, "cpu_limit")) ||
				(interrupted && strcmp(interrupted, "cpu") == 0)};
		snprintf(t->why, sizeof t->why, "%s", why ? why : "");
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int frame_parse_warm(const char *payload, size_t len, struct warm_report *w)
{
	json_t *o = json_loadb(payload, len, 0, NULL);
	json_t *steps = json_object_get(o, "ms"), *why = json_object_get(o, "why");
	int rc = -1;
	if (json_is_object(o) && json_is_object(steps) && (!why || json_is_string(why))) {
		*w = (struct warm_report){0};
		const char *name;
		json_t *ms;
		json_object_foreach(steps, name, ms)
			if (json_is_integer(ms) && json_integer_value(ms) >= 0 &&
			    json_integer_value(ms) < 1000000000)
				w->ms += json_integer_value(ms);
		snprintf(w->why, sizeof w->why, "%s", why ? json_string_value(why) : "");
		rc = 0;
	}
	json_decref(o);
	return rc;
}
