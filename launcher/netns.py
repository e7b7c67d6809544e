# launcher/netns.py: the container's network namespace between calls: what
# a call's sockets leave there after its processes are gone, which the next
# call must not meet.
#
# --network=none gives the container a namespace of its own with only a
# loopback device, shared by every call the container serves. A call's
# sockets outlive its processes in two ways: abstract unix sockets kept
# alive by a cycle of descriptors in flight (a socket sent over a socket to
# itself), which only the kernel's unix garbage collector frees, when a
# unix socket is next closed; and TCP connections in TIME_WAIT (60 s) on
# loopback. Either is a channel from one call to the next (a name bound,
# EADDRINUSE for the same name or port). Between calls the namespace must
# hold no socket the launcher did not hold at its start: the collector is
# woken and given a moment; anything still there ends the container, and
# the next call gets a fresh one.
import os
import socket
import time

# The tables of /proc/net that list a namespace's sockets.
TABLES = ("unix", "tcp", "tcp6", "udp", "udp6", "raw", "raw6", "udplite", "udplite6",
          "packet", "netlink")
# How long the collector and the kernel's teardown are given.
SETTLE_SECONDS = 1.0
SETTLE_STEP_SECONDS = 0.01


def _inode_column(header):
    names = header.split()
    # Every table names its inode column "Inode" or "inode".
    for i, name in enumerate(names):
        if name.lower() == "inode":
            return i
    return None


def sockets():
    """The sockets of this network namespace, as {(table, inode)}: a
    socket's inode stays its own while it lives. Tables the kernel does not
    have are skipped."""
    found = set()
    for table in TABLES:
        try:
            with open("/proc/net/" + table, "r", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        column = _inode_column(lines[0])
        for line in lines[1:]:
            fields = line.split()
            # A TCP socket in TIME_WAIT has no inode (0): its address and
            # port name it.
            if column is not None and column < len(fields) and fields[column] != "0":
                found.add((table, fields[column]))
            elif fields:
                found.add((table, " ".join(fields[1:3])))
    return found


def _wake_collector():
    """Closing a unix socket while descriptors are in flight runs (or
    schedules) the kernel's unix garbage collector."""
    try:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.close()
        b.close()
    except OSError:
        pass


def left_over(recorded, seconds=SETTLE_SECONDS):
    """None once the namespace holds nothing but what was recorded (at the
    launcher's start), or a description of what a call left there after
    the wait."""
    deadline = time.monotonic() + seconds
    while True:
        extra = sockets() - recorded
        if not extra:
            return None
        if time.monotonic() >= deadline:
            tables = sorted({table for table, _ in extra})
            return "%d socket%s of the last call remain in the container's network " \
                "namespace (%s)" % (len(extra), "" if len(extra) == 1 else "s",
                                    ", ".join(tables))
        _wake_collector()
        time.sleep(SETTLE_STEP_SECONDS)
