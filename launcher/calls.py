# launcher/calls.py: the launcher's calls, one after another: each call's
# frames, its prepared child, the code's stdin and output relayed, its
# deadline and CPU seconds, and what becomes of the container after it
# (the X frame's trailer, docs/protocol.md).
#
# Three modes, fixed when the container starts (the launcher's argument):
#   once     one call, then the container ends;
#   serial   call after call, each in a child of its own forked from this
#            process (which no call's code touched), every process of a call
#            killed, /tmp and /dev/shm put back as recorded (tmpreset.py),
#            this process's state checked (parent.py) and the network
#            namespace found as it was (netns.py) before the next;
#   session  the cells of one Sage: one child runs every cell, stopped
#            (SIGSTOP) between cells with every other process killed, so that
#            nothing of a cell runs after its answer.
import collections
import fcntl
import gc
import json
import os
import select
import signal
import sys
import time

from launcher import child, netns, outdir, parent, tmpreset, warm
from launcher.frames import MAX_FRAME, ProtocolError, wipe, write_all

MODES = ("once", "serial", "session")
MAX_CODE_BYTES = 50000
MAX_LIMITS_BYTES = 1024
# A session's cell past its timeout or CPU seconds is interrupted (SIGINT:
# KeyboardInterrupt, its state kept); still running after this long, it is
# killed, and the session with it.
INTERRUPT_GRACE_MS = 2000
# Still running this long after its interrupt, the cell gets one more, as a
# notebook's user presses interrupt again: the first may have landed where
# the cell's code cannot see it (in a finalizer, __del__, whose
# KeyboardInterrupt Python only reports), and the code then ran on to the
# kill, losing the session (attack helper 122).
INTERRUPT_AGAIN_MS = INTERRUPT_GRACE_MS // 2
# A Sage still stopped this long after its first interrupt is continued
# (wake_if_stopped), or it could not take it. Not at the second interrupt:
# a Sage that a process of the code's stopped then had at most the rest of
# the grace, a second less the launcher's lag, to raise, print its
# traceback and say its status, and a loaded machine took longer: the
# cell was killed and its session lost (a CI run). The host's watchdog,
# whose stop this may undo (its CPU throttle's, or its memory freeze's),
# has this long to let it go itself (its looks come every 100 ms or
# less); what it runs or grows past it, the watchdog charges at its next
# look and stops it again.
INTERRUPT_WAKE_MS = 400
# How often a session's cell's CPU time is looked at, and how often a
# stopped session is checked between cells.
CPU_LOOK_MS = 100
FROZEN_LOOK_MS = 200
MAX_ESCAPES = 3
# A session's Sage's stop is asked for and looked for every 0.1 ms (0.2
# with the timer slack) until it is seen (freeze): a SIGCONT from a
# process of the code's (a timer's, every millisecond) cancels a SIGSTOP
# still pending, and ends a stop unseen by a wait for it, which then
# waited for ever (attack helper 138). At a cell's end the first try is
# short (kill_all_but then stops the Sage as it kills such processes),
# and the whole of the stop has STOP_MS: the host gives a session's call
# 5 s past its deadline, a cell may end 2 s past it (its interrupt's
# grace), and a stop the host slows (a write throttled, a busy machine)
# may take a second.
FIRST_STOP_MS = 200
STOP_MS = 2500
# The longest word on the done pipe (child.done_word) kept unended.
MAX_WORD = 32
# How long an orphan of the call waits to be reaped, at most, while the
# call runs. This process is the namespace's init and takes every orphan,
# but it catches no signal (parent.py), so SIGCHLD does not wake it: it
# looks this often, and, for a second after it reaped an orphan, more
# often (10 ms: 1.5% of a core here, for every call, where the 100 ms
# cost a tenth of that). A machine's init reaps at once; left until the
# call's own output woke it, a chain of processes that each fork the next
# and exit (a double fork) filled --pids-limit with zombies, and its next
# fork failed with EAGAIN, where a fresh Sage's would not.
ORPHAN_LOOK_MS = 100
ORPHAN_REAP_MS = 10
ORPHANS_WATCHED_MS = 1000
TICKS = os.sysconf("SC_CLK_TCK")
# A function's frame, whose locals are its own (inspect.CO_OPTIMIZED).
CO_OPTIMIZED = 0x0001


def parse_status(line):
    """A status the child wrote on the done pipe, or None."""
    try:
        status = int(line.split()[0])
    except (IndexError, ValueError):
        return None
    return status if 0 <= status <= 255 else None


class CellWatch:
    """A session's cell against its deadline and CPU seconds: what to do at
    each look. The interrupt (SIGINT) waits for the child's word that the
    code began (child.BEGUN): the child holds SIGINT from a cell's end to
    the next one's begin (child.run_cell), and one sent before the begin
    would be thrown away there, leaving the cell to run on to its kill.
    The kill comes at the interrupt's grace whatever was said; a second
    interrupt before it (INTERRUPT_AGAIN_MS), and before that a SIGCONT
    where it is stopped (INTERRUPT_WAKE_MS). A status that waits unread
    at the kill spares the cell once: it is read first (the cell ended
    in its grace, its session kept)."""

    def __init__(self, deadline, cpu_seconds):
        self.deadline, self.cpu_seconds = deadline, cpu_seconds
        self.began = False   # the child said the code began
        self.why = None      # why the cell is interrupted: timeout, cpu
        self.since = 0       # since when
        self.told = 0        # SIGINTs sent: at most 2
        self.told_at = 0     # when the last was
        self.woken = False   # the wake after the first was sent
        self.spared = False  # the kill was put off for a status unread

    def look(self, now, cpu_used, status_unread=lambda: False):
        """The signal to send the child now (or None), and how long until
        the next look (None: no hurry). cpu_used(): the cell's CPU seconds
        so far, read only where they count. status_unread(): something
        waits on the done pipe, perhaps the cell's status: the interrupt
        waits until it is read (a cell that ended first is no
        interrupted one)."""
        if not self.why:
            if self.deadline and now >= self.deadline:
                self.why = "timeout"
            elif self.cpu_seconds and cpu_used() >= self.cpu_seconds:
                self.why = "cpu"
            if self.why:
                self.since = now
        if self.why:
            if now >= self.since + INTERRUPT_GRACE_MS:
                if not self.spared and status_unread():
                    self.spared = True
                    return None, 0
                return signal.SIGKILL, None
            wait_ms = self.since + INTERRUPT_GRACE_MS - now
            # (A look later than the second interrupt's time sends that,
            # which wakes too: review helper 158.)
            if self.told == 1 and now < self.told_at + INTERRUPT_AGAIN_MS:
                again_ms = self.told_at + INTERRUPT_AGAIN_MS - now
                if self.woken:
                    return None, min(wait_ms, again_ms)
                if now >= self.told_at + INTERRUPT_WAKE_MS:
                    self.woken = True
                    return signal.SIGCONT, min(wait_ms, again_ms)
                return None, min(wait_ms, self.told_at + INTERRUPT_WAKE_MS - now)
            if self.began and self.told < 2 and not status_unread():
                self.told, self.told_at = self.told + 1, now
                return signal.SIGINT, wait_ms if self.told == 2 else min(wait_ms, INTERRUPT_WAKE_MS)
            return None, wait_ms
        wait_ms = CPU_LOOK_MS if self.cpu_seconds else None
        if self.deadline:
            wait_ms = min(wait_ms or CPU_LOOK_MS, max(0, self.deadline - now))
        return None, wait_ms


