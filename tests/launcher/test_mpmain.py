# tests/launcher/test_mpmain.py: the main module multiprocessing's spawn and
# forkserver children are told to run (launcher/mpmain.py): the call's code
# as `sage FILE` writes it, in a file of its own for each cell, once the
# modules that start such children are imported; the name the user gave
# where there is no call's code, or the code changed __main__.__file__.
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

from launcher import mpmain

from .support import temporary_directory


class MpmainTest(unittest.TestCase):
    def setUp(self):
        self.dir = temporary_directory(self)
        main = types.ModuleType("__main__")
        main.__file__ = "/host/dir/pool.sage"
        for patch in (mock.patch.dict(sys.modules, {"__main__": main}),
                      mock.patch.object(tempfile, "tempdir", self.dir),
                      mock.patch.object(mpmain, "main_text", None),
                      mock.patch.object(mpmain, "written", None)):
            patch.start()
            self.addCleanup(patch.stop)
        self.main = main
        if not getattr(mpmain, "installed_here", False):
            mpmain.install("sage.all_cmdline")  # an audit hook stays: once
            mpmain.installed_here = True
        # A starter imported anew, by an import statement, as a call's
        # pool imports it (importlib.import_module raises no audit event).
        for name in mpmain.STARTERS:
            sys.modules.pop(name, None)
        import multiprocessing.popen_spawn_posix  # noqa: F401
        import multiprocessing.spawn
        self.spawn = multiprocessing.spawn

    def main_path(self):
        return self.spawn.get_preparation_data("child")["init_main_from_path"]

    def test_the_call_s_code_as_sage_writes_it(self):
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_2 = Integer(2)\nprint(_sage_const_2)")
        path = self.main_path()
        self.assertEqual(os.path.basename(path), "pool.sage.py")
        self.assertTrue(path.startswith(self.dir + os.sep))
        with open(path) as f:
            self.assertEqual(f.read(), "from sage.all_cmdline import *   # import sage library\n"
                             "_sage_const_2 = Integer(2)\nprint(_sage_const_2)\n")
        self.assertEqual(self.main_path(), path)  # written once

    def test_a_later_cell_gets_a_file_of_its_own(self):
        mpmain.main_is("/host/dir/pool.sage", "print(1)")
        first = self.main_path()
        mpmain.main_is("/host/dir/pool.sage", "print(2)")
        second = self.main_path()
        self.assertNotEqual(first, second)
        with open(second) as f:
            self.assertTrue(f.read().endswith("print(2)\n"))

    def test_standard_input(self):
        self.main.__file__ = "<stdin>"
        mpmain.main_is("<stdin>", "print(1)")
        self.assertEqual(os.path.basename(self.main_path()), "stdin.py")

    def test_left_alone_where_no_call_s_code_or_file_changed(self):
        self.assertEqual(self.main_path(), "/host/dir/pool.sage")
        mpmain.main_is("/host/dir/pool.sage", "print(1)")
        self.main.__file__ = "/elsewhere/own.py"
        self.assertEqual(self.main_path(), "/elsewhere/own.py")
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    unittest.main()
