# launcher.py: the container's first process. It imports Sage, takes the
# program from sage-sandbox on stdin, runs it in a child process as `sage FILE`
# would, relays the program's stdin to it, and reports everything back as
# frames on stdout.
#
# The protocol (sandbox.c speaks it): each frame is one type byte, a 4-byte
# big-endian length and that many bytes (at most 65536).
#   to the host:   S  started: first thing, before Sage or any code exists
#                  R  ready: Sage is imported, the program may come; its
#                     payload is Sage's version
#                  K  "why": Sage cannot start in this image (instead of R);
#                     nothing ran, and nothing of this process's own is
#                     ever sent as the code's output
#                  O  bytes the code wrote to stdout, E  to stderr
#                  F  a file of the output directory begins: its path
#                     below the directory; D frames carry its bytes, and
#                     G ends it ("" whole, else why it was cut short)
#                  Z  "REASON\0PATH": a path of the output directory that
#                     was not sent (symlink, hardlink, special, depth,
#                     count, size, total, unreadable)
#                  X  "exit N T" or "signal N T": the code's process ended
#                     at T (CLOCK_MONOTONIC, ms) and everything it wrote is
#                     in the frames before; "signal 9 T cpu" when the kernel
#                     killed it at its CPU time rlimit; a session's cell
#                     ends with " kept", " interrupted timeout|cpu" or
#                     " lost", a serial call's with " next" (see L)
#   from the host: L  "KEY=N ...": this call's limits. cpu: the code's CPU
#                     rlimit in seconds (0: the container's; it can only be
#                     lowered; the container's leaves this process its
#                     share for Sage's import on top); inputs: how many files follow the code;
#                     out: 1 to send the output directory back, within
#                     out_files files, out_file_bytes each, out_bytes in
#                     all; deadline: when the code is killed (ms, the same
#                     clock as X's), so that its files still come back;
#                     session: 1 for a session's cell (run in the same
#                     child as the cells before it); serial: 1 when the
#                     container serves another call after this one, in a
#                     child of its own, /tmp put back between them (X then
#                     ends with " next"; without it, the container ends)
#                  A  the program's arguments, each ended by a NUL: the
#                     first is the name the code goes by (its file's name
#                     as the user gave it, or "-" for standard input)
#                  C  the code (UTF-8, at most 50000 bytes)
#                  F, D, G  each input file: its path below the working
#                     directory, its bytes, its end
#                  I  bytes for the code's standard input; an empty I frame
#                     is its end
# Code, arguments, files and data share this one channel: nothing of them
# is on a command line, in the environment or on a host mount.
#
# The code runs in a forked child whose stdout and stderr are pipes to this
# process, which frames what they carry: nothing the code prints can be
# taken for a frame, and this process is made non-dumpable first, so the
# code cannot reach its descriptors or memory through /proc either. The
# child is never the namespace's init (whose signals, even its own SIGKILL,
# the kernel drops). It is forked right after R and prepares itself while
# the call travels (a warm sandbox's, while it waits), so that a call waits
# for no fork. Its CPU rlimit is set when the code arrives: Sage's import
# here is not charged to the code, nor the preparation's whole seconds.
#
# Two differences from `sage FILE` that the sandbox needs:
# 1. PARI's stack fits the memory limit. Sage reserves a 1 GiB PARI stack at
#    start-up; under RLIMIT_DATA that reservation fails and PARI prints
#    "Warning: not enough memory, new PARI stack" into every run's stderr.
#    Sage's one call that creates it is redirected, while sage.all imports,
#    to ask for SAGE_SANDBOX_PARI_SIZEMAX bytes instead.
# 2. No interpreter teardown (0.3-0.4 s of Sage's atexit work): the
#    container, and everything in it, is deleted right after anyway.
#
# It runs under the image's own Sage Python (found by image.c), on Sage 9.5
# and 10.x. The Sage internals it uses (cypari2.Pari for PARI's stack,
# sage.all_cmdline, the preparser) are looked up here, at start-up: where
# one moved, the sandbox says so in a K frame, never in a traceback
# mixed into a run's output.
import os
import signal
import stat
import struct
import sys
import time

