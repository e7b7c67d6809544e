/* sandbox.h: one sandbox (a podman container running the launcher) as a
 * state machine on the loop, and the result of the code it ran. */
#ifndef SAGE_SANDBOX_SANDBOX_H
#define SAGE_SANDBOX_SANDBOX_H

#include "buffer.h"
#include "image.h"
#include "error.h"
#include "frames.h"
#include "infiles.h"
#include "loop.h"
#include "outfiles.h"
#include "podman.h"
#include "settings.h"

#include <stdbool.h>
#include <stdint.h>

/* STARTING: podman is starting the container. READY: the launcher has
 * imported Sage and waits for code (it said so before any code existed).
 * RUNNING: the code was handed over. STOPPING: the client is killed and
 * `podman rm` is on its way. DONE: the result is known, or its podman
 * exited before any call came or between calls (sandbox_state); the
 * container is gone or going. */
enum sandbox_state { SANDBOX_STARTING, SANDBOX_READY, SANDBOX_RUNNING, SANDBOX_STOPPING,
	SANDBOX_DONE };

/* Why sage-sandbox, not the code, ended a run. STOP_CPU_ESCAPED: its
 * processes used the CPU while the throttle held them stopped (memwatch.c);
 * STOP_ENDED: its session was ended (sage_sandbox_end_session, or the
 * server's end); STOP_FAILED: sage-sandbox itself failed (result.failure
 * says how). */
enum stop_reason { STOP_NONE, STOP_TIMEOUT, STOP_OUTPUT_LIMIT, STOP_MEMORY_LIMIT,
	STOP_CPU_ESCAPED, STOP_SIGNAL, STOP_OUTPUT_CLOSED, STOP_ENDED, STOP_FAILED };

/* The container waits for another call. */
#define SERVES_NEXT(r) ((r)->after == AFTER_NEXT || (r)->after == AFTER_KEPT)

/* What one run of code in the sandbox produced. */
struct run_result {
	bool failed;        /* the code never ran: see failure */
	struct error failure;
	bool podman_failed; /* ... because podman itself could not be started */
	bool started;       /* the container's launcher started */
	int exit_code;      /* the status sage-sandbox exits with */
	int signal;         /* the signal the code died of, or 0 */
	bool timed_out;
	bool output_limit_exceeded;
	bool memory_limit_exceeded; /* the watchdog stopped it (no memory cgroup) */
	bool cpu_limit_exceeded;    /* the kernel killed the code at its CPU rlimit,
				     * or the watchdog did (cpu_escaped) */
	bool cpu_escaped;           /* ... its processes ran while held stopped */
	uint64_t memory_seen;       /* the watchdog's last look, in bytes */
	uint64_t descriptors_seen;  /* its open descriptors then, each charged */
	uint64_t mappings_seen;     /* its memory mappings then, at most */
	uint64_t kernel_seen;       /* their and its page tables' bytes */
	uint64_t locks_seen;        /* and its byte-range locks (LOCKS_MAX) */
	bool code_begun;            /* the launcher handed the call to its child
				     * (the B frame) */
	bool throttled;             /* the CPU throttle stopped it a while */
	int looks, throttled_looks; /* the watchdog's looks while the code ran,
				     * and those that found it held back for --cpus */
	/* What became of the container, as the launcher's end frame said. */
	enum container_after after;
	/* A session's cell was interrupted (KeyboardInterrupt) at its timeout
	 * or CPU seconds; its state is kept unless after is AFTER_LOST. */
	bool cell_interrupted;
	/* Why a serial container could not serve another call, or "". */
	char ends_why[256];
	int interrupted_by; /* a signal that stopped sage-sandbox, or 0 */
	bool session_ended; /* its session was ended while it ran (SIGTERM) */
	/* The container ended under the code, neither by the code's own end
	 * nor by sage-sandbox: podman died, the container was killed from
	 * outside, the launcher died. Not the code's doing, as far as can
	 * be told: batch tries such a job once more. */
	bool sandbox_broke;
	/* ... at the age its container could not outlive: a container that
	 * serves several calls is killed by podman's --timeout backstop
	 * after SESSION_MAX_SECONDS (podman.c), whatever it runs. */
	bool life_over;
	/* ... and its launcher died by a crash signal (sandbox.c's
	 * crash_signal: SIGSEGV and the like, never SIGKILL) while its
	 * warm-up had not ended (no W frame yet): the warm-up's doing, as far
	 * as can be told (a library that crashes as it starts in this image). */
	bool warm_up_broke;
	struct buffer out, err; /* kept only when asked (keep_output) */
	bool out_truncated, err_truncated;
	uint64_t input_bytes;  /* of the code's stdin, handed over */
	bool input_truncated;  /* cut at MAX_INPUT_BYTES */
	int64_t duration_ms;
	const char *file; /* the code's file, NULL for stdin: the caller's to set */
	/* What came back from $SAGE_SANDBOX_OUT: the program's, or NULL. */
	const struct outfiles *files; /* the call's own: valid while its owner keeps it */
};

