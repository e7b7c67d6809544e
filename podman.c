/* podman.c: podman's command lines and the parsing of what podman prints.
 * The `podman run` arguments below are the sandbox: each flag says which
 * attack or accident it closes. */
#include "podman.h"
#include "embedded.h"
#include "image.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const controller_names[CONTROLLER_COUNT] = {
	[CONTROLLER_MEMORY] = "memory",
	[CONTROLLER_CPU] = "cpu",
	[CONTROLLER_PIDS] = "pids",
};

const char *controller_name(enum cgroup_controller c)
{
	return controller_names[c];
}

void arg_add(struct argv_builder *a, const char *fmt, ...)
{
	va_list ap;
	if (a->n + 1 >= (int)(sizeof a->arg / sizeof a->arg[0]))
		abort();
	va_start(ap, fmt);
	if (vasprintf(&a->arg[a->n], fmt, ap) < 0)
		abort();
	va_end(ap);
	a->arg[++a->n] = NULL;
}

void args_free(struct argv_builder *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->arg[i]);
	a->n = 0;
	a->arg[0] = NULL;
}

/* Podman needs these to find its binaries, its per-user configuration,
 * storage and runtime directory, exactly as the user's own `podman` does;
 * nothing else of the caller's (API keys, tokens) may reach the container
 * through `--env NAME` or a careless image. CONTAINER_HOST and
 * CONTAINER_CONNECTION are not passed: they would make podman remote, and
 * the rootless check refuses them. */
const char *const podman_environment_names[] = {"PATH", "HOME", "XDG_RUNTIME_DIR",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
	"DBUS_SESSION_BUS_ADDRESS", "TMPDIR", NULL};

void podman_environment_digest(char out[65])
{
	/* The remote variables too: they decide whether podman is local. */
	static const char *const remote[] = {"CONTAINER_HOST", "CONTAINER_CONNECTION", NULL};
	const char *const *lists[] = {podman_environment_names, remote};
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	sha256_init(&ctx);
	for (size_t l = 0; l < 2; l++)
		for (size_t i = 0; lists[l][i]; i++) {
			const char *v = getenv(lists[l][i]);
			/* NAME=VALUE, or NAME alone when unset; each ended by NUL. */
			sha256_update(&ctx, strlen(lists[l][i]) + 1, (const uint8_t *)lists[l][i]);
			if (v)
				sha256_update(&ctx, strlen(v) + 1, (const uint8_t *)v);
		}
	sha256_digest(&ctx, sizeof digest, digest);
	for (size_t i = 0; i < sizeof digest; i++)
		snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

char *const *podman_environment(void)
{
	static char *env[sizeof podman_environment_names / sizeof podman_environment_names[0]];
	static bool built;
	size_t n = 0;
	if (built)
		return env;
	built = true;
	for (size_t i = 0; podman_environment_names[i]; i++) {
		const char *v = getenv(podman_environment_names[i]);
		if (!v)
			continue;
		if (asprintf(&env[n], "%s=%s", podman_environment_names[i], v) < 0)
			abort();
		n++;
	}
	env[n] = NULL;
	return env;
}

/* A file this user may run: a directory has its x bits too, and exec
 * refuses it, as execvp passes over one in PATH. */
static bool runnable(const char *path)
{
	struct stat st;
	return access(path, X_OK) == 0 && stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

char *find_executable(const char *name)
{
	if (strchr(name, '/'))
		return runnable(name) ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *dir = path; *dir;) {
		size_t len = strcspn(dir, ":");
		char *candidate;
		if (asprintf(&candidate, "%.*s/%s", (int)(len ? len : 1), len ? dir : ".", name) < 0)
			abort();
		if (runnable(candidate))
			return candidate;
		free(candidate);
		dir += len + (dir[len] == ':');
	}
	return NULL;
}

const char podman_install_hint[] =
	"install podman (apt-get install podman runc uidmap) or name it with --podman PATH";

/* Whether the mode's execute bit for this user is set: the owner's, the
 * group's (the user's own or a supplementary one) or the others'. */
static bool exec_bit_for_me(const struct stat *st)
{
	if (st->st_uid == geteuid())
		return st->st_mode & S_IXUSR;
	gid_t groups[256];
	int n = getgroups(sizeof groups / sizeof *groups, groups);
	bool member = st->st_gid == getegid();
	for (int i = 0; i < n && !member; i++)
		member = groups[i] == st->st_gid;
	return st->st_mode & (member ? S_IXGRP : S_IXOTH);
}

void podman_start_error(struct error *err, const char *path, int errnum)
{
	if (errnum == EAGAIN || errnum == ENOMEM || errnum == EMFILE || errnum == ENFILE) {
		error_set(err, EXIT_REFUSED, "this user is short of processes, memory or open files: "
			"end some, or raise the limit (ulimit -u, ulimit -n), and try again",
			"cannot start podman %s: %s", path, strerror(errnum));
		return;
	}
	error_set(err, EXIT_REFUSED, podman_exec_hint(path, errnum), "cannot execute podman %s: %s",
		path, strerror(errnum));
}

const char *podman_exec_hint(const char *path, int exec_errno)
{
	/* Install podman only where there is nothing there to fix (attack
	 * helpers 157, 162 and 164). */
	struct stat st;
	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? podman_install_hint :
			"name a podman this user can reach with --podman PATH";
	if (S_ISDIR(st.st_mode))
		return "that is a directory: name the podman program itself with --podman PATH";
	if (!S_ISREG(st.st_mode))
		return "that is not a regular file: name the podman program with --podman PATH";
	switch (exec_errno) {
	case EACCES:
		/* Not one on a noexec mount, which has this user's bit (and
		 * access() refuses too); a bit for others only is not (review
		 * helpers 165 and 167). */
		return !exec_bit_for_me(&st) ?
			"make it executable for this user (chmod +x), or name another with --podman PATH" :
			"it has execute bits: see its #! interpreter, and whether its file system is "
			"mounted noexec; or name another with --podman PATH";
	case ENOENT: /* the file is there: what exec needed besides it is not */
		return "the file is there, but a #! interpreter or a loader it needs is not: name the "
		       "podman program with --podman PATH";
	case ENOEXEC:
		return "it is no program this machine runs (not this machine's binary, nor a script "
		       "with a #! line): name the podman program with --podman PATH";
	default:
		return "see why above, or name another with --podman PATH";
	}
}

char *podman_executable(const char *named, struct error *err)
{
	char *podman = find_executable(named);
	if (podman)
		return podman;
	if (!strchr(named, '/')) {
		error_set(err, EXIT_REFUSED, podman_install_hint,
			"podman executable '%s' not found in PATH", named);
		return NULL;
	}
	if (access(named, F_OK) == 0) {
		error_set(err, EXIT_REFUSED, podman_exec_hint(named, EACCES),
			"cannot execute podman %s: %s", named, strerror(EACCES));
	} else if (errno == EACCES) {
		/* A directory on the way that this user may not search. */
		error_set(err, EXIT_REFUSED, "let this user search each directory on its path "
			"(chmod o+x), or name another with --podman PATH",
			"cannot reach podman %s: a directory on its path is closed to this user", named);
	} else if (errno != ENOENT && errno != ENOTDIR) {
		int reach_errno = errno; /* a loop of symbolic links, a name too long */
		error_set(err, EXIT_REFUSED, "name a podman this user can reach with --podman PATH",
			"cannot reach podman %s: %s", named, strerror(reach_errno));
	} else {
		error_set(err, EXIT_REFUSED, podman_install_hint, "podman executable '%s' not found",
			named);
	}
	return NULL;
}

/* Said to the user who lacks the image, in their own storage: setup.sh
 * image, run as that user, builds or copies it there (with sudo for the
 * steps that need root). */
const char image_hint[] =
	"put it in this user's podman storage with './setup.sh image' in the sage-sandbox "
	"source tree (as this user; it uses sudo where it must), or pull one and pass --image";
/* Whether word is one shell word as it is, needing no quotes: no '='
 * (a command's first word NAME=x is an assignment; zsh expands =word). */
static bool shell_safe(const char *word)
{
	return *word && !word[strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					   "0123456789_@%+:,./-")];
}

