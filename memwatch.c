/* memwatch.c: a run's total memory and CPU, measured from the host's /proc,
 * where no cgroup bounds them: the memory watchdog and the CPU throttle.
 *
 * Where podman has no memory cgroup (every cgroup v1 host, v2 hosts without
 * delegation), the rlimits bound each process, but k processes of a run
 * could hold k times --memory. Each run has a host uid of its own (see
 * podman.c), so its processes are the ones that uid owns: one fstatat per
 * /proc entry finds them (the entry is owned by the process's uid). The
 * container's first process, the launcher, is not counted: it holds Sage
 * as imported, allocates nothing once the code runs, and the code can
 * neither write to its memory nor make it grow.
 *
 * What a run holds of the host, per process, and how each part is known:
 * - its pages: the proportional set size (PSS, shared pages counted once
 *   in all) from smaps_rollup, a walk of the process's page tables and
 *   mappings: exact, but 6-12 ms for one forked Sage on these machines, and
 *   as slow as the process has mappings. So it is taken only when needed
 *   (below); the resident size (RSS, from stat, at no cost) bounds it from
 *   above. A process that has not run since its walk has not changed: its
 *   walked PSS stands.
 * - its memory mappings (VMAs): each holds about 300 bytes of the kernel's
 *   (VMA_CHARGE_BYTES), none of it in any PSS, up to vm.max_map_count
 *   (65530) a process: 85 processes each splitting one reservation into
 *   63,000 mappings took 1.3 GiB of slab at the default pids limit, 7 GiB
 *   at 512. Counting them (reading /proc/PID/maps) costs as much as making
 *   them, so they are bounded instead by the CPU time that making them
 *   takes: a process that forked with n mappings and has used t seconds of
 *   CPU since holds at most n + t / c mappings, c the least time the kernel
 *   takes to split one (calibrated on this machine at its first use,
 *   halved). A process that runs reaches the kernel's cap in milliseconds
 *   and is charged it: 65530 x 384 bytes, 24 MiB.
 * - its page tables (VmPTE in status): on cgroup v1 in no limit either.
 * - its open descriptors: each may name a kernel object (sockets, pipes)
 *   whose buffers are the kernel's: one process's 1,020 AF_UNIX sockets,
 *   their buffers filled, took 6.4 GiB of the host. Each is charged the
 *   most one can hold (DESCRIPTOR_CHARGE_BYTES); what a descriptor's object
 *   may hold is kept small elsewhere (socket buffers at their default,
 *   AF_UNIX only: derive-seccomp.py; pipes by the kernel's per-user quota,
 *   per run since each run has a uid of its own).
 * - byte-range locks: kernel records that no descriptor shows, counted in
 *   /proc/locks; a run holding more than LOCKS_MAX is stopped (OFD locks,
 *   listed with no owner, are refused by the seccomp profile).
 * What none of these shows, and the rlimits bound instead: sockets in
 * flight (SCM_RIGHTS; at most RLIMIT_NOFILE per uid), POSIX timers and
 * queued signals (RLIMIT_SIGPENDING per uid), threads' kernel stacks
 * (RLIMIT_NPROC), tmpfs inodes (nr_inodes=).
 *
 * Each look (memwatch_next_look_ms) reads stat of each process and
 * sums the upper bound: walked PSS where it stands, else RSS, plus the
 * mappings, page tables and descriptors. Below --memory, that is all. Past
 * it, the processes that ran since their walk are walked, largest first,
 * as far as a budget allows (MEMWATCH_CPU_SHARE_PERCENT of a core over
 * time, more while the run holds still frozen: a process with 65,000
 * mappings takes 12 ms to walk, and a run cannot make the watchdog's
 * measures, and the sums between them, spend more than their share). The
 * cheap pass is not paid from it: a listing of the host's /proc and a few
 * system calls for each of the run's processes (--pids-limit at most;
 * before Linux 6.2, a listing of each one's descriptors too), and, in a
 * look that freezes the run, that listing and a stat read again up to
 * FREEZE_ROUNDS times.
 * Still past it with processes unmeasured, the run is frozen (SIGSTOP,
 * every process but the launcher) until the bound is back under it: a
 * frozen process cannot grow, so the measure converges; thawed, what the
 * run makes until the next look is in that look's bound (one look's worth
 * of growth past the limit at most, as at any first crossing). Past
 * --memory exactly measured, the run is stopped. Processes come and go
 * meanwhile:
 * - one that exited (a zombie) holds nothing; what it shared is the
 *   others' now, kept in the bound (departed) until each is walked again;
 *   one gone while walked keeps its bound until the next look lists it so;
 * - a leader that exited while its threads run shows nothing: it is read
 *   through a live thread (find_memory);
 * - a fork lowers the PSS of everyone who shared with the child: a walk
 *   from before it still bounds the process from above (its PSS then
 *   counts pages the child shares again), and the bound stands (walking
 *   every process again after each fork kept the kernel-memory attacks
 *   five times longer, 15 s against 74); but it is no exact measure, and
 *   a run past the limit by such walks gets no verdict until they are
 *   walked again (walk_current), as the budget allows. Frozen, a run
 *   forks no more (freeze() stops what it started meanwhile), so the
 *   walks again catch up.
 *
 * What the bound misses, known and open (a review's findings, each shown
 * on this machine kind with a small program, not yet closed):
 * - a page shared copy-on-write that a process drops and makes again as
 *   part of a huge page (MADV_HUGEPAGE where THP is "madvise", or
 *   MADV_COLLAPSE) is one fault for 2 MiB, counted as a page;
 * - a page written into another process through /proc/PID/mem is the
 *   writer's fault, counted only if the writer was walked;
 * - a page of a file or of shared memory that another process of the run
 *   maps after a walk lowers the walked process's PSS, no fork and no
 *   fault of its own: the walk, taken as a measure, counts its share as
 *   it was (a run near the limit by such pages may be stopped early);
 * - a process that a timer of its own continues (SIGCONT) runs on while
 *   the run is frozen for its memory: seen running, it costs the run the
 *   frozen budget's share. (For the CPU, below, such a process is stopped
 *   for good.)
 *
 * The CPU throttle (--cpus where no cpu cgroup holds it) uses the same
 * freeze: the call's CPU time (its live processes' own and their reaped
 * children's, and the launcher's reaped children's) is charged against
 * --cpus cores of allowance, half a second of it banked at most; while the
 * allowance is spent, the run is frozen. Each call has an account of its
 * own, opened full when it starts (memwatch_release() closes the last):
 * what one call overdrew is never charged to the next in the same
 * container. While the freeze holds, the call's debt is at most what its
 * processes ran in one interval between looks before the freeze took
 * them (every core, the longest interval of the call). Debt past that, by
 * CPU_ESCAPE_MS, is a freeze that did not hold, whatever the route: a
 * process that continues itself (a SIGCONT from a timer of its own), or
 * one continued from outside the freeze, forking workers whose time comes
 * back through its reaped children. Then the run is stopped with the CPU
 * verdict (MEMWATCH_CPU_OVER), as memory's is. So over any T seconds a
 * call uses at most --cpus x (T + 0.5) CPU seconds, plus CPU_ESCAPE_MS,
 * plus one interval on every core. A process whose parent ignores SIGCHLD
 * is freed with its time, added to no one's (an attack used 10 CPU-s in
 * 10 s at --cpus 0.2 with workers that each ended between two looks), so
 * each call has a second account, charged by sampling: the threads found
 * running at each look, for the interval since the last, looks drawn at
 * random, exponentially (memwatch_next_look_ms), so that no work can be
 * fitted between them. Debt there past the same bound by four standard
 * deviations of the sampling error (2 x cores x sqrt(0.07 T) seconds) gets
 * the same verdict. Only children of a parent that loses its children
 * (SIGCHLD ignored, or SA_NOCLDWAIT, seen by what its children took away)
 * are sampled; the rest is charged exactly. That leaves a parent with
 * SA_NOCLDWAIT that ends within a look or two, before its losses show:
 * its parent gets back its own time, not its workers'. So where the
 * kernel allows it (perf_event_paranoid at most 2, its default), each
 * container has a third account, charged from the kernel's own count:
 * a task clock opened on the launcher before it starts anything
 * (memwatch_count), which every process of the run inherits and adds its
 * time to as it exits, reaped or not. What it counts covers every route
 * but one: the kernel adds a process's count as it exits, before it
 * unmaps the process's memory (6.x), so the unmapping (some 15 ms for a
 * forked Sage here) is in its reaper's time only. Children freed
 * unreaped by parents with SA_NOCLDWAIT that end within a look or two,
 * each child doing nothing but exit, used 0.41 cores at --cpus 0.25,
 * never stopped: their forks, which cost as much, are counted, so such
 * a run gets at most about twice its share, an open gap. The count
 * freezes the run as the first account does, and its debt past the
 * same bound by CLOCK_DOUBT_MS more gets the same verdict. The CPU
 * rlimit (--timeout x --cpus x 1.25 seconds a process) is a backstop.
 * Where root delegated a cpu group to the account, the scheduler holds
 * --cpus instead, by every route (cpugroup.c), and this throttle is off. */
