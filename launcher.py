# launcher.py: the container's first process. It imports Sage, takes the code
# from sage-sandbox on stdin, runs it in a child process as `sage FILE` would,
# and reports everything back as frames on stdout.
#
# The protocol (sandbox.c reads it): each frame is one type byte, a 4-byte
# big-endian length and that many bytes (at most 65536).
#   to the host:   S  started: first thing, before Sage or any code exists
#                  R  ready: Sage is imported, the code may come
#                  O  bytes the code wrote to stdout, E  to stderr
#                  X  "exit N T" or "signal N T": the code's process ended
#                     at T (CLOCK_MONOTONIC, ms) and everything it wrote is
#                     in the frames before
#   from the host: C  the code (UTF-8, at most 50000 bytes)
# The code runs in a forked child whose stdout and stderr are pipes to this
# process, which frames what they carry: nothing the code prints can be
# taken for a frame, and this process is made non-dumpable first, so the
# code cannot reach its descriptors or memory through /proc either. The
# child is never the namespace's init (whose signals, even its own SIGKILL,
# the kernel drops), and its CPU rlimit counts from the fork: Sage's import
# here is not charged to the code.
#
# Two differences from `sage FILE` that the sandbox needs:
# 1. PARI's stack fits the memory limit. Sage reserves a 1 GiB PARI stack at
#    start-up; under RLIMIT_DATA that reservation fails and PARI prints
#    "Warning: not enough memory, new PARI stack" into every run's stderr.
#    Sage's one call that creates it is redirected, while sage.all imports,
#    to ask for SAGE_SANDBOX_PARI_SIZEMAX bytes instead.
# 2. No interpreter teardown (0.3-0.4 s of Sage's atexit work): the
#    container, and everything in it, is deleted right after anyway.
import os
import signal
import struct
import sys
import time

MAX_FRAME = 65536


def send(kind, data=b""):
    view = memoryview(struct.pack(">cI", kind, len(data)) + data)
    while view:
        view = view[os.write(1, view):]


send(b"S")
os.umask(0o077)
for directory in ("/tmp/sage-home", "/tmp/dot-sage"):
    os.makedirs(directory, exist_ok=True)
# The code could otherwise interrupt this process (Python's own handler).
signal.signal(signal.SIGINT, signal.SIG_IGN)

try:
    import cypari2

    _pari_class = cypari2.Pari
    _sizemax = int(os.environ["SAGE_SANDBOX_PARI_SIZEMAX"])
    cypari2.Pari = lambda *args, **kwargs: _pari_class(1 << 20, _sizemax)
except (ImportError, KeyError, ValueError):
    _pari_class = None

import sage.all_cmdline  # noqa: E402

if _pari_class is not None:
    cypari2.Pari = _pari_class

send(b"R")


def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            os._exit(0)  # the host went away before sending the code
        data += chunk
    return data


kind, length = struct.unpack(">cI", read_exact(5))
if kind != b"C" or length > 50000:
    os._exit(2)
code = read_exact(length)


def run_code(source):
    """In the child: the code as `sage FILE` runs it; returns the status."""
    import numbers
    import traceback

    from sage.repl.preparse import preparse_file

    try:
        # A byte order mark starts many files saved on Windows: not code.
        preparsed = preparse_file(source.decode("utf-8-sig"))
        # Tracebacks quote the preparsed lines, so they are kept in a file
        # of their own, as Sage does.
        with open("/tmp/code.sage", "wb") as f:
            f.write(source)
        with open("/tmp/code.sage.py", "w", encoding="utf-8") as f:
            f.write(preparsed)
        namespace = {"__name__": "__main__", "__file__": "/tmp/code.sage",
                     "__builtins__": __builtins__}
        exec("from sage.all_cmdline import *", namespace)
        exec(compile(preparsed, "/tmp/code.sage.py", "exec"), namespace)
        return 0
    except SystemExit as e:
        # As Python does, but a Sage Integer is an exit code too:
        # sys.exit(3) is preparsed to sys.exit(Integer(3)).
        if e.code is None:
            return 0
        if isinstance(e.code, numbers.Integral):
            return int(e.code) & 0xFF
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        kind, value, tb = sys.exc_info()
        # The first frame is this function: not the user's.
        traceback.print_exception(kind, value, tb.tb_next if tb else tb)
        return 1


import ctypes  # noqa: E402
import select  # noqa: E402

PR_SET_DUMPABLE = 4
PTRACE_CONT = 7
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)

out_r, out_w = os.pipe()
err_r, err_w = os.pipe()
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake_w)

child = os.fork()
if child == 0:
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGCHLD else signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    # The one rlimit podman cannot set (it has no name for it): the code's
    # address space, which counts the shared mappings RLIMIT_DATA does not.
    import resource
    limit = int(os.environ.get("SAGE_SANDBOX_RLIMIT_AS", resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (null, out_r, out_w, err_r, err_w, wake_r, wake_w):
        os.close(fd)
    status = run_code(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)

os.close(out_w)
os.close(err_w)
streams = {out_r: b"O", err_r: b"E"}
poller = select.poll()
for fd in (out_r, err_r, wake_r):
    poller.register(fd, select.POLLIN)
ended = None


def reap():
    """Reaps every exited process (orphans are ours too, as init)."""
    global ended
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if os.WIFSTOPPED(status):
            # Only a tracee stops here: the code made us its tracer with
            # PTRACE_TRACEME (possible only under a profile that allows
            # ptrace). Let the signal through; a stop is not an end.
            libc.ptrace(PTRACE_CONT, pid, None, os.WSTOPSIG(status))
            continue
        if pid == child:
            ended = status


def relay(fd):
    try:
        data = os.read(fd, MAX_FRAME)
    except BlockingIOError:
        return False
    if not data:
        poller.unregister(fd)
        del streams[fd]
        return False
    send(streams[fd], data)
    return True


while ended is None:
    for fd, _ in poller.poll():
        if fd == wake_r:
            os.read(wake_r, 4096)
        elif fd in streams:
            relay(fd)
    reap()

# The child is gone and what it wrote is in the pipes; a descendant that
# still holds them open does not make the run wait.
for fd in list(streams):
    os.set_blocking(fd, False)
    while fd in streams and relay(fd):
        pass
# When the code ended, on the host's monotonic clock (a container has no
# clock of its own): sage-sandbox may read this frame late, if it was
# stopped, and a run that ended past its deadline is a timeout.
ended_at = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000
if os.WIFSIGNALED(ended):
    send(b"X", b"signal %d %d" % (os.WTERMSIG(ended), ended_at))
else:
    send(b"X", b"exit %d %d" % (os.WEXITSTATUS(ended), ended_at))
os._exit(0)
