# launcher/parent.py: the launcher as the parent of every call: a process
# that no call can signal or change, and the check that none did.
#
# The launcher is the container's first process, the init of its pid
# namespace, and every call's code runs as the same uid. The kernel drops a
# signal sent to a namespace's init from inside the namespace unless init
# has a handler for it (SIGKILL and SIGSTOP included). Importing Sage
# installs cysignals' handlers (SIGHUP, SIGALRM, SIGINT, SIGSEGV, ...), so a
# call's os.kill(1, SIGHUP) was delivered and stored, and every later call
# forked from that state ended at its first sig_on(): wrong output, exit 0.
# So once Sage is imported, the handlers are recorded (to be given back to
# each call's own process) and every signal here is left at SIG_DFL: no
# signal from a call reaches this process at all. Children are watched
# through a pidfd, not SIGCHLD.
#
# What else of this process a fork inherits (rlimits, nice, scheduling
# policy and affinity, I/O priority, umask, cwd, environment, the signal
# mask) no call can change: the seccomp profile lets prlimit64,
# setpriority, sched_set* and ioprio_set act on the caller only, and the
# rest is a process's own. state() records all of it, and changed() is
# asked before each call is handed to a child: a difference, should one
# ever appear, ends the container rather than pass to the next call.
import ctypes
import os
import resource
import signal

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
SIGACTION_BYTES = 512  # more than any libc's struct sigaction
# sigaction and the room for a struct sigaction, bound as the launcher
# loads: a session's steps between cells (child.between_cells) look
# nothing up in ctypes once the code began (ctypes' lookups and
# create_string_buffer run Python, which reads the builtins the code
# shares and may have replaced).
sigaction = libc.sigaction
SigactionBuffer = ctypes.c_char * SIGACTION_BYTES
# glibc's struct sigaction opens with the handler everywhere but on MIPS
# (where sa_flags comes first): there, every action counts as changed.
HANDLER_FIRST = not os.uname().machine.startswith("mips")

# Every signal a handler can be set for.
SIGNALS = sorted(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP))


def set_dumpable(on):
    """Not dumpable: no process of the same uid can open this one's
    /proc entries (memory, descriptors, environment) or trace it."""
    libc.prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0)


def dropped(sig):
    """A signal's action in the launcher."""
    return signal.SIG_IGN if sig in (signal.SIGPIPE, signal.SIGXFSZ) else signal.SIG_DFL


class Handlers:
    """The signal handlers as Sage's import left them: each signal's C-level
    action (cysignals installs its own) and its Python-level handler, for
    every signal whose action is not already the launcher's (dropped())."""

    def __init__(self, python=None):
        """python: Python-level handlers to give a call's process where the
        import left Python's table out of date (SIGINT: ignored while Sage
        imported, then cysignals' C handler, which hands interrupts to
        Python's default_int_handler)."""
        self.python = python
        self.reread()

    def reread(self):
        """The handlers as they are now (a warm-up step may have started a
        library that installs its own: ECL's)."""
        self.actions = {}
        python = self.python
        for sig in SIGNALS:
            action = SigactionBuffer()
            if sigaction(sig, None, action) == 0:
                handler = (python or {}).get(sig, signal.getsignal(sig))
                if not (HANDLER_FIRST and handler == dropped(sig) and
                        (ctypes.c_void_p.from_buffer(action).value or 0) == int(handler)):
                    self.actions[sig] = (action, handler)

    def drop_all(self):
        """In the launcher: no signal is caught, none is blocked. SIGPIPE and
        SIGXFSZ are ignored, as Python has them: a write to a pipe nobody
        reads is EPIPE, not a death, even where this process is not its
        namespace's init (which the kernel would spare anyway). A signal
        already so, at both levels, is not in actions: left alone here, it
        needs nothing given back in a call's process (most signals: each
        fork restores a few, not all 62)."""
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in self.actions:
            try:
                signal.signal(sig, dropped(sig))
            except (OSError, ValueError):
                pass

    def restore(self):
        """In a call's process: the handlers Sage installed. The
        Python-level one first (cysignals' C handler calls
        PyErr_SetInterrupt, which needs Python's SIGINT handler), then the
        C-level action over it."""
        for sig, (action, handler) in self.actions.items():
            if handler is not None:
                try:
                    signal.signal(sig, handler)
                except (OSError, ValueError, TypeError):
                    pass
            sigaction(sig, action, None)


STATUS_FIELDS = ("SigBlk", "SigIgn", "SigCgt", "SigPnd", "ShdPnd", "NoNewPrivs", "Seccomp",
                 "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def _status():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in STATUS_FIELDS:
                fields[key] = value.strip()
    return fields


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e.strerror


# ioprio_get(IOPRIO_WHO_PROCESS, 0): Python has no call for it.
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)


def _io_priority():
    if IOPRIO_GET is None:
        return None
    ctypes.set_errno(0)
    return libc.syscall(IOPRIO_GET, 1, 0), ctypes.get_errno()


def state():
    """Everything of this process that a forked child inherits, or that
    tells whether a call reached it."""
    umask = os.umask(0o077)
    os.umask(umask)
    sched = os.sched_getscheduler(0)
    return {
        "rlimits": {name: resource.getrlimit(getattr(resource, name))
                    for name in sorted(dir(resource)) if name.startswith("RLIMIT_")},
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "io_priority": _io_priority(),
        "scheduler": (sched, os.sched_getparam(0).sched_priority),
        "affinity": sorted(os.sched_getaffinity(0)),
        "umask": umask,
        "cwd": os.getcwd(),
        "environment": dict(os.environ),
        "status": _status(),
        "oom_score_adj": _read("/proc/self/oom_score_adj"),
        "timers": _read("/proc/self/timers"),
        "itimers": [signal.getitimer(t) for t in
                    (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)],
        "process_group": (os.getpgid(0), os.getsid(0)),
    }


def changed(before):
    """The names of what differs from before (state()), or []."""
    now = state()
    return sorted(key for key in before if now.get(key) != before[key])
