# tests/launcher/test_parent.py: the launcher as every call's parent
# (launcher/parent.py): state() and changed() see each thing a fork
# inherits change, and the signal handlers are dropped and given back.
# Whatever a test changes of a process it changes in a forked child, so
# that the test runner stays as it was.
import ctypes
import os
import resource
import signal
import time
import unittest

from launcher import parent

from .support import in_child

STATE_KEYS = {"rlimits", "nice", "io_priority", "scheduler", "affinity", "umask", "cwd", "environment",
              "status", "oom_score_adj", "timers", "itimers", "process_group"}
# glibc's own signals (thread cancellation, setxid): caught by the C
# library, never a Python or Sage handler.
GLIBC_SIGNALS = {32, 33}


def signal_set(field):
    """The signals of a /proc/self/status mask (SigCgt, SigIgn, SigBlk)."""
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == field:
                bits = int(value, 16)
                return {n + 1 for n in range(bits.bit_length()) if bits >> n & 1}
    raise AssertionError("no %s in /proc/self/status" % field)


def lower_a_soft_rlimit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = (hard if soft == resource.RLIM_INFINITY else soft) - 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))


def change_of(what):
    """changed() after what() was done to a forked child."""
    def body():
        before = parent.state()
        what()
        return parent.changed(before)
    return in_child(body)


class StateTest(unittest.TestCase):
    def test_the_keys(self):
        state = parent.state()
        self.assertEqual(set(state), STATE_KEYS)
        self.assertEqual(state["umask"], os.umask(state["umask"]))
        self.assertEqual(state["cwd"], os.getcwd())
        self.assertIn("RLIMIT_CPU", state["rlimits"])
        self.assertIn("SigCgt", state["status"])
        self.assertEqual(state["process_group"], (os.getpgid(0), os.getsid(0)))

    def test_nothing_changed_right_after(self):
        self.assertEqual(parent.changed(parent.state()), [])
        self.assertEqual(in_child(lambda: parent.changed(parent.state())), [])

    def test_each_change_is_named(self):
        changes = {
            "nice": lambda: os.nice(1),
            "umask": lambda: os.umask(0o027 if os.umask(0o022) != 0o027 else 0o007),
            "rlimits": lower_a_soft_rlimit,
            "environment": lambda: os.environ.__setitem__("LAUNCHER_TEST", "planted"),
            "cwd": lambda: os.chdir("/"),
            "process_group": os.setsid,
            "itimers": lambda: signal.setitimer(signal.ITIMER_VIRTUAL, 1000),
            # A signal blocked and a handler caught: SigBlk and SigCgt.
            "status": lambda: signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2]),
        }
        for name, what in changes.items():
            with self.subTest(name):
                self.assertEqual(change_of(what), [name])

    def test_an_environment_variable_removed(self):
        def body():
            os.environ["LAUNCHER_TEST"] = "x"
            before = parent.state()
            del os.environ["LAUNCHER_TEST"]
            return parent.changed(before)
        self.assertEqual(in_child(body), ["environment"])

    def test_a_handler_installed(self):
        def body():
            before = parent.state()
            signal.signal(signal.SIGUSR1, lambda *_: None)
            return parent.changed(before)
        self.assertEqual(in_child(body), ["status"])


