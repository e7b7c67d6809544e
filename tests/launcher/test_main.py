# tests/launcher/test_main.py: the launcher's start-up verdicts (main.py).
import builtins
import errno
import unittest

from launcher import main


class RanOutOfMemoryTest(unittest.TestCase):
    def test_the_forms_the_memory_limit_takes(self):
        self.assertTrue(main.ran_out_of_memory(MemoryError()))
        # Sage 10 at --memory 256m: os.listdir of a package failed.
        self.assertTrue(main.ran_out_of_memory(OSError(
            errno.ENOMEM, "Cannot allocate memory", "/opt/sage/lib/python3.11/site-packages/sage/plot")))
        self.assertTrue(main.ran_out_of_memory(ImportError(
            "libgap.so.0: failed to map segment from shared object")))
        self.assertTrue(main.ran_out_of_memory(ImportError(
            "libflint.so: cannot map zero-fill pages: Cannot allocate memory")))

    def test_a_cause_counts(self):
        try:
            try:
                raise OSError(errno.ENOMEM, "Cannot allocate memory")
            except OSError as inner:
                raise RuntimeError("loading failed") from inner
        except RuntimeError as e:
            self.assertTrue(main.ran_out_of_memory(e))
        try:
            try:
                raise MemoryError()
            except MemoryError:
                raise ValueError("while handling")
        except ValueError as e:
            self.assertTrue(main.ran_out_of_memory(e))

    def test_a_context_behind_a_cause_counts_and_a_group(self):
        try:
            try:
                raise MemoryError()
            except MemoryError:
                raise ImportError("x") from KeyError("k")
        except ImportError as e:
            self.assertTrue(main.ran_out_of_memory(e))
        group = getattr(builtins, "ExceptionGroup", None)  # Python 3.11 on
        if group is not None:
            self.assertTrue(main.ran_out_of_memory(group("g", [ValueError(), MemoryError()])))
            self.assertFalse(main.ran_out_of_memory(group("g", [ValueError()])))
        # ctypes' loader: an OSError with no errno.
        self.assertTrue(main.ran_out_of_memory(OSError("libgap.so: failed to map segment from shared object")))

    def test_a_message_that_cannot_be_made(self):
        class Broken(ImportError):
            def __str__(self):
                raise RuntimeError("no")

        class Starved(ImportError):
            def __str__(self):
                raise MemoryError()
        self.assertFalse(main.ran_out_of_memory(Broken()))
        self.assertTrue(main.ran_out_of_memory(Starved()))

    def test_other_failures_are_the_images(self):
        self.assertFalse(main.ran_out_of_memory(ModuleNotFoundError("No module named 'sage'")))
        self.assertFalse(main.ran_out_of_memory(OSError(errno.ENOENT, "No such file or directory")))
        self.assertFalse(main.ran_out_of_memory(ImportError("undefined symbol: foo")))
        # A loader's limit, not the memory's.
        self.assertFalse(main.ran_out_of_memory(ImportError(
            "libgomp.so.1: cannot allocate memory in static TLS block")))
        e = RuntimeError("a")
        e.__context__ = RuntimeError("b")
        e.__context__.__context__ = e      # a cycle ends
        self.assertFalse(main.ran_out_of_memory(e))


if __name__ == "__main__":
    unittest.main()