#include "memwatch.h"
#include "buffer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A run has at most --pids-limit (512) processes: RLIMIT_NPROC holds its
 * uid to that. The table has room for twice as many. */
enum { MAX_PROCESSES = 1024, TABLE_SIZE = 2048 };
/* The kernel's cap on one process's mappings, where it cannot be read. */
#define MAX_MAP_COUNT_DEFAULT 65530
/* The most exact measurements may bank, in CPU time. */
#define BUDGET_MAX_NS (100 * 1000000LL)
/* The CPU allowance a run may bank while idle, in CPU milliseconds per
 * core of --cpus: over any T seconds a run uses at most --cpus x (T +
 * 0.5) CPU seconds. */
#define CPU_BURST_MS 500
/* The debt past what one interval explains at which the CPU throttle
 * stops a run (see the opening comment). */
#define CPU_ESCAPE_MS 500
/* How often a freeze lists the run again for what it started meanwhile:
 * each time a listing of the host's /proc and a stat read for each of the
 * run's processes, like a look's cheap pass (the opening comment). */
#define FREEZE_ROUNDS 4
/* The kernel's count's further margin before its verdict: once, at the
 * start of a run of 8 forked processes, it counted 524 ms in a look 97
 * ms after the last on 2 cores (the exact account: 70), and killed a run
 * the freeze held. Its cause is not found. A count past every core for
 * the time between two readings is dropped now (over_cpu), as that one
 * was; this margin stands for one too high that a run could have used:
 * one such overcount of up to a second may slow a run, never kill it. */
#define CLOCK_DOUBT_MS 1000

struct proc {
	pid_t pid; /* 0: an empty slot */
	unsigned long long start; /* starttime: with pid, the process's identity */
	pid_t ppid;
	pid_t session;
	char state;       /* its leader's, or a live thread's where the leader exited */
	uint64_t threads;
	/* Where its memory is read below /proc: "PID", or "PID/task/TID" of a
	 * live thread once its leader exited (a zombie leader shows no memory
	 * while its threads hold all of it). */
	char at[40];
	bool init;        /* the first process of its pid namespace */
	uint64_t own_cpu; /* utime + stime, clock ticks */
	uint64_t faults;  /* minor faults: every page it made or copied is one */
	uint64_t children_faults; /* its reaped children's: an exact count */
	uint64_t children_cpu; /* cutime + cstime: its reaped children's */
	/* This look's: what its children that left since the last look had
	 * used by then (already charged; their reaping adds it again to
	 * children_cpu), and its threads found running (state R). */
	uint64_t departed_children_cpu, departed_children_faults;
	/* The last look's departed_children_cpu that its reaping had not
	 * shown yet (cpu_used_since): this look's to match. */
	uint64_t carried_cpu;
	int running;
	/* Its children are freed with their CPU time: it ignores SIGCHLD, or
	 * children that left took time that never reached it (once seen, for
	 * the rest of its life). Only such children are charged by sampling. */
	bool loses_children;
	uint64_t rss;     /* bytes */
	uint64_t fds, pte; /* descriptors; page tables in bytes */
	uint64_t rss_at_pte; /* when pte was read */
	bool walked;      /* pss exact then; bounded since (memory_bound) */
	uint64_t pss, rss_at_walk, faults_at_walk;
	uint64_t walk_generation; /* w->departures when it was walked */
	uint64_t walk_arrivals;   /* w->arrivals when it was walked */
	bool maps_known;  /* maps at cpu_at_maps; else charged the cap */
	bool maps_counted; /* ... counted in its own /proc/PID/maps, not its parent's bound */
	uint64_t maps, cpu_at_maps;
	bool asked_parent; /* its mappings were looked for in its parent's */
	bool stopped;     /* SIGSTOP by the watchdog */
	/* A walk found it gone: it keeps its bound until the next look lists
	 * it departed (a PSS of 0 would drop its share of what its sharers
	 * hold, before their walks show it). */
	bool vanished;
};

struct memwatch {
	struct memwatch_options opt;
	struct proc *table, *previous; /* this look's and the last one's, by pid */
	int64_t last_ms;
	/* What processes that left held, which their sharers now hold
	 * instead: kept in the bound until every process was walked since
	 * the last departure (departures counts them). */
	uint64_t departed, departures;
	/* Processes of the run first listed, over its looks: a fork since a
	 * walk lowered the walked process's PSS (one more sharer of its
	 * pages), so that walk counts the child's share too. */
	uint64_t arrivals;
	int64_t budget_ns; /* for exact measurements */
	uint64_t cpu_ns;   /* the watchdog's own, all looks */
	/* The throttle: the run's CPU time at the last look (ticks), and its
	 * allowance left, in CPU microseconds (negative: overdrawn). */
	bool cpu_seen;
	int64_t allowance_us;
	/* The same account charged by sampling instead: the run's running
	 * threads at each look, times the interval. It sees what the exact
	 * one cannot (processes freed with their time unreaped), within a
	 * sampling error whose variance is summed here, in ms^2. */
	int64_t sampled_allowance_us;
	double sampled_variance;
	/* The same account charged from the kernel's count of the run's CPU
	 * time (memwatch_count): its descriptor, -1 where there is none, and
	 * whether to stop trying (counting, or the moment has passed); its
	 * reading, less the launcher's own time, at the call's last look that
	 * read it (clock_read: one did), when it was read (CLOCK_MONOTONIC),
	 * and the time since that look. */
	int clock_fd;
	bool clock_settled, clock_read;
	int64_t clock_unread_ms;
	int64_t clock_last_ns, clock_read_at_ns;
	int64_t clock_allowance_us;
	/* The call's longest interval between two looks, and whether its
	 * debt passed what that interval explains: a freeze that did not
	 * hold. */
	int64_t longest_interval_ms;
	bool cpu_escaped;
	bool frozen_memory, frozen_cpu;
	/* A process it stopped was seen running at the last look (a timer of
	 * its own sent SIGCONT): the freeze did not hold. Also set, for one
	 * look, by a process whose stop has not taken yet: one stopped in
	 * the midst of a fork is 'R' until the fork returns (a warm Sage's
	 * fork ran 30 ms of CPU past its stop, in a run of 94 forks). Its
	 * only effect is the smaller budget share for that interval. */
	bool escaped;
};

static long ticks_per_second;
static long online_cores;
static long page_size;
static uint64_t max_map_count;
/* The least time the kernel takes to split a mapping, in nanoseconds
 * (calibrated once, halved: a faster core, a lighter moment). */
static double split_ns;

static int64_t monotonic_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The host's constants, read once. */
static void read_constants(void)
{
	ticks_per_second = sysconf(_SC_CLK_TCK);
	online_cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (online_cores < 1)
		online_cores = 1;
	page_size = sysconf(_SC_PAGESIZE);
	char text[32] = "";
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	max_map_count = f && fgets(text, sizeof text, f) ? strtoull(text, NULL, 10) : 0;
	if (f)
		fclose(f);
	if (max_map_count == 0)
		max_map_count = MAX_MAP_COUNT_DEFAULT;
}

/* Times 1024 mapping splits, each a mprotect of one page of a reservation
 * to protections unlike its neighbours'. 3.5 ms here: taken where a
 * process's mappings are first counted, while the run's container
 * starts, not before podman is (every cold run's time). A busy machine
 * reads slower splits than an idle one: the halving (split_ns) leaves
 * the room. */
static void calibrate(void)
{
	enum { SPLITS = 1024 };
	size_t len = (size_t)page_size * 2 * SPLITS;
	char *area = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	split_ns = 50; /* where it cannot be measured: a fast machine's */
	if (area == MAP_FAILED)
		return;
	int64_t begin = thread_cpu_ns();
	for (int i = 0; i < SPLITS; i++)
		mprotect(area + (size_t)page_size * 2 * i, (size_t)page_size, PROT_READ);
	double each = (double)(thread_cpu_ns() - begin) / SPLITS / 2;
	munmap(area, len);
	if (each > split_ns)
		split_ns = each;
}

