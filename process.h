/* process.h: child processes on the loop: spawn with an exec-error pipe,
 * non-blocking pipes, a pidfd for exit and for signals. */
#ifndef SAGE_SANDBOX_PROCESS_H
#define SAGE_SANDBOX_PROCESS_H

#include "buffer.h"
#include "loop.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct process;
/* The child has been reaped: status is its exit code, or 128+N when signal
 * N killed it; -1 when it was reaped by someone else (its status is lost). */
typedef void process_exit_callback(struct process *p, int status, void *data);

struct process_spec {
	char *const *argv;     /* argv[0] is a path: no PATH search here */
	char *const *envp;
	bool pipe_stdin;       /* else /dev/null */
	bool pipe_stdout;      /* else /dev/null */
	bool pipe_stderr;      /* else /dev/null */
	int pass_fd;           /* given to the child as fd 3, or -1 */
	/* A cgroup's cgroup.procs, which the child joins before its exec
	 * (cpugroup.h), so that all it starts is in the group from its
	 * start; or NULL. */
	const char *join_cgroup;
	process_exit_callback *on_exit;
	void *data;
};

struct process {
	pid_t pid;
	int pidfd;
	/* Our ends, non-blocking and close-on-exec, or -1. Owned by the caller
	 * once spawned: close them when done. */
	int stdin_fd, stdout_fd, stderr_fd;
	bool exited;
	int status;
	/* private: the exit watch lives in the process's scope, released by
	 * process_release() or process_abandon(). */
	struct loop_scope scope;
	struct loop_watch *exit_watch;
	process_exit_callback *on_exit;
	void *data;
};

/* Starts argv. Returns 0, or -1 with errno set and nothing left open or
 * running: when the program could not be executed, errno is exec's own
 * (ENOENT, EACCES), told apart from any status the program could exit with
 * by a close-on-exec pipe that only a failed exec writes to (or a failed
 * join of spec->join_cgroup, errno open's or write's). */
int process_spawn(struct loop *loop, struct process *p, const struct process_spec *spec);
/* Sends sig through the pidfd: never to a reaped pid that the kernel may
 * have given to another process. 0, or -1 with errno (ESRCH once gone). */
int process_signal(struct process *p, int sig);
/* Sends sig to the child's process group (its own: process_spawn makes it
 * one), so that a program that runs on in a child of its own goes with it.
 * Rootless podman executes itself again in a child to join its user
 * namespace; that child is told only SIGTERM when its parent dies
 * (PR_SET_PDEATHSIG), which `podman run` forwards to the container (its
 * --sig-proxy) and lives on: blocked writing output nobody read, it kept
 * conmon from reaping the container, and podman 5's `podman rm` failed.
 * Nothing else is in the group: podman's pause process makes a session of
 * its own, conmon a group of its own. Only while the child is not reaped
 * (the group's id is its pid: till then no other's); where the group is
 * gone, as process_signal. */
int process_signal_group(struct process *p, int sig);
/* Stops watching the child and closes our ends; kills it, with its group
 * (process_signal_group), and reaps it first if it is still running. */
void process_release(struct process *p);
/* Stops watching the child and closes our ends, but lets it run on to its
 * own end: for a child whose work must outlive its owner (a `podman rm`,
 * which writes nothing before its removal is done). Its pipes are closed:
 * a write to them ends it (SIGPIPE). It is reaped once it has ended, at the
 * next spawn or abandon. on_exit is never called. */
void process_abandon(struct process *p);

/* What a captured command did. */
struct capture {
	int status; /* exit status, 128+N on signal N, -1 if it could not start */
	int exec_errno; /* when it could not start */
	bool timed_out;
	struct buffer out, err; /* up to 64 KiB each */
};
/* The command ended and its pipes closed (or its deadline passed, and it
 * was killed and reaped). The callee owns cap's buffers. */
typedef void capture_callback(struct capture *cap, void *data);

/* A capture on its way: held in a slot of its owner, which it clears
 * before done is called. */
struct capture_run;
/* Runs argv on the loop with no input, capturing up to 64 KiB of each
 * stream, killing it at deadline (loop_now_ms() clock). 0, or -1 with errno
 * when it could not be started (done is then not called). slot: where the
 * run is held until done (so that its owner can abandon it; a run it still
 * held is abandoned first), or NULL for a run whose done always comes. */
int capture_start(struct loop *loop, struct capture_run **slot, char *const argv[],
		char *const envp[], int64_t deadline, capture_callback *done, void *data);
/* Lets go of the run in *slot, if any, and clears the slot: done is never
 * called, nothing of the run points at its owner any more, and the command
 * runs on (process_abandon()): to its end, or to its first write, which
 * its closed pipes end. For an owner freed while a command it started
 * must still finish, or is no longer wanted. */
void capture_abandon(struct capture_run **slot);
/* The same to its end on a loop of its own: for commands that only ask
 * podman something (status, cleanup). 0 if it ran, -1 with cap->exec_errno
 * set if it could not be started. */
int capture_command(char *const argv[], char *const envp[], int timeout_ms, struct capture *cap);
void capture_free(struct capture *cap);

/* Reads what is there without blocking into b, up to max bytes in all;
 * returns bytes read, 0 at end of file, -1 with errno (EAGAIN: nothing now). */
ssize_t read_available(int fd, struct buffer *b, size_t max);

#endif
