# launcher/tmpreset.py: /tmp and /dev/shm as a fresh container has them,
# recorded once Sage is imported, and put back whole between the calls of a
# container that serves several.
#
# They are the container's only writable places (HOME, DOT_SAGE, the
# working directory and SAGE_SANDBOX_OUT are in /tmp; POSIX semaphores and
# shared memory in /dev/shm, which starts empty) and every call's code runs
# as this process's uid, so whatever a call left there, in any mode, this
# process may remove. Nothing is compared to decide what to keep: a
# comparison by stat cannot see a directory chmod'ed 000 (its content was
# planted for the next call: a matplotlibrc, a maxima-init.lisp that ran a
# shell command in a later call, a libgap workspace), nor a file written in
# place through a shared mapping, which tmpfs does not date. Everything
# below each goes, and the recording (a few bytes: Sage's caches) is
# written again, modes and modification times included; then the result is
# compared with the recording, and a reset that cannot be made exact ends
# the container instead.
import os
import stat
import tempfile

from launcher.frames import write_all

# The writable places, each a tmpfs of its own (podman.c).
WRITABLE = ("/tmp", "/dev/shm")
# What a writable place may hold after Sage's import for a container to
# serve several calls: its regular files are kept in memory to be written
# again.
MAX_RECORDED_BYTES = 4 << 20
MAX_RECORDED_ENTRIES = 4096
# Directories deeper than this below a place are not walked down: such a tree
# (a call made it) ends the container instead.
MAX_DEPTH = 200
# {place: whether it lists newest first}, asked once per place (reset()).
_NEWEST_FIRST = {}


class CannotReset(Exception):
    """A writable place cannot be made as recorded: the container must end."""


class Entry:
    __slots__ = ("path", "kind", "mode", "content", "times", "rank")

    def __init__(self, path, kind, mode, content, times, rank=0):
        self.path, self.kind, self.mode, self.content, self.times = \
            path, kind, mode, content, times
        self.rank = rank  # its place in its directory's listing (readdir's order)

    def key(self):
        return (self.path, self.kind, self.mode, self.content)


def _walk(root):
    """Every entry below root as (relative path, lstat, its place in its
    directory's listing), parents first, names sorted, following no link
    and opening nothing by path."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    stack = [(top, "", 1)]
    try:
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                listed = os.listdir(fd)
                rank = {name: i for i, name in enumerate(listed)}
                for name in sorted(listed):
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    path = prefix + name
                    yield fd, name, path, st, rank[name]
                    if stat.S_ISDIR(st.st_mode):
                        if depth >= MAX_DEPTH:
                            raise CannotReset("directories deeper than %d" % MAX_DEPTH)
                        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                        dir_fd=fd)
                        stack.append((inner, path + "/", depth + 1))
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _content(dir_fd, name, st):
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(name, dir_fd=dir_fd)
    if stat.S_ISREG(st.st_mode):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        finally:
            os.close(fd)
    return None


def record(root="/tmp"):
    """The tree below root: directories, regular files with their bytes,
    symbolic links with their targets. CannotReset when it holds anything
    else, or more than a container that serves several calls keeps."""
    entries, total = [], 0
    for fd, name, path, st, rank in _walk(root):
        kind = stat.S_IFMT(st.st_mode)
        if kind not in (stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK):
            raise CannotReset("%s is neither a file, a directory nor a link" % path)
        content = _content(fd, name, st)
        total += len(content or b"")
        if total > MAX_RECORDED_BYTES or len(entries) >= MAX_RECORDED_ENTRIES:
            raise CannotReset("more than %d bytes or %d entries" % (
                MAX_RECORDED_BYTES, MAX_RECORDED_ENTRIES))
        entries.append(Entry(path, kind, stat.S_IMODE(st.st_mode), content,
                             (st.st_atime_ns, st.st_mtime_ns), rank))
    root_mode = stat.S_IMODE(os.stat(root).st_mode)
    return root_mode, entries


def record_trimmed(root="/tmp", largest=1 << 20):
    """root as it is, once regular files larger than largest are removed
    (a warm-up leaves what a cold call's first use leaves, GAP's history
    in ~/.gap_hist or ~/.gap, but not GAP's saved workspace, where the
    image keeps none of its own (gapspace.py): 50-57 MB to write again
    after every call)."""
    for fd, name, path, st, _ in _walk(root):
        if stat.S_ISREG(st.st_mode) and st.st_size > largest:
            os.unlink(name, dir_fd=fd)
    return record(root)


def shared_mappings(places=WRITABLE):
    """This process's shared mappings that a call could write through: a
    call's process forked from it would inherit each, and share its pages
    with every other call's, whatever the reset removes. Those mapped
    writable, those of a file in places, and those of no file the image
    holds (anonymous: "/dev/zero (deleted)"; a deleted file; SysV's and
    memfd's, which seccomp refuses the code but not every library): each
    by the name /proc gives it. A read-only one of the image's files (a
    font cache) stays read-only: the image's files are not the code's
    to open for writing. Where the mappings cannot be read, that is the
    finding (never forked on a guess)."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) < 5 or "s" not in fields[1]:
                    continue
                name = fields[5].rstrip("\n") if len(fields) == 6 else ""
                if ("w" in fields[1] or not name.startswith("/") or
                        name.endswith(" (deleted)") or name.startswith(("/SYSV", "/memfd:")) or
                        name.startswith(tuple(place + "/" for place in places))):
                    found.append(name or "no file")
    except OSError as e:
        found.append("/proc/self/maps, unreadable: %s" % e.strerror)
    return found


