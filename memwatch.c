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
 * What is counted is every process of the code. */
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
static uint64_t process_bytes(int proc_fd, const char *pid)
{
	static const char *const sources[][2] = {{"smaps_rollup", "Pss:"}, {"status", "VmRSS:"}};
	for (size_t s = 0; s < 2; s++) {
		char path[64], text[4096];
		snprintf(path, sizeof path, "%s/%s", pid, sources[s][0]);
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

uint64_t memwatch_total(uid_t uid, int *processes, pid_t *init)
{
	uint64_t total = 0;
	*processes = 0;
	*init = 0;
	DIR *proc = opendir("/proc");
	if (!proc)
		return 0;
	struct dirent *entry;
	while ((entry = readdir(proc))) {
		struct stat st;
		if (entry->d_name[0] < '1' || entry->d_name[0] > '9' ||
		    fstatat(dirfd(proc), entry->d_name, &st, 0) < 0 || st.st_uid != uid)
			continue;
		if (namespace_init(dirfd(proc), entry->d_name)) {
			*init = (pid_t)strtol(entry->d_name, NULL, 10);
			continue;
		}
		total += process_bytes(dirfd(proc), entry->d_name);
		++*processes;
	}
	closedir(proc);
	return total;
}

int memwatch_kill(pid_t init, uid_t uid)
{
	char path[32];
	struct stat st;
	int pidfd = pidfd_open(init, 0);
	if (pidfd < 0)
		return -1;
	/* The pidfd pins the process: if /proc still says it is the run's,
	 * the signal reaches the run's init and no other process. */
	snprintf(path, sizeof path, "/proc/%d", (int)init);
	int rc = stat(path, &st) == 0 && st.st_uid == uid ?
		pidfd_send_signal(pidfd, SIGKILL, NULL, 0) : -1;
	close(pidfd);
	return rc;
}