def done_words(data, call_number):
    """What the done pipe's words in data (child.done_word) say of the
    child's call CALL_NUMBER: whether its code began (child.BEGUN), its
    status (the first; or None), and the end of data that no newline has
    ended yet, to be read again before the pipe's next bytes (a word is
    whole once its newline came). The pipe is in the code's reach: what is
    no word, and a word of another call (one the code, or a thread it left
    running, wrote late), is taken for neither."""
    whole, _, unended = data.rpartition(b"\n")
    began, status = False, None
    for word in whole.split():
        what, _, number = word.rpartition(b":")
        if number != b"%d" % call_number:
            continue
        if what == child.BEGUN:
            began = True
        elif status is None:
            status = parse_status(what)
    return began, status, unended[-MAX_WORD:]


def stat_fields(path):
    """The fields of a /proc stat file after the command's name (which may
    hold spaces and parentheses): [state, ppid, ...], counted from 0 at the
    state; [] where it is gone or cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().rpartition(b")")[2].split()
    except OSError:
        return []


def processes():
    """{pid: (state, ppid, controlling terminal, threads)} of every process
    /proc lists now (this container's: its pid namespace's)."""
    listed = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields("/proc/%s/stat" % name)
        try:
            listed[int(name)] = (fields[0], int(fields[1]), int(fields[4]), int(fields[17]))
        except (IndexError, ValueError):
            pass  # gone
    return listed


# A process's states (processes()) once stopped: by a signal, or traced.
STOPPED = (b"T", b"t")


def threads_stopped(pid):
    """Whether every thread of pid is stopped, a zombie or gone:
    /proc/PID/stat shows its main thread's state alone, and a thread in
    fork() stops only once its child is born."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return True
    for task in tasks:
        state = stat_fields("/proc/%d/task/%s/stat" % (pid, task))[:1]
        if state and state[0] not in STOPPED + (b"Z", b"X"):
            return False
    return True


def dead(state, threads):
    """A zombie is dead unless threads of it live on: a process whose main
    thread exited by itself shows Z while the rest of it runs."""
    return state == b"Z" and threads <= 1


def under_a_terminal(session, listed):
    """The pids of listed (processes()) that descend from session's and
    have a controlling terminal: what Sage runs under a pty (pexpect), its
    interfaces to GAP, Maxima, Singular, gp and the rest, each with what
    it started. A notebook's kernel keeps them between cells, and what a
    cell defined there (gap('...'), maxima('a: 5')) with them. The
    session's Sage has none (the container has no terminal), nor does what
    it starts without one (subprocess, os.system): those are killed; so
    is what shares a terminal the Sage made its own."""
    kept = set()
    # A terminal the Sage took for its own (a session leader, it gets the
    # first it opens) is every child's it starts after: not an interface's.
    own = listed.get(session, (0, 0, 0, 0))[2]
    for pid, (_, ppid, terminal, _) in listed.items():
        if not terminal or terminal == own:
            continue
        seen = set()
        while ppid not in (session, 0) and ppid in listed and ppid not in seen:
            seen.add(ppid)
            ppid = listed[ppid][1]
        if ppid == session:
            kept.add(pid)
    return kept


def interrupt(pid, wake=False):
    """SIGINT to a session's child, its main thread alone (tgkill): that
    thread holds it from a cell's end to the next one's begin, and a
    thread the code left running, which runs in those moments (from the
    status until the freeze, from the thaw until the begin), does not
    take it there. A libc or seccomp profile without tgkill: the
    process, where such a thread may take it again. With wake (the
    second interrupt), wake_if_stopped too."""
    tgkill = getattr(parent.libc, "tgkill", None)
    if tgkill is None or tgkill(pid, pid, signal.SIGINT) != 0:
        os.kill(pid, signal.SIGINT)
    if wake:
        wake_if_stopped(pid)


def wake_if_stopped(pid):
    """A stopped child takes no signal until it runs: one still stopped
    after its interrupt (CellWatch's wake, and its second interrupt) is
    continued, so that the interrupt ends the cell and the session keeps
    its state. A stop a process of the code's made is never undone but
    here, where a notebook's stopped kernel hangs until it is killed (its
    cell is told timed out either way)."""
    if stat_fields("/proc/%d/stat" % pid)[:1] == [b"T"]:
        os.kill(pid, signal.SIGCONT)


def now_ms():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000


class Call:
    """One call as the host sent it (L, A, C frames and the input files).
    args: the A frame (each argument ends with a NUL). The code and args
    are wiped once the call's child has them (Launcher.run)."""

    def __init__(self, limits, args, code):
        self.args, self.code = args, code
        self.cpu_seconds = limits["cpu"]
        self.deadline = limits["deadline"]
        self.inputs = limits["inputs"]
        out = limits.get("out")
        self.out = out and outdir.Limits(out["files"], out["file_bytes"], out["bytes"])
        shown = limits.get("display") or {}
        self.display_flags = ((child.DISPLAY_LAST if shown.get("last") else 0) |
                              (child.FILES_BACK if self.out else 0) |
                              (child.LATEX if shown.get("latex") else 0))
        self.first_show = shown.get("first", 1)
        self.seed = limits.get("seed")


