/* rootless.c: the rootless check, run before every sandbox and never
 * skipped.
 *
 * Rootful podman maps the container's root to the host's root: a container
 * escape is then a host compromise. sage-sandbox runs nothing unless podman
 * itself says it is rootless and local. It refuses outright as root (sudo
 * included), and when CONTAINER_HOST or CONTAINER_CONNECTION would send
 * podman to a service whose rootlessness is not this user's.
 *
 * Asking `podman info` costs 0.35-0.45 s, a third of a run. Its positive
 * answer is cached in $XDG_RUNTIME_DIR/sage-sandbox/podman-host (without a
 * runtime directory, in ${XDG_CACHE_HOME:-$HOME/.cache}/sage-sandbox), a file
 * in directories that only this user can write (each is checked, and links
 * are not followed), together with a key of everything that can change the
 * answer: the uid, the podman executable's identity (device, inode, size,
 * change time), the variables podman is given, the boot id, and the
 * identity of every containers.conf, storage.conf, their drop-in
 * directories and /etc/subuid and /etc/subgid. Any difference, or an answer
 * older than ten minutes, asks podman again. Refusals are never cached.
 *
 * The controllers matter too: rootless podman silently drops --memory,
 * --cpus and --pids-limit when the user has no delegated cgroup controller
 * for them, so podman.c passes each only where it is enforced. */
#include "rootless.h"
#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The first podman call after boot sets up its user namespace and storage:
 * seconds, not milliseconds, on a slow disk. */
#define PODMAN_INFO_TIMEOUT_MS 20000
#define CACHE_MAX_AGE_SECONDS 600
/* Changed whenever what is cached changes. */
#define CACHE_MAGIC "sage-sandbox podman-host 3\n"

static void key_escaped(struct buffer *key, const char *text)
{
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char hex[4];
		if (*p < 0x20 || *p == '%' || *p == 0x7f) {
			snprintf(hex, sizeof hex, "%%%02x", *p);
			buffer_append(key, hex, 3);
		} else {
			buffer_append(key, (const char *)p, 1);
		}
	}
	buffer_append(key, "\n", 1);
}

static void key_file(struct buffer *key, const char *path)
{
	struct stat st;
	char line[256];
	key_escaped(key, path);
	if (stat(path, &st) < 0)
		snprintf(line, sizeof line, "absent");
	else
		snprintf(line, sizeof line, "%llu:%llu:%llu:%lld.%09ld",
			(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			(unsigned long long)st.st_size, (long long)st.st_ctim.tv_sec,
			st.st_ctim.tv_nsec);
	key_escaped(key, line);
}

/* Everything podman's answer depends on, as text. */
static void cache_key(const char *podman, struct buffer *key)
{
	char line[256];
	struct buffer boot = {0};
	const char *home = getenv("HOME");
	const char *config = getenv("XDG_CONFIG_HOME");
	char user_config[4096];

	snprintf(line, sizeof line, "uid %u euid %u", (unsigned)getuid(), (unsigned)geteuid());
	key_escaped(key, line);
	key_file(key, podman);
	for (size_t i = 0; podman_environment_names[i]; i++) {
		const char *v = getenv(podman_environment_names[i]);
		snprintf(line, sizeof line, "%s=", podman_environment_names[i]);
		buffer_append(key, line, strlen(line));
		key_escaped(key, v ? v : "(unset)");
	}
	read_file("/proc/sys/kernel/random/boot_id", 64, &boot);
	key_escaped(key, boot.data ? boot.data : "");
	buffer_free(&boot);

	static const char *const system_files[] = {
		"/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
		"/usr/share/containers/containers.conf.d", "/etc/containers/containers.conf.d",
		"/usr/share/containers/storage.conf", "/etc/containers/storage.conf",
		"/etc/subuid", "/etc/subgid", NULL};
	for (size_t i = 0; system_files[i]; i++)
		key_file(key, system_files[i]);
	if (config && *config)
		snprintf(user_config, sizeof user_config, "%s/containers", config);
	else
		snprintf(user_config, sizeof user_config, "%s/.config/containers", home ? home : "");
	static const char *const user_files[] = {"containers.conf", "containers.conf.d",
		"storage.conf", NULL};
	for (size_t i = 0; user_files[i]; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", user_config, user_files[i]);
		key_file(key, path);
	}
	const char *const overrides[] = {getenv("CONTAINERS_CONF"), getenv("CONTAINERS_STORAGE_CONF")};
	for (size_t i = 0; i < 2; i++)
		if (overrides[i] && *overrides[i])
			key_file(key, overrides[i]);
}

/* A directory of ours that nobody else can write: not a link, owned by
 * us, no write permission for group or others. */
static bool private_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		!(st.st_mode & 022);
}

