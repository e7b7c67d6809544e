/* sandbox.c: one sandbox as a state machine on the loop: the podman client,
 * the launcher's frames, the deadline, the output limit, and stopping
 * (`podman rm` as one more child on the loop, never a nested loop). */
#include "sandbox.h"
#include "cpugroup.h"
#include "embedded.h"
#include "frames.h"
#include "json.h"
#include "memwatch.h"
#include "process.h"
#include "uidclaim.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* podman's own stderr, kept to explain a failure. */
#define PODMAN_ERRORS_MAX (64 * 1024)
/* How long cleanup lets a container whose owner has ended go by itself
 * (conmon's --rm) before calling it a stray. */
#define CLEANUP_GRACE_MS 3000
/* How long a stop's `podman rm` may take, and how often it is tried. */
#define REMOVE_TIMEOUT_MS 15000
#define REMOVE_TRIES 3
/* After the podman client exits, pipes held by a descendant get this long. */
#define DRAIN_GRACE_MS 1000
#define MAX_PROFILE_BYTES (1u << 20)
/* The code's stdin waiting for the launcher: a few frames. */
#define INPUT_QUEUE_BYTES (256 * 1024)
/* Starts of one sandbox when podman loses a start race of its own
 * (podman_said_start_race): the first and two more. */
#define START_TRIES 3

struct sandbox {
	struct loop *loop;
	/* Its watches and timers below, released by sandbox_free() alone. */
	struct loop_scope scope;
	struct sandbox_options opt;
	enum sandbox_state state;
	char name[64];
	int64_t started_at;
	int64_t exited_at; /* its podman client's exit, loop_now_ms() clock */
	int64_t run_from; /* the run's duration counts from here */

	struct process podman;
	struct argv_builder args;
	int profile_fd;
	struct queue *input;
	bool input_open; /* more stdin may come */
	/* The program's input files, sent after the code and before stdin;
	 * the call's, borrowed until its on_done or sandbox_drop_program (see
	 * program below). */
	const struct infiles *in;
	size_t in_next;     /* the file being sent */
	uint64_t in_offset; /* of it, sent; 0 before its F frame */
	bool in_begun, inputs_done;
	struct outfiles *out; /* the call's, borrowed as in is */
	struct loop_watch *out_watch, *err_watch;
	struct loop_timer *deadline_timer, *grace_timer, *retry_timer, *memwatch_timer;
	struct loop_timer *count_timer; /* until memwatch_count settles */
	/* The uid its processes run as, claimed while the sandbox lives, so
	 * that a sandbox started meanwhile draws another (uidclaim.c says
	 * where that does not hold). Released by sandbox_free(); a lost
	 * start's moves to discard_claims. */
	struct uid_claim uid_claim;
	bool podman_local; /* its processes are this host's (podman is not remote) */
	long host_uid; /* the run's own, for the memory watchdog; -1: not watched */
	/* The watchdog of the run's memory and CPU (memwatch.c), where no
	 * cgroup bounds them; NULL where none is kept. Owned. */
	struct memwatch *memwatch;
	/* The container's cpu group, where one holds --cpus (cpugroup.c) in
	 * place of memwatch's throttle; its path "" elsewhere. Removed with
	 * the sandbox, or at the next start after a start race. */
	struct cpugroup cpu_group;
	bool output_paused;

	/* The launcher's stream, read into whole frames. */
	struct frame_reader frames;
	bool saw_started, saw_ready, saw_exit;
	bool saw_refusal; /* a K frame: the launcher ends by itself */
	bool warming; /* granted a warm-up (podman_warms), its W frame not yet seen */
	int64_t code_ended_at; /* from the exit frame, loop_now_ms() clock */
	struct buffer podman_errors;
	size_t seen[2];
	size_t limit;

	enum stop_reason stopping;
	int stop_signal;
	struct argv_builder rm_args;
	int rm_tries;
	/* The container's `podman rm`, while it runs: a stop's, or after a
	 * client that exited with its container maybe alive
	 * (container_may_outlive). */
	struct capture_run *rm;
	bool rm_done;
	bool done_reported, released_reported;
	/* The program as submitted, to be sent again after a start race:
	 * borrowed from its caller from sandbox_submit until the call's
	 * on_done (or sandbox_drop_program), and dropped then (with in and out
	 * above); starts so far; removals of the containers those races left,
	 * while they run (one a race). */
	struct program program;
	bool submitted;
	int starts;
	struct capture_run *discards[START_TRIES];
	/* The uid each lost container ran as, still claimed while its removal
	 * runs: no sandbox draws it until what is left of it is killed
	 * (on_discarded). Released there, at once where its removal cannot
	 * start, or by sandbox_free(). */
	struct uid_claim discard_claims[START_TRIES];
	/* The launcher waits for the next call (a session's next cell, or a
	 * serial sandbox's next call): the container lives on past the last
	 * call's result. */
	bool between_cells;
	struct run_result result;
};

static void sandbox_advance(struct sandbox *sb);
static void hold_cpus(struct sandbox *sb);
/* A hint that sends its user to `status`, or, in the run status made
 * (for_status), says what is left to look at once status has checked
 * podman and the image: a status that printed "check 'sage-sandbox
 * status'" as its own fix sent its user in a circle (attack helper 157). */
static const char *status_or(const struct sandbox *sb, const char *to_status,
		const char *in_status)
{
	return sb->opt.for_status ? in_status : to_status;
}

/* The fix named by every failure of a container's cpu group. */
static const char *cpu_group_hint(const struct sandbox *sb)
{
	return status_or(sb, "run 'sage-sandbox status' to see how --cpus is held",
		"see how --cpus is held in the settings above");
}

/* ---- code -------------------------------------------------------------- */

int sandbox_check_code(const char *code, size_t len, const char *origin, struct error *err)
{
	if (len > MAX_CODE_BYTES) {
		error_set(err, EXIT_REFUSED, "split the computation or read data from a smaller file",
			"code from %s is larger than %d bytes", origin, MAX_CODE_BYTES);
		return -1;
	}
	const char *nul = memchr(code, '\0', len);
	if (nul) {
		error_set(err, EXIT_REFUSED, "Sage code is text; remove the NUL byte",
			"code from %s contains a NUL byte at offset %zu", origin, (size_t)(nul - code));
		return -1;
	}
	/* Python reads the code as UTF-8: anything else would end in the
	 * launcher's traceback instead of a clear refusal. */
	for (size_t i = 0; i < len;) {
		size_t n = utf8_sequence_length((const unsigned char *)code + i, len - i);
		if (n == 0) {
			error_set(err, EXIT_REFUSED, "save the file as UTF-8 (iconv -t UTF-8)",
				"code from %s is not UTF-8: invalid byte at offset %zu", origin, i);
			return -1;
		}
		i += n;
	}
	return 0;
}

/* The seccomp profile as an anonymous in-memory file, for podman to read as
 * /proc/self/fd/3: no temporary file to leave behind or to race on. */
