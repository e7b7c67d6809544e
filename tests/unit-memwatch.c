/* unit-memwatch.c: the memory watchdog's verdict on plain processes of this
 * uid (a session of their own), as TAP: fast, no podman. Processes that
 * fork, exit, linger as zombies and vanish while measured must add up to
 * the memory they hold, no more: a fork bomb of 48 Sage processes was
 * once stopped at 1 GiB while it held about 300 MiB. */
#include "memwatch.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define HELD_MIB 64
#define SLEEPERS 6
#define ZOMBIES 4
#define CHURN_KEPT 16

static int test_number, failures;

static void check(bool ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++test_number, what);
	if (!ok)
		failures++;
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void hold(size_t bytes)
{
	char *held = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (held == MAP_FAILED)
		_exit(1);
	memset(held, 1, bytes);
}

static void say_ready(int ready_fd)
{
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
}

/* Each of these runs in a session of its own, says "ready" on ready_fd
 * once all of it is there, and never returns. */

/* HELD_MIB written, shared by fork with SLEEPERS that wait, ZOMBIES that
 * exit at once and are never reaped, and a churn of children that live
 * 10 ms, reaped as they go. */
static void churn(int ready_fd)
{
	hold(HELD_MIB * MIB);
	for (int i = 0; i < SLEEPERS; i++)
		if (fork() == 0)
			for (;;)
				pause();
	for (int i = 0; i < ZOMBIES; i++)
		if (fork() == 0)
			_exit(0);
	say_ready(ready_fd);
	pid_t kept[CHURN_KEPT] = {0};
	for (unsigned n = 0;; n++) {
		pid_t *slot = &kept[n % CHURN_KEPT];
		if (*slot > 0)
			waitpid(*slot, NULL, 0);
		*slot = fork();
		if (*slot == 0) {
			usleep(10000);
			_exit(0);
		}
		usleep(5000);
	}
}

/* SLEEPERS children that wait, forked a look or more apart. */
static void fork_sleepers_apart(void)
{
	for (int i = 0; i < SLEEPERS; i++) {
		usleep(4 * MEMWATCH_INTERVAL_MS * 1000);
		if (fork() == 0)
			for (;;)
				pause();
	}
}

/* 4 x HELD_MIB written, then SLEEPERS children forked one by one, a look
 * or more apart, that share it and wait: 256 MiB held in all. Each walk
 * taken between two forks counts the share of the pages its process had
 * then, 256 MiB among the few of them, more than its share now. */
static void forks_one_by_one(int ready_fd)
{
	hold(4 * HELD_MIB * MIB);
	say_ready(ready_fd);
	fork_sleepers_apart();
	for (;;)
		pause();
}

static void *hold_and_wait(void *data)
{
	usleep(300000); /* the leader is gone by then */
	hold(2 * HELD_MIB * MIB);
	say_ready(*(int *)data);
	for (;;)
		pause();
	return NULL;
}

/* A thread holds twice HELD_MIB; the leader exits by itself (the raw exit
 * system call, as pthread_exit or ctypes can), a zombie with no memory to
 * see while the thread lives on. */
static void leader_gone(int ready_fd)
{
	static int fd;
	fd = ready_fd;
	pthread_t thread;
	if (pthread_create(&thread, NULL, hold_and_wait, &fd) != 0)
		_exit(1);
	syscall(SYS_exit, 0);
}

/* ZOMBIES children that open 300 descriptors each (600 MiB as charged),
 * in less CPU time than a clock tick, and keep them. */
static void quick_descriptors(int ready_fd)
{
	for (int i = 0; i < ZOMBIES; i++)
		if (fork() == 0) {
			usleep(200000);
			for (int d = 0; d < 300; d++)
				open("/dev/null", O_RDONLY);
			for (;;)
				pause();
		}
	say_ready(ready_fd);
	for (;;)
		pause();
}

/* ZOMBIES children with 200 descriptors open each (400 MiB as charged),
 * then, once they exited and while nobody reaps them, 600 of the
 * leader's own (300 MiB): a zombie holds no descriptor. */
