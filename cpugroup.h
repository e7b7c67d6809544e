/* cpugroup.h: --cpus held by the scheduler, in a cgroup v1 cpu group that
 * root delegated to the account (setup.sh), where podman applies none. */
#ifndef SAGE_SANDBOX_CPUGROUP_H
#define SAGE_SANDBOX_CPUGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The group setup.sh makes for an account, below the cpu hierarchy's
 * mount: CPUGROUP_PREFIX and the account's uid. */
#define CPUGROUP_PREFIX "sage-sandbox-"
/* The scheduler's period, which a new group has: the quota is --cpus of
 * it. */
#define CPUGROUP_PERIOD_US 100000
/* A group this old with nothing in it is a stray (cpugroup_sweep): one is
 * joined within milliseconds of its making, and holds its container's
 * conmon while the container lives; conmon outlives the podman client by
 * a moment, so a run's group is often left to a later sweep. */
#define CPUGROUP_STRAY_SECONDS 10

/* One container's group. Owned by its sandbox. */
struct cpugroup {
	char path[512];      /* "" when there is none */
	uint64_t throttled_ns; /* the kernel's throttled_time when last read */
	int64_t read_at_ms;    /* and when (the caller's clock) */
	bool counted;          /* both are of the last read: it did not fail */
	bool lift_owed;        /* a lift could not write the quota: still held */
};

/* Where a cgroup v1 hierarchy is mounted: its mount point, and the group
 * it shows there (its root: "/", but where a container sees only part of
 * the hierarchy). */
struct cpu_mount {
	char point[512];
	char root[512];
};
/* Where a line of /proc/self/mountinfo ("ID PARENT DEV ROOT MOUNTPOINT
 * OPTS ... - cgroup SOURCE rw,cpu,cpuacct") mounts a cgroup v1 hierarchy
 * with the cpu controller, fills m and returns true. */
bool cpugroup_cpu_mount(const char *line, struct cpu_mount *m);
/* Writes the delegated group's path to dir and returns true where it is
 * there and this account may make groups in it; false elsewhere (no cpu
 * hierarchy of cgroup v1 mounted, setup.sh not run as root since boot,
 * or made for another account). */
bool cpugroup_delegated(char *dir, size_t size);
/* Makes the group name in the delegated dir, with no quota yet. 0, or -1
 * with errno. */
int cpugroup_create(struct cpugroup *g, const char *dir, const char *name);
/* The group name in the delegated dir, made earlier (by a sage-sandbox
 * since gone): 0, or -1 with errno where there is none. */
int cpugroup_find(struct cpugroup *g, const char *dir, const char *name);
/* The file a process joins the group by: its cgroup.procs (process.h). */
void cpugroup_procs_path(const struct cpugroup *g, char *out, size_t size);
/* Holds the group to cpus_milli thousandths of a core, from now_ms.
 * Setting a quota starts the group's account afresh: no earlier call's
 * use is charged to it. 0 (also where there is no group), or -1 with
 * errno. */
int cpugroup_hold(struct cpugroup *g, long cpus_milli, int64_t now_ms);
/* Lifts the hold: no quota. Returns whether the hold held the group back
 * since cpugroup_throttled last looked (its answer at now_ms), so that
 * nothing of the hold's is left for a later look to find. Where the quota
 * cannot be written (out of descriptors), the next look or lift tries
 * again, and what the group held back until it is written is told by none
 * (it held the launcher's work between calls, none of a call's). */
bool cpugroup_lift(struct cpugroup *g, int64_t now_ms);
/* Whether /proc/PID/cgroup's text puts the process in the group at path
 * (below the cpu hierarchy's mount m), or in one below it (runc's). */
bool cpugroup_names_group(const char *proc_cgroup, const struct cpu_mount *m, const char *path);
/* A process of uid (the run's own) that is neither in the group nor below
 * it, or 0 where there is none: the group holds the whole run. A run that
 * already ended has no process anywhere, and so none outside; one that is
 * ending has only exiting ones, which are not asked, nor is a child whose
 * fork has not yet put it in its parent's group. */
pid_t cpugroup_outside(const struct cpugroup *g, uid_t uid);
/* SIGKILL to every process of the container in the group and below it,
 * listed again until a listing finds none not yet killed (one forked
 * while the last was read), at most CPUGROUP_KILL_ROUNDS times. The
 * number killed. */
#define CPUGROUP_KILL_ROUNDS 8
int cpugroup_kill(const struct cpugroup *g);
/* Whether the scheduler held the group back since the last call (at
 * now_ms) for CPUGROUP_HELD_SHARE of that time, or of one period where
 * that was shorter, or more: a thread that runs at --cpus exactly is
 * throttled too, for a millisecond or two now and then at a period's
 * end, which is no hold. After a read that failed, false: what came
 * since the last good one may be an earlier call's. */
#define CPUGROUP_HELD_SHARE 0.1
bool cpugroup_throttled(struct cpugroup *g, int64_t now_ms);
/* Removes the group once nothing is in it (what runc made in it first);
 * where something still is, cpugroup_sweep removes it later. */
void cpugroup_remove(struct cpugroup *g);
/* Removes the delegated dir's groups left empty for CPUGROUP_STRAY_SECONDS
 * or more. The number removed. */
int cpugroup_sweep(const char *dir);

#endif