/* word as one shell word: as it is where it is safe, else in single
 * quotes (each ' as '\''); false where it does not fit in out. */
static bool shell_word(char *out, size_t size, const char *word)
{
	size_t n = 0;
	if (shell_safe(word))
		return (size_t)snprintf(out, size, "%s", word) < size;
	if (size < 3)
		return false;
	out[n++] = '\'';
	for (; *word; word++) {
		const char *piece = *word == '\'' ? "'\\''" : word;
		size_t len = *word == '\'' ? 4 : 1;
		if (n + len + 2 > size)
			return false;
		memcpy(out + n, piece, len);
		n += len;
	}
	out[n++] = '\'';
	out[n] = '\0';
	return true;
}

void podman_try_hint(char *out, size_t size, const char *podman, const char *image,
		const char *command, const char *purpose)
{
	/* The command, to paste into a shell: its words quoted where they
	 * need it (review helper 158), and named in words where a path is
	 * too long to show whole. --pull=never as the sandbox runs it: for a
	 * missing image, pasted, it says so, where podman's default would
	 * pull one from a registry (attack helper 162). */
	char quoted_podman[256], quoted_image[256];
	if (shell_safe(podman) && shell_safe(image) &&
			(size_t)snprintf(out, size, "run '%s run --rm --pull=never %s %s' as this user %s",
				podman, image, command, purpose) < size)
		return;
	if (shell_word(quoted_podman, sizeof quoted_podman, podman) &&
			shell_word(quoted_image, sizeof quoted_image, image) &&
			(size_t)snprintf(out, size, "%s, run as this user: %s run --rm --pull=never %s %s",
				purpose, quoted_podman, quoted_image, command) < size)
		return;
	snprintf(out, size, "%s, run as this user: PODMAN run --rm --pull=never IMAGE %s (PODMAN "
		"and IMAGE being the --podman and --image in use)", purpose, command);
}

void podman_silent_hint(char *out, size_t size, const char *podman, const char *image)
{
	podman_try_hint(out, size, podman, image, "true", "to see why");
}
const char as_root_hint[] =
	"run it as the account that has the image: sudo -iu sage-sandbox sage-sandbox status "
	"(the account setup.sh made), or as your own user after './setup.sh image'";