struct memwatch *memwatch_new(const struct memwatch_options *opt)
{
	if (!ticks_per_second)
		read_constants();
	struct memwatch *w = calloc(1, sizeof *w);
	if (!w)
		abort();
	w->opt = *opt;
	w->table = calloc(TABLE_SIZE, sizeof *w->table);
	w->previous = calloc(TABLE_SIZE, sizeof *w->previous);
	if (!w->table || !w->previous)
		abort();
	w->budget_ns = BUDGET_MAX_NS;
	w->allowance_us = w->sampled_allowance_us = w->clock_allowance_us =
		opt->cpus_milli * CPU_BURST_MS;
	w->clock_fd = -1;
	w->clock_settled = !opt->cpus_milli;
	return w;
}

uint64_t memwatch_cpu_us(const struct memwatch *w)
{
	return w->cpu_ns / 1000;
}

/* ---- reading /proc ------------------------------------------------------ */

static struct proc *slot(struct proc *table, pid_t pid)
{
	size_t i = (size_t)pid % TABLE_SIZE;
	while (table[i].pid && table[i].pid != pid)
		i = (i + 1) % TABLE_SIZE;
	return &table[i];
}

/* A listing of /proc from its start (a dup shares the offset of the last
 * listing through proc_fd). */
static DIR *list_proc(int proc_fd)
{
	int dir_fd = dup(proc_fd);
	DIR *dir = dir_fd < 0 ? NULL : fdopendir(dir_fd);
	if (!dir) {
		if (dir_fd >= 0)
			close(dir_fd);
		return NULL;
	}
	rewinddir(dir);
	return dir;
}

/* /proc/PID/stat, after the command name (which may hold anything). */
static bool read_stat(int proc_fd, const char *pid, struct proc *p)
{
	char path[64], text[1024];
	snprintf(path, sizeof path, "%s/stat", pid);
	if (read_small(proc_fd, path, text, sizeof text) <= 0)
		return false;
	const char *s = strrchr(text, ')');
	unsigned long long v[24];
	char state;
	/* Fields 3 on: state ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime stime cutime cstime priority nice threads
	 * itrealvalue starttime vsize rss. */
	if (!s || sscanf(s + 1, " %c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
			"%llu %llu %llu %llu %llu %llu %llu %llu %llu", &state, &v[0], &v[1], &v[2],
			&v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13],
			&v[14], &v[15], &v[16], &v[17], &v[18], &v[19], &v[20]) != 22)
		return false;
	p->state = state;
	p->ppid = (pid_t)v[0];
	p->session = (pid_t)v[2];
	p->faults = v[6];
	p->children_faults = v[7];
	p->own_cpu = v[10] + v[11];
	p->children_cpu = v[12] + v[13];
	p->threads = v[16];
	p->start = v[18];
	p->rss = v[20] * (uint64_t)page_size;
	return true;
}

/* Whether the /proc entry name is one of the run's processes (its uid's,
 * of its session where one is set), its stat read into *p. */
static bool read_run_process(const struct memwatch *w, int proc_fd, const char *name,
		struct proc *p)
{
	struct stat st;
	*p = (struct proc){0};
	if (name[0] < '1' || name[0] > '9' || fstatat(proc_fd, name, &st, 0) < 0 ||
	    st.st_uid != w->opt.uid || !read_stat(proc_fd, name, p) ||
	    (w->opt.session > 0 && p->session != w->opt.session))
		return false;
	p->pid = (pid_t)strtol(name, NULL, 10);
	return true;
}

/* p's stat read again into *again, where it is still the same process. */
static bool read_again(int proc_fd, const struct proc *p, struct proc *again)
{
	char at[16];
	*again = (struct proc){0};
	snprintf(at, sizeof at, "%d", (int)p->pid);
	return read_stat(proc_fd, at, again) && again->start == p->start;
}

/* Is it the first process of its pid namespace (NSpid ending in 1)? */
static bool namespace_init(int proc_fd, const char *pid)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "%s/status", pid);
	if (read_small(proc_fd, path, text, sizeof text) <= 0)
		return false;
	const char *line = strstr(text, "\nNSpid:");
	if (!line)
		return false;
	size_t len = strcspn(line + 1, "\n");
	const char *last = line + 1 + len;
	while (last > line && last[-1] != '\t' && last[-1] != ' ')
		last--;
	return strtol(last, NULL, 10) == 1 && last > line + 7;
}

/* A process's page tables, from status: 0 where it cannot be read. */
static uint64_t page_tables(int proc_fd, const char *at)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "%s/status", at);
	if (read_small(proc_fd, path, text, sizeof text) <= 0)
		return 0;
	const char *field = strstr(text, "\nVmPTE:");
	return field ? strtoull(field + 7, NULL, 10) * 1024 : 0;
}

/* Entries of a directory under /proc/PID, or -1 if it cannot be read. */
static int64_t count_entries(int proc_fd, const char *path)
{
	int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int64_t n = 0;
	struct dirent *entry;
	while ((entry = readdir(dir)))
		n += entry->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* A process's open descriptors. Since Linux 6.2 the size of /proc/PID/fd
 * is their number, and stat needs no permission on the directory itself,
 * which the account lacks for a dumpable process of another uid. Before,
 * /proc/PID/fdinfo is listed, which needs what reading smaps_rollup does
 * (ptrace read access, which the owner of the run's user namespace has). */
static uint64_t process_descriptors(int proc_fd, const char *at)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "%s/fd", at);
	if (fstatat(proc_fd, path, &st, 0) == 0 && st.st_size > 0)
		return (uint64_t)st.st_size;
	snprintf(path, sizeof path, "%s/fdinfo", at);
	int64_t n = count_entries(proc_fd, path);
	if (n < 0) {
		snprintf(path, sizeof path, "%s/fd", at);
		n = count_entries(proc_fd, path);
	}
	return n > 0 ? (uint64_t)n : 0;
}

/* "Pss:" and "Rss:" of /proc/PID/smaps_rollup, or its RSS for both if
 * that cannot be read; false if the process is gone. */
static bool process_pss(int proc_fd, const struct proc *p, uint64_t *pss, uint64_t *rss)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "%s/smaps_rollup", p->at);
	*pss = *rss = p->rss;
	ssize_t n = read_small(proc_fd, path, text, sizeof text);
	if (n == 0)
		return false; /* no memory left: it is exiting */
	if (n < 0)
		return errno != ESRCH && errno != ENOENT;
	const char *field = strstr(text, "\nPss:");
	if (field)
		*pss = strtoull(field + 5, NULL, 10) * 1024;
	field = strstr(text, "\nRss:");
	if (field)
		*rss = strtoull(field + 5, NULL, 10) * 1024;
	return true;
}

/* The lines of /proc/PID/maps: its mappings. */
static bool count_mappings(int proc_fd, const char *at, uint64_t *count)
{
	char path[64], text[65536];
	snprintf(path, sizeof path, "%s/maps", at);
	int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	uint64_t lines = 0;
	ssize_t n;
	while ((n = read(fd, text, sizeof text)) > 0)
		for (const char *c = text; (c = memchr(c, '\n', (size_t)(text + n - c))); c++)
			lines++;
	close(fd);
	*count = lines;
	return n == 0;
}