static void zombies_then_descriptors(int ready_fd)
{
	for (int i = 0; i < ZOMBIES; i++)
		if (fork() == 0) {
			for (int d = 0; d < 200; d++)
				open("/dev/null", O_RDONLY);
			usleep(500000);
			_exit(0);
		}
	say_ready(ready_fd);
	usleep(1000000);
	for (int d = 0; d < 600; d++)
		open("/dev/null", O_RDONLY);
	for (;;)
		pause();
}

/* forks_one_by_one's 256 MiB and SLEEPERS, then a chain that never
 * stops: a process that forks the next and exits every 2 ms, each born
 * after the look that listed its parent, as a fork loop of Sage
 * processes is under a freeze. The leader reaps them (SIGCHLD ignored,
 * a subreaper). Each arrival lowers the sharers' PSS: a walk from before
 * it is a bound, not a measure. */
static void forks_then_a_chain(int ready_fd)
{
	hold(4 * HELD_MIB * MIB);
	signal(SIGCHLD, SIG_IGN);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	say_ready(ready_fd);
	fork_sleepers_apart();
	if (fork() == 0) {
		/* No descriptors: links the freeze holds between their fork
		 * and their exit (20 at a time, seen) must not be charged
		 * past the limit for them. */
		for (int fd = 0; fd < 64; fd++)
			close(fd);
		for (;;) {
			usleep(2000);
			if (fork() > 0)
				_exit(0);
		}
	}
	for (;;)
		pause();
}

/* Looks at what make makes every MEMWATCH_INTERVAL_MS for seconds, as
 * the sandbox does; true if the watchdog ever found it past limit_mib.
 * The largest total it reported goes to *most. */
/* make() in a session of its own, once it says it is ready; its pid, or
 * -1 (nothing left running) if it never did. */
static pid_t start(void (*make)(int ready_fd))
{
	int ready[2];
	if (pipe(ready) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(ready[0]);
		setsid();
		make(ready[1]);
	}
	close(ready[1]);
	char c;
	bool started = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	if (!started) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static void end(pid_t pid)
{
	kill(-pid, SIGKILL);
	kill(-pid, SIGCONT);
	waitpid(pid, NULL, 0);
}

static int64_t longest_freeze_ms; /* of the last watch() */

static bool watch(void (*make)(int ready_fd), uint64_t limit_mib, int seconds, uint64_t *most)
{
	*most = 0;
	longest_freeze_ms = 0;
	int64_t frozen_since = 0;
	pid_t pid = start(make);
	if (pid < 0)
		return false;
	struct memwatch_options opt = {.uid = getuid(), .session = pid, .limit = limit_mib * MIB};
	struct memwatch *w = memwatch_new(&opt);
	bool over = false;
	for (int64_t end_ms = now_ms() + seconds * 1000LL; !over && now_ms() < end_ms;) {
		struct memwatch_reading r;
		over = memwatch_look(w, now_ms(), &r) == MEMWATCH_OVER;
		if (r.total > *most)
			*most = r.total;
		if (!r.frozen)
			frozen_since = 0;
		else if (!frozen_since)
			frozen_since = now_ms();
		else if (now_ms() - frozen_since > longest_freeze_ms)
			longest_freeze_ms = now_ms() - frozen_since;
		usleep(MEMWATCH_INTERVAL_MS * 1000);
	}
	memwatch_free(w);
	end(pid);
	return over;
}

/* ---- the CPU throttle ---------------------------------------------------- */

static void spin(int ready_fd)
{
	say_ready(ready_fd);
	for (volatile unsigned long i = 0;; i++)
		;
}

static void *spin_thread(void *data)
{
	for (volatile unsigned long i = 0;; i++)
		;
	return data;
}

/* 8 busy threads: a BLAS-threaded computation, which the freeze reaches
 * thread by thread. */
static void spin_threads(int ready_fd)
{
	pthread_t t;
	for (int i = 0; i < 7; i++)
		pthread_create(&t, NULL, spin_thread, NULL);
	spin(ready_fd);
}

/* A parent that forks short workers and reaps them: their time comes
 * back in its reaped children's, never as a process seen twice. */
static void fork_workers(int ready_fd)
{
	say_ready(ready_fd);
	for (;;) {
		pid_t pid = fork();
		if (pid == 0) {
			struct timespec t0, t;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
			do
				clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
			while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 30000000L);
			_exit(0);
		}
		waitpid(pid, NULL, 0);
	}
}

