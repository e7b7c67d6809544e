/* settings.h: the settings table (flag, environment variable, range,
 * default) and the rlimits derived from it. */
#ifndef SAGE_SANDBOX_SETTINGS_H
#define SAGE_SANDBOX_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAGE_SANDBOX_VERSION "0.2.0"

/* The code: at most this many bytes, no NUL byte. */
#define MAX_CODE_BYTES 50000

/* The code's standard input: at most this many bytes reach it, streamed;
 * then it reads end of file, and the result says so. */
#define MAX_INPUT_BYTES (256ull << 20)

/* Size of the container's /tmp, its writable place (with /dev/shm). */
#define TMPFS_BYTES (256ull << 20)

/* Files, directories and symlinks /tmp may hold at once (its nr_inodes=).
 * size= counts data, not inodes and dentries: empty files with 200-byte
 * names took 3.8 GiB of the host's slab. At about 1.3 KiB each (inode,
 * dentry, the name), this is 21 MiB; tmpfs also charges extended
 * attributes to it, 1 KiB per inode. Sage's own start-up uses a few
 * dozen. */
#define TMPFS_INODES 16384

/* The container's /dev/shm, where a fresh container has one (podman's
 * default is 64 MiB): POSIX semaphores and shared memory live there, and
 * Python's multiprocessing needs them for its locks, queues and pools.
 * Like /tmp it is a tmpfs outside --memory, capped in bytes and in inodes
 * (semaphores are files unlinked once opened: few exist at once), and
 * emptied between the calls of a container that serves several. */
#define SHM_BYTES (64ull << 20)
#define SHM_INODES 1024

/* Pseudo-terminals a run may hold at once: pexpect-based interfaces (gp(),
 * gap(), maxima(), singular()) take one each; the host has 4096 in all. */
#define PTY_MAX 8

/* One entry of the settings table: its flag, its environment variable, the
 * values it allows and its default. The CLI, --help, status and the man page
 * all follow this table. */
enum setting_id {
	SET_IMAGE,
	SET_PYTHON,
	SET_PODMAN,
	SET_TIMEOUT,
	SET_MEMORY,
	SET_CPUS,
	SET_PIDS_LIMIT,
	SET_OUTPUT_LIMIT,
	SET_SECCOMP_PROFILE,
	SET_OUTPUT_FILES,
	SET_OUTPUT_FILE_SIZE,
	SET_OUTPUT_SIZE,
	SET_DISPLAY,
	SET_SEED,
	SET_WARM,        /* mcp only */
	SET_CONCURRENCY, /* mcp only */
	SET_SESSIONS,    /* mcp only */
	SET_SESSION_IDLE, /* mcp only */
	SETTING_COUNT
};

enum setting_kind {
	KIND_IMAGE,   /* an image reference */
	KIND_PATH,    /* an executable name or path, printable, no white space */
	KIND_INTEGER, /* min..max */
	KIND_MILLI,   /* a decimal with up to 3 places, stored in thousandths */
	KIND_CHOICE,  /* one of choices[] */
	KIND_PROFILE, /* "builtin" or a file's path */
	KIND_SIZE,    /* bytes, written as podman writes sizes, min..max */
	KIND_INTERPRETER, /* "auto", or an absolute path inside the image */
	KIND_SEED,    /* "none" (number -1), or an integer from 0 to SEED_MAX */
};

struct setting {
	const char *flag;    /* "--timeout" */
	const char *env;     /* "SAGE_SANDBOX_TIMEOUT" */
	const char *metavar; /* "SECONDS" */
	const char *key;     /* name in JSON: "timeout_seconds" */
	enum setting_kind kind;
	long min, max;             /* KIND_INTEGER, KIND_MILLI (in thousandths) */
	const char *const *choices; /* KIND_CHOICE, NULL-terminated */
	const char *allowed;        /* the allowed values, for messages */
	const char *fallback;       /* the default */
	const char *help;
	bool server; /* a setting of `sage-sandbox mcp` only, not of a sandbox */
};

extern const struct setting settings[SETTING_COUNT];

enum setting_source { FROM_DEFAULT, FROM_FILE, FROM_ENVIRONMENT, FROM_FLAG };

/* The settings file: $SAGE_SANDBOX_SETTINGS, else
 * $XDG_CONFIG_HOME/sage-sandbox/settings (~/.config/...). One setting a
 * line, `NAME = VALUE`, NAME a flag without its dashes ("timeout",
 * "memory"); blank lines and lines starting with # are ignored. A flag
 * beats the environment, which beats the file, which beats the default. */
#define SETTINGS_FILE_MAX (64 * 1024)

/* Parses a settings file's text in place: values[id] points into it (NUL
 * ended), line[id] says where. -1 with why set (naming the line) on a line
 * that is not NAME = VALUE, an unknown NAME, or one given twice. */
int settings_file_parse(char *text, size_t len, const char *name,
		const char *values[SETTING_COUNT], int line[SETTING_COUNT], char *why,
		size_t why_size);
/* The settings file's path ($SAGE_SANDBOX_SETTINGS, or the default one),
 * and whether it was named explicitly (then it must exist). */