void podman_works_hint(char *out, size_t size, const char *podman, const char *subcommand,
		const char *operand)
{
	static const char lead[] = "check that podman works for this user";
	char quoted_operand[256], arguments[512];
	if (!operand) {
		podman_command_hint(out, size, lead, podman, subcommand);
		return;
	}
	if (shell_word(quoted_operand, sizeof quoted_operand, operand) &&
	    (size_t)snprintf(arguments, sizeof arguments, "%s %s", subcommand, quoted_operand) <
		    sizeof arguments) {
		if (podman_command_hint(out, size, lead, podman, arguments))
			return;
	}
	snprintf(out, size, "%s: PODMAN %s IMAGE (PODMAN being the --podman in use, IMAGE the "
		"--image)", lead, subcommand);
}

bool podman_command_hint(char *out, size_t size, const char *lead, const char *podman,
		const char *arguments)
{
	char quoted[256];
	if (shell_word(quoted, sizeof quoted, podman) &&
	    (size_t)snprintf(out, size, "%s: %s %s", lead, quoted, arguments) < size)
		return true;
	snprintf(out, size, "%s: PODMAN %s (PODMAN being the --podman in use)", lead, arguments);
	return false;
}

const char *podman_failed_hint(const char *said, const char *probe)
{
	/* Podman asks for it where it cannot join its pause process nor any
	 * conmon it recorded: mostly where they are all gone (killed, or
	 * ended by a restart that kept the runtime directory, which is
	 * /tmp/podman-run-UID where XDG_RUNTIME_DIR is unset); every podman
	 * command then fails until the user resets it. */
	if (said && strstr(said, "podman system migrate"))
		return "run 'podman system migrate' as this user, as podman asks (its state names "
		       "processes that are gone where they were killed, or a restart kept its "
		       "runtime directory)";
	return probe;
}

/* "BOOT-ID:PID:START": who started a container. A process with that pid and
 * start time (in clock ticks since this boot) is its owner; a container
 * whose owner is gone is a stray of a killed sage-sandbox. */
void process_identity(pid_t pid, char *out, size_t size)
{
	struct buffer boot = {0}, stat = {0};
	char path[64];
	unsigned long long start = 0;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_file(path, 4096, &stat) == 0) {
		/* Field 22, counted after the command name, which may hold spaces. */
		const char *p = strrchr(stat.data, ')');
		for (int field = 2; p && field < 22; field++)
			p = strchr(p + 1, ' ');
		if (p)
			start = strtoull(p + 1, NULL, 10);
	}
	read_file("/proc/sys/kernel/random/boot_id", 64, &boot);
	snprintf(out, size, "%.*s:%d:%llu", boot.data ? (int)strcspn(boot.data, "\n") : 0,
		boot.data ? boot.data : "", (int)pid, start);
	buffer_free(&boot);
	buffer_free(&stat);
}

void container_name(char *name, size_t size)
{
	unsigned char random[8];
	if (getrandom(random, sizeof random, 0) != sizeof random)
		abort();
	snprintf(name, size, "sage-sandbox-%02x%02x%02x%02x%02x%02x%02x%02x", random[0],
		random[1], random[2], random[3], random[4], random[5], random[6], random[7]);
}

unsigned long sandbox_uid_max(const struct podman_host *host)
{
	unsigned long top = host->id_count ? host->id_count - 1 : 0;
	return top < SANDBOX_UID_MAX ? top : SANDBOX_UID_MAX;
}

/* The start of every container's `podman run`: what finds it, names it and
 * keeps it away from registries and networks. */
static void container_args(struct argv_builder *a, const char *podman, const char *name,
		const char *owner)
{
	arg_add(a, "%s", podman);
	/* Podman's warnings (e.g. "/ is not a shared mount") would otherwise
	 * be mixed into its error messages. */
	arg_add(a, "--log-level=error");
	arg_add(a, "run");
	/* The container and its writable layer go away with the run, removed
	 * by conmon's exit command even if the podman client is gone. */
	arg_add(a, "--rm");
	/* A name to stop it by (killing the podman client does not stop it),
	 * a label to find strays by, and their owner to tell strays from the
	 * containers of runs still going (sage-sandbox cleanup). */
	arg_add(a, "--name=%s", name);
	arg_add(a, "--label=%s", CONTAINER_LABEL);
	arg_add(a, "--label=%s=%s", OWNER_LABEL, owner);
	/* Never fetch an image during a run: what runs is what the user
	 * built or pulled, not whatever a registry serves today. A missing
	 * image is podman's refusal, turned into ours (podman_said_no_image),
	 * with no `podman image exists` before every run. */
	arg_add(a, "--pull=%s", SANDBOX_PULL);
	/* No network interface but loopback: no exfiltration, no downloads,
	 * no attacks on the host's or the LAN's services. */
	arg_add(a, "--network=%s", SANDBOX_NETWORK);
}

/* What a run could otherwise read of the host through the container's own
 * /proc and /sys, which podman shows unmasked: each tells this host, its
 * boot or its other tenants apart, and Sage needs none of it. Covered by
 * /dev/null (a file) or an empty read-only directory; self-test's
 * host_masked row checks them. Left readable, because programs need them:
 * cpuinfo (CPU features), meminfo (sizes), version (uname(2) says the same),
 * mountinfo (podman has no way to hide its overlay's options: the
 * account's storage path shows in them). */
