/* error.c: filling in an error value. */
#include "error.h"
#include "names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
{
	/* One line of text: a value echoed from an option, a variable or a
	 * file (attack helper 162) could hold a newline that splits the
	 * line, or a terminal escape; one cut short ends in "…" on a
	 * character's boundary. */
	va_list ap;
	err->status = status;
	va_start(ap, fmt);
	printable_vformat(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	hint = hint ? hint : "";
	printable_copy(err->hint, sizeof err->hint, hint, strlen(hint), false);
}