static int seccomp_profile_fd(const struct config *cfg, struct error *err)
{
	const char *path = cfg->value[SET_SECCOMP_PROFILE];
	struct buffer file = {0};
	const char *text = embedded_seccomp_json;

	if (strcmp(path, "builtin") != 0) {
		if (read_file(path, MAX_PROFILE_BYTES, &file) < 0) {
			error_set(err, EXIT_REFUSED,
				"give a readable seccomp profile of at most 1 MiB, or builtin",
				"cannot read seccomp profile %s: %s", path, strerror(errno));
			return -1;
		}
		/* Checked here: podman's own word names neither the file nor
		 * the option (attack helper 157). */
		json_error_t bad;
		json_t *profile = json_loadb(file.data, file.len, 0, &bad);
		bool parsed = profile != NULL, object = json_is_object(profile);
		json_decref(profile);
		if (!object) {
			static const char hint[] = "give --seccomp-profile a profile in podman's "
				"JSON format (an object), or builtin";
			if (parsed)
				error_set(err, EXIT_REFUSED, hint,
					"seccomp profile %s is not a JSON object", path);
			else
				error_set(err, EXIT_REFUSED, hint,
					"seccomp profile %s is not JSON: %s (line %d)", path, bad.text,
					bad.line);
			buffer_free(&file);
			return -1;
		}
		text = file.data;
	}
	size_t len = strlen(text);
	int fd = memfd_create("sage-sandbox-seccomp", MFD_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, text, len);
	if (n != (ssize_t)len) {
		error_set(err, EXIT_REFUSED, NULL, "cannot hold the seccomp profile in memory: %s",
			strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	buffer_free(&file);
	return fd;
}

/* ---- the launcher's stream ------------------------------------------- */

static void take_output(struct sandbox *sb, int stream, const char *data, size_t len)
{
	size_t room = sb->seen[stream] < sb->limit ? sb->limit - sb->seen[stream] : 0;
	size_t used = len < room ? len : room;
	sb->seen[stream] += len;
	if (used) {
		if (sb->opt.cb.keep_output)
			buffer_append(stream ? &sb->result.err : &sb->result.out, data, used);
		if (sb->opt.cb.on_output)
			sb->opt.cb.on_output(sb, stream, data, used, sb->opt.cb.data);
	}
	if (len > room) {
		*(stream ? &sb->result.err_truncated : &sb->result.out_truncated) = true;
		sandbox_stop(sb, STOP_OUTPUT_LIMIT, 0);
	}
}

/* The launcher broke the protocol: not something the code can do (it has
 * no way to the frame stream), so the image or the launcher is broken. */
static void protocol_broken(struct sandbox *sb, const char *what)
{
	sb->result.failed = true;
	error_set(&sb->result.failure, EXIT_REFUSED, status_or(sb,
		"check the image with 'sage-sandbox status' (see IMAGES in sage-sandbox(1))",
		"the image passed the checks above, but not what its Sage and the launcher need: "
		"see IMAGES in sage-sandbox(1)"),
		"the container's launcher broke its protocol: %s", what);
	sandbox_stop(sb, STOP_SIGNAL, 0);
}

/* The image's Sage did not start under what image.c found: the run is
 * refused, naming the image, and the cached answer is dropped so that the
 * next run asks the image again. But where its import ran out of memory
 * (the launcher's "memory: " reason), the limit is at fault, not the
 * image: the refusal says to raise it, and the answer stands. */
static void sage_did_not_start(struct sandbox *sb, const char *why)
{
	static const char memory[] = "memory: ";
	if (sb->result.failed)
		return;
	sb->result.failed = true;
	if (strncmp(why, memory, strlen(memory)) == 0) {
		char limit[32];
		error_set(&sb->result.failure, EXIT_REFUSED, "raise --memory (at most 8g)",
			"%s (--memory %s)", why + strlen(memory),
			setting_text(sb->opt.cfg, SET_MEMORY, limit, sizeof limit));
		return;
	}
	image_refusal(&sb->result.failure, sb->opt.cfg, why);
	image_forget(sb->opt.cfg);
}

/* The launcher's end of a call (docs/protocol.md), checked against what
 * this sandbox serves: false for a malformed one (the run is stopped). */
static bool take_trailer(struct sandbox *sb, const char *payload, size_t len)
{
	struct run_result *r = &sb->result;
	struct trailer t;
	if (frame_parse_trailer(payload, len, &t) < 0 ||
	    ((t.after == AFTER_KEPT || t.after == AFTER_LOST) != sb->opt.session) ||
	    (t.after == AFTER_NEXT && !sb->opt.serial)) {
		protocol_broken(sb, "a malformed end frame");
		return false;
	}
	if (t.exited) {
		r->exit_code = t.status;
	} else {
		r->signal = t.status;
		r->exit_code = 128 + t.status;
	}
	sb->code_ended_at = t.ended_at;
	r->after = t.after;
	r->cell_interrupted = t.interrupted;
	/* A timeout is told by the deadline, as for any run (finish_result). */
	r->cpu_limit_exceeded = t.cpu_limit;
	snprintf(r->ends_why, sizeof r->ends_why, "%s", t.why);
	return true;
}

static void take_frame(struct sandbox *sb, char type, const char *payload, size_t len)
{
	/* Nothing of a frame before the start frame is taken: an X there
	 * would be the run's end, and protocol_broken's stop would come too
	 * late to remove the container. */
	if (type != 'S' && !sb->saw_started) {
		protocol_broken(sb, "a frame before the start frame");
		return;
	}
	switch (type) {
	case 'S':
		sb->saw_started = true;
		sb->result.started = true;
		break;
	case 'K': {
		/* Sage cannot start in this image: a refusal, never the code's
		 * output. The launcher exits by itself. */
		char why[1024];
		snprintf(why, sizeof why, "%.*s", (int)(len < 1000 ? len : 1000), payload);
		sage_did_not_start(sb, why);
		sb->saw_refusal = true;
		break;
	}
	case 'R':
		sb->saw_ready = true;
		if (sb->state == SANDBOX_STARTING)
			sb->state = SANDBOX_READY;
		if (sb->input && sb->state == SANDBOX_READY)
			sb->state = SANDBOX_RUNNING;
		if (sb->opt.cb.on_ready)
			sb->opt.cb.on_ready(sb, sb->opt.cb.data);
		break;
	case 'B':
		/* The launcher hands the call to its child: the code begins. */
		if (!sb->submitted)
			protocol_broken(sb, "a call begun that was never sent");
		else {
			sb->result.code_begun = true;
			hold_cpus(sb);
		}
		break;
	case 'U':
	case 'H':
		/* A serial call's processes are all killed (U): until H, the
		 * launcher forks the next call's child while the kernel tears
		 * the call's down, unheld, as between calls; nothing of the code
		 * runs again. Held at --cpus, that work was charged to the call:
		 * print(n) jobs at --cpus 0.2 took 200 ms where their code takes
		 * 25, and said throttled. From H on, what the call left is the
		 * call's again, held: the files it sends back, the emptying of
		 * what it left in /tmp (its 16,000 directories cost the launcher
		 * 2.7 times what they cost the code: review helper). */
		if (!sb->submitted || !sb->opt.serial || sb->opt.session)
			protocol_broken(sb, "a call's end killed outside a serial call");
		else if (type == 'U')
			sb->result.throttled |= cpugroup_lift(&sb->cpu_group, loop_now_ms());
		else if (sb->result.code_begun)
			hold_cpus(sb);
		break;
	case 'W': {
		/* Its warm-up ended, at any time between calls: only told. */
		struct warm_report w;
		sb->warming = false;
		if (frame_parse_warm(payload, len, &w) < 0)
			protocol_broken(sb, "a malformed warm-up frame");
		else if (sb->opt.cb.on_warm)
			sb->opt.cb.on_warm(sb, &w, sb->opt.cb.data);
		break;
	}
	case 'O':
	case 'E':
		if (sb->stopping == STOP_NONE || sb->stopping == STOP_OUTPUT_LIMIT)
			take_output(sb, type == 'E', payload, len);
		break;
	case 'F':
	case 'D':
	case 'G':
	case 'Z':
		if (!sb->out)
			protocol_broken(sb, "files nobody asked for");
		else if (sb->stopping == STOP_NONE)
			outfiles_frame(sb->out, type, payload, len);
		break;
	case 'X':
		/* Only a well-formed end is the run's end: after a malformed
		 * one the run is stopped, which an end seen would forbid
		 * (sandbox_stop), and the container would be left running. */
		sb->saw_exit = take_trailer(sb, payload, len);
		break;
	default:
		protocol_broken(sb, "an unknown frame type");
	}
}

static void parse_frames(struct sandbox *sb)
{
	char type;
	const char *payload;
	size_t len;
	int got;
	while (sb->state != SANDBOX_STOPPING &&
	       (got = frame_reader_next(&sb->frames, &type, &payload, &len)) != 0) {
		if (got < 0) {
			protocol_broken(sb, "a frame longer than 64 KiB");
			sb->frames = (struct frame_reader){0};
			return;
		}
		/* Between a call's end and the next call the launcher says only
		 * that its warm-up ended. */
		if (sb->saw_exit && type != 'W') {
			protocol_broken(sb, "a frame after the call's end");
			return;
		}
		take_frame(sb, type, payload, len);
	}
}

static void close_stream(struct sandbox *sb, bool out)
{
	loop_unwatch(out ? &sb->out_watch : &sb->err_watch);
}

static void on_launcher_stream(int fd, unsigned events, void *data)
{
	struct sandbox *sb = data;
	/* At most one frame's worth a turn: what on_output gets stays bounded. */
	ssize_t n;
	size_t room;
	char *space = frame_reader_space(&sb->frames, &room);
	while ((n = read(fd, space, room)) < 0 && errno == EINTR)
		;
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		close_stream(sb, true);
		sandbox_advance(sb);
		return;
	}
	frame_reader_filled(&sb->frames, (size_t)n);
	parse_frames(sb);
	if (sb->saw_exit && !SERVES_NEXT(&sb->result))
		close_stream(sb, true);
	sandbox_advance(sb);
}

static void on_podman_errors(int fd, unsigned events, void *data)
{
	struct sandbox *sb = data;
	ssize_t n = read_available(fd, &sb->podman_errors, PODMAN_ERRORS_MAX);
	if (n > 0 || (n < 0 && errno == EAGAIN))
		return;
	close_stream(sb, false);
	sandbox_advance(sb);
}

/* ---- life and death ----------------------------------------------------- */

static int spawn_podman(struct sandbox *sb, struct error *err);
static void queue_program(struct sandbox *sb);

static bool discarding(const struct sandbox *sb)
{
	for (size_t i = 0; i < sizeof sb->discards / sizeof sb->discards[0]; i++)
		if (sb->discards[i])
			return true;
	return false;
}

static void kill_uid_leftovers(const struct sandbox *sb, const struct uid_claim *claim);
static void start_remove(struct sandbox *sb);
static void stop_watching_memory(struct sandbox *sb);

/* What still runs as the claim's uid killed, then the uid let go. */
static void let_uid_go(const struct sandbox *sb, struct uid_claim *claim)
{
	kill_uid_leftovers(sb, claim);
	uid_claim_release(claim);
}

/* A lost container's removal is over: what is left of its uid is killed,
 * as after a stop's removal (removal_over), and the uid let go. */
static void on_discarded(struct capture *cap, void *data)
{
	struct sandbox *sb = data;
	capture_free(cap);
	for (size_t i = 0; i < sizeof sb->discards / sizeof sb->discards[0]; i++)
		if (!sb->discards[i] && sb->discard_claims[i].fd >= 0)
			let_uid_go(sb, &sb->discard_claims[i]);
	sandbox_advance(sb);
}

/* podman runs, but sage-sandbox cannot follow it (no watch on its
 * output): the run is refused with why, and the container removed. */
static void fail_running(struct sandbox *sb, const struct error *err)
{
	sb->result.failed = true;
	sb->result.failure = *err;
	sandbox_stop(sb, STOP_FAILED, 0);
}

/* The container of a start podman lost is removed (discards), its uid
 * kept claimed until that is over (on_discarded): the next start draws
 * another, and no sandbox draws it while something of the container may
 * still run as it. */
static void discard_lost_start(struct sandbox *sb)
{
	struct argv_builder rm = {0};
	struct uid_claim *claim = &sb->discard_claims[sb->starts];
	podman_rm_args(&rm, sb->opt.podman, sb->name);
	*claim = sb->uid_claim;
	sb->uid_claim = UID_CLAIM_NONE;
	if (capture_start(sb->loop, &sb->discards[sb->starts], rm.arg, podman_environment(),
		    loop_now_ms() + REMOVE_TIMEOUT_MS, on_discarded, sb) < 0)
		let_uid_go(sb, claim);
	args_free(&rm);
}

/* podman lost a start race of its own (podman_said_start_race): its
 * container is discarded; and where nothing of it ran and no byte of the
 * code's stdin went to it, the same program goes to a container started
 * again, under a new name, up to START_TRIES starts. */
static bool start_again(struct sandbox *sb)
{
	if (sb->saw_started || sb->stopping != STOP_NONE)
		return false;
	/* What podman said before it exited is all in the pipe by now. */
	while (sb->err_watch && read_available(sb->podman.stderr_fd, &sb->podman_errors,
			PODMAN_ERRORS_MAX) > 0)
		;
	if (!podman_said_start_race(sb->podman_errors.data))
		return false;
	discard_lost_start(sb);
	if (sb->starts + 1 >= START_TRIES || sb->result.input_bytes)
		return false;
	sb->starts++;
	loop_timer_cancel(&sb->grace_timer);
	close_stream(sb, true);
	close_stream(sb, false);
	queue_free(sb->input);
	sb->input = NULL;
	process_release(&sb->podman);
	sb->podman.exited = false;
	buffer_free(&sb->podman_errors);
	sb->frames = (struct frame_reader){0};
	struct error err;
	int spawned = spawn_podman(sb, &err);
	if (spawned < 0) {
		sb->result.failed = true;
		sb->result.failure = err;
		sb->podman.exited = true;
		return false;
	}
	if (sb->submitted)
		queue_program(sb);
	if (spawned > 0)
		fail_running(sb, &err);
	return true;
}

/* A removal of the container was started and is not over. */
static bool removing(const struct sandbox *sb)
{
	return sb->rm_tries && !sb->rm_done;
}

/* Whether the container may outlive its podman client's exit: it started,
 * and was not seen to end on its own (the launcher's end frame, with the
 * container's end in it, or its refusal to start Sage). A client killed
 * alone (SIGKILL to podman, not to the container) leaves conmon and the
 * code running, attached to nothing, until podman's --timeout backstop
 * (minutes; a day for a container that serves several calls), while the
 * uid it runs as would be let go: the next sandbox of this host could draw
 * it and count, or be counted by, what still runs. A container already
 * gone (removed from outside, the likelier case) costs one `podman rm`
 * that finds nothing. Asked once the client's output is read to its end,
 * or its grace is over (sandbox_advance): an end frame still in the pipe
 * when podman's exit is seen is the launcher's own end. */
static bool container_may_outlive(const struct sandbox *sb)
{
	return sb->saw_started && !sb->saw_refusal && sb->stopping == STOP_NONE &&
		!(sb->saw_exit && !SERVES_NEXT(&sb->result));
}

static void on_podman_exit(struct process *p, int status, void *data)
{
	struct sandbox *sb = data;
	loop_timer_cancel(&sb->count_timer); /* its container is gone */
	if (start_again(sb))
		return;
	sb->exited_at = loop_now_ms();
	/* A container that waited for a call waits no more (sandbox_state),
	 * nor is it watched. */
	sb->between_cells = false;
	stop_watching_memory(sb);
	sandbox_advance(sb);
}

static void on_grace_over(void *data)
{
	struct sandbox *sb = data;
	close_stream(sb, true);
	close_stream(sb, false);
	sandbox_advance(sb);
}

static void on_deadline(void *data)
{
	struct sandbox *sb = data;
	/* A run whose podman already exited ended before its deadline: only
	 * its pipes were still draining. */
	if (sb->podman.exited) {
		loop_timer_cancel(&sb->grace_timer);
		on_grace_over(sb);
		return;
	}
	sandbox_stop(sb, STOP_TIMEOUT, 0);
}

/* The memory watchdog and the CPU throttle (memwatch.c): a look every
 * MEMWATCH_INTERVAL_MS on average (memwatch_next_look_ms) while a call
 * runs, and while a session waits for its next cell (its processes are
 * stopped then, and cost nothing to look at); the run is stopped past
 * --memory. */
static void on_memwatch(void *data)
{
	struct sandbox *sb = data;
	struct memwatch_reading look;
	enum memwatch_verdict verdict = memwatch_look(sb->memwatch, loop_now_ms(), &look);
	struct run_result *r = &sb->result;
	look.throttled |= cpugroup_throttled(&sb->cpu_group, loop_now_ms());
	if (!sb->between_cells) {
		r->memory_seen = look.total;
		r->descriptors_seen = look.descriptors;
		r->mappings_seen = look.mappings;
		r->kernel_seen = look.kernel_bytes;
		r->locks_seen = look.locks;
	}
	if (!sb->between_cells && r->code_begun) {
		/* Of the code's time only: Sage's import and a warm-up run
		 * unheld, and what a session's group held back before its cell
		 * began (a thread of the last cell's) is not the cell's. */
		r->throttled |= look.throttled;
		r->looks++;
		r->throttled_looks += look.throttled;
	}
	if (verdict != MEMWATCH_OK) {
		memwatch_kill((uid_t)sb->host_uid);
		sandbox_stop(sb, verdict == MEMWATCH_OVER ? STOP_MEMORY_LIMIT : STOP_CPU_ESCAPED, 0);
		return;
	}
	loop_timer_arm(&sb->scope, &sb->memwatch_timer, loop_now_ms() + memwatch_next_look_ms(),
		on_memwatch, sb);
}

static void watch_memory(struct sandbox *sb)
{
	if (sb->memwatch && !sb->memwatch_timer)
		loop_timer_arm(&sb->scope, &sb->memwatch_timer, loop_now_ms() + memwatch_next_look_ms(),
			on_memwatch, sb);
}

/* The call's code begins (its B frame: the launcher hands the call to its
 * child, after any warm-up step under way): from then until the call's
 * end the container's cpu group, where it has one, is held to --cpus
 * (cpugroup.c), but for a serial call's end from U to H. The child may
 * start a moment before the frame is read here: that moment is the
 * code's unheld (a few milliseconds). A run
 * with a process outside its group (podman put the container elsewhere)
 * would not be held: it is refused. That is asked of the run's own uid,
 * so not where it shares the fallback uid (host_uid -1), which others'
 * processes have. Whether any process is in the group is no test: this
 * frame may be read after the run ended (a cold run of 1/0 on a loaded
 * host), when none is anywhere. */
static void hold_cpus(struct sandbox *sb)
{
	char why[128] = "";
	pid_t outside;
	if (!sb->cpu_group.path[0])
		return;
	if (cpugroup_hold(&sb->cpu_group, sb->opt.cfg->number[SET_CPUS], loop_now_ms()) < 0)
		snprintf(why, sizeof why, "%s", strerror(errno));
	else if (sb->host_uid >= 0 && (outside = cpugroup_outside(&sb->cpu_group, (uid_t)sb->host_uid)))
		snprintf(why, sizeof why, "process %d of the container is not in it", (int)outside);
	if (!why[0])
		return;
	struct error err;
	error_set(&err, EXIT_REFUSED, cpu_group_hint(sb),
		"cannot hold --cpus in the container's cpu group %s: %s", sb->cpu_group.path, why);
	fail_running(sb, &err);
}

/* The kernel's count of the run's CPU time must be opened on the launcher
 * before it forks (memwatch_count): from the container's start, every
 * COUNT_POLL_MS, until it is open or too late, or podman exits. The
 * launcher forks after Sage's import, a second or more after it appears. */
enum { COUNT_POLL_MS = 20 };

static void on_count(void *data)
{
	struct sandbox *sb = data;
	if (sb->memwatch && !memwatch_count(sb->memwatch))
		loop_timer_arm(&sb->scope, &sb->count_timer, loop_now_ms() + COUNT_POLL_MS, on_count,
			sb);
}

static void stop_watching_memory(struct sandbox *sb)
{
	loop_timer_cancel(&sb->memwatch_timer);
}

static void on_retry_remove(void *data)
{
	start_remove(data);
}

/* What is left of the container once its removal is over. Under podman 5,
 * a run stopped while podman started it leaves its container created,
 * never started: podman forgets it (its client was killed before it
 * recorded the start), so `podman rm` finds nothing, while runc init
 * waits on, as a process of the run's uid, until conmon's --timeout
 * (minutes), and the uid's next sandbox would find it. Where the removal
 * failed, what is left is the code, still running. Killed here by uid,
 * as the watchdog kills a run past its limit: the claim keeps the other
 * sandboxes of this host off the uid (uidclaim.c says where it does not),
 * and no container of the run still counts. Not where the uid is not
 * claimed (a shared uid's processes may be another run's) or podman runs
 * elsewhere. A runc init that comes only after this look (its runc create
 * slower than the removal) is left to conmon's --timeout. */
static void kill_uid_leftovers(const struct sandbox *sb, const struct uid_claim *claim)
{
	long uid = uid_claim_host_uid(claim);
	if (uid >= 0 && sb->podman_local)
		memwatch_kill((uid_t)uid);
}

static void removal_over(struct sandbox *sb)
{
	kill_uid_leftovers(sb, &sb->uid_claim);
	sb->rm_done = true;
}

/* Whether podman rm's capture says the container is gone: removed, or
 * gone before (conmon's --rm; podman before 4.2 then fails with status 1). */
static bool container_gone(const struct capture *cap)
{
	return cap->status == 0 || (cap->err.data && strstr(cap->err.data, "no such container"));
}

static void on_removed(struct capture *cap, void *data)
{
	struct sandbox *sb = data;
	bool gone = container_gone(cap);
	if (!gone && sb->rm_tries < REMOVE_TRIES) {
		loop_timer_arm(&sb->scope, &sb->retry_timer, loop_now_ms() + 1000, on_retry_remove, sb);
	} else {
		if (!gone)
			fprintf(stderr, "sage-sandbox: could not remove container %s (%s); "
					"'sage-sandbox cleanup' will\n", sb->name,
				cap->timed_out ? "podman rm timed out" : "podman rm failed");
		removal_over(sb);
	}
	capture_free(cap);
	sandbox_advance(sb);
}

static void start_remove(struct sandbox *sb)
{
	sb->rm_tries++;
	args_free(&sb->rm_args);
	podman_rm_args(&sb->rm_args, sb->opt.podman, sb->name);
	if (capture_start(sb->loop, &sb->rm, sb->rm_args.arg, podman_environment(),
		    loop_now_ms() + REMOVE_TIMEOUT_MS, on_removed, sb) < 0)
		removal_over(sb);
}

void sandbox_stop(struct sandbox *sb, enum stop_reason reason, int signal)
{
	if (sb->stopping != STOP_NONE ||
	    ((sb->state == SANDBOX_DONE || sb->saw_exit) && !sb->between_cells))
		return;
	/* A call's own hold, to its stop: not a session's wait between
	 * cells, whose result was its last cell's. */
	bool in_call = !sb->between_cells && sb->result.code_begun;
	sb->between_cells = false;
	sb->stopping = reason;
	sb->stop_signal = signal;
	/* Killed processes must run to die (a forked Sage's exit takes tens
	 * of ms of CPU): held at --cpus, they would outlive the stop. So
	 * every process of the container in its group is killed here first
	 * (podman rm, below, takes a few hundred ms to), then the hold
	 * lifted: what is left to run is the kernel's work as each exits,
	 * never the code. */
	cpugroup_kill(&sb->cpu_group);
	bool held = cpugroup_lift(&sb->cpu_group, loop_now_ms());
	if (in_call)
		sb->result.throttled |= held;
	sb->state = SANDBOX_STOPPING;
	loop_timer_cancel(&sb->deadline_timer);
	stop_watching_memory(sb);
	/* Nothing printed after a stop is kept, nor a file half sent. */
	close_stream(sb, true);
	if (sb->out)
		outfiles_stopped(sb->out);
	/* The client goes first, with the child it runs on in (its process
	 * group): a live one, blocked writing output nobody reads, holds up
	 * the removal by seconds (podman 5's kept conmon from reaping the
	 * container's process, and `podman rm` failed for as long); and once
	 * it is dead it cannot create the container after the removal. */
	process_signal_group(&sb->podman, SIGKILL);
	/* A removal begun (container_may_outlive's) is the stop's. */
	if (!sb->rm_tries)
		start_remove(sb);
}

/* A signal a process gets from its own fault (a library that crashes as it
 * starts), not one another sends it (an OOM killer's SIGKILL, podman's
 * SIGTERM). */
static bool crash_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
		sig == SIGABRT || sig == SIGSYS;
}