struct sandbox;

/* Who hears of a sandbox's events. A warm sandbox changes hands: the pool
 * hears of it while it waits, the call it serves from then on. */
struct sandbox_callbacks {
	bool keep_output;       /* keep stdout and stderr in the result */
	/* The launcher has imported Sage and waits for the program. */
	void (*on_ready)(struct sandbox *sb, void *data);
	/* A container that waits for its calls has ended its warm-up
	 * (launcher/warm.py): w->why says why it ended before its last step,
	 * or is empty. */
	void (*on_warm)(struct sandbox *sb, const struct warm_report *w, void *data);
	/* Output as it arrives, within the output limit. At most 64 KiB per
	 * call turn; the receiver may pause the sandbox (sandbox_pause_output)
	 * when it cannot take more. */
	void (*on_output)(struct sandbox *sb, int stream, const char *bytes, size_t len,
			void *data);
	/* The code's stdin has room again (see sandbox_input). */
	void (*on_input_room)(struct sandbox *sb, void *data);
	/* The result is known (sandbox_result). For a stopped run, and one
	 * whose podman exited with its container maybe alive, the container
	 * is already removed. */
	void (*on_done)(struct sandbox *sb, void *data);
	/* Everything the sandbox started has ended: the podman client, and any
	 * `podman rm`. After on_done, or with it. */
	void (*on_released)(struct sandbox *sb, void *data);
	void *data;
};

struct sandbox_options {
	const struct config *cfg;
	const struct podman_host *host;
	const struct sage_image *image; /* Sage's Python and user in the image */
	const char *podman;     /* a path */
	/* loop_now_ms() clock: the sandbox is stopped here if no program has
	 * come with a deadline of its own (a warm one's maximum age). */
	int64_t deadline;
	/* How long it may wait for its program after it is ready: 0 for a
	 * sandbox started for a program, POOL_MAX_IDLE_SECONDS for a warm one.
	 * podman's --timeout backstop covers that wait as well. */
	long idle_seconds;
	/* Serves a session: its calls are cells of one Sage (launcher.py),
	 * each submitted after the previous one's on_done. */
	bool session;
	/* Serves a sequence of calls, each in a child of its own, with
	 * nothing of one left for the next (launcher.py, tmp_restored): the
	 * next is submitted after on_done said serves_next. */
	bool serial;
	/* No warm-up, where one would be granted (podman_warms): the runner
	 * saw one kill its launcher. */
	bool cold;
	/* Made by `status` to see Sage start: its refusals' hints say what is
	 * left to look at, not "check 'sage-sandbox status'". */
	bool for_status;
	struct sandbox_callbacks cb;
};

/* Refuses code that is too long, has a NUL byte or is not UTF-8; origin
 * names it in the message ("standard input", a file name). */
int sandbox_check_code(const char *code, size_t len, const char *origin, struct error *err);

/* Starts a container. NULL with err set when podman could not be started. */
struct sandbox *sandbox_start(struct loop *loop, const struct sandbox_options *opt,
		struct error *err);
/* What a sandbox runs: the code (already checked) and its arguments, argv[0]
 * being the name it goes by (its file's name, or "-" for stdin). */
