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


# The IP tables' lines have fewer fields than their header has names
# ("tx_queue rx_queue" is one field): their inode is the tenth field.
IP_INODE_COLUMN = 9


def _inode_column(table, header):
    if table.startswith(("tcp", "udp", "raw")):
        return IP_INODE_COLUMN
    # The others name it "Inode" or "inode", each over its own field.
    for i, name in enumerate(header.split()):
        if name.lower() == "inode":
            return i
    return None


TIME_WAIT = "06"  # the st column of /proc/net/tcp and tcp6


def sockets():
    """The sockets of this network namespace, as {(table, name, lingers)}:
    name is a socket's inode, its own while it lives; lingers marks a TCP
    connection in TIME_WAIT, which has none, named by its addresses. Tables
    the kernel does not have are skipped."""
    found = set()
    for table in TABLES:
        try:
            with open("/proc/net/" + table, "r", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        column = _inode_column(table, lines[0])
        for line in lines[1:]:
            fields = line.split()
            # A TCP socket in TIME_WAIT has no inode (0): its address and
            # port name it.
            lingers = table.startswith("tcp") and len(fields) > 3 and fields[3] == TIME_WAIT
            if column is not None and column < len(fields) and fields[column] != "0":
                found.add((table, fields[column], lingers))
            elif fields:
                found.add((table, " ".join(fields[1:3]), lingers))
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
        # TIME_WAIT lasts 60 s: no wait would see it go.
        if time.monotonic() >= deadline or all(lingers for _, _, lingers in extra):
            tables = sorted({table for table, _, _ in extra})
            return "%d socket%s of the last call remain in the container's network " \
                "namespace (%s)" % (len(extra), "" if len(extra) == 1 else "s",
                                    ", ".join(tables))
        _wake_collector()
        time.sleep(SETTLE_STEP_SECONDS)
