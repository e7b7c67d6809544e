/* uidclaim.h: the uid a sandbox's processes run as, drawn at random in the
 * account's mapping and claimed for as long as the sandbox lives, so that
 * a sandbox started on this host draws no uid a live one holds (uidclaim.c
 * says where that does not hold). */
#ifndef SAGE_SANDBOX_UIDCLAIM_H
#define SAGE_SANDBOX_UIDCLAIM_H

#include "podman.h"

/* A claim: an abstract unix socket bound to the host uid's name; -1 where
 * none is held. Owned by the sandbox that drew the uid. */
struct uid_claim {
	int fd;
	long host_uid; /* the uid on the host that fd claims; -1: none */
};

#define UID_CLAIM_NONE ((struct uid_claim){.fd = -1, .host_uid = -1})

/* A uid in [SANDBOX_UID_MIN, sandbox_uid_max(host)] that no live claim on
 * this host holds, claimed in *claim (which must hold none). Where every
 * draw found its uid claimed, or a claim cannot be made, the last draw,
 * unclaimed: two sandboxes then may share it, as before claims. 1000
 * (shared, unclaimed) where the mapping is smaller than the range. */
unsigned long uid_claim_draw(struct uid_claim *claim, const struct podman_host *host);
/* The host uid the claim holds, which no other sandbox of this host draws
 * while it is held (but as uidclaim.c says); -1 where it holds none (a
 * shared or unclaimed uid, whose processes may be another sandbox's). */
long uid_claim_host_uid(const struct uid_claim *claim);
/* Lets the uid go (nothing where none is held). */
void uid_claim_release(struct uid_claim *claim);

#endif
