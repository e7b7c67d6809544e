/* uidclaim.c: the uid a sandbox's processes run as, drawn and claimed.
 *
 * Each sandbox runs as a uid of its own, so that its processes count
 * against no other sandbox's nproc limit, and so that the memory watchdog
 * (by the run's host uid) and the cpu group's check (is every process of
 * the run's uid in the group?) see the run's processes alone. Sandboxes of
 * one account start from many processes (run, mcp, batch, the server) with
 * no common parent, and a random draw alone gave two of k live sandboxes
 * one uid with a chance of about k in 50000 per start.
 *
 * The claim is an abstract unix socket named after the host uid, bound: a
 * name binds once per network namespace and socket type (every version
 * must use the same type: SOCK_STREAM), it needs no file and no directory
 * that the environment (XDG_RUNTIME_DIR) would choose, and the kernel
 * lets it go when its descriptor closes, however the process ends: no
 * registry to go stale. It never listens: a connection to it is refused,
 * and nothing can be queued on it. Another local user can bind such a
 * name first; that only keeps us off that uid.
 *
 * What it does not cover: the claim is the sandbox's, not the
 * container's, so a container that outlives it (the process that drew the
 * uid killed, or its container not removed after REMOVE_TRIES) runs
 * unclaimed until its idle end, podman's --timeout or 'sage-sandbox
 * cleanup' removes it; processes in another network namespace claim
 * apart; and where every draw finds a claim, or no socket can be made,
 * the uid is drawn as before claims. */
#include "uidclaim.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Draws before taking one unclaimed: with 50000 uids, 16 claimed draws in
 * a row need most of them live. */
enum { UID_DRAWS = 16 };

static unsigned long draw(unsigned long low, unsigned long high)
{
	uint32_t random;
	if (getrandom(&random, sizeof random, 0) != sizeof random)
		abort();
	return low + random % (high - low + 1);
}

/* Binds the claim's name of one uid: its host uid where the mapping names
 * it (the same host uid is the same processes' owner whichever account
 * drew it), else the account's uid and the container's. 1: claimed; 0:
 * claimed by another; -1: no claim can be made. */
static int claim(struct uid_claim *c, const struct podman_host *host, unsigned long uid)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	long host_uid = host_uid_of(host, uid);
	int n = host_uid >= 0 ?
		snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "sage-sandbox-uid-%ld",
			host_uid) :
		snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "sage-sandbox-uid-%u-%lu",
			(unsigned)geteuid(), uid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + 1 + n) < 0) {
		int bind_errno = errno;
		close(fd);
		return bind_errno == EADDRINUSE ? 0 : -1;
	}
	c->fd = fd;
	c->host_uid = host_uid;
	return 1;
}

unsigned long uid_claim_draw(struct uid_claim *c, const struct podman_host *host)
{
	unsigned long top = sandbox_uid_max(host);
	if (top < SANDBOX_UID_MIN)
		return 1000;
	unsigned long uid = 0;
	for (int i = 0; i < UID_DRAWS; i++) {
		uid = draw(SANDBOX_UID_MIN, top);
		if (claim(c, host, uid) != 0)
			break;
	}
	return uid;
}

long uid_claim_host_uid(const struct uid_claim *c)
{
	return c->fd >= 0 ? c->host_uid : -1;
}

void uid_claim_release(struct uid_claim *c)
{
	if (c->fd >= 0)
		close(c->fd);
	*c = UID_CLAIM_NONE;
}
