/* fuzz-request.c: libFuzzer target for the server's request decoder
 * (request.c): any bytes decode or are refused with a reason; what decodes
 * encodes back to bytes that decode to the same request; and a run's
 * timing, as the server takes it (its settings checked as the server
 * checks them, its start time against a clock), gives a deadline that
 * never lies past now + --timeout and never overflows (UBSan's check of
 * the sum), whatever start time the bytes claim. */
#include "request.h"
#include "loop.h"

#include <stdlib.h>
#include <string.h>

static void same(const char *a, const char *b)
{
	if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
		abort();
}

/* What the server does with the timing fields (server.c, oneshot.c). */
static void check_timing(const struct request *req)
{
	struct config cfg = {0};
	char why[256];
	for (int id = 0; id < SETTING_COUNT; id++)
		if (setting_set(&cfg, id, req->value[id], req->source[id], why, sizeof why) < 0)
			return; /* declined: nothing is timed */
	long timeout = cfg.number[SET_TIMEOUT];
	if (timeout < settings[SET_TIMEOUT].min || timeout > settings[SET_TIMEOUT].max)
		abort();
	/* The monotonic clock at boot, now, at the request's own claim (if
	 * within a century of uptime, as any real clock is), and a century
	 * on: the start is never later than the clock, nor before 0. */
	const int64_t century = 100LL * 365 * 86400 * 1000;
	int64_t clocks[] = {0, loop_now_ms(), req->started_at < century ? req->started_at : 1,
		century};
	for (size_t i = 0; i < sizeof clocks / sizeof *clocks; i++) {
		int64_t now = clocks[i];
		int64_t start = request_started_at(req, now);
		if (start > now || start < 0 || (req->started_at <= now && start != req->started_at))
			abort();
		int64_t deadline = start + timeout * 1000;
		if (deadline > now + settings[SET_TIMEOUT].max * 1000 || deadline <= start)
			abort();
	}
}

/* The start time survives the round trip at its bounds too. */
static void check_start_round_trip(struct request *req, int64_t started_at)
{
	struct request again;
	struct buffer bytes = {0};
	char why[256];
	int64_t was = req->started_at;
	req->started_at = started_at;
	request_encode(req, &bytes);
	req->started_at = was;
	if (request_decode(bytes.data, bytes.len, &again, why, sizeof why) < 0 ||
	    again.started_at != started_at)
		abort();
	buffer_free(&bytes);
	request_free(&again);
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
	bool handed = req.kind == REQUEST_RUN || req.kind == REQUEST_BATCH;
	if (handed && request_fd_count(&req) > REQUEST_MAX_FDS)
		abort();
	if (handed && req.started_at < 0)
		abort();
	if (req.kind == REQUEST_BATCH && (req.jobs < 1 || req.jobs > BATCH_MAX_JOBS ||
			req.argc > REQUEST_MAX_BATCH_FILES || req.file || req.output_dir ||
			req.input_count || (req.shard_count && req.shard_index >= req.shard_count)))
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
	same(again.resume, req.resume);
	if (again.jobs != req.jobs || again.shard_index != req.shard_index ||
	    again.shard_count != req.shard_count || again.input_order != req.input_order ||
	    again.progress != req.progress)
		abort();
	for (int i = 0; i < req.argc; i++)
		same(again.args[i], req.args[i]);
	for (int id = 0; handed && id < SETTING_COUNT; id++) {
		same(again.value[id], req.value[id]);
		if (again.source[id] != req.source[id])
			abort();
	}
	if (handed) {
		check_timing(&req);
		check_start_round_trip(&req, 0);
		check_start_round_trip(&req, INT64_MAX);
	}
	buffer_free(&bytes);
	request_free(&again);
	request_free(&req);
	return 0;
}
