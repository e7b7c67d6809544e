/* memwatch.h: a run's total memory, measured from the host's /proc. */
#ifndef SAGE_SANDBOX_MEMWATCH_H
#define SAGE_SANDBOX_MEMWATCH_H

#include <stdint.h>
#include <sys/types.h>

/* The proportional set size (PSS) of every process of host uid uid but the
 * first of its pid namespace (the launcher, whose pid goes to *init), in
 * bytes: pages shared between processes counted once. *processes is how
 * many were counted. */
uint64_t memwatch_total(uid_t uid, int *processes, pid_t *init);
/* SIGKILL to the run's first process, which the kernel turns into the end
 * of every process in its pid namespace, at once: faster than `podman rm`,
 * while the code may still be allocating. The account owns the container's
 * user namespace, so it may. 0, or -1 (gone already, or no longer uid's). */
int memwatch_kill(pid_t init, uid_t uid);

#endif
