# tests/launcher/test_calls.py: what launcher/calls.py takes from the host
# and its child without a container: the L frame's limits, what the done
# pipe says, a session's cell's interrupt and kill, and the input files
# written below the working directory, replacing whatever a session's
# earlier call left in their way without following it anywhere.
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import types
import unittest
from unittest import mock

from launcher import calls, child, frames
from launcher.frames import ProtocolError

from .support import Pipe, as_init, as_root, snapshot, temporary_directory, write_file

# As sandbox.c writes it.
HOST_LIMITS = (b'{"cpu": 30, "deadline": 123456789, "inputs": 2, '
               b'"out": {"files": 100, "file_bytes": 1048576, "bytes": 10485760}}')


class ParseStatusTest(unittest.TestCase):
    # The done pipe is in the code's reach: only a status is taken for one.
    def test_statuses(self):
        self.assertEqual(calls.parse_status(b"0\n"), 0)
        self.assertEqual(calls.parse_status(b"255\n"), 255)
        self.assertEqual(calls.parse_status(b"3\n4\n"), 3)

    def test_not_statuses(self):
        for line in (b"\n", b"x\n", b"256\n", b"-1\n", b"1.5\n", b"\xff\n"):
            self.assertIsNone(calls.parse_status(line), line)


class DoneWordsTest(unittest.TestCase):
    def test_a_begin_and_a_status_in_one_read(self):
        self.assertEqual(calls.done_words(b"\nB:1\n\n0:1\n", 1), (True, 0, b""))
        self.assertEqual(calls.done_words(b"\nB:2\n", 2), (True, None, b""))
        self.assertEqual(calls.done_words(b"\n3:1\n", 1), (False, 3, b""))
        self.assertEqual(calls.done_words(
            child.done_word(child.BEGUN, 7) + child.done_word(b"9", 7), 7), (True, 9, b""))

    def test_what_the_code_wrote_there_is_neither(self):
        self.assertEqual(calls.done_words(b"junk B:1 300:1 -1:1 7:1 8:1\n", 1), (True, 7, b""))
        self.assertEqual(calls.done_words(b"\n", 1), (False, None, b""))
        self.assertEqual(calls.done_words(b"", 1), (False, None, b""))
        # A status without the call's number, or an earlier call's: a
        # session's cell, or a thread it left running, wrote it (issue 33).
        self.assertEqual(calls.done_words(b"0\nB\n0:1\nB:1\n", 2), (False, None, b""))

    def test_a_word_is_whole_once_its_newline_came(self):
        began, status, unended = calls.done_words(b"junk\nB:3\n\n0:", 3)
        self.assertEqual((began, status, unended), (True, None, b"0:"))
        self.assertEqual(calls.done_words(unended + b"3\n", 3), (False, 0, b""))
        # What the code left unended is ended by the word's own newline.
        self.assertEqual(calls.done_words(b"xx" + child.done_word(b"5", 1), 1), (False, 5, b""))
        # Kept short, whatever the code writes without a newline.
        self.assertEqual(len(calls.done_words(b"x" * 5000, 1)[2]), calls.MAX_WORD)


