/* base64.c: RFC 4648 base64 with the standard alphabet and padding. */
#include "base64.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode(const unsigned char *p, size_t len, struct buffer *out)
{
	char quad[4];
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
			(i + 2 < len ? p[i + 2] : 0);
		quad[0] = alphabet[v >> 18 & 63];
		quad[1] = alphabet[v >> 12 & 63];
		quad[2] = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
		quad[3] = i + 2 < len ? alphabet[v & 63] : '=';
		buffer_append(out, quad, 4);
	}
	if (!out->data)
		buffer_append(out, "", 0);
}

static int sextet(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

bool base64_decode(const char *text, size_t len, struct buffer *out)
{
	if (len % 4)
		return false;
	buffer_append(out, "", 0);
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int a = sextet(text[i]), b = sextet(text[i + 1]);
		int c = last && text[i + 2] == '=' && text[i + 3] == '=' ? -2 : sextet(text[i + 2]);
		int d = last && text[i + 3] == '=' ? -2 : sextet(text[i + 3]);
		if (a < 0 || b < 0 || c == -1 || d == -1)
			return false;
		unsigned char bytes[3] = {(unsigned char)(a << 2 | b >> 4),
			(unsigned char)((b & 15) << 4 | (c < 0 ? 0 : c >> 2)),
			(unsigned char)((c < 0 ? 0 : (c & 3) << 6) | (d < 0 ? 0 : d))};
		buffer_append(out, (const char *)bytes, c < 0 ? 1 : d < 0 ? 2 : 3);
	}
	return true;
}