/* Where the cache lives: $XDG_RUNTIME_DIR/sage-sandbox, or, where there is
 * none (no login manager), ${XDG_CACHE_HOME:-$HOME/.cache}/sage-sandbox;
 * the last directory is created 0700 and checked, and so is each one
 * above it that we name. NULL when none qualifies: then nothing is cached. */
static char *cache_dir(void)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	const char *cache = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char *base = NULL, *dir = NULL;

	if (runtime && runtime[0] == '/' && private_dir(runtime)) {
		base = strdup(runtime);
	} else if (cache && cache[0] == '/') {
		if (private_dir(cache))
			base = strdup(cache);
	} else if (home && home[0] == '/' && private_dir(home)) {
		if (asprintf(&base, "%s/.cache", home) < 0)
			abort();
		mkdir(base, 0700);
		if (!private_dir(base)) {
			free(base);
			base = NULL;
		}
	}
	if (!base)
		return NULL;
	if (asprintf(&dir, "%s/sage-sandbox", base) < 0)
		abort();
	free(base);
	mkdir(dir, 0700);
	if (!private_dir(dir)) {
		free(dir);
		return NULL;
	}
	return dir;
}

static long long boot_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec;
}

/* The cached podman info answer for key, or -1. */
static int cache_read(const struct buffer *key, struct podman_host *host)
{
	char *dir = cache_dir(), path[4200];
	struct buffer file = {0};
	struct stat st;
	int rc = -1;
	if (!dir)
		return -1;
	snprintf(path, sizeof path, "%s/podman-host", dir);
	free(dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022)) {
		char chunk[8192];
		ssize_t n;
		while ((n = read(fd, chunk, sizeof chunk)) > 0 && file.len < 65536)
			buffer_append(&file, chunk, (size_t)n);
	}
	close(fd);
	size_t magic = strlen(CACHE_MAGIC);
	/* CACHE_MAGIC, the key, "written BOOT-SECONDS\n", then podman's answer. */
	if (file.len > magic + key->len && memcmp(file.data, CACHE_MAGIC, magic) == 0 &&
	    memcmp(file.data + magic, key->data, key->len) == 0) {
		const char *rest = file.data + magic + key->len;
		long long written;
		int used = 0;
		if (sscanf(rest, "written %lld\n%n", &written, &used) == 1 && used > 0 &&
		    boot_seconds() - written >= 0 && boot_seconds() - written < CACHE_MAX_AGE_SECONDS) {
			podman_info_parse(rest + used, 0, false, NULL, host);
			if (host->rootless == ROOTLESS_TRUE && !host->remote)
				rc = 0;
		}
	}
	buffer_free(&file);
	return rc;
}

static void cache_write(const struct buffer *key, const char *answer)
{
	char *dir = cache_dir(), path[4200], temp[4200];
	if (!dir)
		return;
	snprintf(path, sizeof path, "%s/podman-host", dir);
	snprintf(temp, sizeof temp, "%s/podman-host.%d", dir, (int)getpid());
	free(dir);
	FILE *f = NULL;
	int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		f = fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		unlink(temp);
		return;
	}
	fputs(CACHE_MAGIC, f);
	fwrite(key->data, 1, key->len, f);
	fprintf(f, "written %lld\n%s", boot_seconds(), answer);
	/* Renamed into place whole, or not at all. */
	if (fclose(f) != 0 || rename(temp, path) < 0)
		unlink(temp);
}