/* CPU time spent by this thread since t0, in ns. */
static int64_t thread_cpu_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + t.tv_nsec - t0->tv_nsec;
}

/* Busy for ns of CPU time, then adds it to *spent (shared by fork). */
static void busy_then_exit(int64_t ns, volatile int64_t *spent)
{
	struct timespec t0;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	while (thread_cpu_since(&t0) < ns)
		;
	__atomic_add_fetch(spent, thread_cpu_since(&t0), __ATOMIC_RELAXED);
	_exit(0);
}

/* The CPU time every worker below spent, in ns: theirs is freed with them,
 * unreaped, and no /proc shows it. */
static volatile int64_t *workers_spent;

/* A parent that ignores SIGCHLD (its children are freed as they exit,
 * their time added to no one's) and forks workers of 5 ms each, every
 * 3 ms: each ends between two looks, never seen by stat. */
static void autoreaped_short_workers(int ready_fd)
{
	signal(SIGCHLD, SIG_IGN);
	say_ready(ready_fd);
	for (;;) {
		if (fork() == 0)
			busy_then_exit(5000000, workers_spent);
		usleep(3000);
	}
}

/* The same with SA_NOCLDWAIT, which no /proc file shows: found by the
 * time its children take away. */
static void nocldwait_short_workers(int ready_fd)
{
	struct sigaction sa = {.sa_handler = SIG_DFL, .sa_flags = SA_NOCLDWAIT};
	sigaction(SIGCHLD, &sa, NULL);
	say_ready(ready_fd);
	for (;;) {
		if (fork() == 0)
			busy_then_exit(5000000, workers_spent);
		usleep(3000);
	}
}

/* Parents that each take SA_NOCLDWAIT, fork workers of 5 ms every 3 ms
 * for 30 ms and exit, one after another: each is gone within a look or
 * two, before what its children took away can show, and its parent gets
 * back only its own time. Only the kernel's count (memwatch_count) sees
 * the workers. It stops itself first, alone, until the count is opened
 * on it (count_from_start). */
static void short_nocldwait_parents(int ready_fd)
{
	say_ready(ready_fd);
	raise(SIGSTOP);
	for (;;) {
		pid_t parent = fork();
		if (parent == 0) {
			struct sigaction sa = {.sa_handler = SIG_DFL, .sa_flags = SA_NOCLDWAIT};
			sigaction(SIGCHLD, &sa, NULL);
			for (int i = 0; i < 10; i++) {
				if (fork() == 0)
					busy_then_exit(5000000, workers_spent);
				usleep(3000);
			}
			_exit(0);
		}
		waitpid(parent, NULL, 0);
	}
}

/* The same parent with workers of 300 ms, one after another: each is
 * seen at several looks, and its time vanishes at its end. */
static void autoreaped_long_workers(int ready_fd)
{
	signal(SIGCHLD, SIG_IGN);
	say_ready(ready_fd);
	for (;;) {
		int done[2];
		if (pipe(done) < 0)
			_exit(1);
		if (fork() == 0) {
			close(done[0]);
			busy_then_exit(300000000, workers_spent);
		}
		close(done[1]);
		char c;
		while (read(done[0], &c, 1) > 0)
			;
		close(done[0]);
	}
}

/* An honest shell: `sh -c 'spin 1.5 s; true'` in a loop. The spinner and
 * its parent exit between the same two looks; its time reaches the loop's
 * process through the parent, once. */
static void nested_exits(int ready_fd)
{
	say_ready(ready_fd);
	for (;;) {
		pid_t shell = fork();
		if (shell == 0) {
			pid_t spinner = fork();
			if (spinner == 0)
				busy_then_exit(1500000000, workers_spent);
			waitpid(spinner, NULL, 0);
			_exit(0);
		}
		waitpid(shell, NULL, 0);
	}
}