static int compare_pids(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The owner of one line of /proc/locks, "1: POSIX  ADVISORY  WRITE 4718
 * fe:00:10953300 5 5" (an awaited lock has "->" before its type), or 0. */
static pid_t lock_owner(char *line)
{
	char *field = strchr(line, ':'), *end;
	if (!field)
		return 0;
	field = strtok_r(field + 1, " \t", &end);
	if (field && strcmp(field, "->") == 0)
		field = strtok_r(NULL, " \t", &end);
	for (int i = 0; field && i < 3; i++)
		field = strtok_r(NULL, " \t", &end);
	return field ? (pid_t)strtol(field, NULL, 10) : 0;
}

/* The lines of /proc/locks whose owner is one of pids (sorted), held or
 * awaited, counted up to LOCKS_MAX + 1. The kernel prints a page of it per
 * read and walks its list from the start for each: 100,000 locks took
 * seconds to read, the loop stalled meanwhile. The newest locks come
 * first, so a run making many is seen at the top; reading stops after
 * LOCK_LINES_READ lines whoever they belong to. */
#define LOCK_LINES_READ (4 * LOCKS_MAX)
static uint64_t count_locks(const pid_t *pids, int n)
{
	uint64_t lines = 0;
	static char text[256 << 10];
	size_t held = 0;
	uint64_t count = 0;
	int fd = open("/proc/locks", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (count <= LOCKS_MAX && lines < LOCK_LINES_READ) {
		ssize_t got = read(fd, text + held, sizeof text - 1 - held);
		if (got <= 0)
			break;
		held += (size_t)got;
		text[held] = '\0';
		char *line = text, *newline;
		while ((newline = strchr(line, '\n'))) {
			*newline = '\0';
			pid_t pid = lock_owner(line);
			lines++;
			count += pid > 0 && bsearch(&pid, pids, (size_t)n, sizeof *pids, compare_pids);
			line = newline + 1;
		}
		held = (size_t)(text + held - line);
		memmove(text, line, held);
		if (held == sizeof text - 1)
			held = 0; /* no line is that long */
	}
	close(fd);
	return count;
}

/* ---- bounds ------------------------------------------------------------- */

/* It exited: a zombie, or on its way to one. Its memory is gone. */
static bool exited(const struct proc *p)
{
	return p->state == 'Z' || p->state == 'X';
}

/* Its PSS at most. Since its walk a process's PSS grows only by pages it
 * comes to hold, each of which raised its RSS (a new page; 2 MiB at a
 * time for a huge page) or its minor faults (a page it made or copied: a
 * write to a page shared with its parent makes a private copy, the RSS
 * unchanged; a page another process of the run wrote into it through
 * /proc/PID/mem is that process's fault, and is in its count). Pages
 * shared with a process that left are in departed. Never walked: its
 * RSS, which no PSS exceeds. */
static uint64_t memory_bound(const struct proc *p)
{
	if (exited(p))
		return 0; /* in departed from the look that saw it exit */
	if (!p->walked)
		return p->rss;
	uint64_t grown = p->rss > p->rss_at_walk ? p->rss - p->rss_at_walk : 0;
	return p->pss + grown + (p->faults - p->faults_at_walk) * (uint64_t)page_size;
}

/* Its walk still stands: nothing made since, nothing dropped since,
 * nobody left since. A process that dropped pages (munmap) holds less
 * than its walk says, by as much as its RSS fell at most: its walk bounds
 * it still, but taken as a measure it could stop a run that had come
 * back under the limit by what it dropped (a review's finding, not seen
 * in a run). */
static bool walk_stands(const struct memwatch *w, const struct proc *p)
{
	return p->walked && (w->departed == 0 || p->walk_generation == w->departures) &&
		p->faults == p->faults_at_walk && p->rss == p->rss_at_walk;
}

/* Its walk is taken as its PSS now: it stands, and nothing of the run
 * was forked since. (A page of a file or of shared memory that another
 * process maps since lowers it too, unseen: listed below among the
 * misses.) A walk from before a fork still bounds the PSS from above (the
 * fork only added sharers), but may be far over it: each of 90 sleeping
 * forks of a warm Sage, walked as it came, kept the share of the
 * template's 330 MB it had among the few processes of its time: their
 * walks summed to 1160 MiB where their PSS was 410, a stop at --memory 1g
 * of a run that held 770 MiB in all. */
static bool walk_current(const struct memwatch *w, const struct proc *p)
{
	return walk_stands(w, p) && p->walk_arrivals == w->arrivals;
}

/* Its mappings at most: counted, plus what its CPU time since could
 * have made; the kernel's cap where they were never counted. */
static uint64_t mappings_bound(const struct proc *p)
{
	/* A zombie's mappings went with its memory, at its exit: a fork
	 * bomb's dead are not each the kernel's cap. */
	if (exited(p))
		return 0;
	if (!p->maps_known)
		return max_map_count;
	if (!split_ns)
		calibrate();
	double since_ns = (double)(p->own_cpu - p->cpu_at_maps) * 1e9 / (double)ticks_per_second;
	double made = since_ns / split_ns;
	uint64_t bound = p->maps + (made > (double)max_map_count ? max_map_count : (uint64_t)made);
	return bound < max_map_count ? bound : max_map_count;
}

/* ---- freezing ------------------------------------------------------------ */

/* A signal to pid only if it is still the process identified by start and
 * of uid: the pidfd pins it while /proc is asked. */
static bool signal_process(int proc_fd, const struct proc *p, uid_t uid, int sig)
{
	char path[32], text[1024];
	struct stat st;
	int pidfd = pidfd_open(p->pid, 0);
	if (pidfd < 0)
		return false;
	snprintf(path, sizeof path, "%d", (int)p->pid);
	struct proc now = {.pid = p->pid};
	snprintf(text, sizeof text, "%d", (int)p->pid);
	bool same = fstatat(proc_fd, path, &st, 0) == 0 && st.st_uid == uid &&
		read_stat(proc_fd, text, &now) && now.start == p->start;
	bool sent = same && pidfd_send_signal(pidfd, sig, NULL, 0) == 0;
	close(pidfd);
	return sent;
}

/* Continues p where the watchdog stopped it and it is still that process. */
static void continue_stopped(struct memwatch *w, int proc_fd, struct proc *p)
{
	if (p->stopped && signal_process(proc_fd, p, w->opt.uid, SIGCONT))
		p->stopped = false;
}

/* /proc/PID/task, to list a process's threads; NULL where it is gone. */
static DIR *open_tasks(int proc_fd, pid_t pid)
{
	char path[32];
	snprintf(path, sizeof path, "%d/task", (int)pid);
	int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir && fd >= 0)
		close(fd);
	return dir;
}

/* Where p's memory is read (p->at), and its state and resident size
 * there. A leader that exited (pthread_exit, or a raw exit) leaves a
 * zombie whose stat and smaps show nothing, while its threads hold the
 * memory: those are read through a live thread. */
static void find_memory(int proc_fd, struct proc *p)
{
	snprintf(p->at, sizeof p->at, "%d", (int)p->pid);
	if (!exited(p) || p->threads <= 1)
		return;
	DIR *dir = open_tasks(proc_fd, p->pid);
	if (!dir)
		return;
	struct dirent *entry;
	while ((entry = readdir(dir))) {
		pid_t tid = (pid_t)strtol(entry->d_name, NULL, 10);
		if (tid <= 0 || tid == p->pid)
			continue;
		char at[sizeof p->at];
		struct proc thread = {0};
		snprintf(at, sizeof at, "%d/task/%d", (int)p->pid, (int)tid);
		if (read_stat(proc_fd, at, &thread) && !exited(&thread)) {
			memcpy(p->at, at, sizeof p->at);
			p->state = thread.state;
			p->rss = thread.rss;
			break;
		}
	}
	closedir(dir);
}

/* Stops every process of the run that runs, but the launcher; a process a
 * timer of its own continued is stopped again at the next look. The run
 * is then listed again, and what it started since this look's listing is
 * stopped too, until a listing finds nothing new running (FREEZE_ROUNDS at
 * most): a run whose processes each fork the next and exit (a chain of
 * double forks) had moved on, by the time the look that listed it stopped
 * it, to processes no look had seen.
 * - For the CPU: on a host whose cores the run keeps busy, the watchdog's
 *   own look is slowed as much, and a chain of 20 ms processes ran free
 *   at --cpus 0.25 until it was killed.
 * - For memory: each process that arrives makes every walk from before it
 *   a bound, not a measure (walk_current), and a chain that brought one
 *   to every look kept the run frozen with no verdict, walks again never
 *   done within a look's budget: a fork loop of Sage processes past
 *   --memory 600m ran to its timeout in 2 runs of 4, and a chain of 2 ms
 *   processes beside 7 sharers of 256 MiB, under a limit of 352 MiB,
 *   stayed frozen 3.8 and 5.4 s at a stretch in a 7 s watch
 *   (tests/unit-memwatch.c; with the second listing, 0.4 to 1.3 s).
 * One stopped here is recorded with no time of its own: the next look
 * charges all it used, and walks it. None is stopped that cannot be
 * recorded (one stopped and not recorded would count as stopped by its
 * own, never continued), and no more than MAX_PROCESSES are recorded in
 * all (listed: this look's so far), which keeps the table's probing short
 * of full. A fork still in progress when the last listing was read
 * finishes, and its child runs until the next look. */
static void freeze(struct memwatch *w, int proc_fd, const struct proc *init, int listed)
{
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		struct proc *p = &w->table[i];
		if (!p->pid || p->init || exited(p))
			continue;
		if (p->state == 'T' && p->stopped)
			continue;
		if (p->state == 'T' || p->state == 't')
			continue; /* stopped by its own or the launcher: not ours */
		if (signal_process(proc_fd, p, w->opt.uid, SIGSTOP))
			p->stopped = true;
	}
	for (int round = 0; round < FREEZE_ROUNDS; round++) {
		DIR *dir = list_proc(proc_fd);
		if (!dir)
			return;
		int stopped = 0;
		struct dirent *entry;
		while ((entry = readdir(dir))) {
			struct proc now;
			if (!read_run_process(w, proc_fd, entry->d_name, &now) || exited(&now) ||
			    now.state == 'T' || now.state == 't')
				continue;
			struct proc *p = slot(w->table, now.pid);
			if (p->pid == now.pid)
				continue; /* this look's: stopped above, or the next look's to stop */
			if (w->opt.spare_init &&
			    (init ? now.pid == init->pid : namespace_init(proc_fd, entry->d_name)))
				continue;
			if (listed >= MAX_PROCESSES)
				break;
			if (!signal_process(proc_fd, &now, w->opt.uid, SIGSTOP))
				continue;
			*p = (struct proc){.pid = now.pid, .ppid = now.ppid, .session = now.session,
				.start = now.start, .state = 'T', .stopped = true};
			w->arrivals++; /* first listed here: the next look knows it */
			listed++;
			stopped++;
		}
		closedir(dir);
		if (!stopped || listed >= MAX_PROCESSES)
			return;
	}
}

