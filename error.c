/* error.c: filling in an error value. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
{
	va_list ap;
	err->status = status;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
}