const char *const masked_host_paths[] = {
	"/proc/cmdline",      /* the host kernel's boot options */
	"/proc/sys/kernel/random/boot_id", /* this boot of this host, by name */
	"/proc/uptime",       /* when the host booted */
	"/proc/stat",         /* its boot time (btime) and every CPU's counters */
	"/proc/loadavg",      /* other tenants' load, and the host's last pid */
	"/proc/pressure",     /* other tenants' CPU, memory and I/O stalls */
	"/proc/interrupts",   /* every device's interrupts, as they happen */
	"/proc/softirqs",
	"/proc/vmstat",       /* the host's memory activity */
	"/proc/zoneinfo",
	"/proc/buddyinfo",
	"/proc/diskstats",    /* the host's disks and their traffic */
	"/proc/partitions",
	"/proc/swaps",
	"/sys/block",
	"/proc/key-users",    /* keys held by every uid of the host */
	"/proc/kallsyms",     /* the kernel's symbols */
	"/proc/iomem",        /* the machine's hardware layout */
	"/proc/ioports",
	NULL,
};

/* Where podman makes no cgroup of the container's (rootless on cgroup v1:
 * no namespace of its own, no controller), its /sys/fs/cgroup is the
 * host's tree: the root's cpuacct.usage_percpu and memory.usage_in_bytes
 * count every process of the host, so a call would see the CPU and memory
 * of the calls beside it (what masking /proc/stat hides), and the
 * account's delegated cpu groups by name. Where podman makes one (cgroup
 * v2's namespace, or a controller), the container sees its own, which
 * self-test reads for its limits. */
bool cgroup_tree_masked(const struct podman_host *host)
{
	return strcmp(host->cgroups, "v2") != 0 && !host->controller[CONTROLLER_MEMORY] &&
		!host->controller[CONTROLLER_CPU] && !host->controller[CONTROLLER_PIDS];
}

/* Nothing of the image writable; a capped /tmp and /dev/shm the only
 * writable places. */
static void read_only_root_args(struct argv_builder *a)
{
	/* The image cannot be modified: no trojaned sage for the next run.
	 * Without --read-only-tmpfs=false podman would also mount writable,
	 * uncapped tmpfs on /run, /var/tmp and /dev/shm. */
	arg_add(a, "--read-only");
	arg_add(a, "--read-only-tmpfs=false");
	/* The code's writable place, in memory, capped in bytes and in inodes
	 * (settings.h), no setuid or devices; empty (notmpcopyup: podman
	 * would copy the image's own /tmp into it, and a directory of the
	 * image's root there is one a container that serves several calls
	 * could not put back). Podman 4.3 knows no nr_inodes
	 * option, but passes tmpfs-size's value to the kernel unparsed: the
	 * two travel as one quoted field, as devpts's do below. self-test's
	 * tmp_size and tmp_inodes rows check what the kernel got. */
	arg_add(a, "--mount=type=tmpfs,destination=/tmp,nosuid,nodev,tmpfs-mode=1777,notmpcopyup,"
		"\"tmpfs-size=%llu,nr_inodes=%d\"", TMPFS_BYTES, TMPFS_INODES);
	arg_add(a, "--workdir=/tmp");
	/* A /dev/shm as a fresh container's, which --ipc=none leaves out:
	 * without it multiprocessing's locks, queues and pools fail where a
	 * fresh Sage runs them. Capped like /tmp (settings.h), and noexec: a
	 * second writable place is no second place to run a program from
	 * (/tmp is exec, as Sage's compiled caches need; nothing needs it
	 * here). Emptied between calls (launcher/calls.py); self-test's
	 * shm_size row checks what the kernel got. */
	arg_add(a, "--mount=type=tmpfs,destination=/dev/shm,nosuid,nodev,noexec,tmpfs-mode=1777,"
		"notmpcopyup,\"tmpfs-size=%llu,nr_inodes=%d\"", SHM_BYTES, SHM_INODES);
}

bool podman_warms(const struct config *cfg, long idle_seconds, const char *mode, bool cold)
{
	bool serves_many = strcmp(mode, "once") != 0;
	return !cold && (serves_many || idle_seconds > 0) && warm_up_room(cfg) > 0;
}

/* Long: one flag a line, each with the attack it closes beside it; split,
 * the reasoning would be read in pieces. */