class CellWatchTest(unittest.TestCase):
    """A session's cell: interrupted once it began, killed at the grace."""

    def test_past_its_deadline_before_it_began_the_interrupt_waits_for_the_begin(self):
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        self.assertEqual(watch.look(900, None), (None, 100))
        self.assertEqual(watch.look(1000, None), (None, calls.INTERRUPT_GRACE_MS))
        self.assertEqual(watch.why, "timeout")
        watch.began = True
        self.assertEqual(watch.look(1500, None), (signal.SIGINT, calls.INTERRUPT_WAKE_MS))
        self.assertEqual(watch.look(1600, None), (None, calls.INTERRUPT_WAKE_MS - 100))
        self.assertEqual(watch.look(1000 + calls.INTERRUPT_GRACE_MS, None), (signal.SIGKILL, None))

    def test_one_still_running_is_interrupted_again_before_its_kill(self):
        # The first may be swallowed where the code cannot see it (a
        # finalizer's KeyboardInterrupt is only reported).
        again, grace = calls.INTERRUPT_AGAIN_MS, calls.INTERRUPT_GRACE_MS
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        wake = calls.INTERRUPT_WAKE_MS
        watch.began = True
        self.assertEqual(watch.look(1000, None), (signal.SIGINT, wake))
        self.assertEqual(watch.look(1000 + wake, None), (signal.SIGCONT, again - wake))
        self.assertEqual(watch.look(1000 + again - 1, None), (None, 1))
        self.assertEqual(watch.look(1000 + again, None, lambda: True), (None, grace - again))
        self.assertEqual(watch.look(1000 + again + 1, None), (signal.SIGINT, grace - again - 1))
        self.assertEqual(watch.look(1000 + again + 2, None), (None, grace - again - 2))
        self.assertEqual(watch.look(1000 + grace, None), (signal.SIGKILL, None))

    def test_a_status_waiting_unread_holds_the_interrupt_back(self):
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        watch.began = True
        self.assertEqual(watch.look(1000, None, lambda: True), (None, calls.INTERRUPT_GRACE_MS))
        self.assertEqual(watch.look(1010, None, lambda: False),
                         (signal.SIGINT, calls.INTERRUPT_WAKE_MS))
        self.assertEqual(watch.told, 1)

    def test_a_stopped_sage_is_woken_well_before_its_kill(self):
        # Woken only at the second interrupt, a Sage that a process of the
        # code's stopped had less than the rest of the grace (a second) to
        # raise and say its status; a loaded machine took longer.
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        watch.began = True
        self.assertEqual(watch.look(1000, None)[0], signal.SIGINT)
        self.assertEqual(watch.look(1000 + calls.INTERRUPT_WAKE_MS - 1, None), (None, 1))
        sent, _ = watch.look(1000 + calls.INTERRUPT_WAKE_MS, None)
        self.assertEqual(sent, signal.SIGCONT)
        self.assertGreaterEqual(calls.INTERRUPT_GRACE_MS - calls.INTERRUPT_WAKE_MS, 1500)
        self.assertEqual(watch.look(1000 + calls.INTERRUPT_WAKE_MS + 1, None)[0], None)

    def test_a_look_late_past_the_second_interrupt_s_time_sends_it_never_a_negative_wait(self):
        # The wake's wait, counted to the second interrupt, was negative
        # for a look that came after it: poll() waited for ever.
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        watch.began = True
        watch.look(1000, None)
        late = 1000 + calls.INTERRUPT_AGAIN_MS + 100
        self.assertEqual(watch.look(late, None),
                         (signal.SIGINT, calls.INTERRUPT_GRACE_MS - calls.INTERRUPT_AGAIN_MS - 100))
        self.assertEqual(watch.told, 2)
        for now in range(late, 1000 + calls.INTERRUPT_GRACE_MS, 50):
            self.assertGreaterEqual(watch.look(now, None)[1], 0)

    def test_a_status_waiting_unread_at_the_kill_is_read_first_once(self):
        grace = calls.INTERRUPT_GRACE_MS
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        watch.began = True
        watch.look(1000, None)
        self.assertEqual(watch.look(1000 + grace, None, lambda: True), (None, 0))
        # What the code writes there for ever puts it off no longer.
        self.assertEqual(watch.look(1000 + grace + 1, None, lambda: True), (signal.SIGKILL, None))

    def test_one_that_never_says_it_began_is_killed_at_the_grace(self):
        watch = calls.CellWatch(deadline=1000, cpu_seconds=0)
        watch.look(1000, None)
        self.assertEqual(watch.look(999 + calls.INTERRUPT_GRACE_MS, None), (None, 1))
        self.assertEqual(watch.look(1000 + calls.INTERRUPT_GRACE_MS, None), (signal.SIGKILL, None))

    def test_its_cpu_seconds_read_only_where_they_count(self):
        used = []
        watch = calls.CellWatch(deadline=0, cpu_seconds=2)
        watch.began = True
        self.assertEqual(watch.look(10, lambda: used.append(1) or 1.5), (None, calls.CPU_LOOK_MS))
        self.assertEqual(watch.look(20, lambda: 2.0), (signal.SIGINT, calls.INTERRUPT_WAKE_MS))
        self.assertEqual(watch.why, "cpu")
        self.assertEqual(watch.look(30, lambda: self.fail("read after the interrupt")),
                         (None, calls.INTERRUPT_WAKE_MS - 10))
        self.assertEqual(calls.CellWatch(0, 0).look(10, lambda: self.fail("no limit")), (None, None))
        self.assertEqual(used, [1])


class OnceFinishTest(unittest.TestCase):
    # A once container's call ends at the status its process said, without
    # waiting for the kernel to tear the process down: taken where it was
    # not reaped yet, and where the kill for the files that come back
    # reached it after it said it.
    def finish(self, said, wait_status):
        launcher = object.__new__(calls.Launcher)
        launcher.mode, launcher.session, launcher.streams = "once", False, {}
        launcher.child_status, launcher.cpu_used = wait_status, 0.0
        call = calls.Call.__new__(calls.Call)
        call.out, call.cpu_seconds = None, 30
        return launcher.finish(call, said, None, False, 0)

    def test_the_said_status_where_not_reaped(self):
        trailer = self.finish(3, None)
        self.assertEqual((trailer["exit"], trailer["container"]), (3, "ends"))

    def test_the_said_status_where_killed_after_saying_it(self):
        self.assertEqual(self.finish(0, 9)["exit"], 0)

    def test_a_kill_before_any_word_is_its_end(self):
        trailer = self.finish(None, 9)
        self.assertEqual((trailer["signal"], "exit" in trailer), (9, False))

    def test_its_own_end_where_reaped(self):
        self.assertEqual(self.finish(5, 5 << 8)["exit"], 5)


