/* fuzz-jsonrpc.c: libFuzzer target for what an MCP client sends: each line
 * of the input is one JSON-RPC message to a server (mcp.c) that can run
 * nothing, so that every message is parsed, checked and answered (tools
 * that need a sandbox get the refusal a host without podman gives). */
#include "mcp.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const char *text = (const char *)data, *end = text + size;
	while (text < end) {
		const char *nl = memchr(text, '\n', (size_t)(end - text));
		size_t len = (size_t)((nl ? nl : end) - text);
		mcp_take_line_offline(text, len);
		text += len + 1;
	}
	return 0;
}