int64_t memwatch_next_look_ms(void)
{
	/* Exponential: however much a run knows of the last look (it saw
	 * the throttle continue it there), the time to the next is as
	 * uncertain as ever; so a worker's chance of being seen running is
	 * its share of the time, however short and however timed. Each draw
	 * from the kernel. Capped at twice the mean (what allocation can do
	 * between two looks stays bounded): 43 ms on average. */
	uint64_t bits = 0;
	if (getrandom(&bits, sizeof bits, 0) != sizeof bits)
		bits = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
	double uniform = ((double)(bits >> 11) + 1) / 9007199254740992.0; /* (0, 1] */
	double ms = -MEMWATCH_INTERVAL_MS * log(uniform);
	return ms < 1 ? 1 : ms > 2 * MEMWATCH_INTERVAL_MS ? 2 * MEMWATCH_INTERVAL_MS : (int64_t)ms;
}

void memwatch_release(struct memwatch *w, bool thaw)
{
	int proc_fd = thaw ? open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		struct proc *p = &w->table[i];
		if (proc_fd >= 0 && p->pid)
			continue_stopped(w, proc_fd, p);
		w->table[i].stopped = false;
		w->table[i].loses_children = false; /* the next call's to show */
		/* The launcher's credit is the last call's: it would hide the
		 * next call's reaping. */
		w->table[i].carried_cpu = 0;
	}
	w->frozen_memory = w->frozen_cpu = false;
	/* The next call's account: full, and counted from its first look. */
	w->cpu_seen = w->clock_read = false;
	w->clock_unread_ms = 0;
	w->allowance_us = w->sampled_allowance_us = w->clock_allowance_us =
		w->opt.cpus_milli * CPU_BURST_MS;
	w->sampled_variance = 0;
	w->cpu_escaped = false;
	w->longest_interval_ms = 0;
	/* Its intervals are its own: the time between calls is not one. */
	w->last_ms = 0;
	if (proc_fd >= 0)
		close(proc_fd);
}

/* ---- the kernel's count ---------------------------------------------------- */

/* A task clock on pid, inherited by every thread and process it starts
 * from then on: as each one exits, reaped or not, the kernel adds its
 * count to this one. Limited to user space, which a task clock ignores
 * (it counts all of a task's time on a CPU), so that a
 * perf_event_paranoid of 2, the kernel's default, lets the account open
 * it on a process of the user namespace it owns. */
static int open_task_clock(pid_t pid)
{
	struct perf_event_attr attr = {.type = PERF_TYPE_SOFTWARE, .size = sizeof attr,
		.config = PERF_COUNT_SW_TASK_CLOCK, .inherit = 1, .exclude_kernel = 1,
		.exclude_hv = 1};
	return (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

bool memwatch_kernel_counts(void)
{
	int fd = open_task_clock(0);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* How many processes the run has now, and its first (the launcher, the
 * first of its pid namespace; in tests, the session's leader) in *root
 * where it is among them (root->pid 0 where not). */
static int run_processes(const struct memwatch *w, int proc_fd, struct proc *root)
{
	*root = (struct proc){0};
	DIR *dir = list_proc(proc_fd);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *entry;
	while ((entry = readdir(dir))) {
		struct proc p;
		if (!read_run_process(w, proc_fd, entry->d_name, &p))
			continue;
		n++;
		if (w->opt.spare_init ? namespace_init(proc_fd, entry->d_name) :
		    p.pid == w->opt.session)
			*root = p;
	}
	closedir(dir);
	return n;
}

bool memwatch_count(struct memwatch *w)
{
	if (w->clock_settled)
		return true;
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return false;
	struct proc root, again;
	int n = run_processes(w, proc_fd, &root);
	/* Counted from its first process's first thread, before it starts
	 * another (the launcher's first fork comes after Sage's import, a
	 * second or more after it appears): a process or thread started
	 * before the counter was opened would not inherit it. Before that
	 * process is alone and single-threaded (runc's init, which execs it,
	 * has threads), there is nothing to count yet; past it, too late.
	 * (A fork under way as the counter opens, its child not yet listed,
	 * would escape it; the launcher is found alone long before its first
	 * fork.) A counter refused is refused for good: the kernel's
	 * perf_event_paranoid, its security module, or no perf events. */
	if (n == 1 && root.pid && root.threads == 1) {
		int fd = open_task_clock(root.pid);
		if (fd >= 0 && run_processes(w, proc_fd, &again) == 1 && again.pid == root.pid &&
		    again.start == root.start && again.threads == 1)
			w->clock_fd = fd;
		else if (fd >= 0)
			close(fd);
		w->clock_settled = true;
	} else if (n > 1) {
		w->clock_settled = true;
	}
	close(proc_fd);
	return w->clock_settled;
}

/* ---- a look ---------------------------------------------------------------- */

/* SIGCHLD ignored (SigIgn in its status): its children are freed as they
 * exit. (SA_NOCLDWAIT does the same and shows nowhere: such a parent is
 * found by what its children took away, in cpu_used_since().) */
static bool ignores_sigchld(int proc_fd, const struct proc *p)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "%s/status", p->at);
	if (read_small(proc_fd, path, text, sizeof text) <= 0)
		return false;
	const char *field = strstr(text, "\nSigIgn:");
	return field && (strtoull(field + 8, NULL, 16) >> (SIGCHLD - 1) & 1);
}

/* Its threads in state R now, the leader's state alone where it has one
 * thread. A process that waits while its threads compute is running too.
 * Every thread is read (the pids limit bounds them): one spinning behind
 * many sleeping ones is counted. */
static int running_threads(int proc_fd, const struct proc *p)
{
	if (p->threads <= 1)
		return p->state == 'R';
	char path[64 + sizeof ((struct dirent *)0)->d_name];
	DIR *dir = open_tasks(proc_fd, p->pid);
	if (!dir)
		return p->state == 'R';
	int running = 0;
	struct dirent *entry;
	while ((entry = readdir(dir))) {
		if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
			continue;
		struct proc thread = {0};
		snprintf(path, sizeof path, "%d/task/%s", (int)p->pid, entry->d_name);
		if (read_stat(proc_fd, path, &thread) && thread.state == 'R')
			running++;
	}
	closedir(dir);
	return running;
}

/* This look's table from /proc, each process carried over from the last
 * look where it is the same process. Fills pids (sorted, the launcher
 * left out) and returns their count, or -1. Long: reading and carrying
 * over each process is one loop. */
static int list_run(struct memwatch *w, int proc_fd, pid_t *pids, struct proc **init)
{
	/* Listed before the tables turn: a listing that fails (EMFILE)
	 * leaves the last look's table, and its stopped flags, as they were. */
	DIR *dir = list_proc(proc_fd);
	if (!dir)
		return -1;
	struct proc *swap = w->previous;
	w->previous = w->table;
	w->table = swap;
	memset(w->table, 0, TABLE_SIZE * sizeof *w->table);
	*init = NULL;
	w->escaped = false;
	int n = 0, listed = 0;
	struct dirent *entry;
	while ((entry = readdir(dir)) && listed < MAX_PROCESSES) {
		struct proc now;
		if (!read_run_process(w, proc_fd, entry->d_name, &now))
			continue;
		find_memory(proc_fd, &now);
		struct proc *was = slot(w->previous, now.pid);
		struct proc *p = slot(w->table, now.pid);
		if (was->pid == now.pid && was->start == now.start) {
			*p = *was;
			p->state = now.state;
			p->ppid = now.ppid;
			p->own_cpu = now.own_cpu;
			p->children_cpu = now.children_cpu;
			p->departed_children_cpu = p->departed_children_faults = 0;
			p->children_faults = now.children_faults;
			p->running = 0;
			p->rss = now.rss;
			p->threads = now.threads;
			memcpy(p->at, now.at, sizeof p->at);
			p->vanished = false;
			w->escaped = w->escaped || (p->stopped && (p->state == 'R' || p->state == 'S'));
		} else {
			*p = now;
			p->init = w->opt.spare_init && namespace_init(proc_fd, entry->d_name);
			p->rss_at_pte = UINT64_MAX;
			w->arrivals++;
		}
		listed++;
		if (p->init) {
			*init = p;
			continue;
		}
		/* Descriptors at every look: hundreds are opened in less CPU
		 * time than the clock tick that stat counts in, so its CPU time
		 * need not change (a stat of /proc/PID/fd, one system call).
		 * Page tables change only with its pages (they map them). */
		p->fds = process_descriptors(proc_fd, p->at);
		if (w->opt.cpus_milli) {
			p->running = running_threads(proc_fd, p);
			p->loses_children = p->loses_children || ignores_sigchld(proc_fd, p);
		}
		if (p->rss != p->rss_at_pte) {
			p->pte = page_tables(proc_fd, p->at);
			p->rss_at_pte = p->rss;
		}
		pids[n++] = p->pid;
	}
	closedir(dir);
	qsort(pids, (size_t)n, sizeof *pids, compare_pids);
	/* Who left since the last look, or exited and waits to be reaped
	 * (a zombie's memory went at its exit): what it held of pages shared
	 * with the rest is theirs now. */
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		const struct proc *was = &w->previous[i];
		if (!was->pid || was->init || exited(was))
			continue;
		const struct proc *now = slot(w->table, was->pid);
		if (now->pid == was->pid && now->start == was->start && !exited(now))
			continue;
		w->departed += memory_bound(was);
		w->departures++;
	}
	return n;
}

/* A new process's mappings are its parent's when it forked: the parent's
 * bound as it has grown since the last look (it may have mapped more
 * before the fork), taken before any count of this look lowers it. Not
 * the launcher's: a process it forked is a call's, counted when it
 * matters, and an orphan of the run, whose parent is gone, is the
 * launcher's child too (the kernel reparents it), with whatever mappings
 * its parent made. */
static void inherit_mappings(struct memwatch *w, const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		struct proc *p = slot(w->table, pids[i]);
		if (p->maps_known || p->asked_parent)
			continue;
		p->asked_parent = true;
		struct proc *parent = slot(w->table, p->ppid);
		if (parent->pid == p->ppid && !parent->init && parent->start <= p->start &&
		    parent->maps_known) {
			p->maps = mappings_bound(parent);
			p->cpu_at_maps = 0; /* all its CPU time is since the fork */
			p->maps_known = true;
		}
	}
}