class ExpiredCallTest(unittest.TestCase):
    # A call whose deadline passed before its code could begin (it waited
    # for a warm-up step): never handed to its child, which goes as at a
    # deadline, and no B frame, so the host tells the wait's timeout.
    def run_expired(self, mode):
        launcher = object.__new__(calls.Launcher)
        launcher.mode, launcher.session, launcher.frozen = mode, mode == "session", False
        sent, killed, finished = [], [], []
        launcher.writer = types.SimpleNamespace(send=sent.append)
        launcher.kill_the_rest = lambda: killed.append(True)
        launcher.thaw = lambda: self.fail("thawed a child never to run")
        launcher.take_input = lambda: None
        launcher.reap = lambda: None
        launcher.finish = lambda call, status, why, killed_at_deadline, deadline, *rest, **kw: \
            finished.append((killed_at_deadline, deadline)) or {"container": "next"}
        call_r, call_w = os.pipe()
        reader_r, reader_w = os.pipe()
        pidfd = os.pidfd_open(os.getpid())  # a SIGCONT to this process is nothing
        self.addCleanup(lambda: [os.close(fd) for fd in (call_r, reader_r, reader_w, pidfd)])
        launcher.call_w, launcher.pidfd = call_w, pidfd
        launcher.reader = types.SimpleNamespace(fd=reader_r)
        launcher.pending = calls.StdinQueue()
        launcher.streams, launcher.pipes = {}, types.SimpleNamespace(done=(-1, -1))
        # Its kill reaps it (kill_the_rest): the call's loop has nothing to wait for.
        launcher.child_status, launcher.call_number = 9, 0
        if mode == "session":
            self.addCleanup(os.close, call_w)  # a session's stays open for its next cell
        args, code = bytearray(b"x\0"), bytearray(b"print(1)")
        call = calls.Call({"cpu": 30, "deadline": calls.now_ms() - 1, "inputs": 0}, args, code)
        signalled = []
        real_send = calls.signal.pidfd_send_signal
        calls.signal.pidfd_send_signal = lambda fd, sig, *rest: signalled.append(sig)
        try:
            trailer = launcher.run(call)
        finally:
            calls.signal.pidfd_send_signal = real_send
        self.assertEqual(signalled, [], "no signal to a child never to run")
        os.set_blocking(call_r, False)
        try:
            handed = os.read(call_r, 100)
        except BlockingIOError:
            handed = b""
        return trailer, sent, killed, finished, handed, bytes(args + code)

    def test_a_serial_call_is_never_handed_over_nor_begun(self):
        trailer, sent, killed, finished, handed, left = self.run_expired("serial")
        self.assertEqual((trailer, sent, killed, handed), ({"container": "next"}, [], [True], b""))
        self.assertTrue(finished[0][0], "told as killed at its deadline")
        self.assertEqual(left, bytes(len(left)), "its code and arguments wiped")

    def test_a_session_goes_on_as_it_was(self):
        trailer, sent, killed, finished, handed, left = self.run_expired("session")
        self.assertEqual((trailer["container"], trailer["interrupted"], sent, killed, finished),
                         ("kept", "timeout", [], [], []))
        self.assertEqual(left, bytes(len(left)))


class SessionFinishTest(unittest.TestCase):
    # A session's cell: kept, told interrupted only where its SIGINT was
    # sent; lost, its cause told all the same; its end, when its status came.
    def finish(self, interrupted, told, wait_status=None, ended_at=None):
        launcher = object.__new__(calls.Launcher)
        launcher.mode, launcher.session, launcher.streams = "session", True, {}
        launcher.child, launcher.child_status, launcher.cpu_used = 7, wait_status, 0.0
        launcher.stop_between_cells = lambda: True
        launcher.kill_the_rest = lambda: None
        launcher.at_cpu_limit = lambda *_: False
        call = calls.Call.__new__(calls.Call)
        call.out, call.cpu_seconds = None, 30
        return launcher.finish(call, None if wait_status else 0, interrupted, False, 0,
                               ended_at, told=told)

    def test_kept_and_interrupted_where_its_sigint_was_sent(self):
        trailer = self.finish("timeout", True, ended_at=1234)
        self.assertEqual((trailer["container"], trailer["interrupted"], trailer["ended_at"]),
                         ("kept", "timeout", 1234))

    def test_kept_and_not_interrupted_where_it_ended_first(self):
        trailer = self.finish("timeout", False)
        self.assertEqual((trailer["container"], "interrupted" in trailer), ("kept", False))

    def test_lost_with_its_cause_though_never_interrupted(self):
        trailer = self.finish("cpu", False, wait_status=9)
        self.assertEqual((trailer["container"], trailer["interrupted"]), ("lost", "cpu"))