MAX_FRAME = 65536


def send(kind, data=b""):
    view = memoryview(struct.pack(">cI", kind, len(data)) + data)
    while view:
        view = view[os.write(1, view):]


def cannot_start(why):
    """Sage cannot start here: the host refuses the run, naming the image."""
    send(b"K", " ".join(why.split()).encode("utf-8", "replace")[:4000])
    os._exit(3)


send(b"S")
os.umask(0o077)
OUTPUT_DIR = "/tmp/sage-sandbox-out"  # SAGE_SANDBOX_OUT, empty at the start
try:
    for directory in ("/tmp/sage-home", "/tmp/dot-sage", OUTPUT_DIR):
        os.makedirs(directory, exist_ok=True)
except OSError as e:
    cannot_start("cannot make %s in the container's /tmp: %s" % (directory, e.strerror))
# The code could otherwise interrupt this process (Python's own handler).
signal.signal(signal.SIGINT, signal.SIG_IGN)

try:
    import cypari2

    _pari_class = cypari2.Pari
    _sizemax = int(os.environ["SAGE_SANDBOX_PARI_SIZEMAX"])
    cypari2.Pari = lambda *args, **kwargs: _pari_class(1 << 20, _sizemax)
except (ImportError, AttributeError, KeyError, ValueError):
    # Without it Sage still runs; PARI may warn about its stack.
    _pari_class = None

try:
    # sage.all_cmdline is what `sage FILE` imports (9.5 and 10.x); an
    # older or reorganised Sage may have only sage.all.
    try:
        import sage.all_cmdline  # noqa: F401
        SAGE_ALL = "sage.all_cmdline"
    except ModuleNotFoundError as e:
        if e.name != "sage.all_cmdline":
            raise
        import sage.all  # noqa: F401
        SAGE_ALL = "sage.all"
except BaseException as e:
    cannot_start("%s cannot import Sage: %s: %s" % (sys.executable, type(e).__name__, e))
finally:
    if _pari_class is not None:
        cypari2.Pari = _pari_class

try:
    from sage.repl.preparse import preparse_file
except ImportError:
    try:
        from sage.misc.preparser import preparse_file  # Sage before 9
    except ImportError:
        cannot_start("this Sage has no preparser where sage-sandbox looks for one "
                     "(sage.repl.preparse.preparse_file); sage-sandbox supports Sage 9.5 "
                     "and 10.x")
try:
    from sage.version import version as SAGE_VERSION
except ImportError:
    SAGE_VERSION = "unknown"

send(b"R", SAGE_VERSION.encode("ascii", "replace")[:64])


# What came from the host and was not yet taken: frames of a call, and
# the code's stdin (I frames) parsed from it while the code runs.
inbox = bytearray()


def read_exact(n):
    while len(inbox) < n:
        chunk = os.read(0, max(n - len(inbox), MAX_FRAME + 5))
        if not chunk:
            os._exit(0)  # the host went away before sending the program
        inbox.extend(chunk)
    data = bytes(inbox[:n])
    del inbox[:n]
    return data


def read_any_frame(limit):
    kind, length = struct.unpack(">cI", read_exact(5))
    if length > limit:
        os._exit(2)
    return kind, read_exact(length)


def read_frame(expected, limit):
    kind, data = read_any_frame(limit)
    if kind != expected:
        os._exit(2)
    return data


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def create_input(parts):
    """A new file at parts below the working directory, replacing what a
    session's earlier call left there (a file or a directory)."""
    import shutil
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
            shutil.rmtree(parts[-1], dir_fd=directory)
        return os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                       dir_fd=directory)
    finally:
        os.close(directory)