def make_accessible(dir_fd, name):
    """Gives the directory name (in dir_fd) mode 0700 if it lacks it. The
    chmod goes through an O_PATH descriptor of the directory itself, opened
    without following a link: a process of the call that is still there (a
    session's Sage, stopped, can be continued by a timer of its own) cannot
    swap it for a link to elsewhere between a look and the chmod."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.chmod("/proc/self/fd/%d" % fd, 0o700)
    finally:
        os.close(fd)


def empty_directory(dir_fd, depth=1):
    """Removes everything in the directory dir_fd, whatever the modes a call
    gave it: this uid owns every entry, so it may chmod what it must."""
    for name in os.listdir(dir_fd):
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            continue
        if depth >= MAX_DEPTH:
            raise CannotReset("directories deeper than %d" % MAX_DEPTH)
        make_accessible(dir_fd, name)
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            empty_directory(inner, depth + 1)
        finally:
            os.close(inner)
        os.rmdir(name, dir_fd=dir_fd)


def lists_newest_first(root):
    """Whether a directory in root lists its entries newest first (tmpfs
    on the kernels seen here: a dcache list, or since 6.6 offsets read
    from the top), by a directory made and removed for the purpose. A
    reset that made /tmp's entries in name order showed them to the next
    call in another order than a fresh container's (attack helper 169:
    os.listdir of DOT_SAGE); made in the order of their recorded listing,
    read back as this says, they list as recorded. On a file system that
    lists by hash the order of making does not matter."""
    probe = tempfile.mkdtemp(prefix=".sandbox-order-", dir=root)
    try:
        for name in ("a", "b"):
            os.close(os.open(os.path.join(probe, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return os.listdir(probe) == ["b", "a"]
    finally:
        for name in ("a", "b"):
            try:
                os.unlink(os.path.join(probe, name))
            except FileNotFoundError:
                pass
        os.rmdir(probe)


def _in_making_order(entries, newest_first):
    """entries (parents first, names sorted) in the order they are to be
    made: each directory's before what it holds, and each directory's
    entries in the order that lists them as recorded."""
    children = {}
    for e in entries:
        children.setdefault(os.path.dirname(e.path), []).append(e)
    ordered, pending = [], [""]
    while pending:
        for e in sorted(children.get(pending.pop(), ()), key=lambda e: e.rank,
                        reverse=newest_first):
            ordered.append(e)
            if e.kind == stat.S_IFDIR:
                pending.append(e.path)
    return ordered


def write_new_file(path, content, mode, dir_fd=None):
    """A regular file made at path (none there before, no link followed)
    holding content, of mode, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                 dir_fd=dir_fd)
    try:
        write_all(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _rebuild(root, entries, newest_first):
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for e in _in_making_order(entries, newest_first):
            if e.kind == stat.S_IFDIR:
                os.mkdir(e.path, 0o700, dir_fd=top)
            elif e.kind == stat.S_IFLNK:
                os.symlink(e.content, e.path, dir_fd=top)
            else:
                write_new_file(e.path, e.content, e.mode, dir_fd=top)
        # Deepest first: a directory's mode and times are set once nothing
        # more is written in it.
        for e in reversed(entries):
            if e.kind == stat.S_IFDIR:
                os.chmod(e.path, e.mode, dir_fd=top)
            os.utime(e.path, ns=e.times, dir_fd=top, follow_symlinks=False)
    finally:
        os.close(top)


def reset(recorded, root="/tmp"):
    """Makes root exactly as recorded; CannotReset where it cannot."""
    root_mode, entries = recorded
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            empty_directory(top)
        finally:
            os.close(top)
        if root not in _NEWEST_FIRST:
            _NEWEST_FIRST[root] = lists_newest_first(root)
        _rebuild(root, entries, _NEWEST_FIRST[root])
        now = record(root)
    except OSError as e:
        raise CannotReset("%s: %s" % (type(e).__name__, e))
    except RecursionError:
        raise CannotReset("directories too deep")
    if now[0] != root_mode or [e.key() for e in now[1]] != [e.key() for e in entries]:
        raise CannotReset("%s is not as recorded after the reset" % root)