class StopBetweenCellsTest(unittest.TestCase):
    """A session's Sage stopped at a cell's end though a process of the
    code's sends it SIGCONT (attack helper 138's timer, every millisecond):
    the wait for its stop waited for ever where one cancelled it, and the
    kept cell was told timed out at twice its deadline."""

    def launcher_of(self, argv):
        sage = subprocess.Popen(argv)
        self.addCleanup(sage.wait)
        self.addCleanup(sage.kill)
        launcher = object.__new__(calls.Launcher)
        launcher.child, launcher.child_status, launcher.cpu_used = sage.pid, None, 0.0
        self.passes = []  # (kill_all_but lists the whole of /proc: not here)
        launcher.kill_all_but = lambda spared, give_up=None: self.passes.append(spared) or True
        return sage, launcher

    def continued_after_each_stop(self, pid, times):
        """os.kill as the launcher sees it, where the first times SIGSTOPs
        it sends pid are each followed by a SIGCONT at once: cancelled, or
        ended unseen."""
        real, sent = os.kill, []

        def kill(target, sig):
            real(target, sig)
            if target == pid and sig == signal.SIGSTOP and len(sent) < times:
                sent.append(sig)
                real(target, signal.SIGCONT)
        patch = mock.patch.object(calls.os, "kill", kill)
        patch.start()
        self.addCleanup(patch.stop)

    def in_a_thread(self, function):
        """function's result, or a failure where it is still waiting in 20 s."""
        got = []
        waiting = threading.Thread(target=lambda: got.append(function()), daemon=True)
        waiting.start()
        waiting.join(20)
        self.assertFalse(waiting.is_alive(), "the stop waited for ever")
        return got[0]

    def test_a_stop_cancelled_is_asked_again(self):
        sage, launcher = self.launcher_of(["sleep", "30"])
        self.continued_after_each_stop(sage.pid, 5)
        self.assertTrue(self.in_a_thread(launcher.stop_between_cells))
        self.assertTrue(launcher.frozen)
        time.sleep(0.1)
        self.assertEqual(calls.processes()[sage.pid][0], b"T")

    def test_continued_while_the_rest_is_killed_it_is_stopped_again(self):
        sage, launcher = self.launcher_of(["sleep", "30"])

        def kill_all_but(spared, give_up=None):
            # The last SIGCONT of a continuer killed there, then the Sage
            # stopped again, as kill_all_but stops it: the report of its
            # continue erased by that stop's (review helper 141's 1).
            self.passes.append(spared)
            if len(self.passes) == 1:
                os.kill(sage.pid, signal.SIGCONT)
                os.kill(sage.pid, signal.SIGSTOP)
                while not calls.threads_stopped(sage.pid):
                    time.sleep(0.001)
            return True
        launcher.kill_all_but = kill_all_but
        self.assertTrue(self.in_a_thread(launcher.stop_between_cells))
        self.assertEqual(self.passes, [sage.pid, sage.pid], "stopped again, then a pass for what it forked")
        time.sleep(0.1)
        self.assertEqual(calls.processes()[sage.pid][0], b"T")

    def test_never_seen_stopped_it_is_given_up_within_its_bound(self):
        sage, launcher = self.launcher_of(["sleep", "30"])
        self.continued_after_each_stop(sage.pid, 10**9)
        began = time.monotonic()
        self.assertFalse(self.in_a_thread(lambda: launcher.freeze(calls.now_ms() + 100)))
        self.assertLess(time.monotonic() - began, 5)
        self.assertFalse(launcher.frozen)

    def ended(self):
        sage, launcher = self.launcher_of(["sh", "-c", "exit 3"])
        while calls.processes().get(sage.pid, (b"Z",))[0] != b"Z":
            time.sleep(0.01)
        return launcher

    def test_one_that_ended_keeps_its_status(self):
        launcher = self.ended()
        self.assertFalse(self.in_a_thread(launcher.stop_between_cells))
        self.assertEqual(os.waitstatus_to_exitcode(launcher.child_status), 3)

    def test_one_that_ended_before_its_next_call_keeps_its_status(self):
        # thaw's wait reaped it unrecorded (review helper 141's 4).
        launcher = self.ended()
        launcher.interfaces, launcher.escapes = [], {}
        launcher.thaw()
        self.assertEqual(os.waitstatus_to_exitcode(launcher.child_status), 3)

    def test_continued_and_stopped_again_is_no_longer_frozen(self):
        # Its own timer continued it and a kill pass stopped it again: the
        # second stop erases the report of the continue (review helper
        # 141's 1), where the escape went uncounted.
        sage, launcher = self.launcher_of(["sleep", "30"])
        self.assertTrue(launcher.freeze())
        self.assertTrue(launcher.still_frozen())
        os.kill(sage.pid, signal.SIGCONT)
        os.kill(sage.pid, signal.SIGSTOP)
        while not calls.threads_stopped(sage.pid):
            time.sleep(0.001)
        self.assertFalse(launcher.still_frozen())
        self.assertTrue(launcher.freeze())
        self.assertTrue(launcher.still_frozen())

    def test_every_thread_is_looked_at(self):
        # /proc/PID/stat shows the main thread's state alone.
        worker = subprocess.Popen([sys.executable, "-c", (
            "import threading, time\n"
            "def tick():\n"
            "    while True: time.sleep(0.001)\n"
            "threading.Thread(target=tick, daemon=True).start()\n"
            "time.sleep(30)\n")])
        self.addCleanup(worker.wait)
        self.addCleanup(worker.kill)
        while len(os.listdir("/proc/%d/task" % worker.pid)) < 2:
            time.sleep(0.01)
        self.assertFalse(calls.threads_stopped(worker.pid))
        os.kill(worker.pid, signal.SIGSTOP)
        while not calls.threads_stopped(worker.pid):
            time.sleep(0.001)
        self.assertEqual(calls.processes()[worker.pid][0], b"T")
        os.kill(worker.pid, signal.SIGCONT)


