/* fuzz-frames.c: libFuzzer target for what sage-sandbox reads from a
 * container, which the code inside may have forged had it reached the
 * launcher's stream: the frame reader over any cut of the bytes, the end
 * frame's trailer, and the output files (F, D, G, Z) received into a
 * directory. The first byte chooses where the stream is cut. */
#include "frames.h"
#include "outfiles.h"
#include "settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char directory[] = "/tmp/sage-sandbox-fuzz-frames-XXXXXX";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static struct config cfg;
	static bool ready;
	if (!ready) {
		char why[256];
		if (!mkdtemp(directory) || config_init(&cfg, (const char *[SETTING_COUNT]){0}, why,
				sizeof why) < 0)
			abort();
		ready = true;
	}
	if (size == 0)
		return 0;
	size_t cut = (size_t)data[0] * 97 + 1;
	data++;
	size--;
	struct frame_reader *r = calloc(1, sizeof *r);
	struct outfiles out = {0};
	struct error err;
	if (!r || outfiles_open(&out, directory, true, &cfg, &err) < 0)
		abort();
	for (size_t at = 0; at < size;) {
		size_t room;
		char *space = frame_reader_space(r, &room);
		size_t n = size - at < cut ? size - at : cut;
		if (n > room)
			n = room;
		memcpy(space, data + at, n);
		frame_reader_filled(r, n);
		at += n;
		char type;
		const char *payload;
		size_t len;
		int got;
		while ((got = frame_reader_next(r, &type, &payload, &len)) > 0) {
			if (len > FRAME_MAX)
				abort();
			struct trailer t;
			if (type == 'X' && frame_parse_trailer(payload, len, &t) == 0 &&
			    (t.after > AFTER_LOST || strnlen(t.why, sizeof t.why) == sizeof t.why))
				abort();
			if (strchr("FDGZ", type) && type)
				outfiles_frame(&out, type, payload, len);
		}
		if (got < 0)
			break;
	}
	outfiles_stopped(&out);
	outfiles_close(&out);
	free(r);
	/* What came in goes: the next input starts from an empty directory. */
	outfiles_remove_dir(directory);
	if (mkdir(directory, 0700) < 0)
		abort();
	return 0;
}