struct totals {
	uint64_t own, kernel, descriptors, mappings;
	uint64_t exact; /* of what is measured exactly: the run holds at least this */
	bool departed_in_walks; /* every process walked since the last departure */
	bool vanished;          /* one left while measured: not exact until the next look */
};

static uint64_t sum(const struct memwatch *w, const pid_t *pids, int n, struct totals *t)
{
	*t = (struct totals){0};
	uint64_t tables = 0, exact_maps = 0;
	/* Walked since the last departure, a process's PSS holds its share of
	 * what those who left shared with it: departed is counted once. */
	t->departed_in_walks = true;
	for (int i = 0; i < n; i++) {
		const struct proc *p = slot((struct proc *)w->table, pids[i]);
		if (exited(p))
			continue; /* its memory, descriptors and page tables went at its exit */
		t->departed_in_walks = t->departed_in_walks && p->walked &&
			p->walk_generation == w->departures;
		t->own += memory_bound(p);
		t->vanished = t->vanished || p->vanished;
		t->mappings += mappings_bound(p);
		tables += p->pte;
		t->descriptors += p->fds;
		/* Each part exact on its own; one that vanished as it was
		 * walked holds nothing now. */
		if (walk_current(w, p) && !p->vanished)
			t->exact += p->pss;
		if (p->maps_counted && p->own_cpu == p->cpu_at_maps)
			exact_maps += p->maps * VMA_CHARGE_BYTES;
	}
	uint64_t maps = t->mappings * VMA_CHARGE_BYTES;
	t->kernel = tables + (maps > VMA_ALLOWANCE_BYTES ? maps - VMA_ALLOWANCE_BYTES : 0);
	t->exact += tables + t->descriptors * DESCRIPTOR_CHARGE_BYTES +
		(exact_maps > VMA_ALLOWANCE_BYTES ? exact_maps - VMA_ALLOWANCE_BYTES : 0);
	if (!t->departed_in_walks)
		t->own += w->departed;
	return t->own + t->kernel + t->descriptors * DESCRIPTOR_CHARGE_BYTES;
}

/* The process whose walk stands but is from before a fork (walk_current),
 * with the largest PSS then: what a walk again may lower most. NULL when
 * there is none. */
static struct proc *next_stale_walk(struct memwatch *w, const pid_t *pids, int n)
{
	struct proc *best = NULL;
	for (int i = 0; i < n; i++) {
		struct proc *p = slot(w->table, pids[i]);
		if (exited(p) || p->vanished || !walk_stands(w, p) || walk_current(w, p))
			continue;
		if (!best || p->pss > best->pss)
			best = p;
	}
	return best;
}

/* The next exact measurement worth its cost: the one that may lower the
 * bound most, a walk of a process whose PSS is unknown or stale (its RSS
 * over its last PSS, or half its RSS) or a count of a process's mappings
 * (its bound over its last count); once there is none, a walk again of
 * one walked before a fork (next_stale_walk), so that a run past the
 * limit by such walks gets no verdict before they are measures (frozen,
 * it forks no more, and the budget of the looks that follow pays for
 * them). NULL when everything is measured. */
static struct proc *next_to_measure(struct memwatch *w, const pid_t *pids, int n, bool *walk)
{
	struct proc *best = NULL;
	uint64_t most = 0;
	for (int i = 0; i < n; i++) {
		struct proc *p = slot(w->table, pids[i]);
		if (exited(p) || p->vanished)
			continue;
		if (!walk_stands(w, p)) {
			uint64_t bound = memory_bound(p);
			uint64_t gain = p->walked && p->pss < bound ? bound - p->pss : bound / 2 + 1;
			if (gain > most) {
				most = gain;
				best = p;
				*walk = true;
			}
		}
		uint64_t bound = mappings_bound(p);
		/* A bound inherited from the parent is no count: a fork bomb's
		 * children would each keep their busy parent's loose bound. */
		bool counted_now = p->maps_counted && p->own_cpu == p->cpu_at_maps;
		if (!counted_now) {
			uint64_t gain = (bound - (p->maps_known ? p->maps : 0)) * VMA_CHARGE_BYTES + 1;
			if (gain > most) {
				most = gain;
				best = p;
				*walk = false;
			}
		}
	}
	if (!best && (best = next_stale_walk(w, pids, n)))
		*walk = true;
	return best;
}

static void measure(struct memwatch *w, int proc_fd, struct proc *p, bool walk)
{
	if (walk) {
		uint64_t pss, rss;
		if (!process_pss(proc_fd, p, &pss, &rss)) {
			p->vanished = true;
			return;
		}
		p->pss = pss;
		p->walked = true;
		/* Growth is counted from the lesser of the RSS that stat showed
		 * and the walk's own: a process that runs while it is walked
		 * (a run thaws between looks) and dropped pages after stat was
		 * read must not have its refill of them taken as already in
		 * its PSS. */
		p->rss_at_walk = rss < p->rss ? rss : p->rss;
		p->rss = p->rss_at_walk; /* or it stands not, walked again in every pass */
		p->faults_at_walk = p->faults;
		p->walk_generation = w->departures;
		p->walk_arrivals = w->arrivals;
	} else {
		if (!count_mappings(proc_fd, p->at, &p->maps))
			p->maps = 0; /* gone meanwhile: it holds nothing */
		p->maps_known = p->maps_counted = true;
		p->cpu_at_maps = p->own_cpu;
	}
}

/* Listed at the last look, not at this one: left since. */
static bool departed(const struct memwatch *w, const struct proc *was)
{
	const struct proc *now = slot(w->table, was->pid);
	return now->pid != was->pid || now->start != was->start;
}

/* The CPU the run used since the last look, in clock ticks: each
 * process's growth, a new one's all, and a parent's reaped children's
 * growth less what its children that left had used by the last look
 * (charged then). A process freed unreaped (its parent ignores SIGCHLD)
 * takes its time with it: charged up to the last look, never given back
 * (a sum of the run's totals gave it back, to be spent again). */
