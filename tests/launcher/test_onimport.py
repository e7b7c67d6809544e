# tests/launcher/test_onimport.py: actions run as a module's import ends,
# on real imports of a package written for each test, in a forked child
# (what an import leaves in sys.modules stays there).
import os
import sys
import textwrap
import unittest

from launcher import onimport

from .support import in_child, temporary_directory

# A package whose __init__ imports its generator's module and draws from
# that generator once more, as sympy's draws from its own as it imports
# itself; a module it does not import, as numpy 2 leaves numpy.random;
# one that fails; and one whose import waits for an event.
PACKAGE = {
    "__init__.py": """
        from . import gen
        drawn_by_init = gen.rng.random()
    """,
    "gen.py": """
        import random
        rng = random.Random()
    """,
    "lazy.py": """
        import random
        rng = random.Random()
    """,
    "fails.py": """
        raise ValueError("boom")
    """,
    "slow.py": """
        import random, threading
        started, go = threading.Event(), threading.Event()
        import sys
        sys.modules[__name__.rpartition(".")[0]].slow_events = started, go
        rng = random.Random()
        started.set()
        go.wait(10)
    """,
}


def waiting():
    return sys.modules["_frozen_importlib"]._find_and_load is onimport._find_and_load


class AfterImportTest(unittest.TestCase):
    def setUp(self):
        self.directory = temporary_directory(self)
        self.name = "onimport_probe_%d" % os.getpid()
        os.mkdir(os.path.join(self.directory, self.name))
        for file, text in PACKAGE.items():
            with open(os.path.join(self.directory, self.name, file), "w") as f:
                f.write(textwrap.dedent(text))

    def importing(self, body):
        """body(package name) in a child that imports from the package's
        directory."""
        def run():
            sys.path.insert(0, self.directory)
            return body(self.name)
        return in_child(run)

    def test_seeded_as_the_packages_import_ends_not_before(self):
        def body(name):
            seen = []
            onimport.after_import(name + ".gen", lambda: sys.modules[name + ".gen"].rng.seed(5))
            onimport.after_import(name + ".gen", lambda: seen.append(sys.modules[name].drawn_by_init))
            before = waiting()
            __import__(name + ".gen")
            gen = sys.modules[name + ".gen"]
            return before, waiting(), len(seen), gen.rng.random(), type(gen.__loader__).__name__
        import random
        self.assertEqual(self.importing(body),
                         (True, False, 1, random.Random(5).random(), "SourceFileLoader"))

    def test_a_module_its_package_did_not_import_waits_for_its_own_import(self):
        def body(name):
            __import__(name)
            onimport.after_import(name + ".lazy", lambda: sys.modules[name + ".lazy"].rng.seed(7))
            before = waiting()
            import importlib
            importlib.import_module(name + ".lazy")
            return before, waiting(), sys.modules[name + ".lazy"].rng.random()
        import random
        self.assertEqual(self.importing(body), (True, False, random.Random(7).random()))

    def test_forgotten_actions_do_not_run_and_a_failing_one_fails_no_import(self):
        def body(name):
            ran = []
            onimport.after_import(name + ".gen", lambda: ran.append("forgotten"))
            onimport.forget()
            gone = not waiting()
            onimport.after_import(name + ".gen", lambda: 1 / 0)
            onimport.after_import(name + ".gen", lambda: ran.append("after"))
            __import__(name + ".gen")
            return gone, ran
        self.assertEqual(self.importing(body), (True, ["after"]))

    def test_the_codes_own_finders_and_meta_path_change_nothing(self):
        # A finder of the code's first, which asks the others (as import
        # hooks do): the seed's finder recursed into it without end
        # (attack helper); one that finds the module itself hid the module
        # from the seed's; sys.meta_path as a tuple failed its removal.
        def body(name):
            import importlib.machinery
            import importlib.util

            class Delegating:
                def find_spec(self, fullname, path=None, target=None):
                    for finder in sys.meta_path:
                        if finder is not self and hasattr(finder, "find_spec"):
                            spec = finder.find_spec(fullname, path, target)
                            if spec is not None:
                                return spec
                    return None

            class Own:
                def find_spec(self, fullname, path=None, target=None):
                    return importlib.machinery.PathFinder.find_spec(fullname, path, target)
            sys.meta_path = tuple([Delegating(), Own()] + sys.meta_path)
            onimport.after_import(name + ".gen", lambda: sys.modules[name + ".gen"].rng.seed(5))
            spec = importlib.util.find_spec(name)
            __import__(name + ".gen")
            return (type(spec.loader).__name__, sys.modules[name + ".gen"].rng.random(),
                    waiting())
        import random
        self.assertEqual(self.importing(body),
                         ("SourceFileLoader", random.Random(5).random(), False))

    def test_hooks_of_the_codes_own_stay_and_each_is_called_once(self):
        # A session's cells put their own _find_and_load there, under the
        # wrapper and over it: a seeded cell replaced one, and the next
        # cell put importlib's back; one was dropped, one called twice,
        # and one that took the wrapper for importlib's called itself
        # without end (attack and review helpers).
        def body(name):
            bootstrap = sys.modules["_frozen_importlib"]
            seen = []

            def hook_over(tag, original):
                def hook(module, import_):
                    if module.startswith(name):
                        seen.append((tag, module.rpartition(".")[2]))
                    return original(module, import_)
                return hook
            codes = bootstrap._find_and_load = hook_over("codes", bootstrap._find_and_load)
            onimport.after_import(name + ".gen", lambda: sys.modules[name + ".gen"].rng.seed(5))
            __import__(name + ".gen")
            onimport.forget()
            kept = bootstrap._find_and_load is codes
            # A seed that waits on, a hook over the wrapper, and another seed.
            onimport.after_import(name + ".absent", lambda: None)
            bootstrap._find_and_load = hook_over("over", bootstrap._find_and_load)
            onimport.forget()
            onimport.after_import(name + ".lazy", lambda: sys.modules[name + ".lazy"].rng.seed(6))
            del seen[:]
            __import__(name + ".lazy")
            lazy = list(seen)
            onimport.forget()
            del seen[:]
            import importlib
            try:
                importlib.import_module(name + ".slow_absent")
            except ImportError:
                pass
            return kept, lazy, seen, sys.modules[name + ".lazy"].rng.random()
        import random
        kept, lazy, after, drawn = self.importing(body)
        self.assertTrue(kept)
        self.assertEqual(lazy, [("over", "lazy"), ("codes", "lazy")])
        self.assertEqual(after, [("over", "slow_absent"), ("codes", "slow_absent")])
        self.assertEqual(drawn, random.Random(6).random())

    def test_a_failed_import_shows_no_frame_of_its_own_and_the_action_waits(self):
        def body(name):
            import traceback
            onimport.after_import(name + ".fails", lambda: None)
            try:
                __import__(name + ".fails")
            except ValueError:
                shown = traceback.format_exc()
            return waiting(), "launcher/onimport.py" in shown, "_bootstrap" in shown, shown.count("File ")
        self.assertEqual(self.importing(body), (True, False, False, 2))

    def test_a_module_another_thread_is_importing_waits_for_that_import_to_end(self):
        # Another import's end ran the actions of a module still running in
        # another thread: its seed failed on what it had not yet made, and
        # was dropped (attack helper).
        def body(name):
            import threading
            import time
            __import__(name)
            package = sys.modules[name]
            seeded = []
            onimport.after_import(name + ".slow", lambda: seeded.append(
                sys.modules[name + ".slow"].rng.seed(9)))
            onimport.after_import(name + ".lazy", lambda: None)
            thread = threading.Thread(target=__import__, args=(name + ".slow",))
            thread.start()
            for _ in range(1000):
                if hasattr(package, "slow_events"):
                    break
                time.sleep(0.01)
            started, go = package.slow_events
            started.wait(10)
            __import__(name + ".lazy")  # ends while slow still runs
            early = list(seeded)
            go.set()
            thread.join(10)
            return early, len(seeded), sys.modules[name + ".slow"].rng.random()
        import random
        self.assertEqual(self.importing(body), ([], 1, random.Random(9).random()))


if __name__ == "__main__":
    unittest.main()
