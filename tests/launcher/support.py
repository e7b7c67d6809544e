# tests/launcher/support.py: what several of the launcher's tests share:
# a function run in a forked child (so that what it changes of a process
# stays there), frames collected from a pipe, and trees made, compared and
# removed whatever modes a test gave them.
import os
import pickle
import select
import signal
import stat
import tempfile
import threading
import time
import traceback

from launcher import frames

# A forked child that hangs would hang the whole run: it is killed instead
# (by the parent: a timer in the child would be part of the state that
# parent.state() records).
CHILD_SECONDS = 20


def in_child(function):
    """function() in a forked child; returns what it returned (pickled
    back through a pipe), or raises AssertionError with the child's
    traceback."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            os.close(r)
            try:
                payload = pickle.dumps(("ok", function()))
            except BaseException:
                payload = pickle.dumps(("error", traceback.format_exc()))
                status = 1
            frames.write_all(w, payload)
        finally:
            os._exit(status)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + CHILD_SECONDS
    try:
        poller = select.poll()
        poller.register(r, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                os.kill(pid, signal.SIGKILL)
                raise AssertionError("the child took more than %d s" % CHILD_SECONDS)
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _, wait_status = os.waitpid(pid, 0)
    if not chunks:
        raise AssertionError("the child said nothing (wait status %#x)" % wait_status)
    outcome, value = pickle.loads(b"".join(chunks))
    if outcome != "ok":
        raise AssertionError("in the child:\n" + value)
    return value


CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
PR_SET_PDEATHSIG = 1


def as_init(function):
    """function() as init of a pid namespace of its own, with /proc its
    own, in a user namespace (as rootless podman makes a container's): what
    the launcher does to every process but itself, kill(-1) too, reaches
    none of the host's. Its namespace ends with it, whatever it left
    running. What it returned; unittest.SkipTest where the kernel allows
    no such namespace here."""
    import ctypes
    import unittest
    libc = ctypes.CDLL(None, use_errno=True)

    def init():
        # Ended with the process that made the namespace (its timeout).
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getpid() != 1:
            raise AssertionError("not the namespace's init: pid %d" % os.getpid())
        for source, target, kind, flags in ((None, b"/", None, MS_REC | MS_PRIVATE),
                                            (b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)):
            if libc.mount(source, target, kind, flags, None) != 0:
                raise OSError(ctypes.get_errno(), "mount %s" % target.decode())
        if os.readlink("/proc/self") != "1":
            raise AssertionError("/proc is not the namespace's")
        return function()

    def maker():
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0:
            return ("skip", "unshare: " + os.strerror(ctypes.get_errno()))
        return ("ok", in_child(init))
    outcome, value = in_child(maker)
    if outcome == "skip":
        raise unittest.SkipTest(value)
    return value


class Pipe:
    """Both ends of a pipe, closed at the end of the test whatever it did."""

    def __init__(self, test):
        self.r, self.w = os.pipe()
        test.addCleanup(self.close)

    def write(self, data):
        frames.write_all(self.w, data)

    def close_write(self):
        if self.w >= 0:
            os.close(self.w)
            self.w = -1

    def close(self):
        self.close_write()
        if self.r >= 0:
            os.close(self.r)
            self.r = -1


def frames_sent_by(function, limit=frames.MAX_FRAME):
    """Calls function(Writer) with a Writer on a pipe, and returns every
    frame read from the other end as (kind, data): read on a thread, so
    that a writer that sends more than the pipe holds does not block."""
    r, w = os.pipe()
    got, errors = [], []

    def read_all():
        try:
            reader = frames.Reader(r)
            while True:
                frame = reader.frame(limit)
                if frame is None:
                    return
                got.append(frame)
        except BaseException as e:  # reported in the test's own thread
            errors.append(e)
            # The rest is read and dropped: a writer blocked on a full pipe
            # would hang the test instead of failing it.
            while os.read(r, 65536):
                pass

    thread = threading.Thread(target=read_all)
    thread.start()
    try:
        function(frames.Writer(w))
    finally:
        os.close(w)
        thread.join()
        os.close(r)
    if errors:
        raise errors[0]
    return got


def remove_tree(path, dir_fd=None):
    """Removes path whatever the modes in it (a test chmods directories
    000) and however long the paths below it; follows no link."""
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path, dir_fd=dir_fd)
        return
    os.chmod(path, 0o700, dir_fd=dir_fd)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        for name in os.listdir(fd):
            remove_tree(name, fd)
    finally:
        os.close(fd)
    os.rmdir(path, dir_fd=dir_fd)


def temporary_directory(test, parent=None):
    """A new directory, removed when the test ends whatever it left there."""
    path = tempfile.mkdtemp(prefix="launcher-test-", dir=parent)
    test.addCleanup(remove_tree, path)
    return path


def snapshot(root):
    """The tree below root as the tests compare it: relative path to
    (kind, permission bits, content or link target, mtime in ns). Every
    directory and file in it must be readable."""
    tree = {}

    def walk(directory, prefix):
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            st = os.lstat(path)
            kind = stat.S_IFMT(st.st_mode)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                content = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    content = f.read()
            else:
                content = None
            tree[prefix + name] = (kind, mode, content, st.st_mtime_ns)
            if stat.S_ISDIR(st.st_mode):
                walk(path, prefix + name + "/")

    walk(root, "")
    return tree


def write_file(path, data=b"", mode=None):
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def as_root():
    """Root reads and writes through any mode: cases that turn on a
    permission being denied are skipped, with this reason, when it holds."""
    return os.geteuid() == 0
