/* json.c: writes JSON to a stream. Every byte that came from the sandbox is
 * hostile: the output must stay valid JSON whatever Sage printed. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

static void separate(struct json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->depth > 0 && j->has_items[j->depth - 1])
		fputc(',', j->out);
	if (j->depth > 0)
		j->has_items[j->depth - 1] = true;
}

static void open_container(struct json *j, char c)
{
	separate(j);
	if (j->depth >= JSON_MAX_DEPTH)
		abort();
	fputc(c, j->out);
	j->has_items[j->depth++] = false;
}

static void close_container(struct json *j, char c)
{
	j->depth--;
	fputc(c, j->out);
	if (j->depth == 0)
		fputc('\n', j->out);
}

void jw_begin_object(struct json *j) { open_container(j, '{'); }
void jw_end_object(struct json *j) { close_container(j, '}'); }
void jw_begin_array(struct json *j) { open_container(j, '['); }
void jw_end_array(struct json *j) { close_container(j, ']'); }

size_t utf8_sequence_length(const unsigned char *s, size_t len)
{
	size_t need;
	unsigned min, cp;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		need = 2, min = 0x80, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		need = 3, min = 0x800, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		need = 4, min = 0x10000, cp = s[0] & 0x07;
	else
		return 0;
	if (len < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are
	 * not UTF-8. */
	if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return need;
}

/* 0x2028 or 0x2029 when s starts with U+2028 or U+2029 (E2 80 A8, E2 80
 * A9), else 0: the two characters JavaScript ends a line at that JSON
 * does not (see json_escape_separators in json.h). */
static unsigned js_separator(const unsigned char *s, size_t len)
{
	if (len >= 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9))
		return 0x2000 | (s[2] - 0x80);
	return 0;
}

/* Writes len bytes of JSON text, each separator escaped. */
static void put_text(FILE *out, const char *text, size_t len)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t from = 0;
	for (size_t i = 0; i + 3 <= len; i++) {
		unsigned sep = js_separator(p + i, len - i);
		if (!sep)
			continue;
		fwrite(p + from, 1, i - from, out);
		fprintf(out, "\\u%04x", sep);
		from = i + 3;
		i += 2;
	}
	fwrite(p + from, 1, len - from, out);
}

char *json_escape_separators(char *text)
{
	if (!text)
		return NULL;
	size_t len = strlen(text), count = 0;
	for (size_t i = 0; i + 3 <= len; i++)
		if (js_separator((const unsigned char *)text + i, len - i))
			count++, i += 2;
	if (!count)
		return text;
	char *escaped = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&escaped, &size);
	if (!f)
		abort();
	put_text(f, text, len);
	if (fclose(f) != 0 || !escaped)
		abort();
	free(text);
	return escaped;
}

void jw_string(struct json *j, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	separate(j);
	fputc('"', j->out);
	for (size_t i = 0; i < len;) {
		unsigned char c = p[i];
		size_t n = utf8_sequence_length(p + i, len - i);
		if (n == 0) {
			fputs("\xef\xbf\xbd", j->out); /* U+FFFD */
			i++;
			continue;
		}
		if (n > 1) {
			unsigned sep = n == 3 ? js_separator(p + i, n) : 0;
			if (sep)
				fprintf(j->out, "\\u%04x", sep);
			else
				fwrite(p + i, 1, n, j->out);
			i += n;
			continue;
		}
		switch (c) {
		case '"': fputs("\\\"", j->out); break;
		case '\\': fputs("\\\\", j->out); break;
		case '\n': fputs("\\n", j->out); break;
		case '\t': fputs("\\t", j->out); break;
		case '\r': fputs("\\r", j->out); break;
		case '\b': fputs("\\b", j->out); break;
		case '\f': fputs("\\f", j->out); break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(j->out, "\\u%04x", c);
			else
				fputc(c, j->out);
		}
		i++;
	}
	fputc('"', j->out);
}

void jw_key(struct json *j, const char *key)
{
	jw_cstring(j, key);
	fputc(':', j->out);
	j->after_key = true;
}

void jw_cstring(struct json *j, const char *s)
{
	if (!s) {
		jw_null(j);
		return;
	}
	size_t len = 0;
	while (s[len])
		len++;
	jw_string(j, s, len);
}

void jw_integer(struct json *j, long long value)
{
	separate(j);
	fprintf(j->out, "%lld", value);
}

void jw_decimal(struct json *j, long thousandths)
{
	long whole = thousandths / 1000, part = thousandths % 1000;
	int places = 3;
	separate(j);
	while (part && part % 10 == 0)
		part /= 10, places--;
	if (part)
		fprintf(j->out, "%ld.%0*ld", whole, places, part);
	else
		fprintf(j->out, "%ld", whole);
}

void jw_bool(struct json *j, bool value)
{
	separate(j);
	fputs(value ? "true" : "false", j->out);
}

void jw_null(struct json *j)
{
	separate(j);
	fputs("null", j->out);
}

void jw_raw(struct json *j, const char *json_text)
{
	separate(j);
	put_text(j->out, json_text, strlen(json_text));
}
