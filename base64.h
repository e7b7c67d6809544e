/* base64.h: RFC 4648 base64, for MCP's image content and its files. */
#ifndef SAGE_SANDBOX_BASE64_H
#define SAGE_SANDBOX_BASE64_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>

void base64_encode(const unsigned char *bytes, size_t len, struct buffer *out);
/* Padding required where the length needs it; no white space. false on
 * anything else. */
bool base64_decode(const char *text, size_t len, struct buffer *out);

#endif
