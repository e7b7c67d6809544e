/* memwatch.h: a run's total memory and CPU, measured from the host's /proc,
 * where no cgroup bounds them: the memory watchdog and the CPU throttle. */
#ifndef SAGE_SANDBOX_MEMWATCH_H
#define SAGE_SANDBOX_MEMWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What kernel memory one open descriptor of a run can hold at most: an
 * AF_UNIX socket, the largest of the objects a descriptor can name in the
 * sandbox, with the default buffer it is held to (derive-seccomp.py), its
 * datagrams and their overhead. Measured: see memwatch.c. */
#define DESCRIPTOR_CHARGE_KIB 512
#define DESCRIPTOR_CHARGE_BYTES ((uint64_t)DESCRIPTOR_CHARGE_KIB << 10)

/* What one memory mapping (VMA) holds of the kernel's memory: its
 * vm_area_struct, its share of the maple tree and of anon_vma chains.
 * Measured on Linux 6.18: 260 bytes a mapping, 312 with a page written in
 * each; charged at this, which covers both. */
#define VMA_CHARGE_BYTES 384
/* The mappings' kernel memory a run holds free of charge, in all: half of
 * the 512 MiB past --memory that a run's kernel memory may reach. Since
 * every process that runs is charged the most mappings it could have made
 * (memwatch.c), this keeps runs of a few busy processes from paying for
 * mappings they do not have. */
#define VMA_ALLOWANCE_BYTES (256ull << 20)

/* Byte-range locks a run may hold at once: each is a kernel record (about
 * 250 bytes) that no descriptor shows, and SQLite, the one user in Sage,
 * takes one or two a database. A count, not a charge against --memory:
 * /proc/locks, where they are counted, costs the kernel a walk of its list
 * for every page of it read, so the count must stay small to stay cheap. */
#define LOCKS_MAX 4096

/* How often a run is looked at, and how much of a core the exact
 * measurements of its looks may take (paid from a budget that refills at
 * this rate; the cheap pass of a look is not: a listing of /proc and a few
 * system calls for each of the run's processes). */
#define MEMWATCH_INTERVAL_MS 50
#define MEMWATCH_CPU_SHARE_PERCENT 10
/* The same while the run is frozen for its memory and holds still: its
 * processes are stopped then, and what they would have run on measures
 * them instead (a fork bomb of 95 Sage processes at --memory 1g, 13 ms of
 * measures a child, ran its loop in 11 s at 10%, 7 at 25%). A run one of
 * whose stopped processes was seen running gets the share above. */
#define MEMWATCH_FROZEN_CPU_SHARE_PERCENT 25

struct memwatch;

struct memwatch_options {
	uid_t uid;            /* the run's host uid: its processes are that uid's */
	pid_t session;        /* > 0: only the processes of this session (tests) */
	bool spare_init;      /* the first process of its pid namespace (the
				 launcher) is not counted, frozen or killed */
	uint64_t limit;       /* --memory, in bytes */
	long cpus_milli;      /* --cpus in thousandths; 0: no throttle */
};

/* What one look found; kept by the caller for its messages. */
struct memwatch_reading {
	uint64_t total;       /* all of the below, the bound held to the limit */
	uint64_t own_bytes;   /* the processes' memory: exact (PSS) where
				 measured, else their resident size */
	uint64_t descriptors; /* their open descriptors */
	uint64_t mappings;    /* their memory mappings (VMAs), at most */
	uint64_t kernel_bytes; /* charged for mappings (past the allowance)
				  and page tables, in bytes */
	uint64_t locks;       /* their byte-range locks, counted up to
				 LOCKS_MAX + 1 */
	int processes;
	bool frozen;          /* stopped (SIGSTOP) by the watchdog now, or
				 being killed (MEMWATCH_OVER) */
	bool throttled;       /* ... and for the CPU throttle */
	uint64_t cpu_ms;      /* the run's CPU time so far, as seen */
	uint64_t cpu_debt_ms; /* what it used past its --cpus allowance */
};

/* MEMWATCH_CPU_OVER: the run is further past its --cpus allowance than
 * the freeze lets a run get (its processes continue themselves): stopping
 * cannot hold it to --cpus. */
enum memwatch_verdict { MEMWATCH_OK, MEMWATCH_OVER, MEMWATCH_CPU_OVER };

struct memwatch *memwatch_new(const struct memwatch_options *opt);
/* When to look next, from now: exponentially distributed, MEMWATCH_INTERVAL_MS
 * its mean before it is capped at twice that (43 ms on average), so that a
 * run cannot fit its work between two looks (the CPU throttle's sampled
 * account, memwatch.c). */
int64_t memwatch_next_look_ms(void);
/* Where --cpus is throttled, opens the kernel's count of the run's CPU
 * time (memwatch.c) on its first process while that is still its only
 * one: called every few milliseconds from the container's start until it
 * returns true (counting, or too late, or not allowed: perf_event_paranoid
 * above 2). memwatch_look tries too. */
bool memwatch_count(struct memwatch *w);
/* Whether this account may open that count (status). */
bool memwatch_kernel_counts(void);
/* One look at now_ms (loop_now_ms() clock). MEMWATCH_OVER when the run's
 * memory, exactly measured, is past the limit, or its locks past
 * LOCKS_MAX: the caller kills it. While the upper bound, after this
 * look's measures, is still past the limit, the run is frozen (SIGSTOP);
 * and while it has used more than --cpus cores, too. MEMWATCH_CPU_OVER
 * when that freeze does not hold: the caller kills it. */
enum memwatch_verdict memwatch_look(struct memwatch *w, int64_t now_ms,
		struct memwatch_reading *r);
/* The call is over: what the watchdog stopped is let go of, continued
 * where thaw (every call but a session's: in a serial container what it
 * stopped may outlive the call), else without a SIGCONT (a session's
 * launcher stopped it for the wait until the next cell); the CPU account
 * is the next call's, full. */
void memwatch_release(struct memwatch *w, bool thaw);
/* Forgets what it stopped without continuing it (the run is over). */
void memwatch_free(struct memwatch *w);
/* The watchdog's own CPU time so far, in microseconds (measurements). */
uint64_t memwatch_cpu_us(const struct memwatch *w);

/* SIGKILL to every process of host uid uid, the run's init last (its
 * death ends whatever is left of its pid namespace). The account owns the
 * container's user namespace, so it may. 0, or -1 if none was signalled. */
int memwatch_kill(uid_t uid);

#endif