/* An honest one: a worker of 2 ms every 100 ms, freed unreaped. */
static void autoreaped_light_workers(int ready_fd)
{
	signal(SIGCHLD, SIG_IGN);
	say_ready(ready_fd);
	for (;;) {
		if (fork() == 0)
			busy_then_exit(2000000, workers_spent);
		usleep(100000);
	}
}

/* One link of a chain: busy for 20 ms, forks the next, exits. */
static void chain_link(void)
{
	for (;;) {
		struct timespec t0;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		while (thread_cpu_since(&t0) < 20000000)
			;
		__atomic_add_fetch(workers_spent, thread_cpu_since(&t0), __ATOMIC_RELAXED);
		if (fork() != 0)
			_exit(0);
	}
}

/* An honest one: two chains of processes that each work 20 ms, fork the
 * next and exit (a double fork), under a subreaper that reaps them as
 * they come, as the launcher does, the namespace's init. Each holds
 * 512 MiB, as a forked Sage holds its address space: its fork and exit
 * take milliseconds of the kernel's, which its reaper's time shows. (The
 * Sage chain of tests/030-limits.bats is the one that needs freeze()'s
 * second listing; this one passes without it.) */
static void double_fork_chains(int ready_fd)
{
	hold(512u << 20);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	say_ready(ready_fd);
	for (int chain = 0; chain < 2; chain++)
		if (fork() == 0)
			chain_link();
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		usleep(10000);
	}
}

struct cpu_watch {
	pid_t pid;
	struct memwatch *w;
};

/* The longest time between two looks of the last look_for(): what the
 * watchdog's bounds allow on each core, on a host that delays the looks. */
static int64_t longest_gap_ms;

/* Looks at w for ms; counts the looks that found it throttled; the
 * verdict, or MEMWATCH_OK. continuer != 0: that process (< 0: that
 * process group) is sent SIGCONT every 10 ms meanwhile, as a process that
 * continues itself would be. */
static enum memwatch_verdict look_for(struct memwatch *w, int ms, pid_t continuer,
		int *throttled, uint64_t *cpu_ms)
{
	enum memwatch_verdict v = MEMWATCH_OK;
	int64_t next = 0, last = 0;
	*throttled = 0;
	longest_gap_ms = 0;
	for (int64_t stop = now_ms() + ms; now_ms() < stop && v == MEMWATCH_OK;) {
		if (now_ms() >= next) {
			struct memwatch_reading r;
			if (last && now_ms() - last > longest_gap_ms)
				longest_gap_ms = now_ms() - last;
			last = now_ms();
			v = memwatch_look(w, now_ms(), &r);
			*throttled += r.throttled;
			*cpu_ms = r.cpu_ms;
			next = now_ms() + memwatch_next_look_ms();
		}
		if (continuer != 0)
			kill(continuer, SIGCONT);
		usleep(10000);
	}
	return v;
}

/* short_nocldwait_parents, stopped alone: the kernel's count opened on
 * it, then continued. (It waited 200 ms instead, and on a loaded host
 * the first look came later, found its workers, and opened no count.) */
static void count_from_start(pid_t pid, struct memwatch *w)
{
	int status;
	if (pid <= 0)
		return; /* never started: its case fails on what it finds */
	waitpid(pid, &status, WUNTRACED);
	memwatch_count(w);
	kill(pid, SIGCONT);
}

/* A case that needs the kernel's count, where the kernel refuses it. */
static void skip_without_count(void)
{
	printf("ok %d # SKIP the kernel does not let this account count its CPU time "
		"(perf_event_paranoid)\n", ++test_number);
}