void podman_run_args(struct argv_builder *a, const struct config *cfg,
		const struct podman_host *host, const struct sage_image *image, const char *podman,
		const char *name, const char *owner, unsigned long uid, long idle_seconds,
		const char *mode, bool cold)
{
	bool serves_many = strcmp(mode, "once") != 0;
	long cpus = cfg->number[SET_CPUS];
	struct rlimit_value rlimits[RLIMIT_COUNT];

	sandbox_rlimits(cfg, rlimits);
	container_args(a, podman, name, owner);
	/* -i feeds the code on stdin, so it is never on a command line or a
	 * host mount. */
	arg_add(a, "-i");
	/* No /etc/hosts from the host: nothing about the host's names. */
	arg_add(a, "--no-hosts");
	/* A private IPC namespace without podman's /dev/shm, whose inodes are
	 * uncapped: read_only_root_args mounts a capped one of its own (SysV
	 * IPC calls are refused anyway: derive-seccomp.py). */
	arg_add(a, "--ipc=none");
	/* --ipc=none still mounts a writable /dev/mqueue; cover it with a
	 * read-only empty directory. And what of the host the container's
	 * /proc and /sys would show (masked_host_paths). */
	arg_add(a, "--security-opt=mask=/dev/mqueue");
	struct buffer masks = {0};
	for (size_t i = 0; masked_host_paths[i]; i++) {
		if (i)
			buffer_append(&masks, ":", 1);
		buffer_append(&masks, masked_host_paths[i], strlen(masked_host_paths[i]));
	}
	if (cgroup_tree_masked(host))
		buffer_append(&masks, ":" MASKED_CGROUP_TREE, strlen(":" MASKED_CGROUP_TREE));
	arg_add(a, "--security-opt=mask=%s", masks.data);
	buffer_free(&masks);
	read_only_root_args(a);
	/* A devpts instance of the run's own, capped: with podman's default
	 * one, four processes opening /dev/ptmx in a loop took 3,071 of the
	 * host's 4,096 ptys and `podman run -t` failed for everyone. Without
	 * ptmxmode the kernel makes pts/ptmx mode 000 and Sage's pexpect
	 * interfaces fail. Podman 4.3 accepts only uid, gid, mode and max here
	 * and passes max's value through unparsed, so the two options travel
	 * as one quoted field; newer podman accepts that too. self-test's
	 * pty_cap row checks what the kernel got. */
	arg_add(a, "--mount=type=devpts,destination=/dev/pts,\"max=%d,ptmxmode=0666\"", PTY_MAX);
	/* What Sage prints is returned, not also kept in a log on the host. */
	arg_add(a, "--log-driver=none");
	/* Sage's state, and what `sage -python` would point into it, in the
	 * writable /tmp. The launcher runs under Sage's Python directly: the
	 * `sage` shell wrapper costs 70-100 ms a run and only sets variables. */
	arg_add(a, "--env=HOME=/tmp/sage-home");
	arg_add(a, "--env=DOT_SAGE=/tmp/dot-sage");
	arg_add(a, "--env=MPLCONFIGDIR=/tmp/dot-sage/matplotlib");
	arg_add(a, "--env=MAXIMA_USERDIR=/tmp/dot-sage/maxima");
	/* Where the code leaves files for the host (run --output-dir): made
	 * empty by the launcher; sent back over the launcher's own stream,
	 * never through a mount. */
	arg_add(a, "--env=SAGE_SANDBOX_OUT=/tmp/sage-sandbox-out");
	/* One thread each: the CPU and process limits mean what they say and
	 * BLAS does not spawn a thread per host core. */
	arg_add(a, "--env=SAGE_NUM_THREADS=1");
	arg_add(a, "--env=OPENBLAS_NUM_THREADS=1");
	arg_add(a, "--env=OMP_NUM_THREADS=1");
	arg_add(a, "--env=MKL_NUM_THREADS=1");
	/* The PATH Sage's own `sage` script gives its programs (gp, maxima,
	 * gap live in the Sage tree of a source-built image), read from the
	 * image once (image.c): the launcher starts under Sage's Python
	 * directly, without the script. */
	if (image->path[0])
		arg_add(a, "--env=PATH=%s", image->path);
	/* No user site-packages to shadow Sage's modules. */
	arg_add(a, "--env=PYTHONNOUSERSITE=1");
	/* Printed progress reaches the caller as it happens, not at exit. */
	arg_add(a, "--env=PYTHONUNBUFFERED=1");
	/* The locale Python starts in, as under `sage FILE`, whose wrapper
	 * hands the Python that runs the file LC_CTYPE=C.UTF-8: it starts in
	 * that locale, not in Python's UTF-8 mode (sys.flags.utf8_mode 0,
	 * locale.getpreferredencoding() "UTF-8"). Started in the image's C
	 * locale, Python coerces it to the same and turns UTF-8 mode on too.
	 * An image without that locale starts in C, as before. */
	arg_add(a, "--env=LC_CTYPE=C.UTF-8");
	/* One string hash seed in every container, cold or warm: the order a
	 * set of strings prints in is then
	 * the same in a cold run and a warm call, first or later, and --seed
	 * repeats it. A fresh Python draws its own, and only at its start, so
	 * a warm template's calls could have no other: one fixed value is
	 * what makes cold and warm agree. The launcher takes it out of the
	 * environment before Sage's import; the code and its subprocesses see
	 * what a fresh Sage's see. (Any value but 0, which would turn the
	 * randomisation off and show in sys.flags.hash_randomization.) */
	arg_add(a, "--env=PYTHONHASHSEED=1");
	/* PARI's stack within the memory limit (see launcher.py). */
	arg_add(a, "--env=SAGE_SANDBOX_PARI_SIZEMAX=%llu",
		(unsigned long long)rlimits[RL_DATA].value / 4);
	/* Not root inside, so a container escape starts without even the
	 * user namespace's root; and a uid of this sandbox's own. Rootless
	 * podman maps container uid N to the host uid subuid_start + N - 1, and
	 * RLIMIT_NPROC counts processes per host uid: with one shared uid, a
	 * run held at its pids limit made every concurrent run of the account
	 * fail to fork. The image's files stay owned by root; HOME and all
	 * that Sage writes are in /tmp. (--userns=auto would separate them as
	 * well, but chowns a copy of the whole image for every new range:
	 * 30-50 s here.) */
	arg_add(a, "--user=%lu:%lu", uid, uid);
	/* The image's user's group, as a supplementary group: images keep Sage
	 * under that user's home (the official one: /home/sage, mode 0750 in
	 * Sage 10.9), which the run's own uid could not otherwise reach. It
	 * opens nothing writable (the root is read-only) and changes no uid,
	 * so the per-uid process limit still keeps runs apart. Never group 0:
	 * an image whose user is root gets no root group. */
	if (image->gid > 0)
		arg_add(a, "--group-add=%ld", image->gid);
	/* No capabilities, and no way to regain any through setuid files. */
	arg_add(a, "--cap-drop=all");
	arg_add(a, "--security-opt=no-new-privileges");
	/* Our seccomp profile, on fd 3 (see derive-seccomp.py): no new
	 * namespaces, mounts, keyrings, ptrace, bpf, perf or userfaultfd, the
	 * kernel interfaces most container escapes go through. */
	arg_add(a, "--security-opt=seccomp=/proc/self/fd/3");
	/* Resource limits against fork bombs, memory exhaustion and CPU
	 * hogging. The cgroup ones only where podman can apply them (elsewhere
	 * it drops them and prints a warning); the rlimits everywhere, as the
	 * line of defence that always holds. */
	if (host->controller[CONTROLLER_PIDS])
		arg_add(a, "--pids-limit=%ld", cfg->number[SET_PIDS_LIMIT]);
	/* A container that waits for its calls (a warm one, or one that
	 * serves many) is granted a warm-up (launcher/warm.py); a cold run's,
	 * started for a call already there, would only make that call wait.
	 * Where a memory cgroup holds the container, the launcher's warm
	 * pages are in it too: it gets that much more, and a call the room a
	 * cold one has. */
	bool warms = podman_warms(cfg, idle_seconds, mode, cold);
	if (host->controller[CONTROLLER_MEMORY])
		arg_add(a, "--memory=%llu", (unsigned long long)config_memory_bytes(cfg) +
			(warms ? WARM_UP_RESIDENT : 0));
	if (host->controller[CONTROLLER_CPU])
		arg_add(a, "--cpus=%ld.%03ld", cpus / 1000, cpus % 1000);
	/* The launcher imports Sage under the container's CPU rlimit: 1-2 s
	 * of CPU on a slow machine, which --timeout 10 x --cpus 0.2 would not
	 * leave it (the launcher was killed before the code's end, and the
	 * run's CPU verdict lost). The container gets LAUNCHER_CPU_SECONDS
	 * more; the code's process gets exactly the setting, from the
	 * launcher (its L frame), and so does all it starts. */
	rlimits[RL_CPU].value += LAUNCHER_CPU_SECONDS;
	/* A session's Sage runs cell after cell, and a serial container's
	 * launcher forks a child for call after call: the launcher holds each
	 * cell to its seconds, each call's child gets its own rlimit, and this
	 * one bounds the launcher's and a session's whole life. */
	if (serves_many)
		rlimits[RL_CPU].value = SESSION_CPU_SECONDS;
	uint64_t room = warms ? warm_up_room(cfg) : 0;
	for (int i = 0; i < RLIMIT_COUNT; i++)
		if (!rlimits[i].by_launcher)
			arg_add(a, "--ulimit=%s=%llu:%llu", rlimits[i].name,
				(unsigned long long)rlimits[i].value,
				(unsigned long long)rlimits[i].value + (i == RL_DATA ? room : 0));
	/* No real-time scheduling, which runs ahead of every other process
	 * and outside a cpu group's quota (cpugroup.c): whatever the account's
	 * own limit (an audio group's may allow it). */
	arg_add(a, "--ulimit=rtprio=0:0");
	arg_add(a, "--env=SAGE_SANDBOX_RLIMIT_AS=%llu", (unsigned long long)rlimits[RL_AS].value);
	/* A backstop run by conmon: if sage-sandbox itself is killed before
	 * it can stop the container, the container still dies. A warm
	 * sandbox's clock starts when it does, not at its call: its wait in
	 * the pool (at most idle_seconds, then it is retired) is added. */
	arg_add(a, "--timeout=%ld", serves_many ? SESSION_MAX_SECONDS :
		idle_seconds + cfg->number[SET_TIMEOUT] + PODMAN_BACKSTOP_SECONDS);
	/* The launcher is the container's first process: no shell around it
	 * (it costs a fork and an exec, and buys nothing), under the Python
	 * that the image's Sage uses, found in the image (image.c), never a
	 * bare python3 that may be absent or another Python. The image's own
	 * entrypoint, WORKDIR and HOME play no part. It runs the code in a
	 * child of its own, so the code is never the namespace's init, whose
	 * signals the kernel would drop (see launcher.py). */
	arg_add(a, "--entrypoint=%s", image->python);
	arg_add(a, "--");
	arg_add(a, "%s", cfg->value[SET_IMAGE]);
	/* Tracebacks quote the user's own lines (see launcher.py), so the
	 * column marks Python 3.11 computes on the preparsed lines would
	 * point at the wrong characters. */
	arg_add(a, "-X");
	arg_add(a, "no_debug_ranges");
	arg_add(a, "-c");
	arg_add(a, "%s", embedded_launcher_bundle_py);
	/* What the container serves (launcher/calls.py): one call, calls one
	 * after another each as good as fresh, or a session's cells. */
	arg_add(a, "%s", mode);
}