static uint64_t cpu_used_since(struct memwatch *w, int proc_fd, const pid_t *pids, int n,
		struct proc *init, uint64_t *sampled_instead)
{
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		const struct proc *was = &w->previous[i];
		if (!was->pid || was->init || !departed(w, was))
			continue;
		/* Its time reaches the nearest ancestor still here (a parent
		 * that left too, `sh -c 'a; b'`, was reaped with it), or the
		 * launcher, which reaps orphans. */
		const struct proc *up = was;
		for (int depth = 0; depth < MAX_PROCESSES && up->ppid > 0; depth++) {
			const struct proc *gone = slot(w->previous, up->ppid);
			if (gone->pid != up->ppid || gone->init || !departed(w, gone))
				break;
			up = gone;
		}
		struct proc *ancestor = slot(w->table, up->ppid);
		if (ancestor->pid != up->ppid || ancestor->init)
			ancestor = init;
		if (ancestor) {
			ancestor->departed_children_cpu += was->own_cpu + was->children_cpu;
			/* Whether it loses its children: told by its own only (a
			 * grandchild reparented to the launcher never reaches it). */
			if (up == was)
				ancestor->departed_children_faults += was->faults + was->children_faults;
		}
	}
	uint64_t used = 0;
	*sampled_instead = 0;
	/* The launcher last: what a parent that exited was credited for its
	 * children that left and never reached it is the launcher's (below). */
	for (int i = 0; i <= n; i++) {
		struct proc *p = i == n ? init : slot(w->table, pids[i]);
		if (!p)
			continue;
		const struct proc *parent = slot(w->table, p->ppid);
		bool sampled = !p->init && parent->pid == p->ppid && parent->loses_children;
		const struct proc *was = slot(w->previous, p->pid);
		if (was->pid != p->pid || was->start != p->start) {
			used += p->own_cpu + p->children_cpu;
			*sampled_instead += sampled ? p->own_cpu : 0;
			continue;
		}
		if (p->own_cpu > was->own_cpu && !p->init) {
			used += p->own_cpu - was->own_cpu;
			*sampled_instead += sampled ? p->own_cpu - was->own_cpu : 0;
		}
		uint64_t reaped = p->children_cpu > was->children_cpu ?
			p->children_cpu - was->children_cpu : 0;
		uint64_t fresh = p->departed_children_cpu, credit = fresh + p->carried_cpu;
		uint64_t left = credit > reaped ? credit - reaped : 0;
		p->carried_cpu = 0;
		if (reaped > credit)
			used += reaped - credit;
		/* A parent that exited (a zombie still listed) had its children
		 * that were still running taken from it at its exit: those that
		 * left since (reaped by the launcher, which takes orphans) were
		 * charged up to the last look, and their time reaches the
		 * launcher, not it. Without this, a chain of processes that each
		 * fork the next and exit (a double fork, a daemon's start) was
		 * charged twice and killed at --cpus 0.25. (The credit is time
		 * already charged: where a child went to a subreaper of the run
		 * instead, that one's reaping charges it again, as before.) */
		else if (exited(p) && init && p != init)
			init->departed_children_cpu += left;
		/* This look's credit that its reaping did not show is carried to
		 * the next look, once: a child it reaped after its own stat was
		 * read, and before the child's was looked for, left this look's
		 * listing while its time reaches children_cpu at the next (a
		 * reaper listed before its children: the launcher, which reaps
		 * orphans as they come while a call runs, always is). Carried
		 * one look only, and not by a parent that loses its children: a
		 * credit no reaping will match (a child freed unreaped) hides at
		 * most its own amount of the next look's reaping, as it could of
		 * its own look's already. */
		else if (!p->loses_children)
			p->carried_cpu = left < fresh ? left : fresh;
		/* Children that left without their minor faults reaching it
		 * (exact counts, where a short child's clock ticks round to
		 * none). Read again: it may have reaped one between its own
		 * line in /proc and its child's. The launcher reaps all it has. */
		if (!p->init && p->departed_children_faults &&
		    p->children_faults - was->children_faults < p->departed_children_faults) {
			struct proc again;
			if (read_again(proc_fd, p, &again) &&
			    again.children_faults - was->children_faults < p->departed_children_faults)
				p->loses_children = true;
		}
	}
	return used;
}

/* Charges used_us and elapsed_ms's allowance to an account, its bank
 * capped at CPU_BURST_MS a core of --cpus. */
static void charge(const struct memwatch *w, int64_t *allowance_us, int64_t elapsed_ms,
		int64_t used_us)
{
	*allowance_us += elapsed_ms * w->opt.cpus_milli - used_us;
	if (*allowance_us > w->opt.cpus_milli * CPU_BURST_MS)
		*allowance_us = w->opt.cpus_milli * CPU_BURST_MS;
}

/* The throttle: the run's CPU time since the last look against its
 * allowance; true while the allowance is overdrawn. Sets cpu_escaped
 * where either account is further in debt than a freeze that holds
 * explains. */
static bool over_cpu(struct memwatch *w, int proc_fd, const pid_t *pids, int n, struct proc *init,
		int64_t elapsed_ms, uint64_t *cpu_ms)
{
	uint64_t ticks = init ? init->children_cpu : 0;
	for (int i = 0; i < n; i++) {
		const struct proc *p = slot(w->table, pids[i]);
		ticks += p->own_cpu + p->children_cpu;
	}
	*cpu_ms = ticks * 1000 / (uint64_t)ticks_per_second;
	if (!w->opt.cpus_milli)
		return false;
	bool first = !w->cpu_seen;
	uint64_t sampled_instead = 0;
	uint64_t used = first ? 0 : cpu_used_since(w, proc_fd, pids, n, init, &sampled_instead);
	w->cpu_seen = true;
	/* The threads that could leave unseen: those of processes whose
	 * parent loses its children. The rest are charged exactly above, and
	 * sampling them would only add its error (a thread runnable is not
	 * running: on a busy host, sessions share the cores, not threads). */
	int running = 0;
	for (int i = 0; i < n; i++) {
		const struct proc *p = slot(w->table, pids[i]);
		const struct proc *parent = slot(w->table, p->ppid);
		if (parent->pid == p->ppid && parent->loses_children)
			running += p->running;
	}
	charge(w, &w->allowance_us, elapsed_ms,
		(int64_t)(used * 1000000 / (uint64_t)ticks_per_second));
	/* The kernel's count, where there is one: every process's time, by
	 * whatever route it left. Less the launcher's own time, as above:
	 * its stat's, read again just after the count (so what the launcher
	 * computes during a look's measures is not the run's; the error left
	 * is the gaps between the two readings and the clock ticks, some
	 * 20 ms of the launcher's time over a call). Not read where the
	 * launcher was not found: its whole time would look like the run's.
	 * Never charged more than every core for the time between two
	 * readings: no run can use more, and a count past it is the count's
	 * error (see CLOCK_DOUBT_MS), dropped. */
	int64_t tick_ns = 1000000000 / ticks_per_second;
	uint64_t counted_ns;
	struct proc launcher = {0};
	w->clock_unread_ms += elapsed_ms;
	if (w->clock_fd >= 0 && (init || !w->opt.spare_init) &&
	    read(w->clock_fd, &counted_ns, sizeof counted_ns) == (ssize_t)sizeof counted_ns &&
	    (!init || read_again(proc_fd, init, &launcher))) {
		int64_t run_ns = (int64_t)counted_ns - (init ? (int64_t)launcher.own_cpu * tick_ns : 0);
		int64_t read_at_ns = monotonic_ns();
		if (w->clock_read) {
			int64_t used_ns = run_ns - w->clock_last_ns;
			int64_t possible_ns = online_cores * (read_at_ns - w->clock_read_at_ns);
			charge(w, &w->clock_allowance_us, w->clock_unread_ms,
				(used_ns < possible_ns ? used_ns : possible_ns) / 1000);
		}
		w->clock_last_ns = run_ns;
		w->clock_read_at_ns = read_at_ns;
		w->clock_read = true;
		w->clock_unread_ms = 0;
	}
	/* Sampled: what runs now ran the whole interval, each thread on a
	 * core of its own as far as there are cores. No share is taken off
	 * for a busy host: the kernel shares the cores between sessions, not
	 * threads, and a run's share of them cannot be read; such children
	 * of an honest run that a busy host holds back are charged more
	 * than they got. */
	double cores_running = running < online_cores ? running : online_cores;
	/* Never more than every core for the interval, with what the same
	 * account charged exactly for it. */
	double exact_ms = (double)((used - sampled_instead) * 1000 / (uint64_t)ticks_per_second);
	double room_ms = (double)online_cores * (double)elapsed_ms - exact_ms;
	if (cores_running * (double)elapsed_ms > room_ms)
		cores_running = room_ms > 0 ? room_ms / (double)elapsed_ms : 0;
	/* The sampled account is the exact one's charges, those threads'
	 * own time sampled instead. */
	charge(w, &w->sampled_allowance_us, elapsed_ms,
		(int64_t)((used - sampled_instead) * 1000000 / (uint64_t)ticks_per_second) +
		(int64_t)(cores_running * elapsed_ms * 1000));
	/* Each look's error is at most every core for the interval; a
	 * sampled debt past four standard deviations of the sum of those
	 * errors (each taken as a coin's, the largest variance) is no
	 * sampling error. */
	double error_ms = (double)online_cores * (double)elapsed_ms;
	w->sampled_variance += error_ms * error_ms / 4;
	if (elapsed_ms > w->longest_interval_ms)
		w->longest_interval_ms = elapsed_ms;
	int64_t explained_us = (CPU_ESCAPE_MS + online_cores * w->longest_interval_ms) * 1000;
	int64_t sampling_error_us = (int64_t)(4000 * sqrt(w->sampled_variance));
	w->cpu_escaped = w->allowance_us < -explained_us ||
		w->sampled_allowance_us < -(explained_us + sampling_error_us) ||
		(w->clock_fd >= 0 && w->clock_allowance_us < -(explained_us + CLOCK_DOUBT_MS * 1000));
	return w->allowance_us < 0 || (w->clock_fd >= 0 && w->clock_allowance_us < 0);
}

