/* podman.h: everything sage-sandbox knows of podman's command line and of
 * what podman prints: run, rm, ps, info, image inspect, version. */
#ifndef SAGE_SANDBOX_PODMAN_H
#define SAGE_SANDBOX_PODMAN_H

#include "buffer.h"
#include "settings.h"

#include <stdbool.h>
#include <sys/types.h>

/* The fixed properties of every sandbox: the podman arguments are written
 * from these, and so is the summary that run --json and status report. */
#define SANDBOX_NETWORK "none"
/* Each sandbox runs as a uid (and gid) of its own, drawn from this range
 * where the user's rootless mapping holds it and claimed while it lives
 * (uidclaim.c): see podman_run_args(). */
#define SANDBOX_UID_MIN 10000
#define SANDBOX_UID_MAX 59999
#define SANDBOX_PULL "never"
#define CONTAINER_LABEL "sage-sandbox=1"
#define OWNER_LABEL "sage-sandbox.owner"
/* conmon kills the container this long after our own timeout, if
 * sage-sandbox itself was killed before it could. */
#define PODMAN_BACKSTOP_SECONDS 5

/* A new container's name: "sage-sandbox-" and 16 random hex digits. */
void container_name(char *name, size_t size);
/* "BOOT-ID:PID:START": who started a container, for OWNER_LABEL. A
 * process with that pid and start time is its owner; a container whose
 * owner is gone is a stray of a killed sage-sandbox. */
void process_identity(pid_t pid, char *out, size_t size);

/* What podman says of this host. */
enum rootless_answer { ROOTLESS_TRUE, ROOTLESS_FALSE, ROOTLESS_UNKNOWN };
enum cgroup_controller { CONTROLLER_MEMORY, CONTROLLER_CPU, CONTROLLER_PIDS, CONTROLLER_COUNT };

struct podman_host {
	enum rootless_answer rootless;
	bool remote;                         /* podman talks to a service */
	bool as_root;                        /* refused before asking: we are root */
	char detail[512];                    /* why rootless is unknown or refused */
	char cgroups[8];                     /* "v1", "v2", or "" */
	char runtime[32];                    /* the OCI runtime: "runc", "crun" */
	char storage_driver[32];             /* "overlay"; "vfs" copies the image per run */
	char graph_root[1024];               /* where the storage keeps images */
	bool controller[CONTROLLER_COUNT];   /* usable by this user's containers */
	unsigned long id_count;              /* container uids and gids mapped (0..n-1) */
	struct id_range {
		unsigned long container, host, size;
	} uid_map[4];                        /* container uid -> host uid, as podman maps them */
	int uid_ranges;
};

/* The host uid that container uid maps to, or -1 when it is not mapped. */
long host_uid_of(const struct podman_host *host, unsigned long uid);

/* The highest uid a sandbox may run as on this host; SANDBOX_UID_MIN - 1
 * or less means the mapping is too small for a uid of its own per run. */
unsigned long sandbox_uid_max(const struct podman_host *host);

const char *controller_name(enum cgroup_controller c);

