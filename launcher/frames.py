# launcher/frames.py: the frame codec between sage-sandbox and the launcher
# (docs/protocol.md): one type byte, a 4-byte big-endian length, then that
# many bytes, at most MAX_FRAME.
import os
import select
import struct

MAX_FRAME = 65536
HEADER = 5


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

    def send(self, kind, data=b""):
        write_all(self.fd, encode(kind, data))


class Reader:
    """Frames from the host on fd. What was read and not yet taken stays
    in the inbox, so that a call's frames and the code's stdin (I frames)
    can be read blocking or as they come."""

    def __init__(self, fd=0):
        self.fd = fd
        self.inbox = bytearray()
        self.ended = False  # the host closed its end

    def fill(self):
        """One read of what is there (blocking unless fd is not); False at
        the end of the stream or when nothing was there."""
        try:
            chunk = os.read(self.fd, MAX_FRAME + HEADER)
        except BlockingIOError:
            return False
        if not chunk:
            self.ended = True
            return False
        self.inbox.extend(chunk)
        return True

    def next_ready(self, limit=MAX_FRAME):
        """A whole frame already in the inbox, or None; reads nothing."""
        if len(self.inbox) < HEADER:
            return None
        kind, length = struct.unpack(">cI", self.inbox[:HEADER])
        if length > limit:
            raise ProtocolError("a %r frame of %d bytes" % (kind, length))
        if len(self.inbox) < HEADER + length:
            return None
        data = bytes(self.inbox[HEADER:HEADER + length])
        del self.inbox[:HEADER + length]
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