def receive_inputs(count):
    """The input files, into the working directory, before any code runs.
    The host checked their names; they are checked again here. One that
    cannot be made (a session's code put something in its way) is said so
    on the code's stderr, and its bytes are read and dropped."""
    for _ in range(count):
        parts = read_frame(b"F", 4096).split(b"/")
        if any(p in (b"", b".", b"..") or b"\0" in p for p in parts):
            os._exit(2)
        try:
            fd = create_input(parts)
        except OSError as e:
            fd = -1
            send(b"E", b"sage-sandbox: input file %s could not be written: %s\n" % (
                b"/".join(parts), (e.strerror or str(e)).encode("utf-8", "replace")))
        while True:
            kind, data = read_any_frame(MAX_FRAME)
            if kind == b"G":
                break
            if kind != b"D":
                os._exit(2)
            if fd >= 0:
                write_all(fd, data)
        if fd >= 0:
            os.close(fd)


MISSING_FILE_NOTE = (
    "note: the sandbox holds only this code, the image's packages and the files\n"
    "given with --input (MCP: files); nothing else of the host is there\n")


def run_code(source, namespace, filename):
    """In the prepared child: the code as `sage FILE` runs it, in the
    namespace made before it came; returns the status."""
    try:
        # A byte order mark starts many files saved on Windows: not code.
        text = source.decode("utf-8-sig")
        preparsed = preparse_file(text)
        # The preparser hoists the code's numeric constants into one line
        # of its own at the top; run it first, so that the code's lines keep
        # their numbers, and tracebacks quote the user's own lines.
        first, newline, rest = preparsed.partition("\n")
        if first.startswith("_sage_const_") and not text.startswith("_sage_const_"):
            exec(compile(first, filename, "exec"), namespace)
            preparsed = rest
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(preparsed, filename, "exec"), namespace)
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
    except BaseException as e:
        kind, value, tb = sys.exc_info()
        # The first frame is this function: not the user's.
        traceback.print_exception(kind, value, tb.tb_next if tb else tb)
        if isinstance(e, (FileNotFoundError, ModuleNotFoundError)) or (
                isinstance(e, OSError) and "did not find file" in str(e)):
            sys.stderr.write(MISSING_FILE_NOTE)
        return 1


import ctypes  # noqa: E402
import select  # noqa: E402

PR_SET_DUMPABLE = 4
PTRACE_CONT = 7
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)

# SIGINT: Sage's import installed cysignals' handler, which turns SIGINT
# into KeyboardInterrupt even inside PARI's or GMP's C loops. The code's
# process gets it back (a session's call is interrupted with it); this
# process ignores SIGINT again, as before the import: the code, which may
# signal the namespace's init, must not end the launcher so (it did: the
# run ended with a KeyboardInterrupt traceback of the launcher's).
# cysignals has a Python-level half too (python_check_interrupt), which
# takes the interrupt it recorded: without it, an interrupt that came
# outside C code stays pending and ends the session's next call at its
# first sig_on().
SIGACTION_BYTES = 512  # more than any libc's struct sigaction
sigint_action = ctypes.create_string_buffer(SIGACTION_BYTES)
libc.sigaction(signal.SIGINT, None, sigint_action)
sigint_handler = signal.getsignal(signal.SIGINT)
if not callable(sigint_handler):
    sigint_handler = signal.default_int_handler
signal.signal(signal.SIGINT, signal.SIG_IGN)

wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake_w)
# What reports the code's errors, imported once here: each child has it.
import linecache  # noqa: E402
import numbers  # noqa: E402
import traceback  # noqa: E402


