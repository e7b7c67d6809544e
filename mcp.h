/* mcp.h: `sage-sandbox mcp`: a Model Context Protocol server on stdin and
 * stdout, its tools served by warm sandboxes on the one loop. */
#ifndef SAGE_SANDBOX_MCP_H
#define SAGE_SANDBOX_MCP_H

#include "settings.h"
#include "sniff.h"

#include <stdbool.h>

/* The largest --output-limit mcp takes. MCP clients cap a message: the
 * official SDKs at 10 MiB. An answer carries each stream twice (the text
 * content and structuredContent), and a control byte is 6 once escaped
 * (\u0001): 2 streams x 2 x 6 x 384 KiB = 9 MiB, which leaves room for
 * the rest of the answer. */
#define MCP_MAX_OUTPUT_KIB 384

/* An answer carries an image as image content only up to this many
 * pixels (width x height, as its header declares them). The file's size
 * says nothing of it: a valid 1.5 MiB PNG may declare 40000x40000 pixels,
 * 1.6 billion, gigabytes once decoded, and the client decodes whatever it
 * is sent. 16 million holds a 4000x4000 image, far more than any plot. */
#define MCP_IMAGE_MAX_PIXELS 16000000ull

/* Why an answer does not carry an image, in words for the file's line. */
struct not_shown {
	char why[160];   /* "40000x40000 pixels, more than the 16 megapixels ..." */
	const char *fix; /* what would show it: "save it smaller to see it" */
};

/* Whether an image's pixel size lets an answer carry it (k: sniffed from
 * its bytes); false with *r filled when not. SVG has no pixel size and
 * passes; a raster image whose header gives none does not. */
bool mcp_image_fits(const struct sniffed *k, struct not_shown *r);

/* Serves until stdin ends and every request read has its answer (then
 * returns 0), or until SIGTERM, SIGINT or SIGHUP (then 128+N, every call
 * stopped at once), having removed every container; 125 when it cannot
 * start (stdin or stdout unusable). */
int mcp_serve(const struct config *cfg);

/* One JSON-RPC line to a server that can run nothing, answers dropped: the
 * parsing and checking of what clients send, for the fuzz target. */
void mcp_take_line_offline(const char *line, size_t len);

#endif
