# tests/launcher/test_warm.py: the warm-up's mechanisms without Sage: the
# grant read from the data rlimit, the rlimits a call's process gets back,
# a step that leaves a thread behind, a file a step keeps open (above the
# numbers a call's code opens), numpy's print options and the recursion
# limit put back, GC_MARKERS in Maxima's step only, warnings put back with
# their "printed once" records (but the filters a step's imports add),
# shared mappings a call could write, and a launcher that is idle although
# the last call's end of input is still unread.
import os
import resource
import sys
import threading
import time
import unittest
import unittest.mock
import warnings

from launcher import calls, frames, warm

from .support import in_child


class GrantTest(unittest.TestCase):
    def setUp(self):
        self.saved = warm._grant

    def tearDown(self):
        warm._grant = self.saved

    def test_no_room_no_warm_up(self):
        # A cold run's container: soft and hard the memory limit.
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY:
            self.assertIsNone(warm.Warmer.granted())
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
            self.assertIsNone(warm.Warmer.granted())
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

    def test_a_call_gets_back_what_the_warm_up_took(self):
        warm._grant = None
        self.assertEqual(warm.grown(), (None, 0))
        data, space = warm._status("VmData"), warm._status("VmSize")
        warm._grant = (1 << 30, data - (300 << 20), space - (500 << 20))
        got_data, got_space = warm.grown()
        self.assertAlmostEqual(got_data, (1 << 30) + (300 << 20), delta=64 << 20)
        self.assertAlmostEqual(got_space, 500 << 20, delta=64 << 20)
        # Less than at the grant (memory given back): never less than the limit.
        warm._grant = (1 << 30, data + (1 << 30), space + (1 << 30))
        self.assertEqual(warm.grown(), (1 << 30, 0))

    def test_gaps_step_gets_the_room_a_calls_process_has_after_the_steps_before_it(self):
        # GAP takes for its workspace all the data rlimit leaves it: its
        # step runs under what a call's process gets (grown()), whatever
        # the steps before it took; the others in the room granted.
        def steps():
            held, limits = [], {}

            def grow():
                held.append(bytearray(64 << 20))  # written: data the template holds

            def limit(name):
                return lambda: limits.setdefault(name, resource.getrlimit(resource.RLIMIT_DATA))
            data = warm._status("VmData")
            warmer = warm.Warmer(data + (256 << 20), data + (1 << 30))
            order = (("maxima", grow), ("gap", limit("gap")), ("matplotlib", limit("matplotlib")))
            with unittest.mock.patch.object(warm, "STEPS", order), \
                    unittest.mock.patch.object(warm, "run_step",
                                               lambda name, run, first: run()):
                for _ in order:
                    warmer.step()
                return limits, warm.grown()[0], warmer.memory, warmer.room, warmer.done
        limits, call_data, memory, room, done = in_child(steps)
        self.assertTrue(done)
        self.assertEqual(limits["gap"], (call_data, room))
        self.assertAlmostEqual(call_data - memory, 64 << 20, delta=8 << 20)
        self.assertEqual(limits["matplotlib"], (room, room))