void podman_probe_args(struct argv_builder *a, const struct config *cfg, const char *podman,
		const char *name, const char *owner, const char *script)
{
	/* Only the image's own programs run here, no code of anyone's; still
	 * nothing reaches the network or writes the image, and it holds no
	 * capability. */
	container_args(a, podman, name, owner);
	read_only_root_args(a);
	arg_add(a, "--cap-drop=all");
	arg_add(a, "--security-opt=no-new-privileges");
	arg_add(a, "--log-driver=none");
	arg_add(a, "--timeout=%d", IMAGE_PROBE_SECONDS + PODMAN_BACKSTOP_SECONDS);
	arg_add(a, "--env=HOME=/tmp/sage-home");
	arg_add(a, "--env=DOT_SAGE=/tmp/dot-sage");
	/* As the image's user (no --user): whose group the runs then get, and
	 * who can surely reach the image's Sage. The image's entrypoint (the
	 * official one wraps everything in `sage -sh -c`) is bypassed. */
	arg_add(a, "--entrypoint=/bin/sh");
	arg_add(a, "--");
	arg_add(a, "%s", cfg->value[SET_IMAGE]);
	arg_add(a, "-c");
	arg_add(a, "%s", script);
	arg_add(a, "sage-sandbox-probe");
	arg_add(a, "%s", cfg->value[SET_PYTHON]);
}

