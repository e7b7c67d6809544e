/* names.c: which file names may cross the sandbox boundary (run --input,
 * MCP's files, the files that come back), one rule for all of them, and
 * how a refused one is shown. */
#include "names.h"
#include "buffer.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

/* Characters that change how the text around them reads without being
 * seen: bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069: a name "e<U+202E>ftx.tex" shows as "exft.tex") and the
 * line and paragraph separators (U+2028, U+2029), which some readers
 * break lines at. */
static bool reorders_or_breaks(const unsigned char *s, size_t n)
{
	if (n == 2)
		return s[0] == 0xD8 && s[1] == 0x9C;
	if (n != 3 || s[0] != 0xE2)
		return false;
	return (s[1] == 0x80 && (s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xA8 && s[2] <= 0xAE))) ||
		(s[1] == 0x81 && s[2] >= 0xA6 && s[2] <= 0xA9);
}

size_t printable_char_length(const unsigned char *s, size_t len)
{
	size_t n = utf8_sequence_length(s, len);
	if ((n == 1 && (*s < 0x20 || *s == 0x7f)) || (n == 2 && s[0] == 0xC2 && s[1] < 0xA0) ||
	    reorders_or_breaks(s, n))
		return 0;
	return n;
}

bool name_part_allowed(const char *p, size_t len)
{
	if (len == 0 || len > NAMES_MAX_PART_BYTES || (len == 1 && p[0] == '.') ||
	    (len == 2 && p[0] == '.' && p[1] == '.'))
		return false;
	for (size_t i = 0; i < len;) {
		size_t n = printable_char_length((const unsigned char *)p + i, len - i);
		if (n == 0 || p[i] == '/')
			return false;
		i += n;
	}
	return true;
}

bool relative_path_allowed(const char *p, size_t len)
{
	if (len == 0 || len > NAMES_MAX_PATH_BYTES)
		return false;
	for (size_t start = 0, depth = 0;; depth++) {
		const char *slash = memchr(p + start, '/', len - start);
		size_t part = slash ? (size_t)(slash - (p + start)) : len - start;
		if (depth > NAMES_MAX_DEPTH || !name_part_allowed(p + start, part))
			return false;
		if (!slash)
			return true;
		start += part + 1;
	}
}

char *printable_name(const char *p, size_t len)
{
	struct buffer b = {0};
	for (size_t i = 0; i < len && b.len < 200;) {
		const unsigned char *u = (const unsigned char *)p + i;
		size_t n = printable_char_length(u, len - i);
		if (n == 0 || *u == '\\') {
			char esc[8];
			snprintf(esc, sizeof esc, "\\x%02x", *u);
			buffer_append(&b, esc, 4);
			i++;
		} else {
			buffer_append(&b, p + i, n);
			i += n;
		}
	}
	if (!b.data)
		buffer_append(&b, "", 0);
	return b.data;
}