struct program {
	const char *code;
	size_t code_len;
	const char *const *argv; /* argc strings */
	int argc;
	bool input_follows; /* stdin data comes with sandbox_input; else none */
	/* loop_now_ms() clock: the run ends here. A warm sandbox's run counts
	 * from the call, not from when the container started. */
	int64_t deadline;
	/* The code's CPU rlimit in seconds; 0: the sandbox's own settings'
	 * (--timeout x --cpus x 1.25). The container's is higher by the launcher's
	 * share (LAUNCHER_CPU_SECONDS), and the launcher sets this one on the
	 * code's process. */
	long cpu_seconds;
	/* Its output limit per stream in bytes; 0: the sandbox's settings'. */
	size_t output_limit;
	/* Files put in the working directory before the code runs, or NULL. */
	const struct infiles *in;
	/* What is displayed besides what the code prints (launcher/display.py):
	 * the value of a bare last expression (--display last), and a
	 * formula's LaTeX beside the images show() makes (MCP). */
	bool display_last, display_latex;
	/* The random seed (--seed, a job's, an MCP call's); unseeded: fresh
	 * random state. */
	bool seeded;
	uint32_t seed;
	/* Where the files the code leaves in $SAGE_SANDBOX_OUT go, or NULL for
	 * nothing back. At the deadline the launcher kills the code and sends
	 * them; the run is stopped OUT_GRACE_MS later whatever came. */
	struct outfiles *out;
};
#define OUT_GRACE_MS 3000
/* Hands the program to the sandbox: it runs as soon as the launcher is
 * ready. Once per sandbox; a session's or a serial one's, once per call,
 * after the previous call's on_done said serves_next. What p points to
 * (code, arguments, files in and out) is borrowed until on_done, or until
 * sandbox_drop_program(). */
void sandbox_submit(struct sandbox *sb, const struct program *p);
/* From now on cb hears of sb's events (a warm sandbox handed to a call). */
void sandbox_set_callbacks(struct sandbox *sb, const struct sandbox_callbacks *cb);
/* Streams bytes to the code's stdin: takes at most sandbox_input_room(),
 * returns how many it took; on_input_room says when there is room again.
 * Past MAX_INPUT_BYTES in all the input ends there (input_truncated). */
size_t sandbox_input(struct sandbox *sb, const char *bytes, size_t len);
size_t sandbox_input_room(const struct sandbox *sb);
/* The end of the code's stdin. */
void sandbox_input_end(struct sandbox *sb);
void sandbox_pause_output(struct sandbox *sb, bool paused);
/* Ends the run early, asynchronously: on_done follows once the container is
 * removed. Ignored once the result is known, but for a session or a
 * serial sandbox between its calls (then only on_released follows), and
 * once its podman exited between calls. signal: for STOP_SIGNAL. */
void sandbox_stop(struct sandbox *sb, enum stop_reason reason, int signal);
enum sandbox_state sandbox_state(const struct sandbox *sb);
const char *sandbox_name(const struct sandbox *sb);
struct run_result *sandbox_result(struct sandbox *sb);
/* The call's program, its files in and out, are no longer the sandbox's
 * to use, from now on: for a call freed while it runs (after
 * sandbox_stop), whose owner frees them next. */
void sandbox_drop_program(struct sandbox *sb);
/* Frees it; the result's buffers go with it, and none of its callbacks
 * comes after. Only after on_released, or to abandon it: what it started
 * then runs on by itself (a `podman rm` to its end, a container to
 * podman's --timeout backstop). */
void sandbox_free(struct sandbox *sb);

/* Removes containers that a killed sage-sandbox left: those with our label
 * whose owner process is gone. Lists each removed name in removed (one per
 * line); returns how many, or -1 with err set. */
int sandbox_cleanup(const char *podman, struct buffer *removed, struct error *err);

/* What enforces a limit on this host: up to MAX_ENFORCERS names such as
 * "cgroup memory" or "rlimit nproc"; 0 when nothing does, -1 when the
 * setting is not a limit. */
#define MAX_ENFORCERS 4
int setting_enforcement(enum setting_id id, const struct podman_host *host,
		const char *by[MAX_ENFORCERS]);

#endif