/* Workers whose time no /proc shows: the sampled account sees them. */
static void autoreaped(void)
{
	workers_spent = mmap(NULL, sizeof *workers_spent, PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (workers_spent == MAP_FAILED)
		abort();
	struct memwatch_options opt = {.uid = getuid(), .limit = 1ull << 40, .cpus_milli = 250};
	struct memwatch_options one_core = {.uid = getuid(), .limit = 1ull << 40, .cpus_milli = 1000};
	int throttled;
	uint64_t cpu_ms;
	struct {
		void (*make)(int ready_fd);
		enum memwatch_verdict expected;
		const char *what;
		const struct memwatch_options *opt;
	} cases[] = {
		{autoreaped_short_workers, MEMWATCH_CPU_OVER, "workers of 5 ms freed unreaped by a "
			"parent that ignores SIGCHLD, never seen by a look: the CPU verdict (or held, where "
			"the kernel counts)", NULL},
		{nocldwait_short_workers, MEMWATCH_CPU_OVER, "the same with SA_NOCLDWAIT, which no "
			"/proc file shows: the same", NULL},
		{short_nocldwait_parents, MEMWATCH_OK, "parents with SA_NOCLDWAIT that each end "
			"within a look or two, their workers never seen: held by the kernel's count", NULL},
		{autoreaped_long_workers, MEMWATCH_OK, "workers of 300 ms one after another, freed "
			"unreaped: each one's time stays charged after it left", NULL},
		{autoreaped_light_workers, MEMWATCH_OK, "a worker of 2 ms every 100 ms freed "
			"unreaped, 2% of a core: never stopped", NULL},
		{nested_exits, MEMWATCH_OK, "a shell and its spinner exiting between two looks, at "
			"--cpus 1: the spinner's time charged once, never stopped", &one_core},
		{double_fork_chains, MEMWATCH_OK, "two chains of processes that each work 20 ms, "
			"fork the next and exit, under a subreaper: held, never the verdict", NULL},
	};
	/* The kernel's count needs perf_event_paranoid at most 2, or root. */
	struct perf_event_attr clock = {.type = PERF_TYPE_SOFTWARE, .size = sizeof clock,
		.config = PERF_COUNT_SW_TASK_CLOCK, .exclude_kernel = 1, .exclude_hv = 1};
	int clock_fd = (int)syscall(SYS_perf_event_open, &clock, 0, -1, -1, 0);
	if (clock_fd >= 0)
		close(clock_fd);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		if (cases[i].make == short_nocldwait_parents && clock_fd < 0) {
			skip_without_count();
			continue;
		}
		*workers_spent = 0;
		pid_t pid = start(cases[i].make);
		struct memwatch_options o = cases[i].opt ? *cases[i].opt : opt;
		o.session = pid;
		struct memwatch *w = memwatch_new(&o);
		if (cases[i].make == short_nocldwait_parents)
			count_from_start(pid, w);
		int64_t began = now_ms();
		enum memwatch_verdict v = look_for(w, 4000, 0, &throttled, &cpu_ms);
		int64_t took = now_ms() - began;
		end(pid);
		usleep(20000); /* the last workers add what they spent */
		int64_t spent_ms = *workers_spent / 1000000;
		printf("# %s: %lld CPU ms by the workers in %lld ms, %s\n", cases[i].what,
			(long long)spent_ms, (long long)took, v == MEMWATCH_CPU_OVER ? "stopped" : "not stopped");
		/* Held to the bound, or stopped with the verdict by the time it
		 * was past it by what sampling can mistake: four standard
		 * deviations, at most 0.5 x cores x sqrt(T) CPU seconds with
		 * looks 43 ms apart on average, and the sampled account's
		 * shortfall (a worker between fork and exit is not runnable). */
		long milli = o.cpus_milli;
		double sampling_ms = 1000 * sqrt((double)took / 1000) * (double)sysconf(_SC_NPROCESSORS_ONLN);
		/* Where the kernel counts, the freeze holds them all: stopped
		 * with the verdict or held, either way within the bound. */
		bool held = clock_fd >= 0 && cases[i].expected == MEMWATCH_CPU_OVER && v == MEMWATCH_OK;
		check((v == cases[i].expected || held) && took < 6000 + (v == MEMWATCH_OK) * 1000 &&
			spent_ms <= milli * took / 1000 + milli / 2 + 700 + (int64_t)sampling_ms,
			cases[i].what);
		/* Its parents reap: the exact account holds it, with no sampling
		 * margin, by stopping it. */
		if (cases[i].make == double_fork_chains)
			check(throttled > 0 && spent_ms <= milli * took / 1000 + milli / 2 + 700,
				"the chains were stopped while past --cpus, and held to it without "
				"the sampling margin");
		memwatch_free(w);
	}
	/* Those parents continued while frozen, as a process continuing the
	 * run from a timer of its own would: no freeze holds, and only the
	 * kernel's count sees the workers, so its verdict must end it once
	 * they pass --cpus x (T + 0.5 s) + 0.5 s escaped + its margin
	 * (CLOCK_DOUBT_MS) + the longest interval on each core + a tick's
	 * slack. */
	if (clock_fd >= 0) {
		*workers_spent = 0;
		pid_t pid = start(short_nocldwait_parents);
		struct memwatch_options o = opt;
		o.session = pid;
		struct memwatch *w = memwatch_new(&o);
		count_from_start(pid, w);
		int64_t began = now_ms();
		enum memwatch_verdict v = look_for(w, 10000, -pid, &throttled, &cpu_ms);
		int64_t took = now_ms() - began;
		end(pid);
		usleep(20000);
		int64_t spent_ms = *workers_spent / 1000000;
		/* The longest interval on each core, in the verdict's bound, and
		 * once more: the debt passes it by at most a look's use. */
		int64_t interval_on_cores = 2 * longest_gap_ms * sysconf(_SC_NPROCESSORS_ONLN);
		printf("# the same parents continued while frozen: %lld CPU ms by the workers in "
			"%lld ms, %s (looks at most %lld ms apart)\n", (long long)spent_ms,
			(long long)took, v == MEMWATCH_CPU_OVER ? "stopped" : "not stopped",
			(long long)longest_gap_ms);
		/* Held to that bound: the verdict comes by the time they pass
		 * it. On a loaded host the workers may get too little of the CPU
		 * to pass it in 10 s (once 4179 ms here, just under it), where
		 * idle they pass it within 3 s: then no verdict is due, and the
		 * bound is all there is to check (said, so that it shows). */
		if (v != MEMWATCH_CPU_OVER)
			printf("# no verdict: the workers stayed under the bound for 10 s\n");
		check(spent_ms <= 250 * took / 1000 + 125 + 500 + 1000 + interval_on_cores + 300,
			"the same parents continued while frozen: held to the bound, by the kernel's "
			"count's CPU verdict where they pass it");
		memwatch_free(w);
	} else {
		skip_without_count();
	}
	munmap((void *)workers_spent, sizeof *workers_spent);
}

