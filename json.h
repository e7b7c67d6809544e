/* json.h: a small streaming JSON writer (jw_*) for what sage-sandbox prints;
 * parsing untrusted JSON is jansson's (json_*, in mcp.c). */
#ifndef SAGE_SANDBOX_JSON_H
#define SAGE_SANDBOX_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *out;
	int depth;
	bool has_items[JSON_MAX_DEPTH];
	bool after_key;
};

void jw_begin_object(struct json *j);
void jw_end_object(struct json *j);
void jw_begin_array(struct json *j);
void jw_end_array(struct json *j);
void jw_key(struct json *j, const char *key);
/* Any bytes: control bytes escaped, invalid UTF-8 replaced by U+FFFD. */
void jw_string(struct json *j, const char *s, size_t len);
/* A C string, or null when s is NULL. */
void jw_cstring(struct json *j, const char *s);
void jw_integer(struct json *j, long long value);
/* A decimal given in thousandths: 1500 -> 1.5. */
void jw_decimal(struct json *j, long thousandths);
void jw_bool(struct json *j, bool value);
void jw_null(struct json *j);
/* A value that is JSON already (a job's id, as jansson wrote it). */
void jw_raw(struct json *j, const char *json_text);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
size_t utf8_sequence_length(const unsigned char *s, size_t len);

#endif
