# tests/launcher/test_bundle.py: the launcher's modules joined into the one
# program podman is given (launcher/bundle.py), and each module importable
# without Sage and without doing anything on import.
import ast
import base64
import contextlib
import glob
import io
import json
import os
import subprocess
import sys
import unittest
import zlib

from launcher import bundle

from .support import temporary_directory

LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "launcher")
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(LAUNCHER, "*.py"))
                 if not os.path.basename(p).startswith(("bundle", "test")))
MODULE_NAMES = {"launcher" if m == "__init__" else "launcher." + m for m in MODULES}


def bundled(paths):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bundle.main(paths)
    return out.getvalue()


def sources_of(program):
    """The SOURCES dictionary the program carries, read without running it:
    the one string in its assignment, unpacked."""
    for node in ast.parse(program).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["SOURCES"]:
            packed = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)]
            return json.loads(zlib.decompress(base64.b64decode(packed[0])))
    raise AssertionError("no SOURCES in the bundle")


def run_python(test, code, cwd):
    """code under this python3, isolated (-I: no PYTHONPATH, no user site,
    no current directory on sys.path), in cwd."""
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=cwd,
                          capture_output=True, timeout=20)
    test.assertEqual(done.returncode, 0, done.stderr.decode(errors="replace"))
    return done.stdout, done.stderr


class BundleTest(unittest.TestCase):
    def setUp(self):
        self.paths = glob.glob(os.path.join(LAUNCHER, "*.py"))
        self.program = bundled(self.paths)

    def test_compiles(self):
        compile(self.program, "launcher-bundle.py", "exec")

    def test_fits_in_one_argument_with_room_to_grow(self):
        # execve refuses one argument past 128 KiB (E2BIG); the sources
        # alone passed it. Half of it left for the launcher to grow.
        self.assertLess(len(self.program.encode()), bundle.MAX_ARGUMENT_BYTES // 2)

    def test_carries_every_module_but_bundle(self):
        sources = sources_of(self.program)
        self.assertEqual(set(sources), MODULE_NAMES)
        for name, source in sources.items():
            path = os.path.join(LAUNCHER, "__init__.py" if name == "launcher"
                                else name.partition(".")[2] + ".py")
            with open(path) as f:
                own = f.read().splitlines()
            # Line for line the module's, each comment line left blank,
            # each string that is a statement of its own (a docstring)
            # made empty, its other lines blank.
            lines = source.splitlines()
            self.assertEqual(len(lines), len(own), name)
            tree = ast.parse("\n".join(own))
            strings = {}  # a docstring's first line: its lines
            for node in ast.walk(tree):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                        isinstance(node.value.value, str):
                    strings[node.lineno] = range(node.lineno, node.end_lineno + 1)
                    node.value.value = ""
            in_string = {n for span in strings.values() for n in span}
            for number, (line, of_own) in enumerate(zip(lines, own), 1):
                if number in strings:
                    self.assertIn('""', line, name)
                elif number in in_string:
                    self.assertEqual(line, "", name)
                elif line != of_own:
                    self.assertEqual((line, of_own.lstrip()[:1]), ("", "#"), name)
            self.assertEqual(ast.dump(ast.parse(source)), ast.dump(tree), name)

    def test_leaves_out_tests(self):
        directory = temporary_directory(self)
        test_file = os.path.join(directory, "test_something.py")
        with open(test_file, "w") as f:
            f.write("raise SystemExit('a test in the bundle')\n")
        self.assertEqual(set(sources_of(bundled(self.paths + [test_file]))), MODULE_NAMES)

    def test_the_modules_import_from_the_bundle_alone(self):
        # The program without its last line (which runs main): every module
        # is imported from its sources in memory, none from a disk.
        head, _, last = self.program.rstrip("\n").rpartition("\n")
        self.assertEqual(last, "launcher.main.main(sys.argv[1:], launcher.child.room())")
        code = head + "\n" + "\n".join([
            "import importlib",
            "for name in %r:" % sorted(MODULE_NAMES),
            "    module = importlib.import_module(name)",
            "    assert isinstance(module.__spec__.loader, Finder), name",
            "    assert not os.path.exists(module.__file__), module.__file__",
            "print(sorted(m for m in sys.modules if m.startswith('launcher')))",
        ])
        code = "import os\n" + code
        out, _ = run_python(self, code, temporary_directory(self))
        self.assertEqual(ast.literal_eval(out.decode()), sorted(MODULE_NAMES))

    def test_room_is_measured_where_a_files_top_level_is(self):
        # What main is given: room() from the program's top level, as
        # python3 running a file has there (child.measure_room).
        head, _, _ = self.program.rstrip("\n").rpartition("\n")
        directory = temporary_directory(self)
        program, _ = run_python(self, head + "\nprint(launcher.child.room())\n", directory)
        with open(os.path.join(directory, "file.py"), "w") as f:
            f.write("def depth(n):\n    try:\n        return depth(n + 1)\n"
                    "    except RecursionError:\n        return n\nprint(depth(0))\n")
        done = subprocess.run([sys.executable, "-I", "file.py"], cwd=directory,
                              capture_output=True, timeout=20)
        self.assertEqual(program, done.stdout)
        self.assertGreater(int(program), 900)


class ImportTest(unittest.TestCase):
    def test_no_sage_and_no_side_effects(self):
        # Each module imported in a fresh python3: nothing written, nothing
        # printed, no Sage, and this process's state as it was.
        directory = temporary_directory(self)
        code = "\n".join([
            "import os, sys",
            "sys.path.insert(0, %r)" % os.path.dirname(LAUNCHER),
            "def status():",
            "    with open('/proc/self/status') as f:",
            "        return [l for l in f if l.startswith(('Sig', 'Shd'))]",
            "before = (status(), os.umask(0o022), sorted(os.environ.items()), os.getcwd())",
            "os.umask(before[1])",
            "import %s" % ", ".join(sorted(MODULE_NAMES)),
            "after = (status(), os.umask(0o022), sorted(os.environ.items()), os.getcwd())",
            "assert before == after, (before, after)",
            "assert not [m for m in sys.modules if m == 'sage' or m.startswith('sage.')]",
            "assert not [m for m in sys.modules if m.startswith('cypari')]",
        ])
        out, err = run_python(self, code, directory)
        self.assertEqual((out, err), (b"", b""))
        self.assertEqual(os.listdir(directory), [])


if __name__ == "__main__":
    unittest.main()
