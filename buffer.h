/* buffer.h: growable byte buffers, stepping through lines, reading small files. */
#ifndef SAGE_SANDBOX_BUFFER_H
#define SAGE_SANDBOX_BUFFER_H

#include <stddef.h>
#include <sys/types.h>

/* Always NUL-terminated after its len bytes once anything was appended. */
struct buffer {
	char *data;
	size_t len, cap;
};

void buffer_append(struct buffer *b, const char *data, size_t len);
void buffer_free(struct buffer *b);

/* Appends len bytes and a newline: one line of a list next_line reads. */
void buffer_append_line(struct buffer *b, const char *line, size_t len);

/* The last line with something on it of text's size bytes (len set, no
 * newline): what a program said last, its error after any warning it
 * printed first (podman's). */
const char *last_line(const char *text, size_t size, size_t *len);
/* Steps *cursor through text a line at a time: returns the line's start and
 * sets *len (newline excluded), or NULL at the end of the text. */
const char *next_line(const char **cursor, size_t *len);

/* Reads a whole small file (at most max bytes); -1 with errno on failure
 * (EFBIG past max). */
int read_file(const char *path, size_t max, struct buffer *out);
/* The same from an open descriptor, to its end. */
int read_fd(int fd, size_t max, struct buffer *out);
/* A file of /proc (path, relative to dir_fd or absolute) in one read, as
 * the kernel gives it, into text (size bytes, NUL-terminated): its length,
 * or -1 where it cannot be opened or read (the process gone). */
ssize_t read_small(int dir_fd, const char *path, char *text, size_t size);

#endif
