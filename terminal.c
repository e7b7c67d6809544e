/* terminal.c: the code's output made safe to show on a terminal.
 *
 * A terminal obeys what it is sent: OSC 52 writes the clipboard, OSC 0 the
 * window title, CSI sequences move the cursor and clear the screen, and on
 * terminals that are not in UTF-8 mode a lone 0x9b byte is a CSI too. Code
 * in the sandbox could use them to hide its output, forge what the user
 * sees or reach the desktop. So when sage-sandbox's output is a terminal,
 * every control character but newline and tab is shown in a visible form
 * instead, as less and ls do; pipes and files get the bytes unchanged. */
#include "terminal.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

/* The length a UTF-8 lead byte announces, or 0 if it is not a lead byte. */
static size_t announced_length(unsigned char lead)
{
	if (lead >= 0xc2 && lead <= 0xdf)
		return 2;
	if (lead >= 0xe0 && lead <= 0xef)
		return 3;
	if (lead >= 0xf0 && lead <= 0xf4)
		return 4;
	return 0;
}

/* Could p[0..len) be the start of a valid sequence cut short? */
static bool incomplete(const unsigned char *p, size_t len)
{
	size_t need = announced_length(p[0]);
	if (need == 0 || len >= need)
		return false;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return false;
	return true;
}

static void escape_bytes(const unsigned char *p, size_t len, bool at_end, struct buffer *out,
		size_t *used)
{
	char visible[8];
	size_t i = 0;
	while (i < len) {
		unsigned char c = p[i];
		size_t n = utf8_sequence_length(p + i, len - i);
		if (n == 0 && !at_end && incomplete(p + i, len - i))
			break;
		if (n == 0) {
			snprintf(visible, sizeof visible, "\\x%02x", c);
			buffer_append(out, visible, 4);
			i++;
		} else if (n == 1) {
			if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
				buffer_append(out, (const char *)&c, 1);
			} else {
				visible[0] = '^';
				visible[1] = c == 0x7f ? '?' : (char)(c + 64);
				buffer_append(out, visible, 2);
			}
			i++;
		} else {
			/* U+0080..U+009F, the C1 controls, are C2 80..C2 9F. */
			if (n == 2 && c == 0xc2 && p[i + 1] <= 0x9f) {
				snprintf(visible, sizeof visible, "\\u%04x", p[i + 1]);
				buffer_append(out, visible, 6);
			} else {
				buffer_append(out, (const char *)p + i, n);
			}
			i += n;
		}
	}
	*used = i;
}

void terminal_escape(struct terminal_filter *f, const char *data, size_t len, bool at_end,
		struct buffer *out)
{
	size_t used;
	/* Complete the carried sequence with the first bytes of this chunk. */
	while (f->carry_len && (len || at_end)) {
		if (len && f->carry_len < sizeof f->carry) {
			f->carry[f->carry_len++] = (unsigned char)*data++;
			len--;
		}
		bool whole = utf8_sequence_length(f->carry, f->carry_len) == f->carry_len;
		if (whole || !incomplete(f->carry, f->carry_len) || (at_end && !len)) {
			escape_bytes(f->carry, f->carry_len, true, out, &used);
			f->carry_len = 0;
		} else if (!len) {
			return;
		}
	}
	escape_bytes((const unsigned char *)data, len, at_end, out, &used);
	memcpy(f->carry, data + used, len - used);
	f->carry_len = len - used;
}