def sh(script):
    """The pid of sh -c script, its stderr (a killed job's news) dropped:
    reaped by wait(-1), as the launcher reaps, not by a Popen."""
    return os.posix_spawn("/bin/sh", ["sh", "-c", script], os.environ,
                          file_actions=[(os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])


class KeptStoppedTest(unittest.TestCase):
    """kill_all_but and wait_for_call's escapes on /bin/sh Sages, the test
    the init of a pid namespace of its own (as_init), as the launcher is
    its container's: what it kills and reaps is its namespace's alone."""

    def with_a_sage(self, sage_script, body):
        """body(launcher, the Sage's pid), the Sage sh -c sage_script, as
        init (as_init): what body returned, whether every thread of the
        Sage is stopped then, and the other processes left alive
        ({pid: state})."""
        def run():
            sage = sh(sage_script)
            launcher = object.__new__(calls.Launcher)
            launcher.child, launcher.child_status, launcher.cpu_used = sage, None, 0.0
            launcher.orphan_reaped_at, launcher.frozen = 0, False
            launcher.interfaces, launcher.escapes = [], {}
            got = body(launcher, sage)
            left = {pid: state for pid, (state, _, _, threads) in calls.processes().items()
                    if pid not in (os.getpid(), sage) and not calls.dead(state, threads)}
            return got, calls.threads_stopped(sage), left
        return as_init(run)

    def assert_all_but_the_sage_killed_and_it_held(self, sage_script):
        def body(launcher, sage):
            time.sleep(0.3)  # what it forks born
            return launcher.kill_all_but(sage)
        ok, stopped, left = self.with_a_sage(sage_script, body)
        self.assertTrue(ok)
        self.assertTrue(stopped)
        self.assertEqual(left, {})

    def test_what_the_sage_forked_is_killed_and_it_is_held_stopped(self):
        # An orphan (a double fork), a child in the background, a loop forking.
        self.assert_all_but_the_sage_killed_and_it_held(
            "(sleep 30 &); sleep 30 & while :; do sleep 0.01; done")

    def test_a_child_that_continues_the_sage_is_killed_as_it_is_stopped(self):
        self.assert_all_but_the_sage_killed_and_it_held(
            "while kill -CONT $$ 2>/dev/null; do :; done & while :; do sleep 0.01; done")

    def test_a_sage_never_held_is_given_up_at_the_bound(self):
        def body(launcher, sage):
            time.sleep(0.2)
            began = calls.now_ms()
            # Never seen stopped, every thread.
            with mock.patch.object(calls, "threads_stopped", lambda pid: False):
                ok = launcher.kill_all_but(sage, began + 300)
            return ok, calls.now_ms() - began
        (ok, took), _, _ = self.with_a_sage("while :; do sleep 0.01; done", body)
        self.assertFalse(ok)
        self.assertGreaterEqual(took, 300)
        self.assertLess(took, 2000, "the bound given, not STOP_MS")

    def waiting_for_a_call(self, launcher, sage, continue_every, host_writes_after):
        """wait_for_call on a pipe the host writes to host_writes_after
        seconds on, while a thread of this process's (kill_all_but spares
        it, as it spares the host's watchdog) sends the Sage SIGCONT
        every continue_every seconds, first at once: how often the Sage
        was found escaped, whether wait_for_call returned or ended the
        container (os._exit, after kill_the_rest), and the Sage's wait
        status where it ended."""
        r, w = os.pipe()
        launcher.reader = frames.Reader(r)
        exits, escapes = [], []

        class Exited(Exception):
            pass

        def exit(status):
            exits.append(status)
            raise Exited()
        still_frozen = launcher.still_frozen
        launcher.still_frozen = lambda: still_frozen() or escapes.append(1) or False
        done = threading.Event()

        def continuer():
            while not done.is_set():
                try:
                    os.kill(sage, signal.SIGCONT)
                except ProcessLookupError:
                    return
                done.wait(continue_every)
        threading.Thread(target=continuer, daemon=True).start()
        host = threading.Timer(host_writes_after, os.write, (w, b"x"))
        host.start()
        try:
            with mock.patch.object(calls.os, "_exit", exit):
                launcher.wait_for_call()
            returned = True
        except Exited:
            returned = False
        finally:
            done.set()
            host.cancel()
        return len(escapes), returned, exits, launcher.child_status

    def test_an_escape_between_calls_is_stopped_again_and_what_it_forked_killed(self):
        def body(launcher, sage):
            time.sleep(0.2)
            self.assertTrue(launcher.stop_between_cells())
            # Once: the host's watchdog letting go as the cell ended. Run
            # on, it forks a child that would live on.
            return self.waiting_for_a_call(launcher, sage, 1000, 1.0), launcher.frozen
        ((escapes, returned, exits, _), frozen), stopped, left = self.with_a_sage(
            "while :; do sleep 30 & sleep 0.01; done", body)
        self.assertEqual((escapes, returned, exits), (1, True, []))
        self.assertTrue(frozen)
        self.assertTrue(stopped)
        self.assertEqual(left, {}, "what it forked while it ran")

    def test_a_sage_that_keeps_coming_back_ends_the_container(self):
        def body(launcher, sage):
            time.sleep(0.2)
            self.assertTrue(launcher.stop_between_cells())
            began = calls.now_ms()
            got = self.waiting_for_a_call(launcher, sage, 0.05, 10)
            return got, calls.now_ms() - began
        ((escapes, returned, exits, status), took), _, left = self.with_a_sage(
            "while :; do sleep 0.01; done", body)
        self.assertEqual((escapes, returned, exits), (calls.MAX_ESCAPES, False, [0]))
        self.assertTrue(os.WIFSIGNALED(status), "the Sage killed, with the rest (kill(-1))")
        self.assertEqual(left, {})
        self.assertLess(took, 5000, "%d looks of %d ms" % (calls.MAX_ESCAPES, calls.FROZEN_LOOK_MS))


class UnderATerminalTest(unittest.TestCase):
    """What a session's Sage runs under a pty (its interfaces) is kept
    between its cells; the rest of what it started is not."""

    def test_the_sessions_descendants_with_a_terminal(self):
        pty, other_pty = 34816, 34817
        listed = {
            1: (b"S", 0, 0, 1),            # the launcher
            10: (b"S", 1, 0, 3),           # the session's Sage: no terminal
            11: (b"S", 10, pty, 1),        # gap, under its pty
            12: (b"S", 11, pty, 1),        # what gap started
            13: (b"S", 10, 0, 1),          # subprocess.Popen(["sleep", ...])
            14: (b"S", 13, other_pty, 1),  # a pty below it: kept until 13 goes
            15: (b"S", 1, other_pty, 1),   # an orphan with a terminal
            16: (b"S", 15, other_pty, 1),
        }
        self.assertEqual(calls.under_a_terminal(10, listed), {11, 12, 14})
        del listed[13]
        listed[14] = (b"S", 1, other_pty, 1)  # its parent killed: now init's
        self.assertEqual(calls.under_a_terminal(10, listed), {11, 12})

    def test_a_cycle_of_parents_ends(self):
        listed = {20: (b"S", 21, 5, 1), 21: (b"S", 20, 5, 1), 10: (b"S", 1, 0, 1)}
        self.assertEqual(calls.under_a_terminal(10, listed), set())

    def test_this_process_is_listed_with_its_parent(self):
        listed = calls.processes()
        self.assertEqual(listed[os.getpid()][1], os.getppid())

    def test_an_interface_running_between_cells_is_stopped_again_then_killed(self):
        import subprocess
        stopped = subprocess.Popen(["sleep", "30"])
        running = subprocess.Popen(["sleep", "30"])
        for process in (stopped, running):
            self.addCleanup(process.wait)
            self.addCleanup(process.kill)
        os.kill(stopped.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, stopped.pid, os.WSTOPPED)
        launcher = object.__new__(calls.Launcher)
        launcher.child, launcher.interfaces, launcher.escapes = 7, [stopped.pid, running.pid], {}
        stops = []  # (kill_all_but lists the whole of /proc: not here)
        launcher.kill_all_but = lambda spared: stops.append(spared) or True
        for escape in range(1, calls.MAX_ESCAPES):
            launcher.kill_running_interfaces()
            self.assertEqual((stops, launcher.escapes), ([7] * escape, {running.pid: escape}))
            self.assertIsNone(running.poll())
        launcher.kill_running_interfaces()
        self.assertEqual(running.wait(10), -signal.SIGKILL)
        self.assertIsNone(stopped.poll())
        # None running: nothing done.
        launcher.interfaces = [stopped.pid]
        launcher.kill_running_interfaces()
        self.assertEqual(len(stops), calls.MAX_ESCAPES)


class DoneWaitingTest(unittest.TestCase):
    # Looked at before a cell's SIGINT: a word not yet read, not a write
    # end the code closed.
    def test_a_word_is_waiting_a_closed_end_is_not(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        launcher = object.__new__(calls.Launcher)
        launcher.pipes = types.SimpleNamespace(done=(r, w))
        self.assertFalse(launcher.done_waiting())
        os.write(w, b"0\n")
        self.assertTrue(launcher.done_waiting())
        os.read(r, 8)
        os.close(w)
        self.assertFalse(launcher.done_waiting())
        launcher.pipes = types.SimpleNamespace(done=(-1, -1))
        self.assertFalse(launcher.done_waiting())


class IdleTest(unittest.TestCase):
    """idle() skips what is left of the last call's stdin, wiped, past a
    full inbox, and says whether a call is waiting."""

    def idle_over(self, data):
        pipe = Pipe(self)
        fcntl.fcntl(pipe.w, fcntl.F_SETPIPE_SZ, 1 << 20)
        pipe.write(data)
        launcher = types.SimpleNamespace(reader=frames.Reader(pipe.r))
        idle = calls.Launcher.idle(launcher)
        return idle, launcher.reader, pipe

    def test_stdin_left_after_a_call_goes_wiped_and_the_call_after_it_waits(self):
        stdin = b"".join(frames.encode(b"I", b"\xaa" * frames.MAX_FRAME) for _ in range(6))
        call = frames.encode(b"L", b'{"cpu": 1, "deadline": 0, "inputs": 0}')
        idle, reader, pipe = self.idle_over(stdin + frames.encode(b"I") + call)
        self.assertFalse(idle)
        self.assertEqual(bytes(reader.inbox), call)
        self.assertNotIn(b"\xaa", bytes(reader.buffer))
        self.assertTrue(os.get_blocking(pipe.r))

    def test_only_stdin_left_is_idle(self):
        idle, reader, _ = self.idle_over(frames.encode(b"I", b"\xaa" * 100) + frames.encode(b"I"))
        self.assertTrue(idle)
        self.assertEqual((bytes(reader.inbox), any(reader.buffer)), (b"", False))


class ParseLimitsTest(unittest.TestCase):
    def test_as_the_host_sends_them(self):
        limits = calls.parse_limits(HOST_LIMITS)
        self.assertEqual(limits, json.loads(HOST_LIMITS))
        call = calls.Call(limits, b"a.sage\0", b"code")
        self.assertEqual((call.cpu_seconds, call.deadline, call.inputs), (30, 123456789, 2))
        self.assertEqual((call.out.files, call.out.file_bytes, call.out.total_bytes),
                         (100, 1048576, 10485760))

    def test_without_out(self):
        limits = calls.parse_limits(b'{"cpu": 0, "deadline": 0, "inputs": 0}')
        self.assertEqual(limits, {"cpu": 0, "deadline": 0, "inputs": 0})
        self.assertIsNone(calls.Call(limits, b"", b"").out)

    def test_the_largest_numbers(self):
        # CPU seconds travel on to the child in 32 bits (child.CALL_HEADER).
        largest, cpu = (1 << 62) - 1, (1 << 31) - 1
        data = json.dumps({"cpu": cpu, "deadline": largest, "inputs": largest,
                           "out": {"files": largest, "file_bytes": largest, "bytes": largest}})
        self.assertEqual(calls.parse_limits(data.encode())["deadline"], largest)
        self.assertEqual(calls.parse_limits(data.encode())["cpu"], cpu)
        with self.assertRaises(ProtocolError):
            calls.parse_limits(json.dumps({"cpu": 1 << 31, "deadline": 0, "inputs": 0}).encode())

    def test_nested_too_deep(self):
        with self.assertRaises(ProtocolError):
            calls.parse_limits(b"[" * 1000)

    def test_as_long_as_allowed(self):
        data = b'{"cpu": 1, "deadline": 2, "inputs": 3}'
        data += b" " * (calls.MAX_LIMITS_BYTES - len(data))
        self.assertEqual(calls.parse_limits(data)["inputs"], 3)

    def test_refused(self):
        valid = {"cpu": 1, "deadline": 2, "inputs": 0}
        out = {"files": 1, "file_bytes": 2, "bytes": 3}

        def changed(**changes):
            limits = dict(valid, **changes)
            return json.dumps({k: v for k, v in limits.items() if v is not DROP}).encode()

        def out_changed(**changes):
            limits = dict(out, **changes)
            return changed(out={k: v for k, v in limits.items() if v is not DROP})

        cases = {
            "empty": b"",
            "not JSON": b"cpu=1",
            "cut short": b'{"cpu": 1, "deadline": 2',
            "not UTF-8": b'{"cpu": 1, "deadline": 2, "inputs": 0, "\xff": 1}',
            "an array": b"[1, 2, 3]",
            "a number": b"1",
            "null": b"null",
            "NaN": b"NaN",
            "over-long": changed() + b" " * calls.MAX_LIMITS_BYTES,
            "one byte over": changed() + b" " * (calls.MAX_LIMITS_BYTES + 1 - len(changed())),
            "negative cpu": changed(cpu=-1),
            "negative deadline": changed(deadline=-1),
            "negative inputs": changed(inputs=-1),
            "boolean cpu": changed(cpu=True),
            "boolean inputs": changed(inputs=False),
            "float cpu": changed(cpu=1.0),
            "infinite deadline": changed(deadline=float("inf")),
            "string cpu": changed(cpu="1"),
            "null cpu": changed(cpu=None),
            "2**62 deadline": changed(deadline=1 << 62),
            "huge inputs": changed(inputs=10 ** 30),
            "no cpu": changed(cpu=DROP),
            "no deadline": changed(deadline=DROP),
            "no inputs": changed(inputs=DROP),
            "out not an object": changed(out=[1, 2, 3]),
            "out a number": changed(out=5),
            "out without files": out_changed(files=DROP),
            "out without file_bytes": out_changed(file_bytes=DROP),
            "out without bytes": out_changed(bytes=DROP),
            "out negative": out_changed(bytes=-1),
            "out boolean": out_changed(files=True),
            "out float": out_changed(file_bytes=2.0),
        }
        for name, data in cases.items():
            with self.subTest(name, data=data[:80]):
                with self.assertRaises(ProtocolError):
                    calls.parse_limits(data)


DROP = object()  # a key left out of the limits


class CreateInputTest(unittest.TestCase):
    """create_input() writes below /tmp, the container's working directory:
    here below a temporary directory in /tmp, named as the first part."""

    def setUp(self):
        self.work = temporary_directory(self, parent="/tmp")
        self.first = os.path.basename(self.work).encode()
        self.outside = temporary_directory(self)
        write_file(os.path.join(self.outside, "keep"), b"outside, untouched", 0o644)
        self.before = snapshot(self.outside)

    def tearDown(self):
        self.assertEqual(snapshot(self.outside), self.before)

    def path(self, relative):
        return os.path.join(self.work, relative)

    def create(self, name, data=b"given"):
        fd = calls.create_input([self.first] + name.encode().split(b"/"))
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def assertFileIs(self, relative, data=b"given"):
        st = os.lstat(self.path(relative))
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_nlink, 1)
        with open(self.path(relative), "rb") as f:
            self.assertEqual(f.read(), data)

    def test_a_new_file(self):
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_in_new_directories(self):
        self.create("a/b/c/data.csv")
        self.assertFileIs("a/b/c/data.csv")
        for directory in ("a", "a/b", "a/b/c"):
            self.assertEqual(stat.S_IMODE(os.lstat(self.path(directory)).st_mode), 0o700)

    def test_in_a_directory_there_already(self):
        os.mkdir(self.path("a"))
        write_file(self.path("a/other"), b"other")
        self.create("a/data.csv")
        self.assertFileIs("a/data.csv")
        with open(self.path("a/other"), "rb") as f:
            self.assertEqual(f.read(), b"other")

    def test_replaces_a_file(self):
        write_file(self.path("data.csv"), b"an earlier call's, longer than the new one", 0o444)
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_replaces_a_hard_link_without_writing_through_it(self):
        os.link(os.path.join(self.outside, "keep"), self.path("data.csv"))
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_replaces_a_link_without_following_it(self):
        os.symlink(os.path.join(self.outside, "keep"), self.path("data.csv"))
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_replaces_a_dangling_link(self):
        os.symlink(os.path.join(self.outside, "new"), self.path("data.csv"))
        self.create("data.csv")
        self.assertFileIs("data.csv")
        self.assertFalse(os.path.lexists(os.path.join(self.outside, "new")))

    def test_replaces_a_fifo(self):
        os.mkfifo(self.path("data.csv"))
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_replaces_a_directory_whatever_its_content(self):
        os.makedirs(self.path("data.csv/a/b"))
        write_file(self.path("data.csv/a/b/f"), b"f", 0)
        os.symlink(self.outside, self.path("data.csv/link"))
        os.chmod(self.path("data.csv/a/b"), 0)
        os.chmod(self.path("data.csv/a"), 0o300)
        self.create("data.csv")
        self.assertFileIs("data.csv")

    def test_a_link_on_the_way_is_not_followed(self):
        os.symlink(self.outside, self.path("a"))
        with self.assertRaises(OSError):
            self.create("a/keep", b"planted")
        with self.assertRaises(OSError):
            self.create("a/new", b"planted")
        self.assertFalse(os.path.lexists(os.path.join(self.outside, "new")))

    def test_a_file_on_the_way(self):
        write_file(self.path("a"), b"a file")
        with self.assertRaises(OSError):
            self.create("a/data.csv")

    def test_a_closed_directory_on_the_way(self):
        if as_root():
            self.skipTest("root writes whatever the modes")
        os.mkdir(self.path("a"), 0)
        with self.assertRaises(PermissionError):
            self.create("a/data.csv")


if __name__ == "__main__":
    unittest.main()


class MoveChildEndsTest(unittest.TestCase):
    # replace_child's first step: the prepared child's ends go above any
    # number a fork's pipes take, all of them or none. (The child's own
    # ends stay open here, to read what the moved ends write.)
    def setUp(self):
        from launcher import child
        launcher = calls.Launcher("serial", None, None, None, None, None)
        launcher.pipes = child.Pipes(with_done=True)
        launcher.streams = {launcher.pipes.stdout[0]: b"O", launcher.pipes.stderr[0]: b"E"}
        launcher.call_w, launcher.stdin_w = launcher.pipes.call[1], launcher.pipes.stdin[1]
        launcher.pidfd = os.pidfd_open(os.getpid())
        self.launcher = launcher
        self.child_ends = launcher.pipes.child_ends()
        self.addCleanup(lambda: [os.close(fd) for fd in self.child_ends])
        self.addCleanup(launcher.close_child_pipes)

    def ends(self):
        return sorted(self.launcher.pipes.launcher_ends() + (self.launcher.pidfd,))

    def is_open(self, fd):
        try:
            os.fstat(fd)
            return True
        except OSError:
            return False

    def still_connected(self):
        os.write(self.launcher.stdin_w, b"x")
        return os.read(self.launcher.pipes.stdin[0], 1) == b"x"

    def test_every_end_moves_and_the_old_numbers_are_free(self):
        before = self.ends()
        moved = self.launcher.move_child_ends()
        self.assertEqual(sorted(moved), self.ends())
        self.assertEqual(len(moved), 6)
        self.assertTrue(all(fd >= calls.child.MOVED_FDS_FROM for fd in moved))
        self.assertFalse([fd for fd in before if self.is_open(fd)])
        launcher = self.launcher
        self.assertEqual(set(launcher.streams), {launcher.pipes.stdout[0], launcher.pipes.stderr[0]})
        self.assertEqual((launcher.call_w, launcher.stdin_w),
                         (launcher.pipes.call[1], launcher.pipes.stdin[1]))
        self.assertTrue(all(not os.get_inheritable(fd) for fd in moved))
        self.assertTrue(self.still_connected())
        launcher.close_child_pipes()
        self.assertFalse([fd for fd in moved if self.is_open(fd)])

    def test_none_moves_where_one_cannot(self):
        import resource
        before = self.ends()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        # Room above MOVED_FDS_FROM for two only.
        resource.setrlimit(resource.RLIMIT_NOFILE, (calls.child.MOVED_FDS_FROM + 2, hard))
        try:
            with self.assertRaises(OSError):
                self.launcher.move_child_ends()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        self.assertEqual(self.ends(), before)
        self.assertTrue(all(self.is_open(fd) for fd in before))
        above = calls.child.MOVED_FDS_FROM
        self.assertFalse([fd for fd in range(above, above + 8) if self.is_open(fd)])
        self.assertTrue(self.still_connected())
