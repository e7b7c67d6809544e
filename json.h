/* json.h: a small streaming JSON writer for sage-sandbox's output. */
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

void json_begin_object(struct json *j);
void json_end_object(struct json *j);
void json_begin_array(struct json *j);
void json_end_array(struct json *j);
void json_key(struct json *j, const char *key);
/* Any bytes: control bytes escaped, invalid UTF-8 replaced by U+FFFD. */
void json_string(struct json *j, const char *s, size_t len);
/* A C string, or null when s is NULL. */
void json_cstring(struct json *j, const char *s);
void json_integer(struct json *j, long long value);
/* A decimal given in thousandths: 1500 -> 1.5. */
void json_decimal(struct json *j, long thousandths);
void json_bool(struct json *j, bool value);
void json_null(struct json *j);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
size_t utf8_sequence_length(const unsigned char *s, size_t len);

#endif
