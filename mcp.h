/* mcp.h: `sage-sandbox mcp`: a Model Context Protocol server on stdin and
 * stdout, its tools served by warm sandboxes on the one loop. */
#ifndef SAGE_SANDBOX_MCP_H
#define SAGE_SANDBOX_MCP_H

#include "settings.h"

/* The largest --output-limit mcp takes. MCP clients cap a message: the
 * official SDKs at 10 MiB. An answer carries each stream twice (the text
 * content and structuredContent), and a control byte is 6 once escaped
 * (\u0001): 2 streams x 2 x 6 x 384 KiB = 9 MiB, which leaves room for
 * the rest of the answer. */
#define MCP_MAX_OUTPUT_KIB 384

/* Serves until stdin ends or SIGTERM, SIGINT or SIGHUP, then stops every
 * call, removes every container and returns 0; 125 when it cannot start
 * (stdin or stdout unusable). self: this executable's path, for status. */
int mcp_serve(const struct config *cfg, const char *self);

#endif
