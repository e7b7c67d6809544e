/* client.h: `run` through the server (server.c): found at its socket, the
 * run's settings, names and descriptors handed over, the client's signals
 * forwarded, and the run's exit status back; and the server asked for its
 * status, to stop, or started in the background. */
#ifndef SAGE_SANDBOX_CLIENT_H
#define SAGE_SANDBOX_CLIENT_H

#include "error.h"
#include "infiles.h"
#include "outfiles.h"
#include "settings.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* SAGE_SANDBOX_SERVER: off (always cold), auto (a server when one answers;
 * the default), start (and start one in the background when none does). */
enum server_use { SERVER_OFF, SERVER_AUTO, SERVER_START };
/* From the environment; -1 with err set on a value that is none of them. */
int server_use_from_environment(enum server_use *use, struct error *err);

/* What a run is, as `run` parsed and opened it. */
struct client_run {
	const struct config *cfg;
	const char *file;          /* NULL or "-": the code comes on stdin */
	int code_fd;               /* the FILE, opened (open_code_file) */
	const char *const *args;
	int argc;
	bool json, show_control_chars;
	const struct infiles *in;  /* or NULL */
	const struct outfiles *out; /* the --output-dir, opened, or NULL */
	int64_t started_at;
};

/* The run's exit status once a server took it; CLIENT_COLD when none did
 * (none answers, it declined, its directory is not private: a one-line
 * warning says so): nothing of the run was done, and it goes on cold. */
#define CLIENT_COLD (-1)
int client_run(const struct client_run *run, enum server_use use);

/* What a batch is, as `batch` parsed it (batch.h's options). */
struct client_batch {
	const struct config *cfg;
	char *const *files;
	int file_count;
	const int *fds;            /* its inputs, opened (batch_open_inputs), or NULL */
	size_t nfds;
	long jobs;                 /* sandboxes at once: --jobs, or its default */
	long long shard_index, shard_count;
	bool input_order, progress;
	const char *resume;
	int64_t started_at;
};

/* The same for a batch, on the server's warm sandboxes: its status, or
 * CLIENT_COLD (also when its --jobs is more sandboxes than the server
 * keeps, its inputs could not be opened ahead, one is a terminal or a
 * device, or it runs in a Slurm job). */
int client_batch(const struct client_batch *b, enum server_use use);

/* The server's answer to a status request, as JSON (its "socket" always
 * there, "answers" false when no server does). Owned by the caller. */
json_t *client_server_status(void);
/* Asks the server to stop, and waits until it has (its lock is free):
 * 0 once stopped, 1 when none answered, EXIT_REFUSED with err set. */
int client_stop_server(struct error *err);

#endif