void podman_rm_args(struct argv_builder *a, const char *podman, const char *name)
{
	arg_add(a, "%s", podman);
	arg_add(a, "--log-level=error");
	arg_add(a, "rm");
	arg_add(a, "--force");
	arg_add(a, "--time=0");
	arg_add(a, "%s", name);
}

void podman_ps_args(struct argv_builder *a, const char *podman)
{
	arg_add(a, "%s", podman);
	arg_add(a, "ps");
	arg_add(a, "--all");
	arg_add(a, "--filter=label=%s", CONTAINER_LABEL);
	arg_add(a, "--format={{.Names}} {{index .Labels \"%s\"}}", OWNER_LABEL);
}

void podman_info_args(struct argv_builder *a, const char *podman)
{
	arg_add(a, "%s", podman);
	arg_add(a, "info");
	arg_add(a, "--format");
	arg_add(a, "%s",
		"{{.Host.Security.Rootless}}\n{{.Host.CgroupsVersion}}\n{{.Host.CgroupControllers}}\n"
		"{{.Host.OCIRuntime.Name}}\n{{.Store.GraphDriverName}}\n{{.Host.ServiceIsRemote}}\n"
		"{{range .Host.IDMappings.UIDMap}}{{.ContainerID}}:{{.HostID}}:{{.Size}} {{end}}\n"
		"{{range .Host.IDMappings.GIDMap}}{{.ContainerID}}:{{.HostID}}:{{.Size}} {{end}}\n"
		"{{.Store.GraphRoot}}");
}

static void parse_controllers(struct podman_host *host, const char *list)
{
	/* Go prints a []string as "[cpuset cpu io memory pids]". */
	char words[256];
	snprintf(words, sizeof words, "%s", list);
	for (char *word = strtok(words, "[] "); word; word = strtok(NULL, "[] "))
		for (int c = 0; c < CONTROLLER_COUNT; c++)
			if (strcmp(word, controller_names[c]) == 0)
				host->controller[c] = true;
}

/* Copies line number n (from 0) of text into out. */
static void nth_line(const char *text, int n, char *out, size_t size)
{
	const char *line = NULL;
	size_t len = 0;
	for (int i = 0; i <= n && (line = next_line(&text, &len)); i++)
		;
	snprintf(out, size, "%.*s", line ? (int)len : 0, line ? line : "");
}

void podman_info_parse(const char *said, int status, bool timed_out, const char *errors,
		struct podman_host *host)
{
	char rootless[16], controllers[256], remote[16];

	*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
	said = said ? said : "";
	nth_line(said, 0, rootless, sizeof rootless);
	if (timed_out) {
		snprintf(host->detail, sizeof host->detail, "podman info did not answer in time");
	} else if (status != 0) {
		size_t len;
		const char *why = last_line(errors ? errors : "", errors ? strlen(errors) : 0, &len);
		if (len)
			snprintf(host->detail, sizeof host->detail,
				"podman info exited with status %d: %.*s", status, (int)len, why);
		else
			snprintf(host->detail, sizeof host->detail,
				"podman info exited with status %d and said nothing", status);
	} else if (strcmp(rootless, "true") == 0) {
		host->rootless = ROOTLESS_TRUE;
	} else if (strcmp(rootless, "false") == 0) {
		host->rootless = ROOTLESS_FALSE;
	} else {
		snprintf(host->detail, sizeof host->detail,
			"podman info printed '%s', not true or false", rootless);
	}
	if (host->rootless == ROOTLESS_UNKNOWN)
		return;
	nth_line(said, 1, host->cgroups, sizeof host->cgroups);
	nth_line(said, 2, controllers, sizeof controllers);
	parse_controllers(host, controllers);
	nth_line(said, 3, host->runtime, sizeof host->runtime);
	nth_line(said, 4, host->storage_driver, sizeof host->storage_driver);
	nth_line(said, 5, remote, sizeof remote);
	host->remote = strcmp(remote, "true") == 0;
	nth_line(said, 8, host->graph_root, sizeof host->graph_root);
	/* "CONTAINER:HOST:SIZE ..." for uids, then gids. The container ids
	 * are 0..n-1, n the sum of the sizes; as uid and gid are the same
	 * number, the smaller of the two counts. */
	for (int line = 6; line <= 7; line++) {
		char ranges[512];
		unsigned long total = 0;
		nth_line(said, line, ranges, sizeof ranges);
		for (char *word = strtok(ranges, " "); word; word = strtok(NULL, " ")) {
			struct id_range r;
			if (sscanf(word, "%lu:%lu:%lu", &r.container, &r.host, &r.size) != 3)
				continue;
			total += r.size;
			if (line == 6 && host->uid_ranges < 4)
				host->uid_map[host->uid_ranges++] = r;
		}
		if (line == 6 || total < host->id_count)
			host->id_count = total;
	}
}

