/* cache.h: small answers kept per user between runs (podman's rootless
 * answer, what an image holds), each under a key of everything it depends
 * on, in a directory that only this user can write. */
#ifndef SAGE_SANDBOX_CACHE_H
#define SAGE_SANDBOX_CACHE_H

#include "buffer.h"

/* Appends text to key on a line of its own, control bytes escaped. */
void cache_key_text(struct buffer *key, const char *text);
/* Appends a file's path and identity (device, inode, size, change time),
 * or "absent". */
void cache_key_file(struct buffer *key, const char *path);
/* Everything a podman answer depends on: the uid, the podman executable,
 * the variables podman is given, the boot id, every containers.conf and
 * storage.conf with their drop-in directories, /etc/subuid and /etc/subgid. */
void cache_key_podman(struct buffer *key, const char *podman);

/* The answer cached as name under exactly key, at most max_age seconds
 * old: 0 with it in answer, else -1. */
int cache_read(const char *name, const struct buffer *key, long max_age, struct buffer *answer);
/* Caches answer as name under key: written whole, renamed into place. */
void cache_write(const char *name, const struct buffer *key, const char *answer);
/* Forgets name's answer (it turned out wrong). */
void cache_forget(const char *name);

#endif
