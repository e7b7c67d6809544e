/* rundir.c: the server's directory and the check that it is this user's
 * own.
 *
 * The socket is how a run hands its code, its descriptors and its files to
 * the server: whoever could put a socket of their own there would receive
 * all of that, and whoever could reach the server's socket could run code
 * as this user. Both sides look before they trust the directory: this
 * user's, mode 0700, not a link (so nobody else can create, replace or
 * reach anything in it), and the server checks every peer's uid too
 * (SO_PEERCRED). /tmp is shared: /tmp/sage-sandbox-UID made by someone else
 * first fails the check and is never used. */
#include "rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rundir_locate(struct rundir *d, struct error *err)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	int n;
	if (runtime && runtime[0] == '/')
		n = snprintf(d->dir, sizeof d->dir, "%s/sage-sandbox", runtime);
	else
		n = snprintf(d->dir, sizeof d->dir, "/tmp/sage-sandbox-%u", (unsigned)geteuid());
	/* The longest names below it are "server.sock" and "server.lock". */
	if (n < 0 || (size_t)n >= sizeof d->dir) {
		error_set(err, EXIT_REFUSED, "set XDG_RUNTIME_DIR to a shorter directory",
			"the server's socket path under %s is longer than a socket path may be",
			runtime);
		return -1;
	}
	snprintf(d->socket, sizeof d->socket, "%s/server.sock", d->dir);
	snprintf(d->lock, sizeof d->lock, "%s/server.lock", d->dir);
	snprintf(d->log, sizeof d->log, "%s/server.log", d->dir);
	return 0;
}

int rundir_check(const struct rundir *d, bool create, struct error *err)
{
	struct stat st;
	if (lstat(d->dir, &st) < 0) {
		if (errno != ENOENT || !create)
			return errno == ENOENT ? 0 : (error_set(err, EXIT_REFUSED, NULL,
				"cannot look at the server's directory %s: %s", d->dir,
				strerror(errno)), -1);
		if (mkdir(d->dir, 0700) == 0) {
			chmod(d->dir, 0700); /* whatever the umask */
		} else if (errno != EEXIST) {
			error_set(err, EXIT_REFUSED, "check that its parent is writable",
				"cannot make the server's directory %s: %s", d->dir, strerror(errno));
			return -1;
		}
		if (lstat(d->dir, &st) < 0) {
			error_set(err, EXIT_REFUSED, NULL, "cannot look at the server's directory %s: %s",
				d->dir, strerror(errno));
			return -1;
		}
	}
	const char *wrong = !S_ISDIR(st.st_mode) ? (S_ISLNK(st.st_mode) ? "a symbolic link" :
			"not a directory") :
		st.st_uid != geteuid() ? "owned by another user" :
		(st.st_mode & 07777) != 0700 ? "not mode 0700" : NULL;
	if (wrong) {
		/* Another user's (in sticky /tmp) is not ours to remove. */
		const char *fix = st.st_uid != geteuid() ? "set XDG_RUNTIME_DIR to a directory of "
				"your own (mode 0700)" :
			S_ISDIR(st.st_mode) ? "chmod 0700 it, or remove it" :
			"remove it, or set XDG_RUNTIME_DIR to a directory of your own";
		error_set(err, EXIT_REFUSED, fix,
			"the server's directory %s is %s (mode %04o, uid %u): nobody else may reach "
			"a server's socket", d->dir, wrong, (unsigned)(st.st_mode & 07777),
			(unsigned)st.st_uid);
		return -1;
	}
	return 1;
}
