/* sandbox.h: the settings, the podman sandbox and the result of one run. */
#ifndef SAGE_SANDBOX_SANDBOX_H
#define SAGE_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SAGE_SANDBOX_VERSION "0.1.0"

/* Exit statuses of sage-sandbox besides Sage's own (0, 1, 128+N). */
enum {
	EXIT_OUTPUT_LIMIT = 123, /* an output stream passed --output-limit */
	EXIT_TIMEOUT = 124,      /* --timeout stopped the run */
	EXIT_REFUSED = 125,      /* could not or would not run the code */
};

#define MAX_CODE_BYTES 50000

/* One entry of the settings table: its flag, its environment variable, the
 * values it allows and its default. The CLI, --help, status and the man page
 * all follow this table. */
enum setting_id {
	SET_IMAGE,
	SET_PODMAN,
	SET_TIMEOUT,
	SET_MEMORY,
	SET_CPUS,
	SET_PIDS_LIMIT,
	SET_OUTPUT_LIMIT,
	SET_SECCOMP_PROFILE,
	SETTING_COUNT
};

enum setting_kind {
	KIND_IMAGE,   /* an image reference */
	KIND_PATH,    /* an executable name or path */
	KIND_INTEGER, /* min..max */
	KIND_MILLI,   /* a decimal with up to 3 places, stored in thousandths */
	KIND_CHOICE,  /* one of choices[] */
	KIND_PROFILE, /* "builtin" or a file's path */
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
};

extern const struct setting settings[SETTING_COUNT];

enum setting_source { FROM_DEFAULT, FROM_ENVIRONMENT, FROM_FLAG };

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
 * environment variable (unset or empty: not given), else its default. An
 * environment variable that a flag overrides is not checked. */
int config_init(struct config *cfg, const char *const flag_value[SETTING_COUNT], char *why,
		size_t why_size);

/* The memory limit in bytes (KIND_CHOICE values such as "512m"). */
uint64_t config_memory_bytes(const struct config *cfg);

/* The rlimits every run gets. Podman applies them with setrlimit inside the
 * container, which needs no cgroup: they hold on every host. */
enum rlimit_id { RL_DATA, RL_CPU, RL_NPROC, RL_NOFILE, RL_FSIZE, RL_CORE, RL_MSGQUEUE, RLIMIT_COUNT };
struct rlimit_value {
	const char *name; /* podman's --ulimit name, and RLIMIT_<NAME> */
	uint64_t value;   /* soft and hard */
};
void sandbox_rlimits(const struct config *cfg, struct rlimit_value out[RLIMIT_COUNT]);

/* Size of the container's /tmp, its only writable place. */
#define TMPFS_BYTES (256ull << 20)

/* The seccomp profile compiled in (seccomp.json), and the programs that run
 * inside the container (launcher.py, checks.py); from embedded.c. */
extern const char embedded_seccomp_json[];
extern const char embedded_launcher_py[];
extern const char embedded_checks_py[];

/* An error travels as a value: only main() prints it and picks the exit
 * status. */
struct error {
	int status;
	char message[512];
	char hint[512];
};

void error_set(struct error *err, int status, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* rootless.c: what podman says of this host. */
enum rootless_answer { ROOTLESS_TRUE, ROOTLESS_FALSE, ROOTLESS_UNKNOWN };
enum cgroup_controller { CONTROLLER_MEMORY, CONTROLLER_CPU, CONTROLLER_PIDS, CONTROLLER_COUNT };

struct podman_host {
	enum rootless_answer rootless;
	char detail[512];                    /* why rootless is unknown */
	char cgroups[8];                     /* "v1", "v2", or "" */
	char runtime[32];                    /* the OCI runtime: "runc", "crun" */
	char storage_driver[32];             /* "overlay"; "vfs" copies the image per run */
	bool controller[CONTROLLER_COUNT];   /* usable by this user's containers */
};

/* Asks podman whether it runs rootless, which cgroup controllers its
 * containers get, its runtime and storage driver, in one `podman info` with
 * a bounded wait. */
void podman_host_query(const char *podman, struct podman_host *host);
const char *controller_name(enum cgroup_controller c);

/* A growable byte buffer for captured output. */
struct buffer {
	char *data;
	size_t len, cap;
};

void buffer_append(struct buffer *b, const char *data, size_t len);
void buffer_free(struct buffer *b);

/* Steps *cursor through text a line at a time: returns the line's start and
 * sets *len (newline excluded), or NULL at the end of the text. */
const char *next_line(const char **cursor, size_t *len);

/* What one run of code in the sandbox produced. */
struct run_result {
	int exit_code;      /* the status sage-sandbox exits with */
	int signal;         /* the signal Sage died of, or 0 */
	bool timed_out;
	bool output_limit_exceeded;
	int interrupted_by; /* a signal that stopped sage-sandbox, or 0 */
	struct buffer out, err;
	bool out_truncated, err_truncated;
	int64_t duration_ms;
};

/* How a run's output is handled: captured for JSON, or streamed live to
 * stdout and stderr for text. */
enum output_mode { OUTPUT_CAPTURE, OUTPUT_STREAM };

/* Removes containers that a killed sage-sandbox left: those with our label
 * whose owner process is gone. Lists each removed name in removed (one per
 * line); returns how many, or -1 with err set. */
int sandbox_cleanup(const struct config *cfg, struct buffer *removed, struct error *err);

/* Runs code in a new container and waits for it, its timeout, its output
 * limit or a terminating signal. Returns 0 with res filled in when the code
 * ran (whatever its outcome), -1 with err set when it could not be run. */
int sandbox_run(const struct config *cfg, const struct podman_host *host, const char *code,
		size_t code_len, enum output_mode mode, struct run_result *res, struct error *err);
void run_result_free(struct run_result *res);

/* How to fix a missing podman or a missing image. */
extern const char podman_install_hint[];
extern const char image_hint[];

/* Refuses with err set unless podman is found, reports itself rootless and
 * has the image; fills host for sandbox_run. */
int sandbox_preflight(const struct config *cfg, struct podman_host *host, struct error *err);

/* What enforces a limit on this host: up to MAX_ENFORCERS names such as
 * "cgroup memory" or "rlimit nproc"; 0 when nothing does, -1 when the
 * setting is not a limit. */
#define MAX_ENFORCERS 4
int setting_enforcement(enum setting_id id, const struct podman_host *host,
		const char *by[MAX_ENFORCERS]);

/* Children of sage-sandbox. */

/* Blocks SIGINT, SIGTERM and SIGHUP and turns them into poll events, so a
 * run can remove its container before sage-sandbox exits. Call once. */
int signals_watch(void);

/* The environment podman gets: only what it needs to find its own state. */
char **podman_environment(void);

/* Resolves an executable name through PATH; returns a malloc'd path or NULL. */
char *find_executable(const char *name);

/* Reads a whole small file (at most max bytes); -1 with errno on failure. */
int read_file(const char *path, size_t max, struct buffer *out);

struct capture {
	int status;         /* exit status, 128+N on signal N, -1 if not started */
	bool timed_out;
	struct buffer out, err;
};

/* Runs argv with no input, capturing up to 64 KiB of each stream, killing it
 * after timeout_ms. Returns 0 if it ran, -1 if it could not be started. */
int capture_command(char *const argv[], int timeout_ms, struct capture *cap);
void capture_free(struct capture *cap);

#endif
