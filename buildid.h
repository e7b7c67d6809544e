/* buildid.h: which build of sage-sandbox this is: a server serves only
 * clients of its own build (server.c). */
#ifndef SAGE_SANDBOX_BUILDID_H
#define SAGE_SANDBOX_BUILDID_H

#include <stddef.h>

/* The executable's GNU build id in hex (the linker's hash of the whole
 * program), or "unknown"; computed once. */
const char *build_id(void);
#endif
