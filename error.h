/* error.h: an error as a value: only main() prints it and picks the exit status. */
#ifndef SAGE_SANDBOX_ERROR_H
#define SAGE_SANDBOX_ERROR_H

/* Exit statuses of sage-sandbox besides Sage's own (0, 1, 128+N). */
enum {
	EXIT_MEMORY_LIMIT = 122, /* the run's processes together passed --memory */
	EXIT_OUTPUT_LIMIT = 123, /* an output stream passed --output-limit */
	EXIT_TIMEOUT = 124,      /* --timeout stopped the run */
	EXIT_REFUSED = 125,      /* could not or would not run the code */
};

struct error {
	int status;
	char message[512];
	char hint[512];
};

/* message and hint made one line of text anyone can read (names.h's
 * printable_copy); hint (NULL for none) must not point into err. */
void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
