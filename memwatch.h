/* memwatch.h: a run's total memory, measured from the host's /proc. */
#ifndef SAGE_SANDBOX_MEMWATCH_H
#define SAGE_SANDBOX_MEMWATCH_H

#include <stdint.h>
#include <sys/types.h>

/* What kernel memory one open descriptor of a run can hold at most: an
 * AF_UNIX socket, the largest of the objects a descriptor can name in the
 * sandbox, with the default buffer it is held to (derive-seccomp.py), its
 * datagrams and their overhead. Measured: see memwatch.c. */
#define DESCRIPTOR_CHARGE_KIB 512
#define DESCRIPTOR_CHARGE_BYTES ((uint64_t)DESCRIPTOR_CHARGE_KIB << 10)

/* Byte-range locks a run may hold at once: each is a kernel record (about
 * 250 bytes) that no descriptor shows, and SQLite, the one user in Sage,
 * takes one or two a database. A count, not a charge against --memory:
 * /proc/locks, where they are counted, costs the kernel a walk of its list
 * for every page of it read, so the count must stay small to stay cheap. */
#define LOCKS_MAX 4096

/* One look at a run: every process of host uid uid but the first of its
 * pid namespace (the launcher). */
struct memwatch_reading {
	uint64_t own_bytes;   /* their proportional set size (PSS) */
	uint64_t descriptors; /* their open descriptors */
	uint64_t locks;       /* their byte-range locks, held or awaited, counted
				 up to LOCKS_MAX + 1 */
	int processes;        /* how many were counted */
};

/* own_bytes plus DESCRIPTOR_CHARGE_BYTES for each descriptor: what the run
 * holds of the host's memory, at most. The look ends early, its total
 * already past limit or its locks past LOCKS_MAX, the counts then partial. */
uint64_t memwatch_look(uid_t uid, uint64_t limit, struct memwatch_reading *r);
/* SIGKILL to every process of host uid uid, the run's init last (its
 * death ends whatever is left of its pid namespace). The account owns the
 * container's user namespace, so it may. 0, or -1 if none was signalled. */
int memwatch_kill(uid_t uid);

#endif
