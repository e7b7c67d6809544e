# launcher/frames.py: the frame codec between sage-sandbox and the launcher
# (docs/protocol.md): one type byte, a 4-byte big-endian length, then that
# many bytes, at most MAX_FRAME.
#
# What a call sends is wiped where the launcher lets go of it: every
# call's process is forked from the launcher, and inherits its memory,
# freed blocks too; a later call read an earlier one's code, argv and
# stdin there (/proc/self/mem), 4 and 6 calls back. So the Reader reads
# into one buffer that never moves (a bytearray that grows leaves its old
# block behind, whole), each frame's bytes are copied out of it once, and
# zeroed there; and whoever takes a frame's bytes wipes them when done.
import ctypes
import os
import select
import struct
import sys

MAX_FRAME = 65536
HEADER = 5
# Where the first byte of a bytes object is, and of an ASCII str's
# (CPython's PyBytesObject and compact PyASCIIObject).
_BYTES_DATA = bytes.__basicsize__ - 1
_ASCII_DATA = sys.getsizeof("") - 1


def wipe(data):
    """Zeroes data in place: a bytearray, or bytes or an ASCII str no one
    else holds (a frame's, a read's, one this process made). Those of 0 or
    1 byte are CPython's shared ones, and are left as they are."""
    if isinstance(data, bytearray):
        data[:] = bytes(len(data))
    elif len(data) < 2:
        return
    elif type(data) is bytes:
        ctypes.memset(id(data) + _BYTES_DATA, 0, len(data))
    elif type(data) is str and data.isascii():
        ctypes.memset(id(data) + _ASCII_DATA, 0, len(data))


class ProtocolError(Exception):
    """The host broke the protocol: the launcher ends (status 2)."""


def encode(kind, data=b""):
    return struct.pack(">cI", kind, len(data)) + data


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Writer:
    """Frames to the host, written whole (blocking): the host reads them
    on its loop and never stops reading while the container lives."""

    def __init__(self, fd=1):
        self.fd = fd
        self.read = bytearray(MAX_FRAME)  # load's, zeroed once sent (send_loaded)

    def send(self, kind, data=b""):
        # The header, then data itself: no joined copy of a call's bytes
        # is left to wipe.
        write_all(self.fd, struct.pack(">cI", kind, len(data)))
        write_all(self.fd, data)

    def send_read(self, kind, fd, size=MAX_FRAME):
        """One read of at most size bytes from fd, sent as a kind frame:
        how many (0 at its end; what the read raises, it raises)."""
        got = self.load(fd, size)
        if got:
            self.send_loaded(kind, got)
        return got

    def load(self, fd, size=MAX_FRAME):
        """One read of at most size bytes from fd into this writer's buffer,
        for send_loaded: how many. Apart from send_loaded so that a caller
        can tell the read's error (the source's) from the write's (the
        host's)."""
        return os.readv(fd, [memoryview(self.read)[:size]])

    def send_loaded(self, kind, got):
        """The first got bytes load read, as a kind frame, then zeros
        (whatever the write did). One buffer, sent from and zeroed: a
        bytes object that a short read shrank left its first block
        behind, unwiped."""
        try:
            self.send(kind, memoryview(self.read)[:got])
        finally:
            self.read[:got] = bytes(got)


class Reader:
    """Frames from the host on fd. What was read and not yet taken stays
    in the inbox, so that a call's frames and the code's stdin (I frames)
    can be read blocking or as they come. The inbox is a view of buffer,
    which holds one frame of the largest size and one read more: whatever
    is left in it, a frame is whole or there is room to read."""

    def __init__(self, fd=0):
        self.fd = fd
        self.buffer = bytearray(2 * (MAX_FRAME + HEADER))  # never resized
        self.start = self.end = 0  # the inbox's bytes in buffer
        self.ended = False  # the host closed its end

    @property
    def inbox(self):
        return memoryview(self.buffer)[self.start:self.end]

    def fill(self):
        """One read of what is there (blocking unless fd is not); False at
        the end of the stream, when nothing was there, or when the inbox
        has no room (it holds a whole frame then)."""
        if self.start:
            # The inbox to the buffer's start, and zeros where it was.
            left = self.end - self.start
            base = ctypes.addressof(ctypes.c_char.from_buffer(self.buffer))
            ctypes.memmove(base, base + self.start, left)  # they can overlap
            self.buffer[left:self.end] = bytes(self.end - left)
            self.start, self.end = 0, left
        room = min(len(self.buffer) - self.end, MAX_FRAME + HEADER)
        if not room:
            return False
        try:
            got = os.readv(self.fd, [memoryview(self.buffer)[self.end:self.end + room]])
        except BlockingIOError:
            return False
        if not got:
            self.ended = True
            return False
        self.end += got
        return True

    def drop(self):
        """The inbox emptied, its bytes zeroed (the rest of the buffer is)."""
        self.buffer[self.start:self.end] = bytes(self.end - self.start)
        self.start = self.end = 0

    def next_ready(self, limit=MAX_FRAME):
        """A whole frame already in the inbox, or None; reads nothing. Its
        bytes are the taker's, to wipe; the inbox's copy is zeroed."""
        if self.end - self.start < HEADER:
            return None
        kind, length = struct.unpack_from(">cI", self.buffer, self.start)
        if length > limit:
            raise ProtocolError("a %r frame of %d bytes" % (kind, length))
        if self.end - self.start < HEADER + length:
            return None
        begin = self.start + HEADER
        data = bytes(memoryview(self.buffer)[begin:begin + length])
        self.buffer[self.start:begin + length] = bytes(HEADER + length)
        self.start = begin + length
        if self.start == self.end:
            self.start = self.end = 0
        return kind, data

    def frame(self, limit=MAX_FRAME):
        """The next frame, reading until it is whole (waiting for the fd
        when it does not block); None when the host went away first."""
        while True:
            ready = self.next_ready(limit)
            if ready is not None:
                return ready
            if self.ended:
                return None
            if not self.fill() and not self.ended:
                select.select([self.fd], [], [])

    def expect(self, kind, limit=MAX_FRAME):
        got = self.frame(limit)
        if got is None:
            return None
        if got[0] != kind:
            raise ProtocolError("a %r frame where %r was due" % (got[0], kind))
        return got[1]
