/* cpugroup.c: --cpus held by the scheduler, in a cgroup v1 cpu group that
 * root delegated to the account.
 *
 * Rootless podman on cgroup v1 drops --cpus (it may not make cgroups), so
 * the CPU throttle of memwatch.c holds it there from /proc, with the gaps
 * its opening comment lists: work done between two looks by processes
 * whose time reaches no one, the memory a process frees as it exits. The
 * scheduler has none of them: CFS bandwidth control charges every
 * nanosecond a task of the group runs, in the kernel or out, exiting or
 * not, to the group, and stops the group's tasks for the rest of each
 * period once its quota is spent. Where root made a cpu group for the
 * account (setup.sh: CPUGROUP_PREFIX and the uid, owned by the account),
 * each container gets a group of its own inside it: the podman client
 * joins it before its exec, and conmon, the runtime and every process of
 * the container are its descendants, so they start in it. runc, rootless,
 * makes a group of its own below it for the container, which stays under
 * the quota (a group's quota bounds its descendants).
 *
 * Nothing in the container can leave the group: moving a process needs
 * write access to a group's cgroup.procs, and every file here is root's
 * or the account's, while the run's uids are neither (sandbox_uid), and
 * it has no capabilities. Nor can it escape the quota by real-time
 * scheduling: the container's RLIMIT_RTPRIO is 0 (podman.c), and where
 * the kernel schedules groups' real-time tasks (CONFIG_RT_GROUP_SCHED),
 * a new group's cpu.rt_runtime_us is 0 too.
 * The quota is set when a call's code starts, and lifted when a serial
 * container's launcher warms up between calls, while it forks the next
 * call's child once every process of the last is killed (its U frame,
 * until H), or when a stopped run's processes are killed (sandbox.c):
 * Sage's import and a warm container's warm-up are the launcher's, never
 * charged to a call, as memwatch.c spares the launcher. Setting it again
 * resets the group's runtime: a call cannot begin in another's debt. The
 * podman client, conmon and the launcher share the group: what they do
 * while a call runs (relaying its output) is charged to the call. Rootless
 * podman's pause process, which keeps its user namespace, is born in the
 * group of the podman client that first needs one (after a reboot, say):
 * where that is a container's, the group outlives its container, never
 * removable, with that idle process charged nothing. */
#include "cpugroup.h"
#include "buffer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool cpugroup_cpu_mount(const char *line, struct cpu_mount *m)
{
	char fstype[64], options[1024];
	const char *tail = strstr(line, " - ");
	if (!tail || sscanf(line, "%*s %*s %*s %511s %511s", m->root, m->point) != 2 ||
	    sscanf(tail, " - %63s %*s %1023s", fstype, options) != 2 ||
	    strcmp(fstype, "cgroup") != 0)
		return false;
	bool cpu = false;
	for (char *save, *o = strtok_r(options, ",", &save); o && !cpu;
	     o = strtok_r(NULL, ",", &save))
		cpu = strcmp(o, "cpu") == 0;
	return cpu;
}

/* The cgroup v1 hierarchy that has the cpu controller, as mounted here. */
static bool cpu_hierarchy(struct cpu_mount *m)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = cpugroup_cpu_mount(line, m);
	fclose(f);
	return found;
}

bool cpugroup_delegated(char *dir, size_t size)
{
	struct cpu_mount m;
	struct stat st;
	if (!cpu_hierarchy(&m))
		return false;
	if ((size_t)snprintf(dir, size, "%s/" CPUGROUP_PREFIX "%lu", m.point,
		    (unsigned long)geteuid()) >= size)
		return false;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK) == 0;
}