/* Long: one branch per way a run ends (stop reasons, the launcher's
 * trailer, podman's exit), each setting its fields: read as one table. */
static void finish_result(struct sandbox *sb)
{
	struct run_result *r = &sb->result;
	r->duration_ms = loop_now_ms() - sb->run_from;
	switch (sb->stopping) {
	case STOP_TIMEOUT:
		r->timed_out = true;
		r->signal = SIGKILL;
		r->exit_code = EXIT_TIMEOUT;
		return;
	case STOP_OUTPUT_LIMIT:
		r->output_limit_exceeded = true;
		r->signal = SIGKILL;
		r->exit_code = EXIT_OUTPUT_LIMIT;
		return;
	case STOP_MEMORY_LIMIT:
		r->memory_limit_exceeded = true;
		r->signal = SIGKILL;
		r->exit_code = EXIT_MEMORY_LIMIT;
		return;
	case STOP_CPU_ESCAPED:
		r->cpu_limit_exceeded = r->cpu_escaped = true;
		r->throttled = true;
		r->signal = SIGKILL;
		r->exit_code = 128 + SIGKILL;
		return;
	case STOP_FAILED:
		r->exit_code = r->failure.status;
		return;
	case STOP_ENDED:
		r->session_ended = true;
		r->interrupted_by = SIGTERM;
		r->signal = SIGKILL;
		r->exit_code = 128 + SIGTERM;
		return;
	case STOP_SIGNAL:
	case STOP_OUTPUT_CLOSED:
		r->interrupted_by = sb->stopping == STOP_OUTPUT_CLOSED ? SIGPIPE : sb->stop_signal;
		r->signal = SIGKILL;
		r->exit_code = 128 + r->interrupted_by;
		return;
	case STOP_NONE:
		break;
	}
	if (r->failed)
		return; /* Sage did not start: no code ran (sage_did_not_start) */
	/* Ended past the deadline, though nobody stopped it: sage-sandbox was
	 * itself stopped (SIGSTOP, a suspended VM) while the deadline passed,
	 * and podman's backstop or the code's own end came first. Whatever
	 * ended it, the run did not end in time: a session's cell too, whose
	 * status came as its deadline passed, before its interrupt (its
	 * state kept; describe_stop says so). */
	int64_t ended_at = sb->saw_exit ? sb->code_ended_at :
		sb->podman.exited && sb->stopping == STOP_NONE ? sb->exited_at : loop_now_ms();
	if (ended_at >= sb->opt.deadline && sb->saw_started) {
		r->timed_out = true;
		if (!sb->saw_exit)
			r->signal = SIGKILL; /* podman's backstop */
		r->exit_code = EXIT_TIMEOUT;
		return;
	}
	if (sb->saw_exit)
		return;
	const char *errors = sb->podman_errors.data ? sb->podman_errors.data : "";
	if (!sb->saw_started && podman_said_no_entrypoint(errors, sb->opt.image->python)) {
		/* Podman could not start Sage's Python as the run's user. */
		char why[1500];
		snprintf(why, sizeof why, "cannot execute Sage's Python %s as the run's user: %.*s",
			sb->opt.image->python, (int)strcspn(errors, "\n"), errors);
		sage_did_not_start(sb, why);
		return;
	}
	if (!sb->saw_started) {
		/* The container never started: podman's own refusal, in podman's
		 * own words, which no code could have written. */
		r->failed = true;
		if (podman_said_no_image(errors))
			error_set(&r->failure, EXIT_REFUSED, image_hint,
				"image '%s' is not present locally (runs never pull)",
				sb->opt.cfg->value[SET_IMAGE]);
		else {
			size_t len, before_len = 0;
			const char *tail = last_line(errors, sb->podman_errors.len, &len);
			/* An OCI runtime's failure names its command and status
			 * alone; its own words, where it said any, came before. */
			const char *before = "";
			if (podman_said_runtime_failed(tail, len) && tail > errors)
				before = last_line(errors, (size_t)(tail - errors), &before_len);
			if (len) {
				error_set(&r->failure, EXIT_REFUSED,
					podman_failed_hint(errors, status_or(sb,
						"see podman's message; check 'sage-sandbox status'",
						"see podman's message")),
					"podman could not run the container (status %d): %.*s%s%.*s",
					sb->podman.status, (int)len, tail,
					before_len ? "; before it: " : "", (int)before_len, before);
			} else {
				char hint[512];
				podman_silent_hint(hint, sizeof hint, sb->opt.cfg->value[SET_PODMAN],
					sb->opt.cfg->value[SET_IMAGE]);
				error_set(&r->failure, EXIT_REFUSED, hint,
					"podman could not run the container (status %d) and said nothing",
					sb->podman.status);
			}
		}
		return;
	}
	if (!sb->saw_ready) {
		/* The launcher ended before Sage was imported, and without a
		 * word: a crash in an extension module, a killed interpreter, or
		 * a --seccomp-profile that refuses what Sage needs. No code ran:
		 * a refusal with the launcher's last line, never the code's
		 * output; the image is not blamed, nor its cached answer dropped. */
		size_t len;
		const char *last = last_line(errors, sb->podman_errors.len, &len);
		r->failed = true;
		/* A SIGKILL is not the image's: the launcher is the container's
		 * init, which nothing in it can kill (its CPU rlimit aside, 30 s
		 * past the run's: podman.c), and podman's client is outside;
		 * another process removed or killed them. */
		bool killed = sb->podman.status == 128 + SIGKILL;
		char ended[128];
		snprintf(ended, sizeof ended, killed ? "the container or its podman was killed from "
			"outside (SIGKILL: status %d)" : "the launcher ended with status %d",
			sb->podman.status);
		error_set(&r->failure, EXIT_REFUSED,
			killed ? "nothing of the image is to blame: run it again, and find what "
				 "removes this user's containers (podman rm, kill or stop) or ran the "
				 "kernel's OOM killer" : status_or(sb,
				 "check the image with 'sage-sandbox status', and what a "
				 "--seccomp-profile of your own refuses",
				 "podman and the image passed the checks above: see the message, and "
				 "what a --seccomp-profile of your own refuses"),
			"Sage did not start in the sandbox: %s before Sage was ready%s%.*s", ended,
			len ? ": " : "", (int)len, last);
		return;
	}
	/* The launcher died after it said ready, before it could report: what
	 * podman said is the launcher's own stderr, or podman's, and goes with
	 * the result. */
	r->sandbox_broke = true;
	/* 0 too: the code's end was never seen, and ok must not say it went
	 * well (a launcher that exits 0 on its own never does so mid-call). */
	r->exit_code = sb->podman.status <= 0 ? 1 : sb->podman.status;
	if (r->exit_code > 128 && r->exit_code < 128 + 65)
		r->signal = r->exit_code - 128;
	r->warm_up_broke = sb->warming && crash_signal(r->signal);
	/* conmon counts the --timeout from a moment after started_at: a
	 * container this old was ended by it, not from outside. */
	r->life_over = (sb->opt.session || sb->opt.serial) &&
		sb->exited_at - sb->started_at >= SESSION_MAX_SECONDS * 1000LL;
	if (sb->opt.cb.keep_output && sb->podman_errors.len)
		buffer_append(&r->err, errors, sb->podman_errors.len);
	else if (sb->podman_errors.len && sb->opt.cb.on_output)
		sb->opt.cb.on_output(sb, 1, errors, sb->podman_errors.len, sb->opt.cb.data);
}

