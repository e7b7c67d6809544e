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
/* Any bytes: control bytes, U+2028 and U+2029 escaped, invalid UTF-8
 * replaced by U+FFFD. */
void jw_string(struct json *j, const char *s, size_t len);
/* A C string, or null when s is NULL. */
void jw_cstring(struct json *j, const char *s);
void jw_integer(struct json *j, long long value);
/* A decimal given in thousandths: 1500 -> 1.5. */
void jw_decimal(struct json *j, long thousandths);
void jw_bool(struct json *j, bool value);
void jw_null(struct json *j);
/* A value that is JSON already (a job's id, as jansson wrote it), with
 * U+2028 and U+2029 escaped as json_escape_separators() does. */
void jw_raw(struct json *j, const char *json_text);

/* JSON text that jansson wrote (json_dumps), made fit for every reader:
 * each U+2028 and U+2029 becomes \u2028 or \u2029. Raw, they are valid
 * JSON, and jansson leaves them so, but JavaScript before ES2019 (and any
 * reader that splits lines the way JavaScript does) takes them for line
 * ends. In JSON text they can only be inside strings, so the escape keeps
 * the value. Takes text (malloc'd, or NULL) and returns it or the longer
 * copy that replaces it. */
char *json_escape_separators(char *text);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
size_t utf8_sequence_length(const unsigned char *s, size_t len);

#endif
