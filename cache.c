/* cache.c: small answers kept per user between runs, keyed on everything
 * they depend on.
 *
 * A cached answer decides what runs, so the cache must not be writable by
 * anyone else: it lives in $XDG_RUNTIME_DIR/sage-sandbox (without a runtime
 * directory, in ${XDG_CACHE_HOME:-$HOME/.cache}/sage-sandbox), in
 * directories owned by this user that nobody else can write (each is
 * checked, links are not followed), in files owned by this user, mode 0600.
 * An answer is used only when its key matches byte for byte and it is
 * younger than its maximum age (boot time, so a changed wall clock does not
 * matter). Only answers that let a run go ahead are cached, never refusals. */
#include "cache.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "podman.h"

/* Changed whenever the layout of a cache file changes. */
#define CACHE_MAGIC "sage-sandbox cache 4\n"
#define CACHE_FILE_MAX 65536

void cache_key_text(struct buffer *key, const char *text)
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

void cache_key_file(struct buffer *key, const char *path)
{
	struct stat st;
	char line[256];
	cache_key_text(key, path);
	if (stat(path, &st) < 0)
		snprintf(line, sizeof line, "absent");
	else
		snprintf(line, sizeof line, "%llu:%llu:%llu:%lld.%09ld",
			(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
			(unsigned long long)st.st_size, (long long)st.st_ctim.tv_sec,
			st.st_ctim.tv_nsec);
	cache_key_text(key, line);
}

void cache_key_podman(struct buffer *key, const char *podman)
{
	char line[256];
	struct buffer boot = {0};
	const char *home = getenv("HOME");
	const char *config = getenv("XDG_CONFIG_HOME");
	char user_config[4096];

	snprintf(line, sizeof line, "uid %u euid %u", (unsigned)getuid(), (unsigned)geteuid());
	cache_key_text(key, line);
	cache_key_file(key, podman);
	for (size_t i = 0; podman_environment_names[i]; i++) {
		const char *v = getenv(podman_environment_names[i]);
		snprintf(line, sizeof line, "%s=", podman_environment_names[i]);
		buffer_append(key, line, strlen(line));
		cache_key_text(key, v ? v : "(unset)");
	}
	read_file("/proc/sys/kernel/random/boot_id", 64, &boot);
	cache_key_text(key, boot.data ? boot.data : "");
	buffer_free(&boot);

	static const char *const system_files[] = {
		"/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
		"/usr/share/containers/containers.conf.d", "/etc/containers/containers.conf.d",
		"/usr/share/containers/storage.conf", "/etc/containers/storage.conf",
		"/etc/subuid", "/etc/subgid", NULL};
	for (size_t i = 0; system_files[i]; i++)
		cache_key_file(key, system_files[i]);
	if (config && *config)
		snprintf(user_config, sizeof user_config, "%s/containers", config);
	else
		snprintf(user_config, sizeof user_config, "%s/.config/containers", home ? home : "");
	static const char *const user_files[] = {"containers.conf", "containers.conf.d",
		"storage.conf", NULL};
	for (size_t i = 0; user_files[i]; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", user_config, user_files[i]);
		cache_key_file(key, path);
	}
	const char *const overrides[] = {getenv("CONTAINERS_CONF"), getenv("CONTAINERS_STORAGE_CONF")};
	for (size_t i = 0; i < 2; i++)
		if (overrides[i] && *overrides[i])
			cache_key_file(key, overrides[i]);
}

/* A directory of ours that nobody else can write: not a link, owned by
 * us, no write permission for group or others. */
static bool private_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		!(st.st_mode & 022);
}

/* The cache directory: the last one is created 0700 and checked, and so is
 * each one above it that we name. NULL when none qualifies: then nothing
 * is cached. */
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

static bool cache_path(const char *name, char *path, size_t size)
{
	char *dir = cache_dir();
	if (!dir)
		return false;
	snprintf(path, size, "%s/%s", dir, name);
	free(dir);
	return true;
}

static long long boot_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec;
}

int cache_read(const char *name, const struct buffer *key, long max_age, struct buffer *answer)
{
	char path[4200];
	struct buffer file = {0};
	struct stat st;
	int rc = -1;
	if (!cache_path(name, path, sizeof path))
		return -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022) && read_fd(fd, CACHE_FILE_MAX, &file) < 0)
		buffer_free(&file);
	close(fd);
	size_t magic = strlen(CACHE_MAGIC);
	/* CACHE_MAGIC, the key, "written BOOT-SECONDS\n", then the answer. */
	if (file.len > magic + key->len && memcmp(file.data, CACHE_MAGIC, magic) == 0 &&
	    memcmp(file.data + magic, key->data, key->len) == 0) {
		const char *rest = file.data + magic + key->len;
		long long written, age;
		int used = 0;
		if (sscanf(rest, "written %lld\n%n", &written, &used) == 1 && used > 0 &&
		    (age = boot_seconds() - written) >= 0 && age < max_age) {
			buffer_append(answer, rest + used, strlen(rest + used));
			rc = 0;
		}
	}
	buffer_free(&file);
	return rc;
}

void cache_write(const char *name, const struct buffer *key, const char *answer)
{
	char path[4200], temp[4300];
	if (!cache_path(name, path, sizeof path))
		return;
	snprintf(temp, sizeof temp, "%s.%d", path, (int)getpid());
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

void cache_forget(const char *name)
{
	char path[4200];
	if (cache_path(name, path, sizeof path))
		unlink(path);
}
