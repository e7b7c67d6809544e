/* memwatch.c: a run's total memory, measured from the host's /proc.
 *
 * Where podman has no memory cgroup (every cgroup v1 host, v2 hosts without
 * delegation), the rlimits bound each process, but k processes of a run
 * could hold k times --memory. Each run has a host uid of its own (see
 * podman.c), so its processes are the ones that uid owns: one fstatat per
 * /proc entry finds them (the entry is owned by the process's uid), and
 * their smaps_rollup gives the PSS, which counts shared pages once.
 *
 * The container's first process, the launcher, is not counted: it holds
 * Sage as imported (about 140 MB of PSS here), allocates nothing once the
 * code runs, and the code can neither write to its memory nor make it grow.
 * What is counted is every process of the code.
 *
 * PSS misses what the kernel allocates on a process's behalf, which no
 * memory cgroup charges on cgroup v1: one process's 1,020 AF_UNIX sockets,
 * their buffers filled, took 6.4 GiB of the host, eight processes nearly
 * all of its 24 GiB. Every such object is reached through a descriptor, so
 * each open descriptor is charged the most one can hold
 * (DESCRIPTOR_CHARGE_BYTES), and a run is stopped when its PSS and its
 * charges pass --memory. Counting is one stat per process (below), no
 * readlink per descriptor. What a descriptor's object may hold is kept
 * small elsewhere: socket buffers at their default and only AF_UNIX
 * sockets (derive-seccomp.py); pipes by the kernel's per-user quota, which
 * is per run since each run has a host uid of its own. Byte-range locks
 * are kernel records that no descriptor shows, any number per file: they
 * are counted in /proc/locks, and a run holding more than LOCKS_MAX is
 * stopped (OFD locks, listed there with no owner, are refused by the
 * seccomp profile). What neither shows, and the rlimits bound instead: sockets in flight in another
 * socket's queue (SCM_RIGHTS; at most RLIMIT_NOFILE per uid), POSIX timers
 * and queued signals (RLIMIT_SIGPENDING per uid), threads' kernel stacks
 * (RLIMIT_NPROC), tmpfs inodes (nr_inodes=). */
#include "memwatch.h"

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* Is it the first process of its pid namespace (NSpid ending in 1)? */
static bool namespace_init(int proc_fd, const char *pid)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "%s/status", pid);
	int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, text, sizeof text - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	const char *line = strstr(text, "\nNSpid:");
	if (!line)
		return false;
	size_t len = strcspn(line + 1, "\n");
	const char *last = line + 1 + len;
	while (last > line && last[-1] != '\t' && last[-1] != ' ')
		last--;
	return strtol(last, NULL, 10) == 1 && last > line + 7;
}

/* "Pss:" of /proc/PID/smaps_rollup, or its VmRSS if that cannot be read. */
static uint64_t process_bytes(int proc_fd, pid_t pid)
{
	static const char *const sources[][2] = {{"smaps_rollup", "Pss:"}, {"status", "VmRSS:"}};
	for (size_t s = 0; s < 2; s++) {
		char path[64], text[4096];
		snprintf(path, sizeof path, "%d/%s", (int)pid, sources[s][0]);
		int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, text, sizeof text - 1);
		close(fd);
		if (n <= 0)
			continue;
		text[n] = '\0';
		const char *field = strstr(text, sources[s][1]);
		if (field)
			return strtoull(field + strlen(sources[s][1]), NULL, 10) * 1024;
	}
	return 0;
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
static uint64_t process_descriptors(int proc_fd, pid_t pid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "%d/fd", (int)pid);
	if (fstatat(proc_fd, path, &st, 0) == 0 && st.st_size > 0)
		return (uint64_t)st.st_size;
	snprintf(path, sizeof path, "%d/fdinfo", (int)pid);
	int64_t n = count_entries(proc_fd, path);
	if (n < 0) {
		snprintf(path, sizeof path, "%d/fd", (int)pid);
		n = count_entries(proc_fd, path);
	}
	return n > 0 ? (uint64_t)n : 0;
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

/* A run has at most --pids-limit (512) processes: RLIMIT_NPROC holds its
 * uid to that. */
enum { MAX_PROCESSES = 1024 };

/* The processes of host uid uid, found by the owner of their /proc entry:
 * their pids into pids (at most MAX_PROCESSES), sorted, and their count;
 * the first process of their pid namespace (the launcher) apart, in *init
 * (0 if none). -1 if /proc cannot be read. */
static int run_processes(int proc_fd, uid_t uid, pid_t *pids, pid_t *init)
{
	int dir_fd = dup(proc_fd);
	DIR *proc = dir_fd < 0 ? NULL : fdopendir(dir_fd);
	int n = 0;
	*init = 0;
	if (!proc) {
		if (dir_fd >= 0)
			close(dir_fd);
		return -1;
	}
	struct dirent *entry;
	while ((entry = readdir(proc)) && n < MAX_PROCESSES) {
		struct stat st;
		if (entry->d_name[0] < '1' || entry->d_name[0] > '9' ||
		    fstatat(proc_fd, entry->d_name, &st, 0) < 0 || st.st_uid != uid)
			continue;
		pid_t pid = (pid_t)strtol(entry->d_name, NULL, 10);
		if (namespace_init(proc_fd, entry->d_name))
			*init = pid;
		else
			pids[n++] = pid;
	}
	closedir(proc);
	qsort(pids, (size_t)n, sizeof *pids, compare_pids);
	return n;
}

uint64_t memwatch_look(uid_t uid, uint64_t limit, struct memwatch_reading *r)
{
	static pid_t pids[MAX_PROCESSES];
	pid_t init;
	*r = (struct memwatch_reading){0};
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return 0;
	int n = run_processes(proc_fd, uid, pids, &init);
	r->processes = n > 0 ? n : 0;
	/* First the descriptors, one stat each, then the locks, then the PSS,
	 * a walk of each process's page tables: while the code makes kernel
	 * objects as fast as it can, with every core busy, the cheaper passes
	 * alone stop it. */
	for (int i = 0; i < r->processes; i++)
		r->descriptors += process_descriptors(proc_fd, pids[i]);
	uint64_t total = r->descriptors * DESCRIPTOR_CHARGE_BYTES;
	if (total <= limit)
		r->locks = count_locks(pids, r->processes);
	for (int i = 0; i < r->processes && total <= limit && r->locks <= LOCKS_MAX; i++) {
		uint64_t bytes = process_bytes(proc_fd, pids[i]);
		r->own_bytes += bytes;
		total += bytes;
	}
	close(proc_fd);
	return total;
}

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
	pid_t init;
	int killed = 0;
	int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = proc_fd < 0 ? -1 : run_processes(proc_fd, uid, pids, &init);
	if (proc_fd >= 0)
		close(proc_fd);
	for (int i = 0; i < n; i++)
		killed += kill_if_owned(pids[i], uid) == 0;
	if (n >= 0 && init)
		killed += kill_if_owned(init, uid) == 0;
	return killed ? 0 : -1;
}
