/* rundir.h: the server's directory, $XDG_RUNTIME_DIR/sage-sandbox or
 * /tmp/sage-sandbox-UID: where its socket, lock and log are, and the check
 * that it is this user's own before anything in it is trusted. */
#ifndef SAGE_SANDBOX_RUNDIR_H
#define SAGE_SANDBOX_RUNDIR_H

#include "error.h"

#include <stdbool.h>

/* A socket's path must fit sockaddr_un's 108 bytes. */
#define RUNDIR_PATH_MAX 108

struct rundir {
	char dir[RUNDIR_PATH_MAX - sizeof "/server.sock"];
	char socket[RUNDIR_PATH_MAX]; /* server.sock: the server listens here */
	char lock[RUNDIR_PATH_MAX];   /* server.lock: held by the one server */
	char log[RUNDIR_PATH_MAX];    /* server.log: a server started in the background logs here */
};

/* The paths, from the environment. -1 with err set when they do not fit. */
int rundir_locate(struct rundir *d, struct error *err);
/* Is the directory this user's own: a directory, not a link, owned by this
 * uid, mode 0700? create: make it first where it is missing (0700). 1 when
 * it is, 0 when it is missing (and not created), -1 with err set (naming
 * the directory and the fix) when it is there but not private. */
int rundir_check(const struct rundir *d, bool create, struct error *err);

#endif