class StepTest(unittest.TestCase):
    def setUp(self):
        # catch_warnings() does not put back the "once" table.
        saved = dict(warnings.onceregistry)

        def restore():
            warnings.onceregistry.clear()
            warnings.onceregistry.update(saved)
        self.addCleanup(restore)

    def test_a_step_that_leaves_a_thread_makes_the_template_unsafe(self):
        stop = threading.Event()
        lingering = threading.Thread(target=stop.wait)
        try:
            with self.assertRaisesRegex(warm.Unsafe, r"^the warm-up's lingering step left \d+ "
                                        r"threads in the template$"):
                warm.run_step("lingering", lingering.start)
        finally:
            stop.set()
            lingering.join()
        self.assertNotIn("GC_MARKERS", os.environ)

    def test_a_quiet_step_is_safe(self):
        self.assertIsNone(warm.run_step("quiet", lambda: None))

    def test_a_steps_garbage_is_collected_and_the_imports_left_to_the_call(self):
        # What Sage's import left in the oldest generation is held
        # through the steps and let go in a call's process (inherit()),
        # whose first collection finds it; the young generations' is
        # freed, as before the fork of a cold call's process (calls.py);
        # a step's own garbage is gone.
        import gc

        class Cycle:
            def __init__(self):
                self.me = self

        class Young(Cycle):
            pass
        gc.collect()
        old = Cycle()  # the import's
        gc.collect(1)  # now of the oldest generation
        del old
        Young()
        self.addCleanup(warm.import_garbage.clear)
        self.assertIsNone(warm.run_step("first", Cycle, first=True))
        self.assertEqual(gc.collect(), 0, "the step's garbage, collected")
        self.assertEqual([type(o) for o in warm.import_garbage if isinstance(o, Cycle)], [Cycle])
        held = len(warm.import_garbage)
        warm.import_garbage.clear()  # as inherit() lets it go
        self.assertEqual(gc.collect(), held)

    def test_a_finaliser_of_the_imports_garbage_that_prints_makes_the_template_unsafe(self):
        import gc

        class Loud:
            def __init__(self):
                self.me = self

            def __del__(self):
                print("finalised")
        gc.collect()
        Loud()
        self.addCleanup(warm.import_garbage.clear)
        with self.assertRaisesRegex(warm.Unsafe, r"^the warm-up's first step printed "):
            warm.run_step("first", lambda: None, first=True)

    def test_a_file_a_step_keeps_open_takes_none_of_the_numbers_code_opens(self):
        # As 9.5's IPython keeps /dev/null from its import: the code's
        # first open() gets the number it got before the step.
        kept = []
        probe = os.open("/dev/null", os.O_RDONLY)
        os.close(probe)
        try:
            self.assertIsNone(warm.run_step("keeping", lambda: kept.append(
                os.open("/dev/null", os.O_RDONLY))))
            self.assertGreaterEqual(kept[0], warm.CAPTURE_FDS_FROM)
            self.assertEqual(sorted(os.listdir("/proc/self/fd"), key=int)[-1:],
                             [str(max(kept))], "every held number closed")
            again = os.open("/dev/null", os.O_RDONLY)
            os.close(again)
            self.assertEqual(again, probe)
        finally:
            for fd in kept:
                os.close(fd)

    def test_warnings_and_their_printed_once_records_put_back(self):
        def library():
            warnings.warn("deprecated, said once", DeprecationWarning)

        def noisy():
            library()  # the warm-up's use: "printed once" recorded here
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            before = list(warnings.filters)
            warm.run_step("noisy", noisy)
            self.assertEqual(warnings.filters, before)
            del seen[:]
            library()  # the call's first use: told, as in a fresh Sage
            library()
        self.assertEqual([str(w.message) for w in seen], ["deprecated, said once"])

    def test_the_filters_a_step_adds_stay_and_its_once_records_go(self):
        def importing():
            # What a module's import does (sympy's, scipy's): its filter.
            warnings.filterwarnings("always", message="the library's")
            warnings.warn("said once", UserWarning)  # the "once" recorded here

        def call():
            for _ in range(2):
                warnings.warn("said once", UserWarning)
                warnings.warn("the library's", UserWarning)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("once")
            before = list(warnings.filters)
            warm.run_step("importing", importing)
            self.assertEqual(warnings.filters[1:], before)
            self.assertEqual(warnings.filters[0][0], "always")
            del seen[:]
            call()  # as after the library's import in a fresh Sage
        self.assertEqual([str(w.message) for w in seen],
                         ["said once", "the library's", "the library's"])

    def test_a_step_that_removes_a_filter_gets_it_back_under_those_it_added(self):
        def resetting():
            warnings.resetwarnings()
            warnings.simplefilter("error", UserWarning)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            before = list(warnings.filters)
            warm.run_step("resetting", resetting)
            self.assertEqual(warnings.filters,
                             [("error", None, UserWarning, None, 0)] + before)

    def test_a_step_that_fails_still_puts_back_but_what_it_imported(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            before = list(warnings.filters)

            def failing():
                warnings.resetwarnings()
                warnings.filterwarnings("always", message="imported before the failure")
                raise KeyboardInterrupt  # a BaseException, as cysignals' are
            self.assertEqual(warm.run_step("failing", failing),
                             "the warm-up's failing step failed: KeyboardInterrupt: ")
            self.assertEqual(warnings.filters[1:], before)
            self.assertEqual(warnings.filters[0][0], "always")
            self.assertEqual(warnings.filters[0][1].pattern, "imported before the failure")

    def test_a_step_that_prints_makes_the_template_unsafe_and_its_output_reaches_no_frame(self):
        # Descriptor 1 carries the frames to the host: nothing a step
        # writes, from Python or from C (a write(2) here), may reach it.
        before = [os.fstat(fd) for fd in (1, 2)]
        r, w = os.pipe()
        saved = os.dup(1)
        os.dup2(w, 1)
        try:
            def printing():
                print("from Python")
                os.write(1, b"from C\n")
                os.write(2, b"on stderr\n")
            with self.assertRaisesRegex(warm.Unsafe, r"^the warm-up's printing step printed ") as e:
                warm.run_step("printing", printing)
            # In any order: print() may be buffered until the step's end.
            for line in (r"from Python\n", r"from C\n", r"on stderr\n"):
                self.assertIn(line, str(e.exception))
            os.write(1, b"after")
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(w)
        with os.fdopen(r, "rb") as pipe:
            self.assertEqual(pipe.read(), b"after")
        self.assertEqual([(s.st_dev, s.st_ino) for s in before],
                         [(s.st_dev, s.st_ino) for s in map(os.fstat, (1, 2))])

    def test_a_shared_mapping_of_a_writable_place_is_found(self):
        import mmap
        import tempfile
        from launcher import tmpreset
        with tempfile.TemporaryDirectory() as place:
            with open(os.path.join(place, "segment"), "w+b") as f:
                f.truncate(4096)
                shared = mmap.mmap(f.fileno(), 4096, mmap.MAP_SHARED)
                private = mmap.mmap(f.fileno(), 4096, mmap.MAP_PRIVATE)
            self.assertEqual(tmpreset.shared_mappings((place,)), [place + "/segment"])
            shared.close()
            self.assertEqual(tmpreset.shared_mappings((place,)), [])
            private.close()

    def test_a_shared_mapping_of_no_file_or_mapped_writable_is_found(self):
        import mmap
        import tempfile
        from launcher import tmpreset
        anonymous = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.assertEqual(tmpreset.shared_mappings(()), ["/dev/zero (deleted)"])
        anonymous.close()
        with tempfile.TemporaryDirectory() as place:
            path = os.path.join(place, "segment")
            with open(path, "w+b") as f:
                f.truncate(4096)
                writable = mmap.mmap(f.fileno(), 4096, mmap.MAP_SHARED)
            # Outside the places, but writable: found.
            self.assertEqual(tmpreset.shared_mappings(()), [path])
            writable.close()
            with open(path, "rb") as f:
                read_only = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
            os.unlink(path)
            # Read-only, but of a file no longer there: found.
            self.assertEqual(tmpreset.shared_mappings(()), [path + " (deleted)"])
            read_only.close()
        # A read-only one of a file outside the places: not the code's to write.
        with open("/etc/passwd", "rb") as f:
            font_cache_like = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
        self.assertEqual(tmpreset.shared_mappings(()), [])
        font_cache_like.close()

    def test_what_a_library_function_sets_as_it_runs_is_put_back(self):
        # As Sage 10's find_root sets numpy's legacy printing, and
        # IPython's import raises the recursion limit: a stand-in numpy,
        # so that the host's need not have one.
        class FakeNumpy:
            options = {"legacy": False, "precision": 8}

            def get_printoptions(self):
                return dict(self.options)

            def set_printoptions(self, **options):
                self.options.update(options)
        numpy = FakeNumpy()
        limit = sys.getrecursionlimit()

        def find_root_like():
            numpy.set_printoptions(legacy="1.25")
            sys.setrecursionlimit(limit + 2000)
        with unittest.mock.patch.dict(sys.modules, numpy=numpy):
            self.assertIsNone(warm.run_step("numerics", find_root_like))
        self.assertEqual(numpy.options, {"legacy": False, "precision": 8})
        self.assertEqual(sys.getrecursionlimit(), limit)

    def test_a_thread_a_step_starts_numbers_no_calls_thread(self):
        # As matplotlib's font cache starts a Timer: the next thread is
        # named as it would have been without the step. In a child: one
        # thread, whatever an earlier test left running here.
        def body():
            before = warm.next_thread_number()

            def starts_a_thread():
                t = threading.Thread(target=lambda: None)
                t.start()
                t.join()
                # Joined, its task may linger a moment in /proc.
                for _ in range(1000):
                    if warm.threads() == 1:
                        break
                    time.sleep(0.001)
            failed = warm.run_step("matplotlib-like", starts_a_thread)
            return before, failed, warm.next_thread_number(), threading.Thread().name

        before, failed, after, name = in_child(body)
        self.assertIsNotNone(before)
        self.assertEqual((failed, after, name), (None, before, "Thread-%d" % before))

    def test_only_maximas_step_runs_with_gc_markers_and_the_images_is_kept(self):
        # GAP keeps a copy of the environment it started with. Traces
        # stands in for Maxima's, which needs Sage.
        class NoTraces:
            def __init__(self, name):
                pass

            def put_back(self):
                pass
        for image_setting in (None, "3"):
            with unittest.mock.patch.dict(os.environ), \
                    unittest.mock.patch.object(warm, "Traces", NoTraces):
                os.environ.pop("GC_MARKERS", None)
                if image_setting:
                    os.environ["GC_MARKERS"] = image_setting
                seen = {}
                for name in [name for name, _ in warm.STEPS[:2]]:
                    self.assertIsNone(warm.run_step(name, lambda: seen.setdefault(
                        name, os.environ.get("GC_MARKERS"))))
                    self.assertEqual(os.environ.get("GC_MARKERS"), image_setting)
                self.assertEqual(seen, {"gap": image_setting, "maxima": "1"})


class IdleTest(unittest.TestCase):
    def launcher(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        launcher = calls.Launcher("serial", frames.Reader(r), None, None, None, None)
        return launcher, w

    def test_the_last_calls_end_of_input_is_no_call(self):
        launcher, w = self.launcher()
        self.assertTrue(launcher.idle())
        os.write(w, frames.encode(b"I", b""))
        self.assertTrue(launcher.idle())
        self.assertFalse(launcher.reader.inbox)

    def test_a_call_begun_is_not_idle(self):
        launcher, w = self.launcher()
        os.write(w, frames.encode(b"I", b"") + frames.encode(b"L", b"{}")[:3])
        self.assertFalse(launcher.idle())
        self.assertEqual(bytes(launcher.reader.inbox), frames.encode(b"L", b"{}")[:3])


if __name__ == "__main__":
    unittest.main()
