/* server.h: `sage-sandbox serve`, the per-user server that `run` hands its
 * runs to (client.c): warm sandboxes that serve run after run, each run
 * as a cold one would be, on the client's own descriptors. */
#ifndef SAGE_SANDBOX_SERVER_H
#define SAGE_SANDBOX_SERVER_H

#include "settings.h"

#include <stdint.h>

/* Default --idle: a server with no client this long exits; at most a year. */
#define SERVER_IDLE_SECONDS 900
#define SERVER_IDLE_MAX_SECONDS (86400L * 365)
/* Keys of settings kept warm at once (each its own sandboxes). */
#define SERVER_FLEETS_MAX 4

struct server_options {
	const struct config *cfg; /* its own settings: the sandboxes it warms first */
	long idle_seconds;        /* 0: never */
	int warm;                 /* sandboxes per key of settings */
	int64_t started_at;
};

/* Serves until stopped (serve --stop, a signal, idle, a client of another
 * build). Its exit status: 0, 128+N after signal N, EXIT_REFUSED when it
 * cannot start (a line on stderr says why). */
int server_run(const struct server_options *opt);

#endif