/* A NULL-terminated argv under construction; every string is malloc'd. */
struct argv_builder {
	char *arg[96];
	int n;
};
void arg_add(struct argv_builder *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void args_free(struct argv_builder *a);

/* What of the host a container's /proc and /sys would show and the
 * sandbox masks: NULL-terminated (podman.c says why, one by one). */
extern const char *const masked_host_paths[];
/* The cgroup tree, masked too where the container shares the host's view
 * of it (cgroup_tree_masked). */
#define MASKED_CGROUP_TREE "/sys/fs/cgroup"
bool cgroup_tree_masked(const struct podman_host *host);

/* The environment podman gets: only what it needs to find its own state
 * and configuration, so that it finds the same storage and image as the
 * user's own `podman`. Built once. */
char *const *podman_environment(void);
/* A sha256 in hex (65 bytes with the NUL) of podman_environment()'s
 * variables and CONTAINER_HOST, CONTAINER_CONNECTION: a run through the
 * server runs the server's podman, so only where they are the same. */
void podman_environment_digest(char out[65]);
/* The variables of podman_environment(), for the man page and the cache. */
extern const char *const podman_environment_names[];

/* Resolves an executable name through PATH; returns a malloc'd path or NULL. */
char *find_executable(const char *name);
struct error;
/* find_executable(), or NULL with err saying why: not found (install it),
 * or a path there that this user may not run (chmod +x, or another). */
char *podman_executable(const char *named, struct error *err);

/* How to fix a missing podman or a missing image. */
extern const char podman_install_hint[];
/* How to fix a podman at path that could not be executed (exec's errno). */
const char *podman_exec_hint(const char *path, int exec_errno);
/* err: podman at path did not start (errnum: fork's, pipe's or exec's),
 * worded by which: out of processes, memory or descriptors, or not to be
 * executed (podman_exec_hint). */
void podman_start_error(struct error *err, const char *path, int errnum);
extern const char image_hint[];
/* Where podman failed to run a container and said nothing, or never
 * started it: "run 'PODMAN run --rm IMAGE COMMAND' as this user PURPOSE",
 * with the podman and image in use, quoted for the shell where they must
 * be. podman_silent_hint's COMMAND is true, its PURPOSE "to see why". */
void podman_try_hint(char *out, size_t size, const char *podman, const char *image,
		const char *command, const char *purpose);
void podman_silent_hint(char *out, size_t size, const char *podman, const char *image);
extern const char as_root_hint[];
/* Where podman SUBCOMMAND ("info", "ps", "image inspect") failed without
 * naming its own repair: "check that podman works for this user: PODMAN
 * SUBCOMMAND [OPERAND]", with the podman in use (and the operand, an
 * image, where not NULL), quoted for the shell where they must be. */
void podman_works_hint(char *out, size_t size, const char *podman, const char *subcommand,
		const char *operand);
/* "LEAD: PODMAN ARGUMENTS" with the podman in use, quoted for the shell
 * where it must be (ARGUMENTS as they are, quoted by the caller); false
 * where it could not be named, and the hint says PODMAN instead. */
bool podman_command_hint(char *out, size_t size, const char *lead, const char *podman,
		const char *arguments);
/* How to fix a podman that failed saying SAID: its own repair where it
 * names one ('podman system migrate', for a state whose processes are all
 * gone), else a look at PROBE (such as "podman info"). */
const char *podman_failed_hint(const char *said, const char *probe);

struct sage_image;
/* `podman run` of one sandbox, with the reason for each flag beside it.
 * The seccomp profile is read by podman from fd 3; the launcher is the
 * container's first process, under the image's own Sage Python (image).
 * idle_seconds: how long it may wait, ready, for its program (a warm
 * sandbox), which the backstop adds. mode: the launcher's, "once",
 * "serial" or "session"; the last two serve many calls
 * (SESSION_CPU_SECONDS, SESSION_MAX_SECONDS). cold: no warm-up even
 * where podman_warms would grant one. */
void podman_run_args(struct argv_builder *a, const struct config *cfg,
		const struct podman_host *host, const struct sage_image *image, const char *podman,
		const char *name, const char *owner, unsigned long uid, long idle_seconds,
		const char *mode, bool cold);
/* Whether such a container is granted a warm-up (launcher/warm.py): one
 * that waits for its calls, with room for it above --memory, unless cold. */
bool podman_warms(const struct config *cfg, long idle_seconds, const char *mode, bool cold);
/* `podman run` of the image probe (image.c): script under the image's
 * /bin/sh as the image's own user, with no network and nothing writable
 * but /tmp. */
void podman_probe_args(struct argv_builder *a, const struct config *cfg, const char *podman,
		const char *name, const char *owner, const char *script);
/* Removes a container at once, whatever state it is in. */
void podman_rm_args(struct argv_builder *a, const char *podman, const char *name);
/* Lists "NAME OWNER" of every container with our label. */
void podman_ps_args(struct argv_builder *a, const char *podman);
/* One `podman info` for everything podman_host holds. */
void podman_info_args(struct argv_builder *a, const char *podman);
/* Fills host from what podman info (podman_info_args) printed. */
void podman_info_parse(const char *said, int status, bool timed_out, const char *errors,
		struct podman_host *host);
void podman_version_args(struct argv_builder *a, const char *podman);
/* "4.3.1" from `podman --version`. */
void podman_version_parse(const char *said, char *version, size_t size);
void podman_image_digest_args(struct argv_builder *a, const char *podman, const char *image);

/* podman run's own failure, from its stderr, when the container never
 * started: true when it says the image is missing. */
bool podman_said_no_image(const char *errors);
/* podman failed to start a container it had created, in a race of its own
 * that a second try does not meet (sandbox.c tries again only where no
 * frame of the launcher came back and no byte of stdin went). */
bool podman_said_start_race(const char *errors);
/* Whether LINE (LEN bytes) is podman's word that its OCI runtime failed
 * ("Error: `/usr/bin/runc start ID` failed: exit status 1"): the
 * runtime's own words, where it said any, are on the line before. */
bool podman_said_runtime_failed(const char *line, size_t len);
/* True when it says the entrypoint, the interpreter at path, could not be
 * run (and not some other file: storage, configuration). */
bool podman_said_no_entrypoint(const char *errors, const char *path);

#endif
