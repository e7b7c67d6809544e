/* error.c: filling in an error value. */
#include "error.h"
#include "names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
{
	/* Made in a larger buffer, then shown as one line of text: a value
	 * echoed from an option, a variable or a file (attack helper 162)
	 * could hold a newline that splits the line, or a terminal escape;
	 * one cut short ends in "…" on a character's boundary. */
	char made[2 * sizeof err->message];
	va_list ap;
	err->status = status;
	va_start(ap, fmt);
	int len = vsnprintf(made, sizeof made, fmt, ap);
	va_end(ap);
	len = len < 0 ? 0 : len < (int)sizeof made ? len : (int)sizeof made - 1;
	printable_copy(err->message, sizeof err->message, made, (size_t)len, false);
	hint = hint ? hint : "";
	printable_copy(err->hint, sizeof err->hint, hint, strlen(hint), false);
}
