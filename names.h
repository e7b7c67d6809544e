/* names.h: which file names may cross the sandbox boundary, in either
 * direction, and how a refused one is shown. */
#ifndef SAGE_SANDBOX_NAMES_H
#define SAGE_SANDBOX_NAMES_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Directories a path may go down, in and out. */
#define NAMES_MAX_DEPTH 16
/* A whole path, and one part of it, in bytes. */
#define NAMES_MAX_PATH_BYTES 1024
#define NAMES_MAX_PART_BYTES 255

/* The length of the printable UTF-8 character at s (no C0 control, DEL,
 * C1 control, bidirectional control or line or paragraph separator), or 0
 * when there is none. */
size_t printable_char_length(const unsigned char *s, size_t len);
/* One part of a path: 1 to NAMES_MAX_PART_BYTES bytes of printable UTF-8,
 * no '/', not "." or "..". */
bool name_part_allowed(const char *p, size_t len);
/* A relative path of allowed parts joined by '/', at most
 * NAMES_MAX_PATH_BYTES long and NAMES_MAX_DEPTH directories deep. */
bool relative_path_allowed(const char *p, size_t len);
/* The bytes as text anyone can read, on one line: printable UTF-8 kept,
 * every other byte, each byte of a character that is not seen (a
 * zero-width space, a byte order mark) and, where escape_backslash, the
 * backslash written as \xNN. Into out, NUL-terminated, at most size - 1
 * bytes, cut before a whole character and then ended by "…". Its length. */
size_t printable_copy(char *out, size_t size, const char *p, size_t len, bool escape_backslash);
/* printf's text, shown by printable_copy (backslashes kept) into out, of
 * size less than 4096. */
size_t printable_vformat(char *out, size_t size, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* Whether printable_copy shows these bytes as they are (backslashes
 * aside): printable UTF-8, nothing unseen. */
bool shown_as_is(const char *p, size_t len);
/* shown_as_is, and no space of any kind: a path or an image named in a
 * hint must read as it is, and as one word (attack helper 164 pasted a
 * hint whose zero-width space named another file; review helper 165 a
 * no-break space). */
bool reads_as_one_word(const char *text);
/* A name as printable_copy shows it (backslashes escaped, so that the
 * escapes cannot be mistaken), at most max bytes. A malloc'd string. */
char *printable_name(const char *p, size_t len, size_t max);
/* The string s as printable_name shows it, never cut. */
char *printable_whole(const char *s);

#endif