def parse_limits(data):
    """The L frame: a JSON object of non-negative integers (and out)."""
    if len(data) > MAX_LIMITS_BYTES:
        raise ProtocolError("limits of %d bytes" % len(data))
    try:
        text = data.decode("ascii")
        try:
            limits = json.loads(text)
        finally:
            wipe(text)  # the call's seed and deadline
    except (ValueError, RecursionError):
        raise ProtocolError("limits that are not JSON")

    def number(v):
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62

    if isinstance(limits, dict) and not (number(limits.get("cpu")) and limits["cpu"] < 1 << 31):
        raise ProtocolError("CPU seconds out of range")

    if not isinstance(limits, dict) or not all(
            number(limits.get(k)) for k in ("cpu", "deadline", "inputs")):
        raise ProtocolError("limits without cpu, deadline and inputs")
    out = limits.get("out")
    if out is not None and not (isinstance(out, dict) and all(
            number(out.get(k)) for k in ("files", "file_bytes", "bytes"))):
        raise ProtocolError("out limits without files, file_bytes and bytes")
    seed = limits.get("seed")
    if seed is not None and not (number(seed) and seed < 1 << 63):
        raise ProtocolError("a seed that is not an integer from 0 to 2^63 - 1")
    shown = limits.get("display")
    if shown is not None and not (isinstance(shown, dict) and all(
            isinstance(shown.get(k, False), bool) for k in ("last", "latex")) and
            number(shown.get("first", 1)) and 0 < shown.get("first", 1) < 1 << 31):
        raise ProtocolError("display without booleans last, latex and a first number")
    return limits


def create_input(parts):
    """A new file at parts below the working directory, replacing what a
    session's earlier call left there (a file or a directory)."""
    directory = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o700, dir_fd=directory)
            except FileExistsError:
                pass
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            os.close(directory)
            directory = inner
        try:
            os.unlink(parts[-1], dir_fd=directory)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            tmpreset.make_accessible(directory, parts[-1])
            inner = os.open(parts[-1], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                            dir_fd=directory)
            try:
                tmpreset.empty_directory(inner)
            finally:
                os.close(inner)
            os.rmdir(parts[-1], dir_fd=directory)
        return os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                       dir_fd=directory)
    finally:
        os.close(directory)


def forget_calls(launcher, frame):
    """A call's child's first step: what the launcher holds of the calls
    before, out of the code's reach. The child is forked where the last
    call's frames are still below it (end_serial_call's, finish's, run's,
    serve's), and a probe's code read the last call's code, argv and exit
    status in their locals through its f_back. Those frames, and the ones
    below, have their locals set to None (the child never returns to
    them), and the launcher loses its state, its buffers wiped first:
    nothing of it is found by a walk of the stack or of gc.get_objects()."""
    launcher.pending.clear()
    launcher.reader.drop()  # frames that came meanwhile are the launcher's
    # (The writer's read buffer is zeroed as each chunk is sent.)
    vars(launcher).clear()
    to_fast = None
    if sys.version_info < (3, 13):
        # f_locals is a copy, written back by this (from 3.13 it writes
        # through). Each local set to None, none deleted: 3.12 warns of
        # each one deleted.
        import ctypes
        to_fast = ctypes.pythonapi.PyFrame_LocalsToFast
        to_fast.argtypes, to_fast.restype = [ctypes.py_object, ctypes.c_int], None
    while frame is not None:
        if frame.f_code.co_flags & CO_OPTIMIZED:  # a module's locals are its globals
            names = frame.f_locals
            for name in list(names):
                names[name] = None
            if to_fast:
                to_fast(frame, 0)
        frame = frame.f_back


class StdinQueue:
    """The code's stdin, as the host sent it and not yet written to the
    code: the I frames' bytes, each wiped once written (frames.py)."""

    def __init__(self):
        self.chunks = collections.deque()
        self.size = 0     # bytes not yet written
        self.written = 0  # of the first chunk

    def __bool__(self):
        return bool(self.chunks)

    def put(self, data):
        self.chunks.append(data)
        self.size += len(data)

    def write_to(self, fd):
        first = self.chunks[0]
        done = os.write(fd, memoryview(first)[self.written:])
        self.written += done
        self.size -= done
        if self.written == len(first):
            wipe(self.chunks.popleft())
            self.written = 0

    def clear(self):
        while self.chunks:
            wipe(self.chunks.popleft())
        self.size = self.written = 0


