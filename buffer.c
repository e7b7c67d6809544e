/* buffer.c: growable byte buffers, stepping through lines, reading small files. */
#include "buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void buffer_append(struct buffer *b, const char *data, size_t len)
{
	if (len > SIZE_MAX - b->len - 1)
		abort();
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len + 1)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		char *p = realloc(b->data, cap);
		if (!p)
			abort();
		b->data = p;
		b->cap = cap;
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void buffer_free(struct buffer *b)
{
	free(b->data);
	*b = (struct buffer){0};
}

void buffer_append_line(struct buffer *b, const char *line, size_t len)
{
	buffer_append(b, line, len);
	buffer_append(b, "\n", 1);
}

const char *next_line(const char **cursor, size_t *len)
{
	const char *line = *cursor;
	if (!line || !*line)
		return NULL;
	*len = strcspn(line, "\n");
	*cursor = line + *len + (line[*len] == '\n');
	return line;
}

int read_fd(int fd, size_t max, struct buffer *out)
{
	char chunk[65536];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || out->len + (size_t)n > max) {
			int saved = n < 0 ? errno : EFBIG;
			buffer_free(out);
			errno = saved;
			return -1;
		}
		buffer_append(out, chunk, (size_t)n);
	}
	if (!out->data)
		buffer_append(out, "", 0);
	return 0;
}

int read_file(const char *path, size_t max, struct buffer *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	int rc = read_fd(fd, max, out);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

ssize_t read_small(int dir_fd, const char *path, char *text, size_t size)
{
	int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	text[n] = '\0';
	return n;
}

const char *last_line(const char *text, size_t size, size_t *len)
{
	while (size && (text[size - 1] == '\n' || text[size - 1] == '\r' || text[size - 1] == ' '))
		size--;
	const char *start = text + size;
	while (start > text && start[-1] != '\n')
		start--;
	*len = (size_t)(text + size - start);
	return start;
}
