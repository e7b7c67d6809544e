/* names.c: which file names may cross the sandbox boundary (run --input,
 * MCP's files, the files that come back), one rule for all of them, and
 * how a refused one is shown. */
#include "names.h"
#include "buffer.h"
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Characters that are not seen at all, Unicode's default ignorable code
 * points: the soft hyphen, the combining grapheme joiner, Hangul fillers,
 * Khmer inherent vowels, Mongolian variation selectors and vowel
 * separator, the zero-width space, non-joiner and joiner, the word joiner,
 * invisible operators and deprecated format controls, variation
 * selectors, the byte order mark, interlinear annotation controls,
 * shorthand format controls, invisible musical format controls, the tag
 * characters (U+E0000-U+E007F: text a reader never sees and a model
 * reads) and the supplementary variation selectors. A name may hold some
 * of them (a joiner in an emoji, a non-joiner in Persian), but a message
 * that shows one raw shows two different names alike (attack helpers 162,
 * 164 and 166). */
static const struct {
	unsigned long first, last;
} unseen_ranges[] = {
	{0x00AD, 0x00AD}, {0x034F, 0x034F}, {0x115F, 0x1160}, {0x17B4, 0x17B5},
	{0x180B, 0x180F}, {0x200B, 0x200D}, {0x2060, 0x206F}, {0x3164, 0x3164},
	{0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF}, {0xFFA0, 0xFFA0}, {0xFFF0, 0xFFFB},
	{0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF},
};

/* s: one well-formed UTF-8 character of n bytes. */
static unsigned long code_point(const unsigned char *s, size_t n)
{
	static const unsigned char lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
	unsigned long c = s[0] & lead_mask[n];
	for (size_t i = 1; i < n; i++)
		c = c << 6 | (s[i] & 0x3F);
	return c;
}

static bool unseen(unsigned long c)
{
	for (size_t i = 0; i < sizeof unseen_ranges / sizeof *unseen_ranges; i++)
		if (c >= unseen_ranges[i].first && c <= unseen_ranges[i].last)
			return true;
	return false;
}

/* Unicode's space separators (Zs): a path or an image name holding one
 * reads as two words (the line and paragraph separators are refused as
 * breaks, the rest of white space as controls). */
static bool space_separator(unsigned long c)
{
	return c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
		c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Every character printable and seen, and, where one_word, none a space. */
static bool shown_whole(const char *p, size_t len, bool one_word)
{
	for (size_t i = 0; i < len;) {
		const unsigned char *u = (const unsigned char *)p + i;
		size_t n = printable_char_length(u, len - i);
		if (n == 0)
			return false;
		unsigned long c = code_point(u, n);
		if (unseen(c) || (one_word && space_separator(c)))
			return false;
		i += n;
	}
	return true;
}

bool shown_as_is(const char *p, size_t len)
{
	return shown_whole(p, len, false);
}

bool reads_as_one_word(const char *text)
{
	return shown_whole(text, strlen(text), true);
}

/* The characters from p[0] shown into out within limit bytes (and a NUL);
 * *used tells how many bytes of p they took. */
static size_t printable_part(char *out, size_t limit, const char *p, size_t len,
		bool escape_backslash, size_t *used)
{
	size_t at = 0, i = 0;
	while (i < len) {
		const unsigned char *u = (const unsigned char *)p + i;
		size_t n = printable_char_length(u, len - i);
		/* An unseen character is escaped whole, \xNN per byte; any
		 * other byte that is no printable character, alone. */
		bool escaped = n == 0 || unseen(code_point(u, n)) || (escape_backslash && *u == '\\');
		size_t take = n ? n : 1, width = escaped ? 4 * take : take;
		if (width > limit - at)
			break;
		if (escaped)
			for (size_t k = 0; k < take; k++)
				snprintf(out + at + 4 * k, 5, "\\x%02x", u[k]);
		else
			memcpy(out + at, u, take);
		at += width;
		i += take;
	}
	out[at] = '\0';
	*used = i;
	return at;
}

size_t printable_copy(char *out, size_t size, const char *p, size_t len, bool escape_backslash)
{
	static const char ellipsis[] = "\xe2\x80\xa6"; /* "…" */
	const size_t ellipsis_len = sizeof ellipsis - 1;
	size_t used;
	if (size == 0)
		return 0;
	size_t at = printable_part(out, size - 1, p, len, escape_backslash, &used);
	if (used == len || size - 1 < ellipsis_len)
		return at;
	/* Cut: again, with room for the "…" that says so. */
	at = printable_part(out, size - 1 - ellipsis_len, p, len, escape_backslash, &used);
	memcpy(out + at, ellipsis, ellipsis_len + 1);
	return at + ellipsis_len;
}

size_t printable_vformat(char *out, size_t size, const char *fmt, va_list ap)
{
	/* Made whole first where it fits: the cut is printable_copy's, on a
	 * character's boundary with its "…" (each byte shown is at least one
	 * byte, so a text cut here is cut again there). */
	char made[4096];
	int len = vsnprintf(made, sizeof made, fmt, ap);
	len = len < 0 ? 0 : len < (int)sizeof made ? len : (int)sizeof made - 1;
	return printable_copy(out, size, made, (size_t)len, false);
}

char *printable_name(const char *p, size_t len, size_t max)
{
	char *shown = malloc(max + 1);
	if (!shown)
		abort();
	printable_copy(shown, max + 1, p, len, true);
	return shown;
}

char *printable_whole(const char *s)
{
	size_t len = strlen(s);
	return printable_name(s, len, 4 * len); /* room for every byte as \xNN */
}
