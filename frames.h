/* frames.h: the frame format between sage-sandbox and the launcher (see
 * docs/protocol.md): one type byte, a 4-byte big-endian length, then that
 * many bytes, at most FRAME_MAX. The reader takes bytes as they come and
 * hands back whole frames; it holds at most one frame's worth. */
#ifndef SAGE_SANDBOX_FRAMES_H
#define SAGE_SANDBOX_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER 5
/* The fuzz build sets a small one, so that its inputs fill the reader. */
#ifndef FRAME_MAX
#define FRAME_MAX 65536
#endif

void frame_header(unsigned char header[FRAME_HEADER], char type, size_t len);

struct frame_reader {
	char bytes[FRAME_HEADER + FRAME_MAX];
	size_t len;  /* bytes held */
	size_t at;   /* of them, taken as frames */
};

/* Where to put the next bytes read, and how many fit. */
char *frame_reader_space(struct frame_reader *r, size_t *room);
/* n more bytes are in the space. */
void frame_reader_filled(struct frame_reader *r, size_t n);
/* The next whole frame: 1 with its type, payload (valid until the next
 * call that adds bytes) and length; 0 when none is whole yet; -1 when
 * the stream is broken (a length past FRAME_MAX), which it stays. */
int frame_reader_next(struct frame_reader *r, char *type, const char **payload, size_t *len);

/* What becomes of the container after a call: it ends (a run's, or a
 * serial one that cannot be put back as it was); it serves the next call
 * as good as fresh (serial); a session's Sage lives on for the next cell,
 * or was lost with this one. */
enum container_after { AFTER_ENDS, AFTER_NEXT, AFTER_KEPT, AFTER_LOST };

/* The launcher's end of a call (X): what the code's process did, when, and
 * what becomes of the container. */
struct trailer {
	bool exited;      /* else killed by signal */
	int status;       /* its exit status, or the signal */
	int64_t ended_at; /* the launcher's CLOCK_MONOTONIC, in ms */
	enum container_after after;
	bool cpu_limit;   /* killed at its CPU rlimit, or a cell interrupted there */
	bool interrupted; /* a session's cell, interrupted at its time or CPU */
	char why[256];    /* why a serial container ends, or "" */
};
/* Parses an X frame's JSON; -1 when it is not one. */
int frame_parse_trailer(const char *payload, size_t len, struct trailer *t);

/* The launcher's warm-up, ended (W): how long its steps took in all, and
 * why it ended before its last step, or "". */
struct warm_report {
	int64_t ms;
	char why[256];
};
/* Parses a W frame's JSON; -1 when it is not one. */
int frame_parse_warm(const char *payload, size_t len, struct warm_report *w);

#endif