/* Long: one look is one sequence (list, bound, measure within the budget,
 * verdict, freeze or thaw, throttle) whose steps share its totals. */
enum memwatch_verdict memwatch_look(struct memwatch *w, int64_t now_ms,
		struct memwatch_reading *r)
{
	static pid_t pids[MAX_PROCESSES];
	int64_t begin = thread_cpu_ns();
	*r = (struct memwatch_reading){0};
	enum memwatch_verdict verdict = MEMWATCH_OK;
	memwatch_count(w);
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return MEMWATCH_OK;
	/* As the last look left the run: the interval since was spent so. */
	bool left_frozen = w->frozen_memory && !w->escaped;
	struct proc *init;
	int n = list_run(w, proc_fd, pids, &init);
	if (n < 0) {
		close(proc_fd);
		return MEMWATCH_OK;
	}
	/* The interval from the last look that listed the run: a look that
	 * could not (out of descriptors) neither counted the CPU used since
	 * nor may shorten the interval the next one charges it to. */
	int64_t elapsed_ms = w->last_ms ? now_ms - w->last_ms : 0;
	w->last_ms = now_ms;
	/* The budget pays for exact measurements only. The cheap pass costs
	 * what the run's process count makes it (about 35 us a process here,
	 * bounded by --pids-limit), whatever the budget says: charged to the
	 * budget, it left a run of 95 Sage processes 1.5 ms of the 5 each look
	 * for walks of 8 ms, and a fork bomb that finishes in 3 s took 27. */
	w->budget_ns += elapsed_ms * 1000000LL / 100 * (left_frozen ?
		MEMWATCH_FROZEN_CPU_SHARE_PERCENT : MEMWATCH_CPU_SHARE_PERCENT);
	if (w->budget_ns > BUDGET_MAX_NS)
		w->budget_ns = BUDGET_MAX_NS;
	/* The launcher's mappings, which the first call's process is forked
	 * with: counted once. */
	if (init && !init->maps_known && count_mappings(proc_fd, init->at, &init->maps))
		init->maps_known = init->maps_counted = true;
	inherit_mappings(w, pids, n);
	struct totals t;
	uint64_t limit = w->opt.limit;
	uint64_t total = sum(w, pids, n, &t);
	/* Past the limit by the bound: measure, most gain first, as the budget
	 * allows, until the bound is back under it or the run is proven past
	 * it. Meanwhile the run is frozen: what it does cannot outrun the
	 * measures. It thaws once the bound is under the limit, measured or
	 * not (the bound holds what a frozen run could be, but for what the
	 * opening comment lists as missed), and what a thawed run makes shows
	 * in the next look's. (Frozen until every process was measured, a
	 * fork bomb of 95 Sage processes, 14 ms of measures each, crawled at
	 * the budget's pace.) */
	if (total > limit) {
		/* The budget pays for the whole of it: the sums and choices
		 * between measures too (10 us each at 512 processes). */
		int64_t measuring = thread_cpu_ns();
		bool walk = false;
		struct proc *next = NULL;
		while (total > limit && t.exact <= limit && w->budget_ns > 0 &&
		       (next = next_to_measure(w, pids, n, &walk))) {
			measure(w, proc_fd, next, walk);
			total = sum(w, pids, n, &t);
			w->budget_ns -= thread_cpu_ns() - measuring;
			measuring = thread_cpu_ns();
		}
		bool exact = !next_to_measure(w, pids, n, &walk) && !t.vanished;
		w->budget_ns -= thread_cpu_ns() - measuring;
		/* Past it exactly, or past it already by what is measured. */
		if ((exact && total > limit) || t.exact > limit)
			verdict = MEMWATCH_OVER;
	}
	w->frozen_memory = total > limit;
	if (t.departed_in_walks)
		w->departed = 0;
	if (total <= limit)
		r->locks = count_locks(pids, n);
	if (r->locks > LOCKS_MAX)
		verdict = MEMWATCH_OVER;
	w->frozen_cpu = over_cpu(w, proc_fd, pids, n, init, elapsed_ms, &r->cpu_ms);
	if (verdict == MEMWATCH_OK && w->cpu_escaped)
		verdict = MEMWATCH_CPU_OVER;
	if (verdict == MEMWATCH_OK && (w->frozen_memory || w->frozen_cpu)) {
		freeze(w, proc_fd, init, n + (init != NULL));
	} else if (verdict == MEMWATCH_OK) {
		for (int i = 0; i < n; i++)
			continue_stopped(w, proc_fd, slot(w->table, pids[i]));
	}
	close(proc_fd);
	r->total = total;
	r->own_bytes = t.own;
	r->descriptors = t.descriptors;
	r->mappings = t.mappings;
	r->kernel_bytes = t.kernel;
	r->processes = n;
	r->frozen = w->frozen_memory;
	r->throttled = w->frozen_cpu || verdict == MEMWATCH_CPU_OVER;
	int64_t allowance_us = w->clock_fd >= 0 && w->clock_allowance_us < w->allowance_us ?
		w->clock_allowance_us : w->allowance_us;
	r->cpu_debt_ms = allowance_us < 0 ? (uint64_t)-allowance_us / 1000 : 0;
	w->cpu_ns += (uint64_t)(thread_cpu_ns() - begin);
	return verdict;
}

void memwatch_free(struct memwatch *w)
{
	if (!w)
		return;
	if (w->clock_fd >= 0)
		close(w->clock_fd);
	free(w->table);
	free(w->previous);
	free(w);
}

/* ---- killing --------------------------------------------------------------- */

/* SIGKILL to pid if it is still uid's: the pidfd pins the process, so if
 * /proc says it is the run's after the pidfd was opened, the signal
 * reaches that process and no other that took its pid. */
static int kill_if_owned(pid_t pid, uid_t uid)
{
	char path[32];
	struct stat st;
	int pidfd = pidfd_open(pid, 0);
	if (pidfd < 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	int rc = stat(path, &st) == 0 && st.st_uid == uid ?
		pidfd_send_signal(pidfd, SIGKILL, NULL, 0) : -1;
	close(pidfd);
	return rc;
}

int memwatch_kill(uid_t uid)
{
	/* The init's death would take the rest with it, but only once its
	 * own exit has torn its memory down, with every core busy with the
	 * code: 1.5 s, in which 90 processes went on making sockets (2 GiB).
	 * So every process of the run first, then its init. */
	static pid_t pids[MAX_PROCESSES];
	int n = 0, killed = 0;
	pid_t init = 0;
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = proc_fd < 0 ? NULL : fdopendir(dup(proc_fd));
	struct dirent *entry;
	while (dir && (entry = readdir(dir)) && n < MAX_PROCESSES) {
		struct stat st;
		if (entry->d_name[0] < '1' || entry->d_name[0] > '9' ||
		    fstatat(proc_fd, entry->d_name, &st, 0) < 0 || st.st_uid != uid)
			continue;
		pid_t pid = (pid_t)strtol(entry->d_name, NULL, 10);
		if (namespace_init(proc_fd, entry->d_name))
			init = pid;
		else
			pids[n++] = pid;
	}
	if (dir)
		closedir(dir);
	if (proc_fd >= 0)
		close(proc_fd);
	for (int i = 0; i < n; i++)
		killed += kill_if_owned(pids[i], uid) == 0;
	if (init)
		killed += kill_if_owned(init, uid) == 0;
	return killed ? 0 : -1;
}