/* Moves the machine on after any event. */
static void sandbox_advance(struct sandbox *sb)
{
	bool stopping = sb->stopping != STOP_NONE;
	/* A container that may outlive its client is removed before the
	 * result is known, as after a stop: its owner may give the uid to
	 * the next sandbox from on_done on. Between calls no end frame can
	 * still come: at once. */
	if (!stopping && sb->podman.exited && !sb->rm_tries &&
	    ((!sb->out_watch && !sb->err_watch) || sb->done_reported) && container_may_outlive(sb))
		start_remove(sb);
	/* The code's end is known from its exit frame: the run is over, while
	 * the container exits and conmon removes it (--rm). */
	bool result_known = (sb->saw_exit && !stopping) ||
		(stopping && sb->podman.exited && sb->rm_done) ||
		(!stopping && sb->podman.exited && !sb->out_watch && !sb->err_watch &&
			!removing(sb));

	if (!stopping && sb->podman.exited && (sb->out_watch || sb->err_watch) && !sb->grace_timer &&
	    !sb->saw_exit)
		loop_timer_arm(&sb->scope, &sb->grace_timer, loop_now_ms() + DRAIN_GRACE_MS,
			on_grace_over, sb);

	if (result_known && !sb->done_reported) {
		sb->done_reported = true;
		loop_timer_cancel(&sb->deadline_timer);
		if (sb->out)
			outfiles_stopped(sb->out); /* a file cut short by the end */
		finish_result(sb);
		/* A session's warm-up ends as its first cell comes, with no W
		 * frame (launcher/calls.py): what kills its launcher later is
		 * not the warm-up. */
		if (sb->opt.session)
			sb->warming = false;
		/* A run that never ran the code exits with its refusal's
		 * status, as a call refused by the runner does (not 128 for a
		 * stop, nor 0). */
		if (sb->result.failed)
			sb->result.exit_code = sb->result.failure.status;
		/* The call's program, its files in and out, are its owner's,
		 * borrowed from sandbox_submit until now: nothing of the
		 * sandbox points into them from here on, whenever the owner
		 * frees them (a session's call is freed with its answer, its
		 * container lives on). */
		sb->program = (struct program){0};
		sb->in = NULL;
		sb->out = NULL;
		sb->between_cells = !stopping && SERVES_NEXT(&sb->result) && !sb->podman.exited;
		/* What the watchdog stopped is over (killed) or, in a session,
		 * stopped by the launcher until the next cell, which the
		 * watchdog keeps looking at; a serial container's next call
		 * has not begun. In a serial container what it stopped may
		 * outlive the call, and is continued: the launcher forks the
		 * next call's child before its end frame, and starts its
		 * warm-up step as soon as it is sent, while this end is still
		 * unread and the watchdog still looks. The watchdog does
		 * stop a step's subprocesses (Sage's package-system probe:
		 * sh, bash and Python, seen stopped in warm batch containers
		 * at --memory 1g); one stopped then and let go of here would
		 * never be continued, and the warm-up, and the call waiting
		 * for it, would wait to the timeout. */
		if (sb->memwatch)
			memwatch_release(sb->memwatch, !sb->opt.session);
		/* A serial container's launcher, which has killed and reaped
		 * every process of the call, warms up between calls: unheld. A
		 * session's Sage waits stopped for its next cell, still held (a
		 * process of it that continues itself runs at --cpus at most),
		 * and so does a container that ends: what the code left running
		 * dies with it, held until it is gone. The call's last moments
		 * are read here all the same, as its own: the looks between
		 * cells tell no one, and a run with no watchdog (a memory
		 * cgroup holds --memory) has no look at all. */
		if (sb->between_cells && !sb->opt.session)
			sb->result.throttled |= cpugroup_lift(&sb->cpu_group, loop_now_ms());
		else if (sb->result.code_begun)
			sb->result.throttled |= cpugroup_throttled(&sb->cpu_group, loop_now_ms());
		/* A pause of the output is the call's (its reader's back
		 * pressure): its end, read, ends it, or the next call's frames
		 * would never be read. */
		if (sb->output_paused)
			sandbox_pause_output(sb, false);
		if (!(sb->between_cells && sb->opt.session))
			stop_watching_memory(sb);
		sb->state = sb->between_cells ? SANDBOX_READY : SANDBOX_DONE;
		if (sb->opt.cb.on_done)
			sb->opt.cb.on_done(sb, sb->opt.cb.data);
	}
	bool released = sb->done_reported && sb->podman.exited && !sb->rm &&
		!sb->retry_timer && !removing(sb) && !discarding(sb);
	if (released && !sb->released_reported) {
		sb->released_reported = true;
		loop_timer_cancel(&sb->grace_timer);
		close_stream(sb, true);
		close_stream(sb, false);
		if (sb->opt.cb.on_released)
			sb->opt.cb.on_released(sb, sb->opt.cb.data);
	}
}

