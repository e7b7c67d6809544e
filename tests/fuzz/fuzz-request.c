/* fuzz-request.c: libFuzzer target for the server's request decoder
 * (request.c): any bytes decode or are refused with a reason; what decodes
 * encodes back to bytes that decode to the same request. */
#include "request.h"

#include <stdlib.h>
#include <string.h>

static void same(const char *a, const char *b)
{
	if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct request req, again;
	char why[256];
	if (request_decode((const char *)data, size, &req, why, sizeof why) < 0) {
		if (!why[0])
			abort(); /* a refusal says why */
		return 0;
	}
	if (req.kind == REQUEST_RUN && request_fd_count(&req) > REQUEST_MAX_FDS)
		abort();
	struct buffer bytes = {0};
	request_encode(&req, &bytes);
	if (request_decode(bytes.data, bytes.len, &again, why, sizeof why) < 0)
		abort();
	if (again.kind != req.kind || again.argc != req.argc ||
	    again.input_count != req.input_count || again.umask != req.umask ||
	    again.started_at != req.started_at || again.json != req.json)
		abort();
	same(again.file, req.file);
	same(again.output_dir, req.output_dir);
	for (int i = 0; i < req.argc; i++)
		same(again.args[i], req.args[i]);
	for (int id = 0; req.kind == REQUEST_RUN && id < SETTING_COUNT; id++)
		same(again.value[id], req.value[id]);
	buffer_free(&bytes);
	request_free(&again);
	request_free(&req);
	return 0;
}
