/* sniff.c: a file's media type from its first bytes, and the pixel size of
 * PNG, JPEG, GIF and WebP images, read from their headers with every offset
 * checked: the bytes come from the sandbox. */
#include "sniff.h"
#include "json.h"

#include <stdint.h>
#include <string.h>

static unsigned be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static unsigned be32(const unsigned char *p)
{
	return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

static unsigned le24(const unsigned char *p)
{
	return p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16;
}

static unsigned le32(const unsigned char *p)
{
	return le24(p) | (unsigned)p[3] << 24;
}

static bool starts_with(const unsigned char *head, size_t len, const char *magic, size_t n)
{
	return len >= n && memcmp(head, magic, n) == 0;
}

/* JPEG: the first start-of-frame segment holds the size; segments before
 * it (EXIF, ICC) are skipped by their lengths. i never passes len + 65537
 * (a length is 16 bits), and each byte is read only below len. Anything
 * that is not a marker where one must be, a length shorter than itself,
 * or the scan or the image's end before a frame header, leaves the size
 * unknown (0). */
static void jpeg_size(const unsigned char *p, size_t len, struct sniffed *out)
{
	size_t i = 2;
	while (i + 4 <= len) {
		if (p[i] != 0xFF)
			return;
		unsigned marker = p[i + 1];
		if (marker == 0xFF) { /* fill byte */
			i++;
			continue;
		}
		if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
			i += 2;
			continue;
		}
		if (marker == 0x00 || marker == 0xD9 || marker == 0xDA)
			return; /* a stuffed byte, the end of the image, the scan */
		unsigned seglen = be16(p + i + 2);
		if (seglen < 2)
			return;
		bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
			marker != 0xCC;
		if (sof) {
			/* length, precision, height, width: 7 bytes of the segment */
			if (seglen >= 7 && i + 9 <= len) {
				out->height = be16(p + i + 5);
				out->width = be16(p + i + 7);
			}
			return;
		}
		i += 2 + (size_t)seglen;
	}
}

/* WebP: RIFF, its size, WEBP, then the first chunk, which holds the size:
 * VP8 (lossy: a key frame's start code, then 14-bit width and height),
 * VP8L (lossless: a signature byte, then width - 1 and height - 1 in 14
 * bits each) or VP8X (extended: flags, then the canvas's width - 1 and
 * height - 1 in 24 bits each). A chunk too short for its fields, or cut
 * by the end of the head, leaves the size unknown (0). */
static void webp_size(const unsigned char *p, size_t len, struct sniffed *out)
{
	if (len < 20)
		return;
	const unsigned char *chunk = p + 12, *data = p + 20;
	uint32_t chunk_len = le32(chunk + 4);
	size_t have = len - 20;
	if (memcmp(chunk, "VP8 ", 4) == 0) {
		if (chunk_len < 10 || have < 10 || (data[0] & 1) ||
		    memcmp(data + 3, "\x9d\x01\x2a", 3) != 0)
			return; /* not a key frame: no size */
		out->width = (data[6] | (unsigned)data[7] << 8) & 0x3fff;
		out->height = (data[8] | (unsigned)data[9] << 8) & 0x3fff;
	} else if (memcmp(chunk, "VP8L", 4) == 0) {
		if (chunk_len < 5 || have < 5 || data[0] != 0x2f)
			return;
		uint32_t bits = le32(data + 1);
		out->width = (bits & 0x3fff) + 1;
		out->height = (bits >> 14 & 0x3fff) + 1;
	} else if (memcmp(chunk, "VP8X", 4) == 0) {
		if (chunk_len < 10 || have < 10)
			return;
		out->width = le24(data + 4) + 1;
		out->height = le24(data + 7) + 1;
	}
}

static bool is_utf8_text(const unsigned char *p, size_t len, bool whole)
{
	for (size_t i = 0; i < len;) {
		if (p[i] == 0)
			return false;
		size_t n = utf8_sequence_length(p + i, len - i);
		if (n == 0)
			/* A sequence cut by the end of the head is not an error. */
			return !whole && len - i < 4 && (p[i] & 0xC0) == 0xC0;
		i += n;
	}
	return true;
}

/* An SVG document: text whose first element is <svg>, after an optional
 * XML declaration, doctype and comments. */
static bool is_svg(const unsigned char *p, size_t len)
{
	const char *text = (const char *)p;
	const char *svg = memmem(text, len, "<svg", 4);
	if (!svg)
		return false;
	for (const char *c = text; c < svg;) {
		if (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n') {
			c++;
		} else if ((size_t)(svg - c) >= 3 && memcmp(c, "\xEF\xBB\xBF", 3) == 0 && c == text) {
			c += 3;
		} else if (*c == '<' && c + 1 < svg && (c[1] == '?' || c[1] == '!')) {
			const char *end = memchr(c, '>', (size_t)(svg - c));
			if (!end)
				return false;
			c = end + 1;
		} else {
			return false;
		}
	}
	return true;
}

void sniff(const unsigned char *p, size_t len, bool whole, struct sniffed *out)
{
	*out = (struct sniffed){.media_type = "application/octet-stream"};
	if (starts_with(p, len, "\x89PNG\r\n\x1a\n", 8)) {
		out->media_type = "image/png";
		out->is_image = true;
		if (len >= 24 && memcmp(p + 12, "IHDR", 4) == 0) {
			out->width = be32(p + 16);
			out->height = be32(p + 20);
		}
	} else if (starts_with(p, len, "\xFF\xD8\xFF", 3)) {
		out->media_type = "image/jpeg";
		out->is_image = true;
		jpeg_size(p, len, out);
	} else if (starts_with(p, len, "GIF87a", 6) || starts_with(p, len, "GIF89a", 6)) {
		out->media_type = "image/gif";
		out->is_image = true;
		if (len >= 10) {
			out->width = p[6] | (unsigned)p[7] << 8;
			out->height = p[8] | (unsigned)p[9] << 8;
		}
	} else if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0) {
		out->media_type = "image/webp";
		out->is_image = true;
		webp_size(p, len, out);
	} else if (starts_with(p, len, "%PDF-", 5)) {
		out->media_type = "application/pdf";
	} else if (len == 0) {
		out->media_type = "application/x-empty";
	} else if (is_utf8_text(p, len, whole)) {
		if (is_svg(p, len)) {
			out->media_type = "image/svg+xml";
			out->is_image = true;
		} else {
			out->media_type = "text/plain";
		}
	}
}