static int write_file(const char *dir, const char *file, const char *text)
{
	char path[640];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	int saved = errno;
	close(fd);
	errno = saved;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* g's path: the group name in dir. 0, or -1 with errno. */
static int name_group(struct cpugroup *g, const char *dir, const char *name)
{
	*g = (struct cpugroup){0};
	if ((size_t)snprintf(g->path, sizeof g->path, "%s/%s", dir, name) >= sizeof g->path) {
		g->path[0] = '\0';
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int cpugroup_find(struct cpugroup *g, const char *dir, const char *name)
{
	struct stat st;
	*g = (struct cpugroup){0};
	if (!name[0] || name[0] == '.' || strchr(name, '/')) {
		errno = EINVAL;
		return -1;
	}
	if (name_group(g, dir, name) < 0)
		return -1;
	int found = stat(g->path, &st);
	if (found == 0 && !S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		found = -1;
	}
	if (found < 0)
		g->path[0] = '\0';
	return found;
}

int cpugroup_create(struct cpugroup *g, const char *dir, const char *name)
{
	if (name_group(g, dir, name) < 0)
		return -1;
	cpugroup_sweep(dir);
	if (mkdir(g->path, 0755) < 0) {
		g->path[0] = '\0';
		return -1;
	}
	return 0;
}

void cpugroup_procs_path(const struct cpugroup *g, char *out, size_t size)
{
	snprintf(out, size, "%s/cgroup.procs", g->path);
}

/* throttled_time (ns) from the group's cpu.stat, in *ns; false where it
 * could not be read (out of descriptors), which must not read as 0: the
 * next read would hold the group's whole life of throttles. */
static bool read_throttled(const char *path, uint64_t *ns)
{
	char file[640], line[128];
	bool read = false;
	snprintf(file, sizeof file, "%s/cpu.stat", path);
	FILE *f = fopen(file, "re");
	if (!f)
		return false;
	while (!read && fgets(line, sizeof line, f))
		read = sscanf(line, "throttled_time %" SCNu64, ns) == 1;
	fclose(f);
	return read;
}

int cpugroup_hold(struct cpugroup *g, long cpus_milli, int64_t now_ms)
{
	char quota[32];
	if (!g->path[0])
		return 0;
	/* Thousandths of a core, of a period in microseconds. */
	snprintf(quota, sizeof quota, "%ld", cpus_milli * (CPUGROUP_PERIOD_US / 1000));
	g->counted = read_throttled(g->path, &g->throttled_ns);
	g->read_at_ms = now_ms;
	g->lift_owed = false;
	return write_file(g->path, "cpu.cfs_quota_us", quota);
}

static void lift_quota(struct cpugroup *g)
{
	g->lift_owed = write_file(g->path, "cpu.cfs_quota_us", "-1") < 0;
}

/* cpugroup_throttled's answer, from the count read now; spent: the time
 * since the last read was no call's, so the read only starts anew. A
 * count that could not be read starts no account, and ends the one it
 * had: the throttles until the next good read may be the last call's (a
 * hold's last moments where its lift could not read), so that read is a
 * new start and tells nothing. */
static bool held_since_last_read(struct cpugroup *g, int64_t now_ms, bool spent)
{
	uint64_t now;
	bool counted = g->counted && !spent;
	g->counted = read_throttled(g->path, &now);
	if (!g->counted)
		return false;
	if (!counted) {
		g->throttled_ns = now;
		g->read_at_ms = now_ms;
		return false;
	}
	double held_ms = (double)(now - g->throttled_ns) / 1e6;
	/* Of one scheduler period at least: looks come at random intervals,
	 * some of a few ms, in which one throttle at a period's end would be
	 * a large share. */
	int64_t over_ms = now_ms - g->read_at_ms;
	if (over_ms < CPUGROUP_PERIOD_US / 1000)
		over_ms = CPUGROUP_PERIOD_US / 1000;
	bool held = now > g->throttled_ns && held_ms >= CPUGROUP_HELD_SHARE * (double)over_ms;
	g->throttled_ns = now;
	g->read_at_ms = now_ms;
	return held;
}

bool cpugroup_lift(struct cpugroup *g, int64_t now_ms)
{
	if (!g->path[0])
		return false;
	/* Lifted before the count is read: a throttle under way is counted
	 * only as it ends. What the hold's last moments were throttled,
	 * since its last look, is the hold's, and no later look's (a serial
	 * container's next call, whose first looks come before its hold,
	 * read it as its own: a busy job before it made it say throttled 6
	 * times in 22, where a quiet one made it once: attack helper), told
	 * whether or not this lift is written; but where an earlier one was
	 * not, that time held the launcher's work (review helper 131). */
	bool owed = g->lift_owed;
	lift_quota(g);
	return held_since_last_read(g, now_ms, owed);
}

/* The processes of the container listed in the group at path: pids whose
 * owner is not this account (the podman client's and conmon's are), up
 * to max, appended at *n. */
static void container_processes(const char *path, pid_t *pids, int *n, int max)
{
	char file[1100], line[32];
	snprintf(file, sizeof file, "%s/cgroup.procs", path);
	FILE *f = fopen(file, "re");
	while (f && *n < max && fgets(line, sizeof line, f)) {
		char proc[48];
		struct stat st;
		pid_t pid = (pid_t)strtol(line, NULL, 10);
		snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
		if (pid > 0 && stat(proc, &st) == 0 && st.st_uid != geteuid())
			pids[(*n)++] = pid;
	}
	if (f)
		fclose(f);
}

/* The container's processes in the group and the groups below it. */
static int list_container(const struct cpugroup *g, pid_t *pids, int max)
{
	int n = 0;
	container_processes(g->path, pids, &n, max);
	DIR *d = opendir(g->path);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			char child[1024];
			snprintf(child, sizeof child, "%s/%s", g->path, e->d_name);
			container_processes(child, pids, &n, max);
		}
	if (d)
		closedir(d);
	return n;
}

bool cpugroup_names_group(const char *proc_cgroup, const struct cpu_mount *m, const char *path)
{
	/* The group as /proc/PID/cgroup names it: its path below the mount
	 * point, under the group the mount shows there (its root: "/" but
	 * where only part of the hierarchy is mounted, in a container). */
	char named[1100];
	size_t point_len = strlen(m->point);
	if (strncmp(path, m->point, point_len) != 0 || (path[point_len] != '/' && path[point_len]) ||
	    (size_t)snprintf(named, sizeof named, "%s%s", strcmp(m->root, "/") == 0 ? "" : m->root,
		    path + point_len) >= sizeof named)
		return false;
	size_t named_len = strlen(named);
	for (const char *line = proc_cgroup; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *controllers = memchr(line, ':', len);
		const char *group = controllers ?
			memchr(controllers + 1, ':', len - (size_t)(controllers + 1 - line)) : NULL;
		if (group) {
			bool cpu = false;
			for (const char *c = controllers + 1; c < group && !cpu;) {
				const char *comma = memchr(c, ',', (size_t)(group - c));
				const char *stop = comma ? comma : group;
				cpu = stop - c == 3 && memcmp(c, "cpu", 3) == 0;
				c = stop + 1;
			}
			size_t group_len = len - (size_t)(group + 1 - line);
			if (cpu)
				return group_len >= named_len && memcmp(group + 1, named, named_len) == 0 &&
				       (group_len == named_len || group[1 + named_len] == '/');
		}
		line = end ? end + 1 : NULL;
	}
	return false;
}

/* The flags and parent of a process from /proc/PID/stat; false where it
 * is gone. */
static bool flags_and_parent(long pid, unsigned *flags, long *parent)
{
	char path[64], text[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if (read_small(AT_FDCWD, path, text, sizeof text) <= 0)
		return false;
	/* After the name, which may hold anything, ")" included: state,
	 * ppid, pgrp, session, tty, tpgid, flags. */
	const char *after = strrchr(text, ')');
	return after && sscanf(after + 1, " %*c %ld %*d %*d %*d %*d %u", parent, flags) == 2;
}

/* 1 where /proc/PID/cgroup puts the process in the group or below it, 0
 * where it does not, -1 where the process is gone. */
static int in_group(long pid, const struct cpu_mount *m, const char *path)
{
	char file[64], text[4096];
	snprintf(file, sizeof file, "/proc/%ld/cgroup", pid);
	/* A process that ended since it was listed has no lines. */
	if (read_small(AT_FDCWD, file, text, sizeof text) <= 0)
		return -1;
	return cpugroup_names_group(text, m, path);
}

/* Whether a process named outside the group is one: not exiting, nor a
 * child still being made, nor gone. cgroup v1 names "/" for a process
 * that is exiting (the kernel's PF_EXITING: a run's code that ends at
 * once is, as its B frame is read), and for one whose fork has not yet
 * put it in its parent's group (the child is in /proc a moment before):
 * its parent is in the group then. */
static bool really_outside(long pid, const struct cpu_mount *m, const char *path)
{
	enum { PF_EXITING_FLAG = 0x4 };
	unsigned flags;
	long parent;
	return flags_and_parent(pid, &flags, &parent) && !(flags & PF_EXITING_FLAG) &&
	       in_group(parent, m, path) == 0;
}

pid_t cpugroup_outside(const struct cpugroup *g, uid_t uid)
{
	struct cpu_mount m;
	if (!g->path[0] || !cpu_hierarchy(&m))
		return 0;
	DIR *proc = opendir("/proc");
	struct dirent *e;
	pid_t outside = 0;
	while (proc && !outside && (e = readdir(proc))) {
		char path[300];
		struct stat st;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s", e->d_name);
		long pid = strtol(e->d_name, NULL, 10);
		if (stat(path, &st) == 0 && st.st_uid == uid && in_group(pid, &m, g->path) == 0 &&
		    really_outside(pid, &m, g->path))
			outside = (pid_t)pid;
	}
	if (proc)
		closedir(proc);
	return outside;
}

/* A run has at most --pids-limit (512) processes. */
enum { MAX_LISTED = 1024 };

int cpugroup_kill(const struct cpugroup *g)
{
	static pid_t listed[MAX_LISTED], killed[MAX_LISTED];
	int n_killed = 0;
	if (!g->path[0])
		return 0;
	for (int round = 0; round < CPUGROUP_KILL_ROUNDS; round++) {
		int n = list_container(g, listed, MAX_LISTED), fresh = 0;
		for (int i = 0; i < n && n_killed < MAX_LISTED; i++) {
			bool done = false;
			for (int k = 0; k < n_killed && !done; k++)
				done = killed[k] == listed[i];
			if (done)
				continue;
			/* Through a pidfd, and only while it is still the
			 * container's: never a pid the kernel gave to another. */
			int pidfd = pidfd_open(listed[i], 0);
			char proc[48];
			struct stat st;
			snprintf(proc, sizeof proc, "/proc/%d", (int)listed[i]);
			if (pidfd >= 0 && stat(proc, &st) == 0 && st.st_uid != geteuid())
				pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
			if (pidfd >= 0)
				close(pidfd);
			killed[n_killed++] = listed[i];
			fresh++;
		}
		if (!fresh)
			break;
	}
	return n_killed;
}

bool cpugroup_throttled(struct cpugroup *g, int64_t now_ms)
{
	if (!g->path[0])
		return false;
	/* A lift not yet written left the group holding what ran between
	 * calls: written now, and what it held back meanwhile is no call's. */
	bool owed = g->lift_owed;
	if (owed)
		lift_quota(g);
	return held_since_last_read(g, now_ms, owed);
}

/* rmdir of the group at path, and first of the groups in it (runc's). */
static int remove_group(const char *path)
{
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_type == DT_DIR && e->d_name[0] != '.') {
				char child[1024];
				snprintf(child, sizeof child, "%s/%s", path, e->d_name);
				rmdir(child);
			}
		closedir(d);
	}
	return rmdir(path);
}

void cpugroup_remove(struct cpugroup *g)
{
	if (g->path[0])
		remove_group(g->path);
	g->path[0] = '\0';
}

int cpugroup_sweep(const char *dir)
{
	DIR *d = opendir(dir);
	int removed = 0;
	if (!d)
		return 0;
	time_t now = time(NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[1024];
		struct stat st;
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		/* Young ones may be another sage-sandbox's, made a moment
		 * before its podman joins them. */
		if (stat(path, &st) == 0 && now - st.st_ctime >= CPUGROUP_STRAY_SECONDS &&
		    remove_group(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
