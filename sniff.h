/* sniff.h: a file's media type from its first bytes, never from its name,
 * and the pixel size of the raster images among them. */
#ifndef SAGE_SANDBOX_SNIFF_H
#define SAGE_SANDBOX_SNIFF_H

#include <stdbool.h>
#include <stddef.h>

/* How many of a file's first bytes sniff() looks at. */
#define SNIFF_BYTES 65536

struct sniffed {
	const char *media_type; /* "image/png", "text/plain", ... */
	bool is_image;          /* one that MCP can show: PNG, JPEG, GIF, WebP, SVG */
	unsigned width, height; /* pixels, for PNG, JPEG, GIF and WebP; 0 if unknown */
};

/* head: the first bytes of the file (all of it when whole), len of them. */
void sniff(const unsigned char *head, size_t len, bool whole, struct sniffed *out);

#endif