def read_exactly_from(fd, n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_call(call_r):
    """In the prepared child: the next call, or None once the launcher
    closed the pipe: its CPU seconds, whether it is a session's cell, its
    arguments and its code."""
    header = read_exactly_from(call_r, 16)
    body = header and read_exactly_from(call_r, sum(struct.unpack(">IIII", header)[2:]))
    if body is None:
        return None
    cpu, session, args_len, code_len = struct.unpack(">IIII", header)
    argv = [os.fsdecode(a) for a in body[:args_len].split(b"\0")[:-1]] or ["-"]
    return cpu, session, argv, body[args_len:]


def child_main(in_r, out_w, err_w, call_r, done_w, launchers):
    """The prepared child: made ready before its call comes, then runs it
    (a session's child, every cell of the session). Never returns."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGCHLD else signal.SIG_IGN)
    # The Python-level handler first (PyErr_SetInterrupt, which cysignals
    # calls, ignores a signal Python does not handle), then cysignals' C
    # handler, which signal.signal replaced.
    signal.signal(signal.SIGINT, sigint_handler)
    libc.sigaction(signal.SIGINT, sigint_action, None)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    # The one rlimit podman cannot set (it has no name for it): the code's
    # address space, which counts the shared mappings RLIMIT_DATA does not.
    import resource
    address_space = int(os.environ.get("SAGE_SANDBOX_RLIMIT_AS", resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    # The launcher's ends of the pipes: the code must reach none of them.
    for fd in (in_r, out_w, err_w) + launchers:
        os.close(fd)
    # The fork's copy of the namespace made once below: the code's changes
    # to it are this process's alone.
    namespace = SAGE_NAMESPACE
    first_call = True
    while True:
        try:
            call = read_call(call_r)
        except KeyboardInterrupt:
            continue  # an interrupt that came as a cell ended: nothing to stop
        if call is None:
            os._exit(0)  # no call came: the sandbox was stopped while waiting
        call_cpu_seconds, in_session, argv, code = call
        if first_call and not in_session:
            # The call's CPU time, where it is less than the container's:
            # a warm sandbox was started for the longest call it may
            # serve. The rlimit counts whole seconds from the fork: the
            # preparation's whole seconds (none, in practice) are added,
            # its fraction of one counts as the code's, as it did when
            # the fork came with the code. A session's cells are watched
            # by the launcher instead: an rlimit counts a process's life.
            cpu_soft, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
            usage = resource.getrusage(resource.RUSAGE_SELF)
            want = int(usage.ru_utime + usage.ru_stime) + call_cpu_seconds
            if 0 < call_cpu_seconds and (cpu_hard == resource.RLIM_INFINITY or want < cpu_hard):
                resource.setrlimit(resource.RLIMIT_CPU, (want, want))
        first_call = False
        # Tracebacks name the file as the user gave it, with the user's lines.
        filename = "<stdin>" if argv[0] == "-" else argv[0]
        namespace["__file__"] = filename
        sys.argv = argv
        status = run_code(code, namespace, filename)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        if not in_session:
            os._exit(status)
        while True:
            try:
                os.write(done_w, b"%d\n" % status)
                break
            except KeyboardInterrupt:
                continue


# What the code runs in, as `sage FILE` gives it: Sage's names, made once
# here (45 ms: as long as the fork itself) for every child to inherit.
SAGE_NAMESPACE = {"__name__": "__main__", "__builtins__": __builtins__}
exec("from %s import *" % SAGE_ALL, SAGE_NAMESPACE)

# The child that runs the call is forked and made ready before the call
# comes (a warm sandbox's wait is spent here, not the call's time): the
# fork of an imported Sage, its namespace, rlimits and descriptors. The
# call itself brings only its code, its arguments and its CPU seconds. In
# a session the same child runs every cell in the same namespace, as a
# notebook's kernel does; a container that serves several calls forks a
# new one for each, from this process, which no call's code touched.
child = 0
child_status = None  # the child's wait status, once it ended
cpu_used = 0.0
in_w = call_w = done_r = -1
streams = {}
poller = None


def fork_prepared_child():
    global child, child_status, cpu_used, in_w, call_w, done_r, streams, poller
    global input_closed
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    call_r, call_w = os.pipe()
    # A session's cells end without the process: the child says so here.
    done_r, done_w = os.pipe()
    child = os.fork()
    if child == 0:
        child_main(in_r, out_w, err_w, call_r, done_w,
                   (in_w, out_r, err_r, call_w, done_r, wake_r, wake_w))
    for fd in (call_r, done_w, in_r, out_w, err_w):
        os.close(fd)
    os.set_blocking(in_w, False)
    os.set_blocking(done_r, False)
    streams = {out_r: b"O", err_r: b"E"}
    poller = select.poll()
    for fd in (out_r, err_r, wake_r, done_r):
        poller.register(fd, select.POLLIN)
    child_status = None
    cpu_used = 0.0
    pending.clear()
    input_closed = False


def close_child_pipes():
    """The ended child's pipes, before the next child's are made."""
    close_input()
    for fd in list(streams) + [call_w, done_r]:
        if fd >= 0:
            os.close(fd)
    streams.clear()


# The code's standard input: I frames from the host, parsed from inbox,
# into pending, then into the child's pipe. The host is read only while
# pending is short: a code that does not read its input holds the data
# back to sage-sandbox, which stops reading its own stdin.
pending = bytearray()
input_ended = False  # the empty I frame came, or the host closed
input_closed = False  # the child's pipe is closed
in_session = False  # this call is a session's cell


def close_input():
    global input_closed
    if not input_closed:
        input_closed = True
        pending.clear()
        os.close(in_w)


def parse_inbox():
    global input_ended
    while len(inbox) >= 5:
        kind, length = struct.unpack(">cI", inbox[:5])
        if kind != b"I" or length > MAX_FRAME:
            os._exit(2)
        if len(inbox) < 5 + length:
            break
        if length == 0:
            input_ended = True
        elif not input_closed:
            pending.extend(inbox[5:5 + length])
        del inbox[:5 + length]


def take_input():
    global input_ended
    try:
        data = os.read(0, MAX_FRAME + 5)
    except BlockingIOError:
        return
    if not data:
        if in_session:
            # sage-sandbox went away: a session has nobody to answer.
            kill_the_rest()
            os._exit(0)
        input_ended = True
        return
    inbox.extend(data)
    parse_inbox()


def give_input():
    try:
        del pending[:os.write(in_w, pending[:MAX_FRAME])]
    except BlockingIOError:
        pass
    except OSError:  # the code closed its stdin: what is left is not wanted
        close_input()


def input_interest():
    want_host = not input_ended and len(pending) < MAX_FRAME
    if want_host:
        poller.register(0, select.POLLIN)
    else:
        try:
            poller.unregister(0)
        except KeyError:
            pass
    if not input_closed and pending:
        poller.register(in_w, select.POLLOUT)
    else:
        try:
            poller.unregister(in_w)
        except KeyError:
            pass
    if input_ended and not pending:
        close_input()


def reap():
    """Reaps every exited process (orphans are ours too, as init)."""
    global child_status, cpu_used
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == child:
            cpu_used = usage.ru_utime + usage.ru_stime
        if os.WIFSTOPPED(status):
            # Only a tracee stops here: the code made us its tracer with
            # PTRACE_TRACEME (possible only under a profile that allows
            # ptrace). Let the signal through; a stop is not an end.
            libc.ptrace(PTRACE_CONT, pid, None, os.WSTOPSIG(status))
            continue
        if pid == child:
            child_status = status


def relay(fd):
    try:
        data = os.read(fd, MAX_FRAME)
    except BlockingIOError:
        return False
    if not data:
        poller.unregister(fd)
        del streams[fd]
        os.close(fd)
        return False
    send(streams[fd], data)
    return True


def drain():
    """What the code wrote is in the pipes: all of it goes out now; a
    descendant that still holds them open does not make the run wait."""
    for fd in list(streams):
        os.set_blocking(fd, False)
        while fd in streams and relay(fd):
            pass


def kill_the_rest():
    """Every process but this one (init of the namespace is spared by
    kill(-1)): the code, and whatever it left running."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_all_but(spared):
    """Between a session's cells: every process but this one and the
    session's Sage, until none is left alive (a process may fork while it
    is being looked for; the nproc limit bounds how long that goes on)."""
    me = os.getpid()
    for _ in range(1000):
        alive = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in (me, spared):
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    if f.read().rpartition(b")")[2].split()[0] == b"Z":
                        continue
                os.kill(int(name), signal.SIGKILL)
                alive = True
            except (OSError, IndexError):
                pass
        reap()
        if not alive:
            return


TICKS = os.sysconf("SC_CLK_TCK")


def child_cpu_seconds():
    """The session's Sage's own CPU time so far, from /proc."""
    try:
        with open("/proc/%d/stat" % child, "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def now_ms():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000000


# A session's cell past its timeout or CPU seconds is interrupted
# (SIGINT: KeyboardInterrupt, its state kept); still running after this
# long, it is killed, and the session with it.
INTERRUPT_GRACE_MS = 2000
# How often a session's cell's CPU time is looked at.
CPU_LOOK_MS = 100


def send_output_files():
    """The output directory, walked without following links, after every
    process of the code is gone: the tree cannot change while it is sent.
    The host checks everything again; this side only saves it the work."""
    max_files, max_file, max_total = limit(b"out_files"), limit(b"out_file_bytes"), limit(b"out_bytes")
    sent = [0, 0]  # files, bytes

    def drop(reason, path):
        send(b"Z", reason + b"\0" + path[:4000])

    def send_file(directory, name, path, st):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
        except OSError:
            return drop(b"unreadable", path)
        try:
            now = os.fstat(fd)
            if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(now.st_mode):
                return drop(b"unreadable", path)
            send(b"F", path)
            left, why = max_file + 1, b""
            while left > 0:
                try:
                    data = os.read(fd, min(MAX_FRAME, left))
                except OSError:
                    why = b"unreadable"
                    break
                if not data:
                    break
                send(b"D", data)
                left -= len(data)
                sent[1] += len(data)
            send(b"G", why)
            sent[0] += 1
        finally:
            os.close(fd)

    def walk(directory, prefix, depth):
        for name in sorted(os.listdir(directory)):
            path = prefix + os.fsencode(name)
            try:
                st = os.stat(name, dir_fd=directory, follow_symlinks=False)
            except OSError:
                drop(b"unreadable", path)
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= 16:
                    drop(b"depth", path + b"/")
                    continue
                try:
                    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                    dir_fd=directory)
                except OSError:
                    drop(b"unreadable", path + b"/")
                    continue
                try:
                    walk(inner, path + b"/", depth + 1)
                finally:
                    os.close(inner)
            elif stat.S_ISLNK(st.st_mode):
                drop(b"symlink", path)
            elif not stat.S_ISREG(st.st_mode):
                drop(b"special", path)
            elif st.st_nlink > 1:
                drop(b"hardlink", path)
            elif sent[0] >= max_files:
                drop(b"count", path)
            elif st.st_size > max_file:
                drop(b"size", path)
            elif sent[1] + st.st_size > max_total:
                drop(b"total", path)
            else:
                send_file(directory, name, path, st)

    top = os.open(OUTPUT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    walk(top, b"", 1)
    os.close(top)


def empty_output_dir():
    """A session's files went back with their cell: the next cell's
    directory starts empty, as a run's does."""
    try:
        remove_tree(OUTPUT_DIR)
    except (OSError, RecursionError):
        pass
    os.makedirs(OUTPUT_DIR, exist_ok=True)


# What of /tmp a container that serves several calls keeps: exactly what
# was there when Sage was imported, before any call. Regular files of it
# (Sage's caches: a few bytes here) are kept in memory to be put back.
TREE_FILE_BYTES = 1 << 20


def tree_key(st):
    """What tells a changed entry: anything written, renamed over, or
    chmod'ed has a new ctime, which no call can set back."""
    return (st.st_ino, stat.S_IFMT(st.st_mode), st.st_mode, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns, st.st_uid)


def tree_entries(path, rel, into, with_content):
    for name in sorted(os.listdir(path)):
        full, key = path + "/" + name, rel + name
        st = os.lstat(full)
        content = None
        if not with_content:
            pass
        elif stat.S_ISREG(st.st_mode) and st.st_size <= TREE_FILE_BYTES:
            try:
                with open(full, "rb") as f:
                    content = f.read()
            except OSError:
                pass
        elif stat.S_ISLNK(st.st_mode):
            content = os.readlink(full)
        into[key] = (st, content)
        if stat.S_ISDIR(st.st_mode) and os.access(full, os.R_OK | os.X_OK):
            tree_entries(full, key + "/", into, with_content)


def tmp_tree(with_content):
    """Every entry of /tmp by path: its stat, and (with_content, at the
    start) a small regular file's bytes or a link's target."""
    entries = {}
    tree_entries("/tmp", "", entries, with_content)
    return entries


def remove_tree(path):
    """Removes what a call left, following no link; a directory it made
    unreadable is made readable first (it is this uid's)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        if st.st_mode & 0o700 != 0o700:
            os.chmod(path, 0o700)
        for name in os.listdir(path):
            remove_tree(path + "/" + name)
        os.rmdir(path)
    else:
        os.unlink(path)


def tmp_restored():
    """Between the calls of a container that serves several, with no
    process of the last call left: /tmp (the working directory, HOME,
    DOT_SAGE, SAGE_SANDBOX_OUT) made as it was before the first call.
    What was added goes, what was changed or removed is put back. False
    where that cannot be done (the container then ends)."""
    try:
        now = tmp_tree(False)
        for key in sorted(now, reverse=True):
            st, _ = now[key]
            was = tmp_at_start.get(key)
            same = was is not None and (tree_key(was[0]) == tree_key(st) or (
                stat.S_ISDIR(st.st_mode) and was[0].st_ino == st.st_ino))
            if not same:
                remove_tree("/tmp/" + key)
        for key in sorted(tmp_at_start):
            st, content = tmp_at_start[key]
            path = "/tmp/" + key
            try:
                there = os.lstat(path)
            except FileNotFoundError:
                there = None
            if stat.S_ISDIR(st.st_mode):
                if there is None:
                    os.mkdir(path)
                if there is None or there.st_mode != st.st_mode:
                    os.chmod(path, stat.S_IMODE(st.st_mode))
            elif there is not None:
                continue
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(content, path)
            elif stat.S_ISREG(st.st_mode) and content is not None:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                             stat.S_IMODE(st.st_mode))
                try:
                    write_all(fd, content)
                    os.fchmod(fd, stat.S_IMODE(st.st_mode))
                finally:
                    os.close(fd)
            else:
                return False
        return True
    except (OSError, RecursionError):
        return False


def limit(key):
    try:
        return int(limits.get(key, b"0"))
    except ValueError:
        os._exit(2)


def read_call_frames():
    """The call's frames. A warm sandbox waits here, blocked, with its
    child prepared, and a session between its cells: no code exists
    before these frames come. The end of a session's previous input may
    come first, read after its cell had ended: it is skipped."""
    global limits
    os.set_blocking(0, True)
    while True:
        kind, data = read_any_frame(MAX_FRAME)
        if kind != b"I":
            break
    if kind != b"L" or len(data) > 512:
        os._exit(2)
    limits = dict(item.split(b"=", 1) for item in data.split() if b"=" in item)
    args = read_frame(b"A", MAX_FRAME)
    code = read_frame(b"C", 50000)
    receive_inputs(limit(b"inputs"))
    return args, code


limits = {}
tmp_at_start = tmp_tree(True)
fork_prepared_child()
while True:
    args, code = read_call_frames()
    call_cpu_seconds = limit(b"cpu")
    deadline = limit(b"deadline")
    in_session = limit(b"session") == 1
    # This container serves another call after this one, in a new child.
    serial = limit(b"serial") == 1 and not in_session
    try:
        write_all(call_w, struct.pack(">IIII", max(0, call_cpu_seconds), in_session, len(args),
                                      len(code)) + args + code)
    except OSError:
        pass  # the child is gone: its status says why, below
    if not in_session:
        os.close(call_w)
        call_w = -1
    os.set_blocking(0, False)
    input_ended = False
    parse_inbox()
    cell_status = None  # a session's cell ended, the child still alive
    interrupted = b""  # why a session's cell was interrupted: timeout, cpu
    interrupted_at = 0
    killed_at_deadline = False
    cpu_at_start = child_cpu_seconds() if in_session else 0.0
    while child_status is None and cell_status is None:
        input_interest()
        wait_ms = None
        now = now_ms()
        if in_session:
            if not interrupted:
                if deadline and now >= deadline:
                    interrupted = b"timeout"
                elif call_cpu_seconds and child_cpu_seconds() - cpu_at_start >= call_cpu_seconds:
                    interrupted = b"cpu"
                if interrupted:
                    interrupted_at = now
                    os.kill(child, signal.SIGINT)
            if interrupted and now >= interrupted_at + INTERRUPT_GRACE_MS:
                os.kill(child, signal.SIGKILL)
                wait_ms = None
            elif interrupted:
                wait_ms = interrupted_at + INTERRUPT_GRACE_MS - now
            else:
                wait_ms = CPU_LOOK_MS if call_cpu_seconds else None
                if deadline:
                    wait_ms = min(wait_ms or CPU_LOOK_MS, max(0, deadline - now))
        elif deadline and not killed_at_deadline:
            wait_ms = max(0, deadline - now)
            if wait_ms == 0:
                # The run's time is up: the code goes, and what it saved
                # still comes back, below.
                killed_at_deadline = True
                kill_the_rest()
                wait_ms = None
        for fd, events in poller.poll(wait_ms):
            if fd == wake_r:
                os.read(wake_r, 4096)
            elif fd in streams:
                relay(fd)
            elif fd == done_r:
                # A session's cell ended; the end of the pipe is the
                # child's own, which reap() tells.
                line = os.read(done_r, 64)
                if line:
                    cell_status = int(line.split()[0])
                else:
                    poller.unregister(done_r)
            elif fd == 0:
                take_input()
            elif fd == in_w and not input_closed:
                if events & (select.POLLERR | select.POLLHUP):
                    close_input()
                else:
                    give_input()
        reap()

    drain()
    ended_at = now_ms()
    if killed_at_deadline:
        ended_at = max(ended_at, deadline)
    session_goes_on = in_session and child_status is None
    if session_goes_on:
        kill_all_but(child)
    elif limit(b"out") or in_session or serial:
        kill_the_rest()
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
    if limit(b"out"):
        try:
            send_output_files()
        except OSError:
            pass  # the directory itself was replaced or removed: nothing to send
        if session_goes_on:
            empty_output_dir()

    # When the code ended, on the host's monotonic clock (a container has
    # no clock of its own): sage-sandbox may read this frame late, if it
    # was stopped, and a run that ended past its deadline is a timeout. A
    # session's cell says what became of the session: kept, kept though
    # interrupted (timeout or cpu), or lost.
    if session_goes_on:
        send(b"X", b"exit %d %d %s" % (cell_status, ended_at,
                                       b"interrupted " + interrupted if interrupted else b"kept"))
        continue
    # A container that serves several calls says whether it can serve the
    # next: only once /tmp is as it was before the first call.
    if in_session:
        how = b" lost" + (b" " + interrupted if interrupted else b"")
    elif serial and tmp_restored():
        how = b" next"
    else:
        how = b""
        serial = False
    if os.WIFSIGNALED(child_status):
        # At RLIMIT_CPU (soft = hard) the kernel sends SIGKILL: told from
        # any other SIGKILL by the CPU time the process had used (90% of
        # the limit: the kernel's precise clock and rusage's can differ
        # under load).
        import resource
        cpu_limit = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if not in_session and 0 < call_cpu_seconds and (
                cpu_limit == resource.RLIM_INFINITY or call_cpu_seconds < cpu_limit):
            cpu_limit = call_cpu_seconds
        at_limit = os.WTERMSIG(child_status) in (signal.SIGKILL, signal.SIGXCPU) and \
            cpu_limit != resource.RLIM_INFINITY and cpu_used >= cpu_limit * 0.9
        if in_session and at_limit and not interrupted:
            how = b" lost cpu"
            at_limit = False
        send(b"X", b"signal %d %d%s%s" % (os.WTERMSIG(child_status), ended_at,
                                           b" cpu" if at_limit else b"", how))
    else:
        send(b"X", b"exit %d %d%s" % (os.WEXITSTATUS(child_status), ended_at, how))
    if not serial:
        os._exit(0)
    close_child_pipes()
    fork_prepared_child()