/* Starts the podman client of the sandbox's container, under a name and a
 * uid of its own: at its start, and again after a start race. */
static int spawn_podman(struct sandbox *sb, struct error *err)
{
	const struct sandbox_options *opt = &sb->opt;
	char owner[128];
	sb->profile_fd = seccomp_profile_fd(opt->cfg, err);
	if (sb->profile_fd < 0)
		return -1;
	container_name(sb->name, sizeof sb->name);
	process_identity(getpid(), owner, sizeof owner);
	/* After a start race, the lost container's uid is still claimed
	 * (discard_claims): this draws another. */
	unsigned long uid = uid_claim_draw(&sb->uid_claim, opt->host);
	args_free(&sb->args);
	const char *mode = opt->session ? "session" : opt->serial ? "serial" : "once";
	podman_run_args(&sb->args, opt->cfg, opt->host, opt->image, opt->podman, sb->name, owner,
		uid, opt->idle_seconds, mode, opt->cold);
	sb->warming = podman_warms(opt->cfg, opt->idle_seconds, mode, opt->cold);
	/* Watched where no memory cgroup holds the total, and where the run's
	 * uid is its own (with the shared fallback uid, the sum would be of
	 * every run's processes). */
	sb->host_uid = !opt->host->controller[CONTROLLER_MEMORY] && uid >= SANDBOX_UID_MIN ?
		host_uid_of(opt->host, uid) : -1;
	/* --cpus, where podman's cgroup does not hold it and it is less than
	 * the host has: a cpu group of the container's own where root
	 * delegated one (the podman client joins it, and all it starts is in
	 * it); else the watchdog's throttle. */
	long cpus = opt->cfg->number[SET_CPUS];
	bool limited = !opt->host->controller[CONTROLLER_CPU] &&
		cpus < sysconf(_SC_NPROCESSORS_ONLN) * 1000L;
	char delegated[512], join[600];
	cpugroup_remove(&sb->cpu_group);
	bool grouped = limited && !opt->host->remote &&
		cpugroup_delegated(delegated, sizeof delegated);
	if (grouped && cpugroup_create(&sb->cpu_group, delegated, sb->name) < 0) {
		error_set(err, EXIT_REFUSED, cpu_group_hint(sb),
			"cannot make the container's cpu group in %s: %s", delegated, strerror(errno));
		close(sb->profile_fd);
		sb->profile_fd = -1;
		return -1;
	}
	if (grouped)
		cpugroup_procs_path(&sb->cpu_group, join, sizeof join);
	struct memwatch_options mo = {.uid = (uid_t)sb->host_uid, .spare_init = true,
		.limit = config_memory_bytes(opt->cfg), .cpus_milli = limited && !grouped ? cpus : 0};
	memwatch_free(sb->memwatch);
	sb->memwatch = sb->host_uid >= 0 ? memwatch_new(&mo) : NULL;
	loop_timer_arm(&sb->scope, &sb->count_timer, loop_now_ms(), on_count, sb);
	struct process_spec spec = {.argv = sb->args.arg, .envp = podman_environment(),
		.pipe_stdin = true, .pipe_stdout = true, .pipe_stderr = true,
		.pass_fd = sb->profile_fd, .join_cgroup = grouped ? join : NULL,
		.on_exit = on_podman_exit, .data = sb};
	int spawned = process_spawn(sb->loop, &sb->podman, &spec);
	/* podman has read the profile by the time it runs the container; the
	 * memfd itself must not outlive this call in us. */
	close(sb->profile_fd);
	sb->profile_fd = -1;
	int spawn_errno = errno;
	if (spawned < 0 && grouped && access(join, W_OK) < 0) {
		error_set(err, EXIT_REFUSED, cpu_group_hint(sb),
			"podman could not join the container's cpu group %s: %s", sb->cpu_group.path,
			strerror(spawn_errno));
		return -1;
	}
	if (spawned < 0) {
		podman_start_error(err, opt->podman, spawn_errno);
		return -1;
	}
	if (loop_watch(&sb->scope, &sb->out_watch, sb->podman.stdout_fd, LOOP_READ,
		    on_launcher_stream, sb) < 0 ||
	    loop_watch(&sb->scope, &sb->err_watch, sb->podman.stderr_fd, LOOP_READ,
		    on_podman_errors, sb) < 0) {
		error_set(err, EXIT_REFUSED, NULL, "cannot watch podman's output: %s", strerror(errno));
		return 1; /* running: the caller stops it */
	}
	return 0;
}

