/* names.h: which file names may cross the sandbox boundary, in either
 * direction, and how a refused one is shown. */
#ifndef SAGE_SANDBOX_NAMES_H
#define SAGE_SANDBOX_NAMES_H

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
/* The bytes as text anyone can read: printable UTF-8 kept, every other
 * byte (and the backslash) written as \xNN; at most 200 bytes of it. A
 * malloc'd string. */
char *printable_name(const char *p, size_t len);

#endif