class HandlersTest(unittest.TestCase):
    def test_dropped_then_restored(self):
        def body():
            caught = []
            # Python's own SIGINT handler, also where the test was started
            # with SIGINT ignored (a shell's background job): then Python
            # installs none.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGUSR1, lambda sig, frame: caught.append(sig))
            signal.signal(signal.SIGUSR2, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
            before = {f: signal_set(f) for f in ("SigCgt", "SigIgn")}
            handlers = parent.Handlers()
            dropped = {f: signal_set(f) for f in ("SigCgt", "SigIgn", "SigBlk")}
            handlers.drop_all()
            after_drop = {f: signal_set(f) for f in ("SigCgt", "SigIgn", "SigBlk")}
            handlers.restore()
            after_restore = {f: signal_set(f) for f in ("SigCgt", "SigIgn")}
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(1000):
                if caught:
                    break
                time.sleep(0.001)
            return before, dropped, after_drop, after_restore, caught

        before, captured, after_drop, after_restore, caught = in_child(body)
        # Capturing changes nothing.
        self.assertEqual(captured["SigCgt"], before["SigCgt"])
        self.assertIn(signal.SIGUSR1, before["SigCgt"])
        self.assertIn(signal.SIGINT, before["SigCgt"])  # Python's own
        self.assertIn(signal.SIGUSR2, before["SigIgn"])
        # Dropped: no signal caught, ignored or blocked.
        self.assertEqual(after_drop["SigCgt"] - GLIBC_SIGNALS, set())
        # Ignored as Python has them (EPIPE and EFBIG, not deaths).
        self.assertEqual(after_drop["SigIgn"] - GLIBC_SIGNALS, {signal.SIGPIPE, signal.SIGXFSZ})
        self.assertEqual(after_drop["SigBlk"], set())
        # Restored: as they were, and the handler runs.
        self.assertEqual(after_restore["SigCgt"] - GLIBC_SIGNALS,
                         before["SigCgt"] - GLIBC_SIGNALS)
        self.assertEqual(after_restore["SigIgn"], before["SigIgn"])
        self.assertEqual(caught, [signal.SIGUSR1])

    def test_a_c_level_action_python_does_not_know_of(self):
        # As cysignals installs its handlers: through sigaction, behind
        # Python's table. The C-level action is what comes back.
        def body():
            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal.restype = ctypes.c_void_p
            libc.signal(signal.SIGUSR2, ctypes.c_void_p(1))  # SIG_IGN
            python_thinks = signal.getsignal(signal.SIGUSR2)
            handlers = parent.Handlers()
            handlers.drop_all()
            dropped = signal.SIGUSR2 in signal_set("SigIgn")
            handlers.restore()
            return python_thinks, dropped, signal.SIGUSR2 in signal_set("SigIgn")

        python_thinks, dropped, restored = in_child(body)
        self.assertEqual(python_thinks, signal.SIG_DFL)
        self.assertFalse(dropped)
        self.assertTrue(restored)

    def test_a_python_handler_given_in_place_of_the_table(self):
        # main.py gives SIGINT's Python handler: ignored while Sage imports.
        def body():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            handlers = parent.Handlers(python={signal.SIGINT: signal.default_int_handler})
            handlers.drop_all()
            handlers.restore()
            return signal.getsignal(signal.SIGINT) is signal.default_int_handler

        self.assertTrue(in_child(body))

    def test_only_what_differs_from_the_launchers_is_kept(self):
        # A signal at its default (or SIGPIPE ignored, as Python has it)
        # is neither dropped nor given back: a fork restores a few.
        def body():
            signal.signal(signal.SIGUSR1, lambda *_: None)
            signal.signal(signal.SIGUSR2, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            return sorted(parent.Handlers().actions)

        kept = in_child(body)
        self.assertIn(signal.SIGUSR1, kept)
        self.assertNotIn(signal.SIGUSR2, kept)
        self.assertNotIn(signal.SIGPIPE, kept)

    def test_every_signal_but_kill_and_stop(self):
        self.assertNotIn(signal.SIGKILL, parent.SIGNALS)
        self.assertNotIn(signal.SIGSTOP, parent.SIGNALS)
        self.assertIn(signal.SIGHUP, parent.SIGNALS)
        self.assertIn(signal.SIGRTMAX, parent.SIGNALS)


class DumpableTest(unittest.TestCase):
    def test_set_dumpable(self):
        def body():
            libc = ctypes.CDLL(None)
            parent.set_dumpable(False)
            off = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
            parent.set_dumpable(True)
            return off, libc.prctl(3, 0, 0, 0, 0)

        self.assertEqual(in_child(body), (0, 1))


if __name__ == "__main__":
    unittest.main()