static void cpu_throttle(void)
{
	pid_t pid = start(spin);
	struct memwatch_options opt = {.uid = getuid(), .session = pid, .limit = 1ull << 40,
		.cpus_milli = 250};
	struct memwatch *w = memwatch_new(&opt);
	int throttled;
	uint64_t cpu_ms;
	enum memwatch_verdict v = look_for(w, 2000, 0, &throttled, &cpu_ms);
	check(v == MEMWATCH_OK && throttled > 0, "a spinning process at --cpus 0.25 is throttled, "
		"not stopped");
	printf("# used %llu CPU ms in 2 s at --cpus 0.25\n", (unsigned long long)cpu_ms);
	check(cpu_ms <= 250 * 2 + 125 + 200, "... and held to --cpus x (T + 0.5 s), with a look's slack");
	memwatch_free(w);
	end(pid);

	/* A freeze that does not hold: continued from outside the watched
	 * session every 10 ms, as a process with a timer of its own that sends
	 * it SIGCONT would be. */
	pid = start(spin);
	opt.session = pid;
	w = memwatch_new(&opt);
	int64_t began = now_ms();
	v = look_for(w, 10000, pid, &throttled, &cpu_ms);
	int64_t took = now_ms() - began;
	check(v == MEMWATCH_CPU_OVER, "a process continued while frozen gets the CPU verdict");
	printf("# verdict after %lld ms, %llu CPU ms\n", (long long)took, (unsigned long long)cpu_ms);
	/* The longest interval between two looks, on each core: at most
	 * twice the mean (memwatch_next_look_ms). */
	int64_t interval_on_cores = 2 * MEMWATCH_INTERVAL_MS * sysconf(_SC_NPROCESSORS_ONLN);
	check(took < 5000 && (int64_t)cpu_ms <= 250 * took / 1000 + 125 + 500 + interval_on_cores + 300,
		"... within --cpus x (T + 0.5 s) + 0.5 s escaped + the longest interval + a tick's slack");
	/* The same from outside, with workers forked and reaped: caught by
	 * what its debt is, whatever the route. */
	end(pid);
	memwatch_free(w);
	pid = start(fork_workers);
	opt.session = pid;
	w = memwatch_new(&opt);
	began = now_ms();
	v = look_for(w, 10000, -pid, &throttled, &cpu_ms);
	took = now_ms() - began;
	printf("# fork workers: verdict after %lld ms, %llu CPU ms\n", (long long)took,
		(unsigned long long)cpu_ms);
	check(v == MEMWATCH_CPU_OVER &&
		(int64_t)cpu_ms <= 250 * took / 1000 + 125 + 500 + interval_on_cores + 300,
		"a parent and workers continued while frozen, the workers forked and reaped: the CPU verdict");
	end(pid);
	memwatch_free(w);
	pid = start(spin);
	opt.session = pid;
	w = memwatch_new(&opt);
	look_for(w, 1000, pid, &throttled, &cpu_ms);

	/* Overdrawn by that call (it ran far past its share): the next
	 * call's account is its own. The same spinning process stands for
	 * the next call's, no longer continued from outside. */
	memwatch_release(w, false);
	kill(pid, SIGCONT);
	struct memwatch_reading first, second;
	memwatch_look(w, now_ms(), &first);
	usleep(MEMWATCH_INTERVAL_MS * 1000);
	memwatch_look(w, now_ms(), &second);
	check(!first.throttled && !second.throttled,
		"after memwatch_release the next call starts with a full account, not the last one's debt");
	memwatch_free(w);
	end(pid);

	/* A legitimate run of 8 busy threads at --cpus 0.5, held for 6 s:
	 * throttled, never taken for one that continues itself. */
	pid = start(spin_threads);
	struct memwatch_options threads_opt = {.uid = getuid(), .session = pid,
		.limit = 1ull << 40, .cpus_milli = 500};
	w = memwatch_new(&threads_opt);
	v = look_for(w, 6000, 0, &throttled, &cpu_ms);
	printf("# 8 threads: %llu CPU ms in 6 s at --cpus 0.5\n", (unsigned long long)cpu_ms);
	check(v == MEMWATCH_OK && throttled > 0 && cpu_ms <= 500 * 6.5 + 500 + 2 * 100,
		"8 busy threads at --cpus 0.5 are throttled for 6 s, not stopped, and held to the bound");
	memwatch_free(w);
	end(pid);
	autoreaped();
}