const char *settings_file_path(bool *named);

struct config {
	const char *value[SETTING_COUNT];
	enum setting_source source[SETTING_COUNT];
	long number[SETTING_COUNT]; /* parsed value of numeric settings */
};

const char *setting_source_name(enum setting_source source);

/* Checks text against the setting's rules; on success stores it in cfg and
 * returns 0, else writes the reason into why and returns -1. */
int setting_set(struct config *cfg, enum setting_id id, const char *text,
		enum setting_source source, char *why, size_t why_size);
/* Fills every setting from its flag (flag_value[id] non-NULL), else its
 * environment variable (unset or empty: not given), else the settings
 * file, else its default. A value that one of higher rank overrides is not
 * checked; the file itself is, whole. Without server, mcp's own settings
 * take their defaults: a command that does not use them does not check
 * them (SAGE_SANDBOX_WARM=9 refused every run: attack helper 157). */
int config_init(struct config *cfg, const char *const flag_value[SETTING_COUNT], bool server,
		char *why, size_t why_size);

/* A size as sage-sandbox writes it: "1g", "1536m", "300k", "1000b". */
void size_text(long bytes, char *buf, size_t size);
/* The setting's value as sage-sandbox writes it (sizes normalised: "1.5g"
 * is "1536m"); buf is used for those. */
const char *setting_text(const struct config *cfg, int id, char *buf, size_t size);
/* The memory limit in bytes. */
uint64_t config_memory_bytes(const struct config *cfg);
/* The data rlimit's hard limit above its soft one in a container granted a
 * warm-up (0: none is, below WARM_UP_MEMORY_MIN): the most a call's
 * process gets on top of the memory limit for the template's warm pages. */
uint64_t warm_up_room(const struct config *cfg);

/* The rlimits every run gets. Podman applies them with setrlimit inside the
 * container (the launcher, those podman has no name for), which needs no
 * cgroup: they hold on every host. */
enum rlimit_id { RL_DATA, RL_CPU, RL_NPROC, RL_NOFILE, RL_FSIZE, RL_CORE, RL_MSGQUEUE, RL_STACK,
	RL_SIGPENDING, RL_AS, RLIMIT_COUNT };
struct rlimit_value {
	const char *name; /* podman's --ulimit name, and RLIMIT_<NAME> */
	uint64_t value;   /* soft and hard */
	bool by_launcher; /* set on the code's process by the launcher */
};

/* RLIMIT_AS is --memory plus this: the address space Sage reserves beyond
 * what it uses (libraries, PARI's and GAP's reservations). Measured with
 * the test corpus: the code's process peaks at 1.54 GB at --memory 1g and
 * 7.0 GB at 8g, and starts at 0.51 GB at 256m. */
#define ADDRESS_SPACE_HEADROOM (1ull << 30)
/* The largest --seed: Sage's, Python's and numpy's generators all take it
 * whole. */
#define SEED_MAX 4294967295l
/* A container that serves calls is granted a warm-up (launcher/warm.py:
 * Maxima's and ECL's heap, GAP's workspace, matplotlib) by its data
 * rlimit's hard limit: the memory limit plus the memory limit again (GAP
 * takes what the memory limit leaves it, as in a cold call) and
 * WARM_UP_DATA_EXTRA for the rest. Each call's process gets the memory
 * limit plus what the warm-up took, soft and hard: the room a cold call
 * has. Only at WARM_UP_MEMORY_MIN and more: below it a call's share of the
 * template's warm pages (memwatch.c counts it) would leave it too little
 * of --memory. */
#define WARM_UP_DATA_EXTRA (512ull << 20)
/* What the warm-up adds to the launcher's resident memory (230 MB here),
 * with room: added to a memory cgroup's limit, where one holds --memory. */
#define WARM_UP_RESIDENT (320ull << 20)
#define WARM_UP_MEMORY_MIN (1ull << 30)
/* A process's CPU rlimit, in percent of --timeout x --cpus (settings.c,
 * sandbox_rlimits). */
#define RLIMIT_CPU_PERCENT 125
/* The container's CPU rlimit is the code's plus this: the launcher's own
 * share (Sage's import, relaying output); see podman_run_args(). */
#define LAUNCHER_CPU_SECONDS 30
/* A session's container (sage-sandbox-mcp(7), SESSIONS): an rlimit counts
 * a process's whole life, so a session's processes each get this much CPU
 * time in all, and its cells are held to their own by the launcher, which
 * interrupts a cell past its seconds or its timeout and kills it when it
 * has not stopped SESSION_INTERRUPT_GRACE_MS later (launcher.py's
 * INTERRUPT_GRACE_MS). podman's backstop ends a session's container
 * after SESSION_MAX_SECONDS whatever happens. */
#define SESSION_CPU_SECONDS 3600
#define SESSION_MAX_SECONDS 86400
#define SESSION_INTERRUPT_GRACE_MS 2000
void sandbox_rlimits(const struct config *cfg, struct rlimit_value out[RLIMIT_COUNT]);

#endif
