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
# itself; and a module it does not import, as numpy 2 leaves numpy.random.
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
}


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
            waiting = onimport._finder in sys.meta_path
            __import__(name + ".gen")
            gen = sys.modules[name + ".gen"]
            return (waiting, onimport._finder in sys.meta_path, len(seen), gen.rng.random(),
                    type(gen.__loader__).__name__, type(gen.__spec__.loader).__name__,
                    type(sys.modules[name].__loader__).__name__)
        import random
        waiting, still, seen, drawn, loader, spec_loader, package_loader = self.importing(body)
        self.assertEqual((waiting, still, seen), (True, False, 1))
        # Seeded after __init__'s own draw: the code's first draw is the
        # seed's first, as where the package was imported before the seed.
        self.assertEqual(drawn, random.Random(5).random())
        self.assertEqual({loader, spec_loader, package_loader}, {"SourceFileLoader"})

    def test_a_module_its_package_did_not_import_waits_for_its_own_import(self):
        def body(name):
            __import__(name)
            onimport.after_import(name + ".lazy", lambda: sys.modules[name + ".lazy"].rng.seed(7))
            before = onimport._finder in sys.meta_path
            __import__(name + ".lazy")
            return before, onimport._finder in sys.meta_path, sys.modules[name + ".lazy"].rng.random()
        import random
        self.assertEqual(self.importing(body), (True, False, random.Random(7).random()))

    def test_forgotten_actions_do_not_run_and_a_failing_one_fails_no_import(self):
        def body(name):
            ran = []
            onimport.after_import(name + ".gen", lambda: ran.append("forgotten"))
            onimport.forget()
            gone = onimport._finder not in sys.meta_path
            onimport.after_import(name + ".gen", lambda: 1 / 0)
            onimport.after_import(name + ".gen", lambda: ran.append("after"))
            __import__(name + ".gen")
            return gone, ran
        self.assertEqual(self.importing(body), (True, ["after"]))

    def test_a_module_that_is_nowhere_is_not_found_and_the_action_waits(self):
        def body(name):
            onimport.after_import(name + ".absent", lambda: None)
            try:
                __import__(name + ".absent")
            except ModuleNotFoundError:
                return onimport._finder in sys.meta_path
        self.assertIs(self.importing(body), True)


if __name__ == "__main__":
    unittest.main()