/* A process's state letter from /proc (0 where it is gone). */
static char process_state(pid_t pid)
{
	char path[64], text[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = '\0';
	const char *paren = strrchr(text, ')');
	return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* A watchdog at --cpus 0.1 over pid (a spinner), looking until it has
 * stopped it (at most 5 s); pid's state then in *state. */
static struct memwatch *throttled_until_stopped(pid_t pid, char *state)
{
	struct memwatch_options opt = {.uid = getuid(), .session = pid, .limit = 1ull << 40,
		.cpus_milli = 100};
	struct memwatch *w = memwatch_new(&opt);
	*state = 0;
	for (int64_t stop = now_ms() + 5000; now_ms() < stop && *state != 'T';) {
		struct memwatch_reading r;
		memwatch_look(w, now_ms(), &r);
		usleep(20000);
		*state = process_state(pid);
	}
	return w;
}

/* A process the watchdog stopped, still stopped as the call ends: a
 * serial container's release continues it (a warm-up step's subprocess,
 * started as the launcher sent the call's end, outlives the call); a
 * session's leaves it stopped, for its launcher's own stop. */
static void release_continues_where_asked(void)
{
	for (int thaw = 0; thaw < 2; thaw++) {
		pid_t pid = start(spin);
		char state;
		struct memwatch *w = throttled_until_stopped(pid, &state);
		memwatch_release(w, thaw);
		usleep(50000);
		char after = process_state(pid);
		if (thaw)
			check(state == 'T' && after != 'T' && after != 0, "a process the watchdog stopped is "
				"continued as a serial container's call is let go of");
		else
			check(state == 'T' && after == 'T', "... and left stopped as a session's is");
		memwatch_free(w);
		end(pid);
	}
}

/* A look that cannot list /proc (out of descriptors) keeps what the last
 * look knew: a process it stopped is still its to continue. */
static void failed_listing_keeps_the_stopped(void)
{
	pid_t pid = start(spin);
	char state;
	struct memwatch *w = throttled_until_stopped(pid, &state);
	/* Room for /proc itself and no more: the listing's dup fails. */
	int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(lowest);
	struct rlimit was, tight;
	bool tightened = lowest >= 0 && getrlimit(RLIMIT_NOFILE, &was) == 0 &&
		(tight = (struct rlimit){.rlim_cur = (rlim_t)lowest + 1, .rlim_max = was.rlim_max},
		 setrlimit(RLIMIT_NOFILE, &tight) == 0);
	struct memwatch_reading r;
	memwatch_look(w, now_ms(), &r);
	if (tightened && setrlimit(RLIMIT_NOFILE, &was) != 0)
		abort();
	memwatch_release(w, true);
	usleep(50000);
	char after = process_state(pid);
	/* A look that listed counts the spinner. */
	check(tightened && r.processes == 0 && state == 'T' && after != 'T' && after != 0,
		"a process the watchdog stopped is continued at release after a look that could "
		"not list /proc");
	memwatch_free(w);
	end(pid);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	uint64_t most;
	/* Each process's resident size counts the 64 MiB it shares: the
	 * cheap bound (640 MiB and more) is past 256 MiB, and the exact
	 * measure must settle it. Before the fix, 1 run in 3 was stopped. */
	bool over = watch(churn, 256, 4, &most);
	printf("# the largest bound a look reported (exact or not): %llu MiB\n", (unsigned long long)(most / MIB));
	check(!over, "64 MiB shared by 10 processes, with zombies and a churn of short-lived "
		"children: never past a limit of 256 MiB");
	over = watch(churn, 48, 3, &most);
	check(over, "the same 64 MiB: past a limit of 48 MiB");
	/* Before the fix, the walks taken as they came, counted as exact,
	 * stopped it (3 runs of 3). */
	over = watch(forks_one_by_one, 5 * HELD_MIB, 4, &most);
	check(!over, "256 MiB shared by 7 processes forked a look or more apart: never past a "
		"limit of 320 MiB");
	/* Before the fix, a link arrived at every look, no walk was ever a
	 * measure, and the run stayed frozen, never thawed nor stopped (a
	 * fork loop past --memory 600m ran to its timeout). */
	over = watch(forks_then_a_chain, 5 * HELD_MIB + 32, 7, &most);
	printf("# the longest freeze: %lld ms\n", (long long)longest_freeze_ms);
	check(!over && longest_freeze_ms < 3000, "the same, then a chain of processes that each "
		"fork the next and exit, one arriving at every look: never past a limit of 352 MiB, "
		"never frozen for 3 s");
	over = watch(leader_gone, HELD_MIB, 2, &most);
	check(over, "128 MiB held by a thread whose leader exited (a zombie that shows nothing): "
		"past a limit of 64 MiB");
	over = watch(quick_descriptors, 512, 2, &most);
	check(over, "4 processes that open 300 descriptors each (600 MiB) in less than a clock "
		"tick of CPU time: past a limit of 512 MiB");
	over = watch(zombies_then_descriptors, 512, 2, &most);
	check(!over, "4 processes' 800 descriptors (400 MiB), then as zombies none, and 600 of "
		"their parent's (300 MiB): under a limit of 512 MiB");
	cpu_throttle();
	release_continues_where_asked();
	failed_listing_keeps_the_stopped();
	printf("1..%d\n", test_number);
	return failures != 0;
}
