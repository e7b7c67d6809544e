/* terminal.h: the code's output made safe to show on a terminal. */
#ifndef SAGE_SANDBOX_TERMINAL_H
#define SAGE_SANDBOX_TERMINAL_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>

/* One stream's state: a UTF-8 sequence may be split between chunks. */
struct terminal_filter {
	unsigned char carry[4];
	size_t carry_len;
};

/* Appends to out the visible form of data: newline, tab and printable
 * UTF-8 unchanged; other C0 controls and DEL in caret notation ("^[",
 * "^?", as cat -v); C1 controls as "\u009b"; bytes that are not UTF-8 as
 * "\x9b". An incomplete sequence at the end waits for the next chunk,
 * unless at_end. */
void terminal_escape(struct terminal_filter *f, const char *data, size_t len, bool at_end,
		struct buffer *out);

#endif
