# launcher/outdir.py: SAGE_SANDBOX_OUT, the directory whose files go back to
# the host after a call (F, D, G and Z frames), walked once every process
# of the call is gone, so that the tree cannot change while it is sent.
import os
import stat

from launcher import tmpreset
from launcher.frames import MAX_FRAME

OUTPUT_DIR = "/tmp/sage-sandbox-out"
MAX_DEPTH = 16


class Limits:
    """What may go back: files, bytes a file, bytes in all (the call's L)."""

    def __init__(self, files, file_bytes, total_bytes):
        self.files, self.file_bytes, self.total_bytes = files, file_bytes, total_bytes


def send(writer, limits, directory=OUTPUT_DIR):
    """Sends the directory's files within limits, and names what was not
    sent and why. The host checks everything again; this side only saves
    it the work."""
    sent = [0, 0]  # files, bytes

    def drop(reason, path):
        writer.send(b"Z", reason + b"\0" + path[:4000])

    def send_file(dir_fd, name, path, st):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            return drop(b"unreadable", path)
        try:
            now = os.fstat(fd)
            if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(now.st_mode):
                return drop(b"unreadable", path)
            writer.send(b"F", path)
            left, why = limits.file_bytes + 1, b""
            while left > 0:
                # Only the read's error is the file's: a frame that cannot
                # be written is the host's, and ends the launcher.
                try:
                    got = writer.load(fd, min(MAX_FRAME, left))
                except OSError:
                    why = b"unreadable"
                    break
                if not got:
                    break
                # Wiped once sent: the call's, in the launcher that forks the next.
                writer.send_loaded(b"D", got)
                left -= got
                sent[1] += got
            writer.send(b"G", why)
            sent[0] += 1
        finally:
            os.close(fd)

    def walk(dir_fd, prefix, depth):
        for name in sorted(os.listdir(dir_fd)):
            path = prefix + os.fsencode(name)
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                drop(b"unreadable", path)
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    drop(b"depth", path + b"/")
                    continue
                try:
                    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                    dir_fd=dir_fd)
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
            elif sent[0] >= limits.files:
                drop(b"count", path)
            elif st.st_size > limits.file_bytes:
                drop(b"size", path)
            elif sent[1] + st.st_size > limits.total_bytes:
                drop(b"total", path)
            else:
                send_file(dir_fd, name, path, st)

    try:
        top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return  # the directory itself was replaced or removed: nothing to send
    try:
        walk(top, b"", 1)
    finally:
        os.close(top)


def empty(directory=OUTPUT_DIR):
    """A session's files went back with their cell: the next cell's
    directory starts empty, as a run's does. False where it cannot."""
    try:
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            os.mkdir(directory, 0o700)  # the cell removed it: a new one
            return True
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(directory)
            os.mkdir(directory, 0o700)
            return True
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(directory, 0o700)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            tmpreset.empty_directory(fd)
        finally:
            os.close(fd)
        return True
    except (OSError, tmpreset.CannotReset, RecursionError):
        return False
