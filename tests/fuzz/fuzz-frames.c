/* fuzz-frames.c: libFuzzer target for what sage-sandbox reads from a
 * container, which the code inside may have forged had it reached the
 * launcher's stream: the frame reader over any cut of the bytes, the end
 * frame's trailer, and the output files (F, D, G, Z) received into a
 * directory. The first byte chooses where the stream is cut; the frames
 * read from any cut must be the frames read from the whole stream. */
#include "frames.h"
#include "outfiles.h"
#include "settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char directory[] = "/tmp/sage-sandbox-fuzz-frames-XXXXXX";

/* The frames of data cut in chunks of cut bytes: a fingerprint of each
 * (type, length, a sum of the payload) into seen, and how the stream ended
 * (0: all read, -1: broken). Each frame is handed to take. */
struct seen {
	unsigned long long sum[512];
	size_t count;
};

static int read_frames(const unsigned char *data, size_t size, size_t cut, struct seen *seen,
		void (*take)(char type, const char *payload, size_t len, void *data), void *arg)
{
	struct frame_reader *r = calloc(1, sizeof *r);
	int got = 0;
	if (!r)
		abort();
	seen->count = 0;
	for (size_t at = 0; at < size && got >= 0;) {
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
		while ((got = frame_reader_next(r, &type, &payload, &len)) > 0) {
			if (len > FRAME_MAX)
				abort();
			unsigned long long sum = (unsigned char)type * 1000003ULL + len;
			for (size_t i = 0; i < len; i++)
				sum = sum * 31 + (unsigned char)payload[i];
			if (seen->count < 512)
				seen->sum[seen->count++] = sum;
			if (take)
				take(type, payload, len, arg);
		}
	}
	free(r);
	return got < 0 ? -1 : 0;
}

static void take_frame(char type, const char *payload, size_t len, void *arg)
{
	struct outfiles *out = arg;
	struct trailer t;
	if (type == 'X' && frame_parse_trailer(payload, len, &t) == 0 &&
	    (t.after > AFTER_LOST || strnlen(t.why, sizeof t.why) == sizeof t.why))
		abort();
	if (type && strchr("FDGZ", type))
		outfiles_frame(out, type, payload, len);
}

/* The directory goes with the run: libFuzzer ends by exit(). */
static void remove_directory(void)
{
	outfiles_remove_dir(directory);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static struct config cfg;
	static bool ready;
	static struct seen cut_seen, whole_seen;
	if (!ready) {
		char why[256];
		if (!mkdtemp(directory) || config_init(&cfg, (const char *[SETTING_COUNT]){0}, false, why,
				sizeof why) < 0)
			abort();
		atexit(remove_directory);
		ready = true;
	}
	if (size == 0)
		return 0;
	size_t cut = (size_t)data[0] * 97 + 1;
	data++;
	size--;
	struct outfiles out = {0};
	struct error err;
	if (outfiles_open(&out, directory, true, &cfg, &err) < 0)
		abort();
	int cut_end = read_frames(data, size, cut, &cut_seen, take_frame, &out);
	int whole_end = read_frames(data, size, FRAME_HEADER + FRAME_MAX, &whole_seen, NULL, NULL);
	if (cut_end != whole_end || cut_seen.count != whole_seen.count ||
	    memcmp(cut_seen.sum, whole_seen.sum, cut_seen.count * sizeof cut_seen.sum[0]) != 0)
		abort(); /* how the stream is cut changed what was read */
	outfiles_stopped(&out);
	outfiles_close(&out);
	/* What came in goes: the next input starts from an empty directory. */
	outfiles_remove_dir(directory);
	if (mkdir(directory, 0700) < 0)
		abort();
	return 0;
}