struct sandbox *sandbox_start(struct loop *loop, const struct sandbox_options *opt,
		struct error *err)
{
	struct sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		abort();
	sb->loop = loop;
	loop_scope_init(&sb->scope, loop, "a sandbox");
	sb->opt = *opt;
	sb->limit = (size_t)opt->cfg->number[SET_OUTPUT_LIMIT] * 1024;
	sb->started_at = loop_now_ms();
	sb->run_from = sb->started_at;
	sb->podman.pidfd = sb->podman.stdin_fd = sb->podman.stdout_fd = sb->podman.stderr_fd = -1;
	sb->profile_fd = -1;
	sb->uid_claim = UID_CLAIM_NONE;
	sb->podman_local = !opt->host->remote;
	for (size_t i = 0; i < sizeof sb->discard_claims / sizeof sb->discard_claims[0]; i++)
		sb->discard_claims[i] = UID_CLAIM_NONE;
	int spawned = spawn_podman(sb, err);
	if (spawned < 0) {
		sandbox_free(sb);
		return NULL;
	}
	loop_timer_arm(&sb->scope, &sb->deadline_timer, opt->deadline, on_deadline, sb);
	/* A warm sandbox starts its watchdog with its program: until then no
	 * code exists, and eight idle pools' looks at /proc would cost CPU. */
	if (opt->idle_seconds == 0)
		watch_memory(sb);
	sb->state = SANDBOX_STARTING;
	if (spawned > 0)
		fail_running(sb, err);
	return sb;
}

static void put_frame(struct queue *q, char type, const char *payload, size_t len)
{
	unsigned char header[FRAME_HEADER];
	frame_header(header, type, len);
	queue_put_all(q, header, sizeof header);
	queue_put_all(q, payload, len);
}

/* Sends the input files as the queue has room: at most a frame a file a
 * turn read from the descriptor checked when it was named, never more than
 * the size it had then. The code's stdin follows them. */
static void send_inputs(struct sandbox *sb)
{
	char chunk[FRAME_MAX];
	while (!sb->inputs_done && sb->in && sb->in_next < sb->in->count) {
		const struct infile *f = &sb->in->files[sb->in_next];
		size_t room = queue_room(sb->input);
		if (room <= FRAME_HEADER)
			return;
		if (!sb->in_begun) {
			put_frame(sb->input, 'F', f->name, strlen(f->name));
			sb->in_begun = true;
			sb->in_offset = 0;
			continue;
		}
		size_t want = room - FRAME_HEADER < FRAME_MAX ? room - FRAME_HEADER : FRAME_MAX;
		if (want > f->size - sb->in_offset)
			want = (size_t)(f->size - sb->in_offset);
		ssize_t n = want ? pread(f->fd, chunk, want, (off_t)sb->in_offset) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* Its end, or a file that shrank since: what there was. */
			put_frame(sb->input, 'G', "", 0);
			sb->in_next++;
			sb->in_begun = false;
			continue;
		}
		put_frame(sb->input, 'D', chunk, (size_t)n);
		sb->in_offset += (uint64_t)n;
	}
	if (sb->inputs_done)
		return;
	sb->inputs_done = true;
	if (!sb->input_open)
		put_frame(sb->input, 'I', "", 0);
}