def kill_all_others():
    """SIGKILL to every process but this one (init of the namespace, which
    kill(-1) spares): none of them runs code after it, and none forks, as
    the kernel lets no fork outrun a kill(-1). Not waited for."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Launcher:
    def __init__(self, mode, reader, writer, handlers, namespace, preparse_file):
        self.mode = mode
        self.session = mode == "session"
        self.reader, self.writer = reader, writer
        self.pending = StdinQueue()  # the code's stdin
        self.handlers, self.namespace, self.preparse_file = handlers, namespace, preparse_file
        self.recorded = None  # {place: as recorded} of WRITABLE, for serial
        self.state = None     # this process's state, checked before each call is handed on
        self.network = set()  # the sockets of its network namespace at its start (netns.py)
        self.child = 0
        self.pidfd = -1
        self.pipes = None
        self.child_status = None
        self.cpu_used = 0.0
        self.orphan_reaped_at = 0  # now_ms() when reap() last took an orphan
        self.frozen = False   # a session's child, stopped between cells
        # Between a session's cells, the processes its Sage runs under a
        # terminal (its interfaces': under_a_terminal), stopped with it,
        # and how often each was found running (kill_running_interfaces).
        self.interfaces = []
        self.escapes = {}
        self.no_reset = None  # why the writable places could not be recorded (serial)
        self.unprepared = None  # why the next call's child could not be forked (serial)

    # ---- the prepared child -------------------------------------------------

    def prepare_child(self, stale=()):
        """Forks the next call's child; stale are descriptors of this
        process's that the child closes first (replace_child's old child's
        ends: open at the fork, and none of a call's). The child starts
        with every signal blocked (it may be forked while the last call's
        processes die, and a process's exit can still send signals: SIGIO
        to an owner it named, such as this process's group, which the child
        is in until its setsid()); it throws away what came meanwhile, and
        unblocks, only once its call came, when none of them is left
        (child.py)."""
        threads = warm.threads()
        if threads > 1:
            # A lock another thread holds would stay held in the child.
            raise OSError("this process has %d threads, and a fork copies one" % threads)
        self.pending.clear()
        self.pipes = child.Pipes(
            with_done=self.session or self.mode == "once" or
            (self.mode == "serial" and self.recorded is not None))
        # The young generations' garbage freed: left, a child's first
        # automatic collections free some of it, as many cycles as the
        # code's length and the launcher's last steps make them, and a
        # call's gc.collect() found 1, 2 or 5 of the cycles Sage's import
        # left, cold or warm, from run to run (warm.hold_import_garbage).
        # Their finalisers run here, as those of this process's automatic
        # collections always did.
        gc.collect(1)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            self.pipes.close()
            raise
        if pid == 0:
            try:
                pipes, handlers, namespace = self.pipes, self.handlers, self.namespace
                preparse_file, session = self.preparse_file, self.session
                forget_calls(self, sys._getframe().f_back)
                self = None  # noqa: F841 (its state is gone; it goes too)
                child.child_main(pipes, handlers, namespace, preparse_file, session, stale)
            finally:
                os._exit(70)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.child = pid
        try:
            self.pidfd = os.pidfd_open(pid)
        except OSError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            self.pipes.close()
            raise
        for fd in self.pipes.child_ends():
            if fd >= 0:
                os.close(fd)
        self.stdin_w = self.pipes.stdin[1]
        for fd in (self.stdin_w, self.pipes.done[0]):
            if fd >= 0:
                os.set_blocking(fd, False)
        self.streams = {self.pipes.stdout[0]: b"O", self.pipes.stderr[0]: b"E"}
        self.call_w = self.pipes.call[1]
        self.child_status = None
        self.cpu_used = 0.0
        self.call_number = 0  # the child's calls so far (child.done_word)
        self.done_unended = b""  # the done pipe's bytes of a word to come

    def close_child_pipes(self):
        for fd in list(self.streams) + [self.call_w, self.pipes.done[0], self.stdin_w,
                                        self.pidfd]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.streams = {}
        self.call_w = self.stdin_w = self.pidfd = -1

    # ---- processes ------------------------------------------------------------

    def reap(self):
        """Reaps every exited process (orphans are ours too, as init). A
        stop is no end: wait reports a tracee's stops (a weakened profile
        can let the call's process ask to be traced by this one)."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child and not os.WIFSTOPPED(status):
                self.cpu_used = usage.ru_utime + usage.ru_stime
                self.child_status = status
            elif pid != self.child:
                self.orphan_reaped_at = now_ms()

    def kill_the_rest(self):
        """Every process but this one, until none is left (kill_all_others),
        and wait() says when the last one is gone."""
        kill_all_others()
        while True:
            try:
                pid, status, usage = os.wait4(-1, 0)
            except ChildProcessError:
                return
            if pid == self.child and not os.WIFSTOPPED(status):
                self.cpu_used = usage.ru_utime + usage.ru_stime
                self.child_status = status

    def kill_all_but(self, spared, give_up=None):
        """Between a session's cells: every process but this one, its Sage
        (spared) and what that runs under a terminal (under_a_terminal: its
        interfaces, kept in self.interfaces) killed, until none is left
        alive, and those stopped, every thread (threads_stopped), until a
        pass finds nothing to do twice running: the second's listing began
        after every thread was seen stopped, so it finds what a thread
        forked before its stop (a fork under way is not stopped). The Sage
        is stopped in the same pass as what would continue it (a process of
        the code's that sends it SIGCONT) is killed. The nproc limit bounds
        how long forks go on; give_up (now_ms(), STOP_MS from now unless
        given) the whole: False then."""
        me = os.getpid()
        if give_up is None:
            give_up = now_ms() + STOP_MS
        clean = False  # the last pass found nothing to do
        while now_ms() < give_up:
            alive = stopping = False
            listed = processes()
            kept = under_a_terminal(spared, listed)
            for pid, (state, _, _, threads) in listed.items():
                held = pid == spared or pid in kept
                if pid == me or dead(state, threads) or held and threads_stopped(pid):
                    continue
                if held:
                    stopping = True
                else:
                    alive = True
                try:
                    os.kill(pid, signal.SIGSTOP if held else signal.SIGKILL)
                except OSError:
                    pass
            self.reap()
            if not alive and not stopping:
                if clean:
                    self.interfaces = sorted(kept)
                    return True
                clean = True
                continue
            clean = False
            if not alive:
                time.sleep(0.001)  # a stop under way (a process in D state)
        return False

    def child_report(self, events, block=False):
        """The session's Sage's report among events (os.WSTOPPED,
        os.WCONTINUED) or its end, left pending: its si_code, None where
        none is pending (block waits for one). Where it ended, its status is
        reaped (as reap() takes it). (A tracer, which a weakened profile can
        let it have, sees its traps whatever it asks.) ChildProcessError
        where it is gone."""
        flags = events | os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
        info = os.waitid(os.P_PID, self.child, flags)
        if info is None:
            return None
        if info.si_code not in (os.CLD_STOPPED, os.CLD_CONTINUED):
            self.reap()  # ended (or traced, which reap() lets be)
        return info.si_code

    def take_report(self, event):
        """Takes the session's Sage's pending report of event (child_report
        saw it)."""
        os.waitid(os.P_PID, self.child, event | os.WNOHANG)

    def child_cpu_seconds(self):
        """The session's Sage's own CPU time so far, from /proc."""
        fields = stat_fields("/proc/%d/stat" % self.child)
        try:
            return (int(fields[11]) + int(fields[12])) / TICKS
        except (IndexError, ValueError):
            return 0.0

    def freeze(self, give_up=None):
        """A session's Sage between cells: stopped, threads and all, so that
        nothing of the cell runs after its answer (kill_all_but then stops
        its interfaces), its stop's report taken (still_frozen reads a
        later one). False where it ended (its status reaped, as reap()
        takes it) or was not seen stopped by give_up (now_ms(), STOP_MS
        from now unless given)."""
        self.frozen = False
        if give_up is None:
            give_up = now_ms() + STOP_MS
        while True:
            try:
                os.kill(self.child, signal.SIGSTOP)
                report = self.child_report(os.WSTOPPED)
            except (ProcessLookupError, ChildProcessError):
                return False
            if report == os.CLD_STOPPED:
                self.take_report(os.WSTOPPED)  # the stop seen
                self.frozen = True
                return True
            if report is not None:
                return False  # it ended (or is traced: no session of ours)
            if now_ms() >= give_up:
                return False
            time.sleep(0.0001)

    def stop_between_cells(self):
        """At a session's cell's end: its Sage stopped first, every thread
        (freeze), so that the code's threads fork nothing meanwhile, then
        every other process killed but its interfaces, stopped
        (kill_all_but). A process of the code's that sends the Sage SIGCONT
        (a timer's, or a thread's that forks such processes) may keep it
        from stopping, or continue it once stopped: kill_all_but stops the
        Sage too as it kills that one, then the Sage is stopped again, every
        thread, and what it forked meanwhile killed. False where it could
        not be within STOP_MS, or was continued MAX_ESCAPES times (a timer
        of its own): the session is lost, as between cells."""
        give_up = now_ms() + STOP_MS
        stopped = self.freeze(min(give_up, now_ms() + FIRST_STOP_MS))
        for escapes in range(1, MAX_ESCAPES + 1):
            if not self.kill_all_but(self.child, give_up):
                return False
            if stopped and self.still_frozen():
                return True
            if escapes == MAX_ESCAPES:
                return False
            stopped = self.freeze(give_up)
            if not stopped:
                return False

    def thaw(self):
        self.frozen = False
        self.escapes = {}
        for pid in self.interfaces:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        try:
            os.kill(self.child, signal.SIGCONT)
            if self.child_report(os.WCONTINUED, block=True) == os.CLD_CONTINUED:
                self.take_report(os.WCONTINUED)
        except (ProcessLookupError, ChildProcessError):
            pass

    def continue_child(self):
        """The call's child, running as its call is handed over: thawed
        where a session froze it; else sent SIGCONT, for the host's
        watchdog (--memory or --cpus where no cgroup holds them) may have
        stopped it: a serial call's is forked as the last call ends, while
        that call is still watched, and a session's first cell may have
        timed out before it began (run), a look in between. A serial
        call's release continues what the watchdog stopped, unless its
        listing of /proc failed; a session's continues nothing, its own
        freeze must hold. (Not thaw's wait: a child never stopped gives
        no notice of continuing.)"""
        if self.frozen:
            self.thaw()
            return
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def still_frozen(self):
        """False when the stopped session came back by itself (a timer of
        its own can send it SIGCONT) or ended (its status reaped, as
        reap() takes it). A stop's report there, its last one taken by
        freeze, says it came back and was stopped again (by kill_all_but,
        or itself): that stop erased the report of its continue."""
        try:
            report = self.child_report(os.WSTOPPED | os.WCONTINUED)
            if report == os.CLD_CONTINUED:
                self.take_report(os.WCONTINUED)
            return report is None
        except ChildProcessError:
            return False

    def kill_running_interfaces(self):
        """A session's interface found running between cells is stopped
        again, with what it forked meanwhile (kill_all_but), and killed the
        MAX_ESCAPESth time: a real one waits for its Sage; a timer of its
        own can send it SIGCONT (once can be the host's watchdog letting
        go of one it had stopped as the cell ended). What it held is lost
        then, as where its process dies."""
        if not self.interfaces:
            return
        listed = processes()
        escaped = []
        for pid in self.interfaces:
            state, _, _, threads = listed.get(pid, (b"Z", 0, 0, 0))
            if not dead(state, threads) and state not in STOPPED + (b"D",):
                escaped.append(pid)
        if not escaped:
            return
        for pid in escaped:
            self.escapes[pid] = self.escapes.get(pid, 0) + 1
            if self.escapes[pid] >= MAX_ESCAPES:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if not self.kill_all_but(self.child):
            self.kill_the_rest()
            os._exit(0)

    # ---- a call's frames --------------------------------------------------------

    def wait_for_call(self):
        """Blocks until the host's next frame. A session's stopped Sage is
        checked meanwhile: one that came back by itself (a timer of its
        own can send it SIGCONT) is stopped again, what it started
        meanwhile killed (kill_all_but), and killed, with the container,
        the third time: it is trying to run between calls. (Once can be
        the host's watchdog letting go as the cell ended.)"""
        os.set_blocking(self.reader.fd, True)
        if not self.frozen:
            return
        poller = select.poll()
        poller.register(self.reader.fd, select.POLLIN)
        escapes = 0
        while not self.reader.inbox and not poller.poll(FROZEN_LOOK_MS):
            self.kill_running_interfaces()
            if self.still_frozen():
                continue
            escapes += 1
            if escapes >= MAX_ESCAPES or not self.freeze() or not self.kill_all_but(self.child):
                self.kill_the_rest()
                os._exit(0)

    def read_call(self):
        """The call's frames: L, A, C, then its input files. The end of a
        session's previous input may come first: it is skipped. None when
        the host went away."""
        self.wait_for_call()
        while True:
            got = self.reader.frame()
            if got is None:
                return None
            if got[0] != b"I":
                break
            wipe(got[1])  # the last call's stdin, which it did not read
        kind, data = got
        if kind != b"L":
            raise ProtocolError("a %r frame where a call was due" % kind)
        try:
            limits = parse_limits(data)
        finally:
            wipe(data)
        args = self.reader.expect(b"A")
        code = self.reader.expect(b"C", MAX_CODE_BYTES)
        if args is None or code is None:
            return None
        call = Call(limits, args, code)
        self.receive_inputs(call.inputs)
        return call

    def receive_inputs(self, count):
        """The input files, into the working directory, before any code runs.
        The host checked their names; they are checked again here. One that
        cannot be made (a session's code put something in its way) is said so
        on the code's stderr, and its bytes are read and dropped."""
        for _ in range(count):
            name = self.reader.expect(b"F", 4096)
            if name is None:
                os._exit(0)
            parts = name.split(b"/")
            if any(p in (b"", b".", b"..") or b"\0" in p for p in parts):
                raise ProtocolError("an input file's name")
            try:
                fd = create_input(parts)
            except (OSError, tmpreset.CannotReset, RecursionError) as e:
                fd = -1
                why = str(getattr(e, "strerror", None) or e).encode("utf-8", "replace")
                said = b"sage-sandbox: input file %s could not be written: %s\n" % (name, why)
                self.writer.send(b"E", said)
                wipe(said)
                wipe(why)  # it can name a session's earlier files
            for part in parts + [name]:
                wipe(part)
            while True:
                got = self.reader.frame()
                if got is None:
                    os._exit(0)
                if got[0] == b"G":
                    break
                if got[0] != b"D":
                    raise ProtocolError("a %r frame in an input file" % got[0])
                if fd >= 0:
                    try:
                        write_all(fd, got[1])
                    except OSError:
                        os.close(fd)
                        fd = -1
                wipe(got[1])
            if fd >= 0:
                os.close(fd)

    # ---- the code's stdin ---------------------------------------------------------

    def take_input(self):
        """I frames the host sent while the code runs, into pending."""
        while True:
            got = self.reader.next_ready()
            if got is None:
                return
            kind, data = got
            if kind != b"I":
                raise ProtocolError("a %r frame while the code runs" % kind)
            if not data:
                self.input_ended = True
            elif self.stdin_w >= 0:
                self.pending.put(data)
            else:
                wipe(data)

    def give_input(self):
        try:
            self.pending.write_to(self.stdin_w)
        except BlockingIOError:
            pass
        except OSError:  # the code closed its stdin: what is left is not wanted
            self.close_input()

    def close_input(self):
        if self.stdin_w >= 0:
            os.close(self.stdin_w)
            self.stdin_w = -1
        self.pending.clear()

    # ---- output ------------------------------------------------------------------

    def relay(self, fd):
        try:
            got = self.writer.send_read(self.streams[fd], fd)
        except BlockingIOError:
            return False
        if not got:
            self.poller.unregister(fd)
            del self.streams[fd]
            os.close(fd)
            return False
        return True

    def drain(self):
        """What the code wrote is in the pipes: all of it goes out now; a
        descendant that still holds them open does not make the call wait."""
        for fd in list(self.streams):
            os.set_blocking(fd, False)
            while fd in self.streams and self.relay(fd):
                pass

    # ---- one call ----------------------------------------------------------------

    def run(self, call):
        """Runs the call to its end; returns the X frame's trailer."""
        # Its time ran out before its code could begin (a first call waits
        # for the container and Sage's import, a later one of a serial
        # container for a warm-up step): the code is not run, and no B
        # frame says it began, so the host tells the timeout as the wait's,
        # not the code's. A deadline that falls after this look ends the
        # code as it begins (below; a session's: CellWatch).
        expired = bool(call.deadline) and now_ms() >= call.deadline
        if expired:
            wipe(call.args)
            wipe(call.code)
            if self.session:
                # The session goes on as it was (its Sage frozen where a
                # cell ran before; the call's input files are in its
                # directory).
                return {"ended_at": now_ms(), "exit": 1, "container": "kept",
                        "interrupted": "timeout"}
            # The child, never handed the call, goes as at a deadline; a
            # serial container serves the next call as after one.
            self.kill_the_rest()
        else:
            self.continue_child()
            # The code begins: the host holds the call to its CPU share
            # from here (cpugroup.c), not for the warm-up step before it.
            self.writer.send(b"B")
            self.call_number += 1
            message = child.encode_call(call.cpu_seconds, call.args, call.code,
                                        call.display_flags, call.first_show, call.seed)
            try:
                write_all(self.call_w, message)
            except OSError:
                pass  # the child is gone: its status says why, below
            # The child has them: no call forked later finds them here.
            for data in (message, call.args, call.code):
                wipe(data)
        if not self.session:
            os.close(self.call_w)
            self.call_w = -1
        os.set_blocking(self.reader.fd, False)
        self.pending.clear()
        self.input_ended = False
        self.poller = select.poll()
        for fd in list(self.streams) + [self.pidfd] + (
                [self.pipes.done[0]] if self.pipes.done[0] >= 0 else []):
            self.poller.register(fd, select.POLLIN)
        self.take_input()
        # The child said its code ended (a session's cell; a once or
        # serial call's child about to exit): its status.
        cell_status = None
        cell_ended_at = None  # when it was read
        watch = CellWatch(call.deadline, call.cpu_seconds) if self.session else None
        killed_at_deadline = expired
        cpu_at_start = self.child_cpu_seconds() if self.session else 0.0
        deadline = call.deadline
        while self.child_status is None and cell_status is None:
            self.input_interest()
            wait_ms = None
            now = now_ms()
            if watch:
                sent, wait_ms = watch.look(now, lambda: self.child_cpu_seconds() - cpu_at_start,
                                           self.done_waiting)
                if sent == signal.SIGINT:
                    interrupt(self.child, wake=watch.told == 2)
                elif sent == signal.SIGCONT:
                    wake_if_stopped(self.child)
                elif sent:
                    os.kill(self.child, sent)
            elif deadline and not killed_at_deadline:
                wait_ms = max(0, deadline - now)
                if wait_ms == 0:
                    # The call's time is up: the code goes, and what it
                    # saved still comes back, below.
                    killed_at_deadline = True
                    self.kill_the_rest()
                    wait_ms = None
            orphans_ms = ORPHAN_REAP_MS if now < self.orphan_reaped_at + ORPHANS_WATCHED_MS \
                else ORPHAN_LOOK_MS
            wait_ms = orphans_ms if wait_ms is None else min(wait_ms, orphans_ms)
            for fd, events in self.poller.poll(wait_ms):
                if fd in self.streams:
                    self.relay(fd)
                elif fd == self.pipes.done[0]:
                    # A session's code began, or the code ended; the end of
                    # the pipe is the child's own, which reap() tells.
                    data = os.read(fd, 4096)
                    if not data:
                        self.poller.unregister(fd)
                    words = self.done_unended + data
                    began, cell_status, self.done_unended = done_words(words,
                                                                       self.call_number)
                    for read in {id(data): data, id(words): words}.values():
                        if read is not self.done_unended:  # it can be either
                            wipe(read)
                    if watch and began:
                        watch.began = True
                    if cell_status is not None:
                        cell_ended_at = now_ms()
                elif fd == self.reader.fd:
                    if not self.reader.fill() and self.reader.ended:
                        if self.session:
                            # sage-sandbox went away: a session has nobody
                            # to answer.
                            self.kill_the_rest()
                            os._exit(0)
                        self.input_ended = True
                    self.take_input()
                elif fd == self.stdin_w:
                    if events & (select.POLLERR | select.POLLHUP):
                        self.close_input()
                    else:
                        self.give_input()
                elif fd == self.pidfd:
                    self.poller.unregister(fd)
            self.reap()
        return self.finish(call, cell_status, watch.why if watch else None,
                           killed_at_deadline, deadline, cell_ended_at,
                           told=not watch or watch.told > 0)

    def input_interest(self):
        want_host = not self.input_ended and self.pending.size < MAX_FRAME
        self._interest(self.reader.fd, select.POLLIN, want_host)
        self._interest(self.stdin_w, select.POLLOUT, self.stdin_w >= 0 and bool(self.pending))
        if self.input_ended and not self.pending:
            self.close_input()

    def _interest(self, fd, events, wanted):
        if fd < 0:
            return
        if wanted:
            self.poller.register(fd, events)
        else:
            try:
                self.poller.unregister(fd)
            except KeyError:
                pass

    def end_serial_call(self, reported):
        """A serial call's end, and the next call's child forked meanwhile.
        Every process of the call is sent SIGKILL first (kill(-1): no fork
        outruns it, and none of them runs a line of code again), then the
        next call's child is forked, and the call's processes are reaped
        while it makes itself ready: the kernel tears the call's process
        down (its page tables: about as long as a fork) on one core while
        the fork runs on the other. A dying process can still signal the new
        child (prepare_child says how, and why that comes to nothing but its
        death); one that died is forked again once none is left. Nothing of
        the next call reaches the new child before /tmp, /dev/shm and this
        process are checked (reset(), then X). Returns the call's process's
        wait status and CPU seconds."""
        called = self.child
        status, cpu = self.child_status, self.cpu_used  # if already reaped
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # Nothing of the call runs again: the host lifts its hold of the
        # call's CPU share, which the fork below and the kernel's teardown
        # of the call's processes are no part of (H, at the end, holds
        # what follows again: the call's files, the emptying of /tmp).
        self.writer.send(b"U")
        self.close_child_pipes()
        try:
            self.prepare_child()
            ready = self.child
        except OSError:
            # The call's processes, dying, still count against the pids
            # limit (a fork bomb's do): the fork waits until they are gone.
            ready = 0
        prepared, me, blocking = bool(ready), os.getpid(), False
        while True:
            try:
                pid, wait_status, usage = os.wait4(-1, 0 if blocking else os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                # What had ended is reaped (/proc is listed once for all
                # of it): is anything of the call left to wait for?
                if not any(name.isdigit() and int(name) not in (me, ready)
                           for name in os.listdir("/proc")):
                    break
                blocking = True
                continue
            blocking = False
            if os.WIFSTOPPED(wait_status):
                continue
            if ready and pid == ready:
                ready = 0  # the new child died (a signal, above): forked again below
            elif pid == called and status is None:
                status, cpu = wait_status, usage.ru_utime + usage.ru_stime
        if not ready:
            if prepared:
                self.close_child_pipes()
            try:
                self.prepare_child()
            except OSError as e:
                self.unprepared = "the next call's process could not be forked: %s" % e
        # The new child's setup that outlasts the reap runs from here on,
        # held, as the call's: about 2 ms of CPU, since the template does
        # Singular's part of it (child.prepare_reseed). Waiting for the
        # child's word before H cost 7% of a container's print(n) jobs/s.
        self.writer.send(b"H")
        if reported is not None and status is not None and os.WIFSIGNALED(status) \
                and os.WTERMSIG(status) == signal.SIGKILL:
            status = reported << 8  # it had said its status, and was exiting
        return status, cpu

    def done_waiting(self):
        """Something is on the done pipe, unread."""
        fd = self.pipes.done[0]
        if fd < 0:
            return False
        look = select.poll()
        look.register(fd, select.POLLIN)
        # Data only: a write end the code closed is no word.
        return any(events & select.POLLIN for _, events in look.poll(0))

    def finish(self, call, cell_status, interrupted, killed_at_deadline, deadline,
               cell_ended_at=None, told=True):
        """The X frame's trailer. interrupted: why a session's cell was
        past its limit; told: whether its SIGINT was sent (a kept cell
        that ended before is no interrupted one)."""
        self.drain()
        # A session's cell ended when its status came (cell_ended_at), not
        # once its output is drained: the host holds its end to its
        # deadline (sandbox.c, finish_result).
        ended_at = now_ms() if cell_ended_at is None else cell_ended_at
        if killed_at_deadline:
            ended_at = max(ended_at, deadline)
        trailer = {"ended_at": ended_at}
        # The call's process's wait status and CPU seconds: its own once
        # every kill below is done, but for a serial call's, whose child is
        # the next call's by then.
        ended = None
        session_goes_on = self.session and self.child_status is None
        if session_goes_on:
            session_goes_on = self.stop_between_cells()
            if not session_goes_on:
                self.kill_the_rest()
        elif self.mode == "serial" and self.recorded is not None:
            ended = self.end_serial_call(cell_status)
        elif call.out or self.session or self.mode == "serial":
            self.kill_the_rest()
        if call.out:
            outdir.send(self.writer, call.out)
            if session_goes_on and not outdir.empty():
                session_goes_on = False
                self.kill_the_rest()
        status, cpu = ended or (self.child_status, self.cpu_used)
        if self.mode == "once" and cell_status is not None and (
                status is None or os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            # It said its status as it exited: the container ends with
            # this process, so the kernel's teardown of the call's process
            # (its page tables: 10-15 ms of every cold run) is not waited
            # for; and a kill that came meanwhile (kill_the_rest, for the
            # files that come back) is not its end, as end_serial_call's.
            # The pipe is in the code's reach: a status the code writes
            # there in the child's words (child.done_word) ends its call as
            # its own exit would at that moment, and nothing more (what it
            # prints after is lost, as after os._exit; the host's limits
            # and verdicts are its own).
            status = cell_status << 8
        if session_goes_on:
            trailer.update({"exit": cell_status, "container": "kept"})
            if interrupted and told:
                trailer["interrupted"] = interrupted
            return trailer
        if status is None:  # the session's Sage could not be stopped
            trailer.update({"signal": signal.SIGKILL, "container": "lost"})
            return trailer
        if os.WIFSIGNALED(status):
            trailer["signal"] = os.WTERMSIG(status)
            if self.at_cpu_limit(call, status, cpu) and not (self.session and interrupted):
                trailer["cpu_limit"] = True
        else:
            trailer["exit"] = os.WEXITSTATUS(status)
        if self.session:
            trailer["container"] = "lost"
            if interrupted:
                trailer["interrupted"] = interrupted
        elif self.mode == "serial":
            why = self.reset()
            trailer["container"] = "ends" if why else "next"
            if why:
                trailer["why"] = why
        else:
            trailer["container"] = "ends"
        return trailer

    def at_cpu_limit(self, call, status, cpu_used):
        """At RLIMIT_CPU (soft = hard) the kernel sends SIGKILL: told from
        any other SIGKILL by the CPU time the process had used (90% of the
        limit: the kernel's precise clock and rusage's can differ under
        load)."""
        import resource
        cpu_limit = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if not self.session and 0 < call.cpu_seconds and (
                cpu_limit == resource.RLIM_INFINITY or call.cpu_seconds < cpu_limit):
            cpu_limit = call.cpu_seconds
        return os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGXCPU) and \
            cpu_limit != resource.RLIM_INFINITY and cpu_used >= cpu_limit * 0.9

    def reset(self):
        """Between the calls of a serial container, with no process of the
        last call left: its writable places as recorded, and this process as
        it was. None, or why the container cannot serve another call."""
        if self.recorded is None:
            return self.no_reset
        if self.unprepared:
            return self.unprepared
        for place, recorded in self.recorded.items():
            try:
                tmpreset.reset(recorded, place)
            except tmpreset.CannotReset as e:
                return "%s could not be put back: %s" % (place, e)
        differs = parent.changed(self.state)
        if differs:
            return "the launcher's state changed: %s" % ", ".join(differs)
        return netns.left_over(self.network)

    # ---- the warm-up --------------------------------------------------------------

    def idle(self):
        """No call of the host's has come, or begun to. The last call's input
        may still come after its X (I frames, the empty one that ends it):
        that is no call, and goes, wiped (read_call would skip it). Read
        until the pipe is empty: the inbox holds two frames' worth."""
        os.set_blocking(self.reader.fd, False)
        try:
            while True:
                while self.reader.inbox[:1] == b"I":
                    got = self.reader.next_ready()
                    if got is None:
                        break
                    wipe(got[1])
                if not self.reader.fill():
                    break
        finally:
            os.set_blocking(self.reader.fd, True)
        return not self.reader.inbox and not self.reader.ended

    def warm_up(self):
        """The warm-up's steps (warm.py), between calls: one after another
        while no call waits. The first call that comes meanwhile is served
        at once, as if there were no warm-up; a later one, of a container
        kept busy (batch's), first waits for one step (at most about as
        long as a cold run's start) and runs warmer for it: a busy
        container gets warm after as many calls as there are steps. After
        each step the prepared child
        is forked again, from this process as warm as it now is, and this
        process is left as the launcher keeps it: no handler, /tmp as Sage's
        import left it, its state recorded anew. A session's Sage is its
        first cell's: once that came, nothing here is forked again, and the
        warm-up stops."""
        if not self.warmer or self.warmer.done:
            return
        if self.frozen or (self.session and self.child_status is not None):
            self.warmer.done = True
            return
        if not self.idle() and not self.warmer.served_while_warming:
            self.warmer.served_while_warming = True
            return
        while not self.warmer.done:
            self.handlers.restore()
            try:
                self.warmer.step()
            finally:
                self.handlers.reread()
                self.handlers.drop_all()
            # What the step wrote in /tmp stays, as a cold call's first use
            # would leave it (on the images setup.sh makes, every
            # container starts with it: firstuse.py), but for files too
            # large to be written again after each call (GAP's saved
            # workspace, where the image keeps none: gapspace.py), and is
            # what each call's /tmp is put back to.
            try:
                trimmed = tmpreset.record_trimmed()
                if self.recorded is not None:
                    self.recorded["/tmp"] = trimmed
            except (OSError, tmpreset.CannotReset) as e:
                self.warmer.unsafe = "/tmp could not be recorded after the warm-up: %s" % e
            if self.mode == "serial":
                self.state = parent.state()  # for reset()
            if self.warmer.unsafe:
                # No call's process is forked from it again: the child
                # prepared before serves the next call, the container ends.
                self.unprepared = self.warmer.unsafe
                self.warmer.done = True
            else:
                self.replace_child()
            if self.warmer.done:
                self.writer.send(b"W", json.dumps(self.warmer.report(), sort_keys=True).encode())
            if not self.idle():
                return

    def replace_child(self):
        """The prepared child, never handed a call, forked again; where the
        fork fails, the old one stays, and the container ends after it."""
        fields = ("child", "pidfd", "pipes", "streams", "call_w", "stdin_w")
        try:
            stale = self.move_child_ends()
        except OSError as e:
            self.unprepared = "the next call's process could not be forked: %s" % e
            self.warmer.done = True
            return
        old = {name: getattr(self, name) for name in fields}
        try:
            self.prepare_child(stale)
        except OSError as e:
            for name, value in old.items():
                setattr(self, name, value)
            self.unprepared = "the next call's process could not be forked: %s" % e
            self.warmer.done = True
            return
        new = {name: getattr(self, name) for name in fields}
        for name, value in old.items():
            setattr(self, name, value)
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.close_child_pipes()
        os.waitpid(self.child, 0)
        for name, value in new.items():
            setattr(self, name, value)

    def move_child_ends(self):
        """The prepared child's ends, moved above any a fork makes, so that
        the next child's pipes get the numbers a cold call's have, and that
        child closes these (a call holds none of them: a fresh Sage has no
        such descriptors, and the memory watchdog charges each). Returns
        them. All or none: where one cannot be moved, none is, and the
        OSError is raised."""
        ends = [fd for fd in list(self.streams) + [self.call_w, self.stdin_w, self.pidfd,
                                                   self.pipes.done[0]] if fd >= 0]
        moved = {}
        try:
            for fd in ends:
                moved[fd] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, child.MOVED_FDS_FROM)
        except OSError:
            for fd in moved.values():
                os.close(fd)
            raise
        for fd in ends:
            os.close(fd)

        def at(fd):
            return moved.get(fd, fd)

        self.streams = {at(fd): name for fd, name in self.streams.items()}
        self.call_w, self.stdin_w, self.pidfd = at(self.call_w), at(self.stdin_w), at(self.pidfd)
        p = self.pipes
        p.stdin, p.call = (p.stdin[0], at(p.stdin[1])), (p.call[0], at(p.call[1]))
        p.stdout, p.stderr = (at(p.stdout[0]), p.stdout[1]), (at(p.stderr[0]), p.stderr[1])
        p.done = (at(p.done[0]), p.done[1])
        return list(moved.values())

    # ---- the whole ----------------------------------------------------------------

    def record_writable(self):
        """self.recorded: each writable place as it is now, to be put back
        after each call. None, or why they cannot be."""
        shared = tmpreset.shared_mappings()
        if shared:
            return "the launcher maps %s shared, and every call's process would" % shared[0]
        recorded = {}
        for place in tmpreset.WRITABLE:
            try:
                recorded[place] = tmpreset.record(place)
            except (OSError, tmpreset.CannotReset) as e:
                return "%s could not be recorded: %s" % (place, e)
        self.recorded = recorded
        return None

    def serve(self):
        if self.mode == "serial":
            # Where it cannot, it serves one call, then ends, and says why.
            self.no_reset = self.record_writable()
            # What reset() finds again before each next call. A container
            # of one call, or a session's, has no next call to keep them
            # for (the sockets' look is 7 ms of a cold run).
            self.state = parent.state()
            self.network = netns.sockets()
        self.warmer = warm.Warmer.granted()
        if self.warmer and self.recorded is None:
            # As each step's end will (warm_up); a serial container's
            # record_writable has just done it.
            try:
                tmpreset.record()
            except (OSError, tmpreset.CannotReset):
                self.warmer = None
        self.prepare_child()
        while True:
            self.warm_up()
            call = self.read_call()
            if call is None:
                self.kill_the_rest()
                os._exit(0)  # the host went away before sending the program
            trailer = self.run(call)
            said = json.dumps(trailer, sort_keys=True)
            sent = said.encode()
            if trailer["container"] not in ("next", "kept"):
                # The container ends with this process, and the kernel
                # would kill what the call left running only then, after
                # its result is out: a setsid spinner of a cold run ran
                # on 20-35 ms past the host's answer (attack helper). Their
                # teardown in the kernel is not waited for (10-15 ms of a
                # forked Sage's, on every cold run).
                kill_all_others()
            self.writer.send(b"X", sent)
            wipe(said)
            wipe(sent)
            # next: end_serial_call forked the next call's child.
            if trailer["container"] not in ("next", "kept"):
                os._exit(0)