long host_uid_of(const struct podman_host *host, unsigned long uid)
{
	for (int i = 0; i < host->uid_ranges; i++) {
		const struct id_range *r = &host->uid_map[i];
		if (uid >= r->container && uid - r->container < r->size)
			return (long)(r->host + (uid - r->container));
	}
	return -1;
}

void podman_version_args(struct argv_builder *a, const char *podman)
{
	arg_add(a, "%s", podman);
	arg_add(a, "--version");
}

void podman_version_parse(const char *said, char *version, size_t size)
{
	const char *v = said ? strstr(said, "version ") : NULL;
	v = v ? v + strlen("version ") : said ? said : "";
	snprintf(version, size, "%.*s", (int)strcspn(v, "\n"), v);
}

void podman_image_digest_args(struct argv_builder *a, const char *podman, const char *image)
{
	arg_add(a, "%s", podman);
	arg_add(a, "image");
	arg_add(a, "inspect");
	arg_add(a, "--format={{.Digest}}");
	arg_add(a, "%s", image);
}

bool podman_said_no_entrypoint(const char *errors, const char *path)
{
	/* runc and crun, podman 4 and 5: exec: "X": "executable file not
	 * found in $PATH", "stat X: no such file or directory", "permission
	 * denied". */
	return errors && strstr(errors, path) && (strstr(errors, "executable file") ||
		strstr(errors, "no such file or directory") || strstr(errors, "permission denied") ||
		strstr(errors, "Permission denied"));
}

/* Whether podman said its OCI runtime's `start` step refused: podman 4.3
 * and 5 run it with the runtime's stderr their own, then say
 * "Error: `/usr/bin/runc start ID` failed: exit status 1", where runc's
 * own words (its init gone before the exec fifo opened, "container
 * process is already dead", among others) may be on a line before or
 * nowhere. Status 1 alone: a runtime killed (a signal, 137) may have let
 * the container's process go on before it died. */
static const char runtime_failed[] = "` failed: ";

static bool said_runtime_start_failed(const char *errors)
{
	static const char status_1[] = "exit status 1";
	for (const char *at = errors; (at = strstr(at, runtime_failed)); at++) {
		const char *status = at + sizeof runtime_failed - 1;
		char after = status[sizeof status_1 - 1];
		if (strncmp(status, status_1, sizeof status_1 - 1) != 0 ||
		    (after != '\n' && after != '\0'))
			continue;
		const char *open = at;
		while (open > errors && open[-1] != '`' && open[-1] != '\n')
			open--;
		if (open == errors || open[-1] != '`')
			continue;
		/* The command's second word from its end: "start", then the ID. */
		const char *id = memrchr(open, ' ', (size_t)(at - open));
		if (id && id - open >= 6 && memcmp(id - 6, " start", 6) == 0)
			return true;
	}
	return false;
}

bool podman_said_runtime_failed(const char *line, size_t len)
{
	return memmem(line, len, runtime_failed, sizeof runtime_failed - 1) != NULL;
}

bool podman_said_start_race(const char *errors)
{
	/* Podman 4.3 under concurrent starts (8 at once on 2 cores: 3 of 120
	 * runs here): its client lost the race with conmon for the attach
	 * socket, or runc's `start` found the container's init already gone
	 * (CI saw it fail with no word but its status, once in 8). The
	 * container is discarded either way, and the caller tries again only
	 * where no frame of the launcher came and no byte of stdin went: had
	 * the code begun in a failed start, nothing of it reaches the caller.
	 * And runc's init, dead before its preliminary setup (CI, 8
	 * containers starting at once under podman 5.4: "runc create failed:
	 * ... waiting for init preliminary setup: read init-p: connection
	 * reset by peer"): no process of the container ran. Other failures of
	 * `create` are not races, and are not tried again. */
	return errors && (strstr(errors, "failed to connect to container's attach socket") ||
		strstr(errors, "cannot start a container that has stopped") ||
		strstr(errors, "runc create failed: unable to start container process: "
			"waiting for init preliminary setup") ||
		said_runtime_start_failed(errors));
}

bool podman_said_no_image(const char *errors)
{
	/* podman 4: "Error: IMAGE: image not known"; older and newer wordings
	 * say "no such image". */
	return errors && (strstr(errors, "image not known") || strstr(errors, "no such image") ||
		strstr(errors, "No such image"));
}