static void on_input_drained(struct queue *q, void *data)
{
	struct sandbox *sb = data;
	send_inputs(sb);
	if (sb->inputs_done && sb->input_open && sb->opt.cb.on_input_room &&
	    sandbox_input_room(sb) > 0)
		sb->opt.cb.on_input_room(sb, sb->opt.cb.data);
}

/* Queues the program's frames on podman's stdin: at its submission, and
 * again to the container started after a start race. */
static void queue_program(struct sandbox *sb)
{
	const struct program *p = &sb->program;
	struct buffer args = {0};
	/* No error callback: a launcher that stops reading has died or was
	 * stopped, and its exit or our stop says the rest. A session's cells
	 * share the queue of its first. */
	if (!sb->input) {
		sb->input = queue_new(sb->loop, sb->podman.stdin_fd, INPUT_QUEUE_BYTES,
			on_input_drained, NULL, sb);
		if (!sb->input)
			return;
		sb->podman.stdin_fd = -1; /* the queue owns it now */
	}
	for (int i = 0; i < p->argc; i++) {
		buffer_append(&args, p->argv[i], strlen(p->argv[i]));
		buffer_append(&args, "", 1); /* each ends with its NUL */
	}
	/* Arguments longer than a frame are cut at the last whole one: the
	 * command line that gave them is far shorter in practice. */
	size_t args_len = args.len;
	while (args_len > FRAME_MAX)
		args_len = (size_t)((char *)memrchr(args.data, '\0', args_len - 1) - args.data) + 1;
	/* The call's own limits, which the launcher can only lower, and what
	 * comes with the code and goes back (docs/protocol.md). The deadline
	 * is the launcher's to keep where the container outlives the call or
	 * files come back; else the stop is sage-sandbox's. */
	char limits[512];
	struct rlimit_value rl[RLIMIT_COUNT];
	sandbox_rlimits(sb->opt.cfg, rl);
	long cpu_seconds = p->cpu_seconds ? p->cpu_seconds : (long)rl[RL_CPU].value;
	bool launcher_deadline = p->out || sb->opt.session || sb->opt.serial;
	int limits_len = snprintf(limits, sizeof limits, "{\"cpu\": %ld, \"deadline\": %lld, "
		"\"inputs\": %zu", cpu_seconds, launcher_deadline ? (long long)p->deadline : 0LL,
		p->in ? p->in->count : 0);
	if (p->out)
		limits_len += snprintf(limits + limits_len, sizeof limits - (size_t)limits_len,
			", \"out\": {\"files\": %ld, \"file_bytes\": %llu, \"bytes\": %llu}",
			p->out->max_files, (unsigned long long)p->out->max_file_bytes,
			(unsigned long long)p->out->max_total_bytes);
	if (p->seeded)
		limits_len += snprintf(limits + limits_len, sizeof limits - (size_t)limits_len,
			", \"seed\": %lu", (unsigned long)p->seed);
	limits_len += snprintf(limits + limits_len, sizeof limits - (size_t)limits_len,
		", \"display\": {\"last\": %s, \"latex\": %s, \"first\": %u}}",
		p->display_last ? "true" : "false", p->display_latex ? "true" : "false",
		p->out ? outfiles_first_show(p->out) : 1);
	put_frame(sb->input, 'L', limits, (size_t)limits_len);
	put_frame(sb->input, 'A', args.data ? args.data : "", args_len);
	put_frame(sb->input, 'C', p->code, p->code_len);
	buffer_free(&args);
	sb->in_next = 0;
	sb->in_begun = sb->inputs_done = false;
	send_inputs(sb);
}

/* The next call of a session or a serial sandbox: the last one's result
 * goes, the container stays. */
static void next_cell(struct sandbox *sb)
{
	struct run_result *r = &sb->result;
	buffer_free(&r->out);
	buffer_free(&r->err);
	*r = (struct run_result){.started = true};
	sb->seen[0] = sb->seen[1] = 0;
	sb->saw_exit = sb->done_reported = sb->between_cells = false;
	sb->code_ended_at = 0;
	sb->state = SANDBOX_READY;
}

void sandbox_submit(struct sandbox *sb, const struct program *p)
{
	if (sb->between_cells)
		next_cell(sb);
	sb->program = *p;
	sb->submitted = true;
	sb->limit = p->output_limit ? p->output_limit :
		(size_t)sb->opt.cfg->number[SET_OUTPUT_LIMIT] * 1024;
	sb->input_open = p->input_follows;
	sb->in = p->in;
	sb->out = p->out;
	sb->result.files = p->out;
	queue_program(sb);
	/* A warm sandbox's run counts from now: its wait was not the call's. */
	if (sb->state == SANDBOX_READY) {
		sb->state = SANDBOX_RUNNING;
		sb->run_from = loop_now_ms();
	}
	if (sb->stopping == STOP_NONE && !sb->done_reported)
		watch_memory(sb);
	if (p->deadline && sb->stopping == STOP_NONE && !sb->done_reported) {
		/* With files to bring back, the launcher ends the code at the
		 * deadline and sends them: the stop waits for that, a while. */
		sb->opt.deadline = p->deadline;
		/* A session's launcher interrupts the cell at the deadline and
		 * kills it a grace later: the stop is the backstop to that. */
		loop_timer_arm(&sb->scope, &sb->deadline_timer, p->deadline +
			(p->out || sb->opt.serial ? OUT_GRACE_MS : 0) +
			(sb->opt.session ? SESSION_INTERRUPT_GRACE_MS + OUT_GRACE_MS : 0),
			on_deadline, sb);
	}
}

void sandbox_set_callbacks(struct sandbox *sb, const struct sandbox_callbacks *cb)
{
	sb->opt.cb = *cb;
}

size_t sandbox_input_room(const struct sandbox *sb)
{
	size_t room = sb->input && sb->input_open && sb->inputs_done ? queue_room(sb->input) : 0;
	return room > FRAME_HEADER ? room - FRAME_HEADER : 0;
}

size_t sandbox_input(struct sandbox *sb, const char *bytes, size_t len)
{
	size_t room = sandbox_input_room(sb);
	uint64_t left = MAX_INPUT_BYTES - sb->result.input_bytes;
	if (len > room)
		len = room;
	if (len > FRAME_MAX)
		len = FRAME_MAX;
	if (len > left) {
		/* The cap: the code reads end of file here, and is told so. */
		sb->result.input_truncated = true;
		len = (size_t)left;
	}
	if (len)
		put_frame(sb->input, 'I', bytes, len);
	sb->result.input_bytes += len;
	if (sb->result.input_truncated)
		sandbox_input_end(sb);
	return len;
}

void sandbox_input_end(struct sandbox *sb)
{
	if (!sb->input || !sb->input_open)
		return;
	sb->input_open = false;
	if (sb->inputs_done) /* else it follows the files */
		put_frame(sb->input, 'I', "", 0);
}

void sandbox_pause_output(struct sandbox *sb, bool paused)
{
	sb->output_paused = paused;
	loop_watch_events(sb->out_watch, paused ? 0 : LOOP_READ);
}

enum sandbox_state sandbox_state(const struct sandbox *sb)
{
	/* One whose podman has exited serves no call, while its removal
	 * runs too, whatever frame was read after. */
	return sb->state == SANDBOX_READY && sb->podman.exited ? SANDBOX_DONE : sb->state;
}

const char *sandbox_name(const struct sandbox *sb)
{
	return sb->name;
}

struct run_result *sandbox_result(struct sandbox *sb)
{
	return &sb->result;
}