/* Refusals that need no podman at all. */
static bool refused_early(struct podman_host *host)
{
	*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
	if (geteuid() == 0) {
		host->rootless = ROOTLESS_FALSE;
		host->as_root = true;
		snprintf(host->detail, sizeof host->detail, "running as root");
		return true;
	}
	static const char *const remote_vars[] = {"CONTAINER_HOST", "CONTAINER_CONNECTION"};
	for (size_t i = 0; i < 2; i++) {
		const char *v = getenv(remote_vars[i]);
		if (v && *v) {
			host->remote = true;
			snprintf(host->detail, sizeof host->detail,
				"%s is set: podman would run containers through a service", remote_vars[i]);
			return true;
		}
	}
	return false;
}

struct rootless_query {
	struct buffer key;
	struct argv_builder args;
	rootless_callback *done;
	void *data;
};

static void info_answered(struct capture *cap, void *data)
{
	struct rootless_query *q = data;
	struct podman_host host;
	podman_info_parse(cap->out.data, cap->status, cap->timed_out, cap->err.data, &host);
	if (host.rootless == ROOTLESS_TRUE && !host.remote && q->key.data)
		cache_write(&q->key, cap->out.data ? cap->out.data : "");
	capture_free(cap);
	rootless_callback *done = q->done;
	void *done_data = q->data;
	buffer_free(&q->key);
	args_free(&q->args);
	free(q);
	done(&host, done_data);
}

int rootless_check(struct loop *loop, const char *podman, int64_t deadline,
		rootless_callback *done, void *data)
{
	struct podman_host host;
	if (refused_early(&host)) {
		done(&host, data);
		return 0;
	}
	struct rootless_query *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	cache_key(podman, &q->key);
	if (cache_read(&q->key, &host) == 0) {
		buffer_free(&q->key);
		free(q);
		done(&host, data);
		return 0;
	}
	q->done = done;
	q->data = data;
	podman_info_args(&q->args, podman);
	int64_t limit = loop_now_ms() + PODMAN_INFO_TIMEOUT_MS;
	if (capture_start(loop, q->args.arg, podman_environment(), deadline < limit ? deadline : limit,
		    info_answered, q) < 0) {
		int saved = errno;
		buffer_free(&q->key);
		args_free(&q->args);
		free(q);
		errno = saved;
		return -1;
	}
	return 0;
}

void rootless_query_now(const char *podman, struct podman_host *host)
{
	struct argv_builder args = {0};
	struct capture cap;
	if (refused_early(host))
		return;
	podman_info_args(&args, podman);
	if (capture_command(args.arg, podman_environment(), PODMAN_INFO_TIMEOUT_MS, &cap) < 0) {
		*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
		snprintf(host->detail, sizeof host->detail, "cannot start %s: %s", podman,
			strerror(cap.exec_errno));
	} else {
		podman_info_parse(cap.out.data, cap.status, cap.timed_out, cap.err.data, host);
	}
	capture_free(&cap);
	args_free(&args);
}

int rootless_verdict(const struct podman_host *host, struct error *err)
{
	if (host->remote) {
		error_set(err, EXIT_REFUSED,
			"unset CONTAINER_HOST and CONTAINER_CONNECTION, and use a local rootless podman "
			"(no remote = true in containers.conf)",
			"refusing to run: podman is remote (%s)",
			host->detail[0] ? host->detail : "it reports a remote service");
		return -1;
	}
	switch (host->rootless) {
	case ROOTLESS_TRUE:
		return 0;
	case ROOTLESS_FALSE:
		if (host->as_root) {
			error_set(err, EXIT_REFUSED,
				"run it as the account setup.sh made (sudo -iu sage-sandbox sage-sandbox "
				"run FILE), or as your own user after './setup.sh image'",
				"refusing to run as root: rootless podman needs an unprivileged user");
			return -1;
		}
		error_set(err, EXIT_REFUSED,
			"run sage-sandbox as an unprivileged user (not root, not sudo) with rootless "
			"podman; check with: podman info --format '{{.Host.Security.Rootless}}'",
			"refusing to run: podman is not rootless (%s)",
			host->detail[0] ? host->detail : "it runs as root");
		return -1;
	default:
		error_set(err, EXIT_REFUSED, "check that podman works for this user: podman info",
			"refusing to run: cannot confirm podman is rootless: %s", host->detail);
		return -1;
	}
}
