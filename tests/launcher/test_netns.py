# tests/launcher/test_netns.py: the network namespace between calls
# (launcher/netns.py): a socket that outlives its process is seen, one held
# in a cycle of descriptors in flight is collected by the wait, and what
# cannot go in time is described. The tests run in the host's namespace,
# where other programs make sockets too: each looks at its own.
import array
import os
import socket
import unittest

from launcher import netns

from .support import in_child


def unix(*socks):
    return {("unix", str(os.fstat(s.fileno()).st_ino), False) for s in socks}


class NetnsTest(unittest.TestCase):
    def test_a_socket_made_after_the_record_is_left_over(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(b"\0sage-sandbox-netns-test-%d" % os.getpid())
        ours = unix(s)
        try:
            self.assertTrue(ours <= netns.sockets())
            why = netns.left_over(netns.sockets() - ours, seconds=0.05)
            self.assertIsNotNone(why)
            self.assertIn("remain in the container's network namespace (unix", why)
        finally:
            s.close()
        self.assertFalse(ours & netns.sockets())

    def test_a_cycle_in_flight_is_collected_within_the_wait(self):
        r, w = os.pipe()

        def make_cycle():
            # A bound socket sent over itself, then every descriptor closed
            # by the exit: only the collector frees them.
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            named = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            named.bind(b"\0sage-sandbox-netns-cycle-%d" % os.getpid())
            fds = array.array("i", [a.fileno(), b.fileno(), named.fileno()])
            a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            b.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            os.write(w, repr(sorted(unix(a, b, named))).encode())
            return True

        in_child(make_cycle)
        os.close(w)
        ours = set(tuple(x) for x in eval(os.read(r, 4096).decode()))
        os.close(r)
        netns.left_over(netns.sockets() - ours, seconds=1.0)
        self.assertFalse(ours & netns.sockets(), "the cycle was not collected in time")

    def test_time_wait_alone_is_told_at_once(self):
        # A loopback connection whose client closed first lingers in
        # TIME_WAIT for 60 s: no wait helps. (The host's namespace churns
        # with other programs' sockets: the tables are given here.)
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        port = client.getsockname()[1]
        client.close()
        accepted.close()
        server.close()
        lingering = {key for key in netns.sockets()
                     if key[2] and (":%04X " % port) in key[1] + " "}
        self.assertTrue(lingering, "the client's end is not in TIME_WAIT")
        import time
        from unittest import mock
        with mock.patch.object(netns, "sockets", return_value=lingering):
            began = time.monotonic()
            why = netns.left_over(set(), seconds=5)
        self.assertLess(time.monotonic() - began, 0.5)
        self.assertIn("(tcp)", why)

if __name__ == "__main__":
    unittest.main()