void sandbox_drop_program(struct sandbox *sb)
{
	/* The queue holds copies of what was sent; nothing more is sent. */
	sb->program = (struct program){0};
	sb->in = NULL;
	sb->out = NULL;
	sb->result.files = NULL;
	sb->inputs_done = true;
	sb->input_open = false;
}

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	/* First: no timer or watch of the sandbox calls back from here on. */
	loop_scope_end(&sb->scope);
	/* What the sandbox started and still runs is let go of, never waited
	 * for, and none of its callbacks reaches the freed sandbox: the stop's
	 * `podman rm` and the removals of containers a start race left run on
	 * by themselves (capture_abandon), so that the container is still
	 * removed; they are started with --log-level=error, so they write
	 * nothing before the removal is done, and their closed pipes cannot
	 * cut it short. A removal not started yet (between tries) is left to
	 * podman's --timeout backstop and 'sage-sandbox cleanup'. */
	capture_abandon(&sb->rm);
	for (size_t i = 0; i < sizeof sb->discards / sizeof sb->discards[0]; i++)
		capture_abandon(&sb->discards[i]);
	/* A uid let go while its container's removal still runs is first
	 * rid of what runs as it, as at a removal's end (removal_over): the
	 * sandbox that draws it next would count what is left as its own. */
	if (removing(sb))
		kill_uid_leftovers(sb, &sb->uid_claim);
	for (size_t i = 0; i < sizeof sb->discard_claims / sizeof sb->discard_claims[0]; i++)
		let_uid_go(sb, &sb->discard_claims[i]);
	memwatch_free(sb->memwatch);
	cpugroup_remove(&sb->cpu_group);
	uid_claim_release(&sb->uid_claim);
	queue_free(sb->input);
	/* A client still running is left to finish on its own (conmon removes
	 * the container); we only let go of our ends. */
	process_abandon(&sb->podman);
	args_free(&sb->args);
	args_free(&sb->rm_args);
	buffer_free(&sb->podman_errors);
	buffer_free(&sb->result.out);
	buffer_free(&sb->result.err);
	free(sb);
}
/* Is the process named by an owner label ("BOOT-ID:PID:START") alive? */
static bool owner_alive(const char *owner)
{
	int pid = 0;
	const char *colon = strchr(owner, ':');
	char now[128];
	if (!colon || sscanf(colon + 1, "%d", &pid) != 1 || pid <= 0)
		return false;
	process_identity(pid, now, sizeof now);
	return strcmp(now, owner) == 0;
}

/* Lists the names of our containers whose owner is gone, one per line;
 * -1 when podman ps fails. */
static int list_orphans(const char *podman, struct buffer *names, struct error *err)
{
	struct argv_builder list = {0};
	struct capture cap;
	const char *cursor, *line;
	size_t len;
	int count = 0;

	podman_ps_args(&list, podman);
	if (capture_command(list.arg, podman_environment(), 30000, &cap) < 0 || cap.status != 0) {
		size_t said_len;
		const char *said = last_line(cap.err.data ? cap.err.data : "", cap.err.len, &said_len);
		char works[512];
		podman_works_hint(works, sizeof works, podman, "ps", NULL);
		if (cap.exec_errno) /* not "status -1" (attack helper 162) */
			podman_start_error(err, podman, cap.exec_errno);
		else if (cap.timed_out)
			error_set(err, EXIT_REFUSED, works, "podman ps did not answer in 30 s");
		else
			error_set(err, EXIT_REFUSED, podman_failed_hint(cap.err.data, works),
				"podman ps failed (status %d)%s%.*s", cap.status, said_len ? ": " : "",
				(int)said_len, said);
		capture_free(&cap);
		args_free(&list);
		return -1;
	}
	for (cursor = cap.out.data; (line = next_line(&cursor, &len));) {
		/* "NAME OWNER", parsed within its own line. */
		char text[512], name[128], owner[128] = "";
		snprintf(text, sizeof text, "%.*s", (int)len, line);
		if (sscanf(text, "%127s %127s", name, owner) >= 1 && !owner_alive(owner)) {
			buffer_append_line(names, name, strlen(name));
			count++;
		}
	}
	capture_free(&cap);
	args_free(&list);
	return count;
}

/* Keeps in *names only the names also in other. */
static void keep_listed(struct buffer *names, const struct buffer *other)
{
	struct buffer kept = {0};
	const char *cursor = names->data, *line;
	size_t len;
	while ((line = next_line(&cursor, &len))) {
		const char *c = other->data, *l;
		size_t n;
		while ((l = next_line(&c, &n)))
			if (n == len && memcmp(l, line, len) == 0) {
				buffer_append_line(&kept, line, len);
				break;
			}
	}
	buffer_free(names);
	*names = kept;
}

int sandbox_cleanup(const char *podman, struct buffer *removed, struct error *err)
{
	struct buffer orphans = {0};
	const char *cursor, *line;
	size_t len;
	int count = 0;

	if (list_orphans(podman, &orphans, err) < 0)
		return -1;
	/* A run that ended by itself does not wait for its container's removal
	 * (conmon does it, about 0.1 s later, longer on a busy host): for that
	 * moment its container outlives its owner. Such containers go by
	 * themselves; only those still there after the grace were left by a
	 * killed run. A container whose owner ended during the grace is not
	 * one of them. */
	int64_t until = loop_now_ms() + CLEANUP_GRACE_MS;
	while (orphans.len && loop_now_ms() < until) {
		struct timespec pause = {0, 250 * 1000 * 1000};
		struct buffer now = {0};
		nanosleep(&pause, NULL);
		if (list_orphans(podman, &now, err) < 0) {
			buffer_free(&orphans);
			return -1;
		}
		keep_listed(&orphans, &now);
		buffer_free(&now);
	}
	char group_dir[512];
	bool grouped = cpugroup_delegated(group_dir, sizeof group_dir);
	for (cursor = orphans.data; (line = next_line(&cursor, &len));) {
		char name[128];
		struct argv_builder rm_args = {0};
		struct capture rm;
		struct cpugroup group;
		snprintf(name, sizeof name, "%.*s", (int)len, line);
		/* As sandbox_stop does, and for the same reason: a stray's
		 * processes held at --cpus by its group (its sage-sandbox,
		 * killed, lifted nothing) die at --cpus, and podman rm waits
		 * for them (three of 200 MB at --cpus 0.1: about 1 s, 0.4 s
		 * with this); so they are killed in the group first, and the
		 * hold lifted. */
		if (grouped && cpugroup_find(&group, group_dir, name) == 0) {
			cpugroup_kill(&group);
			cpugroup_lift(&group, 0);
		}
		podman_rm_args(&rm_args, podman, name);
		if (capture_command(rm_args.arg, podman_environment(), 30000, &rm) == 0 &&
		    container_gone(&rm)) {
			buffer_append_line(removed, name, strlen(name));
			count++;
		}
		capture_free(&rm);
		args_free(&rm_args);
	}
	buffer_free(&orphans);
	/* The cpu groups of containers gone, where they could not be removed
	 * at the time (cpugroup.c). */
	if (grouped)
		cpugroup_sweep(group_dir);
	return count;
}

#define TEXT_OF_DIGITS(n) #n
#define TEXT_OF(n) TEXT_OF_DIGITS(n)

int setting_enforcement(enum setting_id id, const struct podman_host *host,
		const char *by[MAX_ENFORCERS])
{
	int n = 0;
	char group[512];
	switch (id) {
	case SET_TIMEOUT:
		by[n++] = "sage-sandbox";
		by[n++] = "podman --timeout";
		break;
	case SET_OUTPUT_LIMIT:
		by[n++] = "sage-sandbox";
		break;
	case SET_MEMORY:
		if (host->controller[CONTROLLER_MEMORY])
			by[n++] = "cgroup memory";
		else if (sandbox_uid_max(host) >= SANDBOX_UID_MIN)
			by[n++] = "sage-sandbox (the run's total: its pages, " TEXT_OF(DESCRIPTOR_CHARGE_KIB)
				" KiB per open descriptor, its mappings and page tables)";
		by[n++] = "rlimit data (per process)";
		by[n++] = "rlimit as (per process, + 1 GiB)";
		break;
	case SET_CPUS:
		if (host->controller[CONTROLLER_CPU])
			by[n++] = "cgroup cpu";
		else if (!host->remote && cpugroup_delegated(group, sizeof group))
			by[n++] = "cgroup cpu (the account's, delegated by setup.sh)";
		else if (sandbox_uid_max(host) >= SANDBOX_UID_MIN)
			by[n++] = memwatch_kernel_counts() ?
				"sage-sandbox (the run's processes together, stopped while past it; "
				"counted by the kernel)" :
				"sage-sandbox (the run's processes together, stopped while past it; "
				"counted from /proc: the kernel refuses to count it, see "
				"perf_event_paranoid)";
		by[n++] = "rlimit cpu (timeout x cpus x 1.25 seconds per process)";
		break;
	case SET_PIDS_LIMIT:
		if (host->controller[CONTROLLER_PIDS])
			by[n++] = "cgroup pids";
		by[n++] = "rlimit nproc";
		break;
	default:
		return -1;
	}
	return n;
}
