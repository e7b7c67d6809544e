# tests/launcher/test_mpmain.py: the main module multiprocessing's spawn and
# forkserver children are told to run (launcher/mpmain.py): the call's code
# laid out as sage-preparse writes FILE.sage.py, in a file of its own for
# each cell, once the modules that start such children are imported; the
# name the user gave where there is no call's code, or the code changed
# __main__.__file__. One real spawn child runs it, with a stand-in for Sage.
import multiprocessing
import os
import sys
import types
import unittest
from unittest import mock

from launcher import mpmain

from .support import temporary_directory

HOOKED = []  # an audit hook stays for the process's life: installed once


class MpmainTest(unittest.TestCase):
    def setUp(self):
        self.dir = temporary_directory(self)
        main = types.ModuleType("__main__")
        main.__file__ = "/host/dir/pool.sage"
        for patch in (mock.patch.dict(sys.modules, {"__main__": main}),
                      mock.patch.object(mpmain, "CALL_TMP", self.dir),
                      mock.patch.object(mpmain, "main_code", None),
                      mock.patch.object(mpmain, "written", None),
                      mock.patch.object(mpmain, "pari_sizemax", None)):
            patch.start()
            self.addCleanup(patch.stop)
        self.main = main
        if not HOOKED:
            mpmain.install("sage.all_cmdline")
            HOOKED.append(True)
        # A starter imported anew, by an import statement, as a call's
        # pool imports it (importlib.import_module raises no audit event).
        import multiprocessing.spawn
        self.spawn = multiprocessing.spawn
        self.unwrap()
        for name in mpmain.STARTERS:
            sys.modules.pop(name, None)
        import multiprocessing.popen_spawn_posix  # noqa: F401

    def unwrap(self):
        self.spawn.get_preparation_data = getattr(
            self.spawn.get_preparation_data, "__wrapped__", self.spawn.get_preparation_data)

    def main_path(self):
        return self.spawn.get_preparation_data("child")["init_main_from_path"]

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_the_call_s_code_as_sage_writes_it(self):
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_2 = Integer(2)", "print(_sage_const_2)")
        path = self.main_path()
        self.assertEqual(os.path.basename(path), "pool.sage.py")
        self.assertEqual(os.path.dirname(os.path.dirname(path)), self.dir)
        self.assertEqual(self.read(path), "# -*- coding: utf-8 -*-\n\n"
                         "from sage.all_cmdline import *   # import sage library\n"
                         "_sage_const_2 = Integer(2)\nprint(_sage_const_2)\n")
        self.assertEqual(self.main_path(), path)  # written once
        text = self.read(path)
        os.unlink(path)  # the code cleaned /tmp: written again
        self.assertEqual(self.read(self.main_path()), text)

    def test_docstring_and_future_imports_first(self):
        code = '"""Doc."""\nfrom __future__ import annotations\nx = _sage_const_1\n'
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_1 = Integer(1)", code)
        text = self.read(self.main_path())
        self.assertEqual(text, '# -*- coding: utf-8 -*-\n"""Doc."""\nfrom __future__ import annotations\n\n'
                         "from sage.all_cmdline import *   # import sage library\n"
                         "_sage_const_1 = Integer(1)\nx = _sage_const_1\n\n")
        compile(text, "pool.sage.py", "exec")

    def test_the_future_imports_taken_out_go_first_as_sage_preparse_writes_them(self):
        # child.FutureImports took them out, their lines left blank.
        code = '"""Doc."""\nx = _sage_const_1\n\ndef f(a: B): pass\n'
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_1 = Integer(1)", code,
                       ["from __future__ import annotations"])
        text = self.read(self.main_path())
        self.assertEqual(text, '# -*- coding: utf-8 -*-\n"""Doc."""\nfrom __future__ import annotations\n\n'
                         "from sage.all_cmdline import *   # import sage library\n"
                         "_sage_const_1 = Integer(1)\nx = _sage_const_1\n\ndef f(a: B): pass\n\n")
        compile(text, "pool.sage.py", "exec")

    def test_the_code_s_own_encoding_line_is_not_the_file_s(self):
        # The text was decoded already; the file is UTF-8.
        code = '#!/usr/bin/env sage\n# coding: ascii\nfrom __future__ import annotations\nprint("\u00e9")\n'
        mpmain.main_is("/host/dir/pool.sage", "", code)
        with open(self.main_path(), "rb") as f:
            compile(f.read(), "pool.sage.py", "exec")

    def test_a_docstring_that_shares_its_line_stays_below_the_constants(self):
        code = '"""Doc."""; a = _sage_const_2\n'
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_2 = Integer(2)", code)
        text = self.read(self.main_path())
        self.assertLess(text.index("_sage_const_2 = Integer(2)"), text.index('"""Doc."""'))

    def test_a_later_cell_gets_a_file_of_its_own(self):
        mpmain.main_is("/host/dir/pool.sage", "", "print(1)")
        first = self.main_path()
        mpmain.main_is("/host/dir/pool.sage", "", "print(2)")
        second = self.main_path()
        self.assertNotEqual(first, second)
        self.assertTrue(self.read(second).endswith("print(2)\n"))

    def test_standard_input(self):
        self.main.__file__ = "<stdin>"
        mpmain.main_is("<stdin>", "", "print(1)")
        self.assertEqual(os.path.basename(self.main_path()), "stdin.py")

    def test_left_alone_where_no_call_s_code_or_file_changed(self):
        self.assertEqual(self.main_path(), "/host/dir/pool.sage")
        mpmain.main_is("/host/dir/pool.sage", "", "print(1)")
        self.main.__file__ = "/elsewhere/own.py"
        self.assertEqual(self.main_path(), "/elsewhere/own.py")
        self.assertEqual(os.listdir(self.dir), [])

    def test_imported_before_or_without_an_event(self):
        self.unwrap()  # as where spawn came before the hook, or by importlib
        mpmain.main_is("/host/dir/pool.sage", "", "print(1)")
        self.assertTrue(self.main_path().endswith("/pool.sage.py"))

    def test_events_of_any_shape_raise_nothing(self):
        sys.audit("import")
        sys.audit("import", None)
        sys.audit("import", 5, [])
        sys.audit("open", "x", "r", 0)

    def test_pari_s_stack_bounded_on_the_import_s_line(self):
        code = "x = _sage_const_2\nprint(x)\n"
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_2 = Integer(2)", code)
        unbounded = self.read(self.main_path()).splitlines()
        mpmain.pari_sizemax, mpmain.written = 3 << 30, None
        lines = self.read(self.main_path()).splitlines()
        self.assertEqual(len(lines), len(unbounded))
        self.assertRegex(lines[2], r"^import cypari2 as _sandbox_pari; .*\(1048576, "
                         r"min\(sizemax or 3221225472, 3221225472\)\); "
                         r"from sage\.all_cmdline import \*; .*"
                         r"del _sandbox_pari, _sandbox_pari_class   # import sage library$")
        self.assertEqual(lines[:2] + lines[3:], unbounded[:2] + unbounded[3:])

    def stand_in_sage(self, text):
        for name, module in (("stand_in_sage", text), ("cypari2", "Pari = lambda *args: args\n")):
            with open(os.path.join(self.dir, name + ".py"), "w") as f:
                f.write(module)
        sys.path.insert(0, self.dir)
        self.addCleanup(sys.path.remove, self.dir)
        patch = mock.patch.object(mpmain, "sage_all", "stand_in_sage")
        patch.start()
        self.addCleanup(patch.stop)

    def test_a_spawn_child_s_pari_stack_is_the_launcher_s_and_no_name_stays(self):
        # Sage makes PARI's instance as it imports; its class is left as it was.
        self.stand_in_sage("import cypari2\npari = cypari2.Pari(1 << 20, 1 << 30)\n")
        mpmain.pari_sizemax = 3 << 30
        code = "def stacks(n):\n    import cypari2\n    " \
            "return pari, cypari2.Pari(n), sorted(k for k in globals() if 'sandbox' in k)\n"
        mpmain.main_is("/host/dir/pool.sage", "", code)
        exec(code, self.main.__dict__)
        self.main.stacks.__module__ = "__main__"
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            self.assertEqual(pool.map_async(self.main.stacks, [5]).get(timeout=60),
                             [((1 << 20, 1 << 30), (5,), [])])

    def test_pari_s_bound_is_what_sage_asks_or_the_limit_s_the_lower(self):
        pari = mpmain.bounded_pari(lambda *args: args, 256 << 20)
        self.assertEqual(pari(1 << 20, 1 << 30), (1 << 20, 256 << 20))
        self.assertEqual(pari(8 << 20, 1 << 27), (1 << 20, 1 << 27))
        self.assertEqual(pari(sizemax=1 << 27), (1 << 20, 1 << 27))
        self.assertEqual(pari(), (1 << 20, 256 << 20))

    def test_a_spawn_child_runs_it(self):
        self.stand_in_sage("Integer = int\n")
        code = "def cube(n):\n    return n**_sage_const_3\n"
        mpmain.main_is("/host/dir/pool.sage", "_sage_const_3 = Integer(3)", code)
        namespace = self.main.__dict__
        exec("_sage_const_3 = 3\n" + code, namespace)
        self.main.cube.__module__ = "__main__"
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            # Where the child cannot run it, the pool starts worker after
            # worker, each failing: bounded.
            self.assertEqual(pool.map_async(self.main.cube, [2, 3]).get(timeout=60), [8, 27])


if __name__ == "__main__":
    unittest.main()
