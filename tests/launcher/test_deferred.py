# tests/launcher/test_deferred.py: the filters a warm-up step's import adds,
# held: where the import put them while the code sets none of its own;
# once it does, none until it imports the module (or its package, or a
# module whose import imported it), then in front of the code's, as a cold
# call's import would add them. Each case runs in a forked child: it
# changes builtins.__import__ and the warnings module.
import builtins
import importlib
import os
import sys
import unittest
import warnings

from launcher import deferred, warm

from .support import in_child, temporary_directory


def message(item):
    return item[1].pattern if item[1] is not None else None


class DeferredTest(unittest.TestCase):
    def setUp(self):
        # A package whose submodule adds a filter as it is imported, as
        # scipy.special does ("always" for its own warnings).
        self.root = temporary_directory(self)
        os.mkdir(os.path.join(self.root, "probepkg"))
        with open(os.path.join(self.root, "probepkg", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(self.root, "probepkg", "special.py"), "w") as f:
            f.write("import warnings\n"
                    "warnings.filterwarnings('always', message='probe says')\n"
                    "def say():\n"
                    "    warnings.warn('probe says', UserWarning)\n")
        with open(os.path.join(self.root, "probepkg", "user.py"), "w") as f:
            f.write("from probepkg import special\n")
        # A package that adds two filters as it is imported (numpy's
        # RankWarning and "size changed" ones), with a submodule; and a
        # module that warns as it is imported (scipy.odr's deprecation).
        os.mkdir(os.path.join(self.root, "twopkg"))
        with open(os.path.join(self.root, "twopkg", "__init__.py"), "w") as f:
            f.write("import warnings\n"
                    "warnings.filterwarnings('ignore', message='first added')\n"
                    "warnings.filterwarnings('always', message='second added')\n")
        with open(os.path.join(self.root, "twopkg", "sub.py"), "w") as f:
            f.write("")
        with open(os.path.join(self.root, "probepkg", "old.py"), "w") as f:
            f.write("import warnings\n"
                    "warnings.warn('probepkg.old is deprecated', DeprecationWarning, stacklevel=2)\n")

    def warmed(self, step_imports="probepkg.user"):
        """In the child: the step imported step_imports; returns the
        template's filters after it."""
        sys.path.insert(0, self.root)
        warnings.simplefilter("default")
        warm.run_step("probe", lambda: importlib.import_module(step_imports))
        return list(warnings.filters)

    def test_the_step_holds_the_filter_its_import_added_with_the_importing_modules(self):
        def case():
            filters = self.warmed()
            return ([message(f) for f in filters],
                    [(message(item), append, sorted(modules))
                     for item, append, modules in deferred.HELD])
        filters, held = in_child(case)
        self.assertEqual(filters[0], "probe says")  # kept, where the import put it
        # Not probepkg: its own import (over before user's began) imports
        # no special, cold.
        self.assertEqual(held, [("probe says", False, ["probepkg.special", "probepkg.user"])])

    def test_a_catch_warnings_block_takes_the_filters_an_import_in_it_added_as_cold(self):
        # The list it puts back as it ends is the one it found: where that
        # still held the warm-up's filters, they came back with it, as if
        # the import in the block had added them for good (attack helper:
        # scipy.special's "always" printed a warning three times, cold once).
        def case(set_one):
            self.warmed()
            deferred.install()
            with warnings.catch_warnings():
                if set_one:
                    warnings.simplefilter("ignore")
                import probepkg.special  # noqa: F401
            return [message(f) for f in warnings.filters]
        for set_one in (True, False):
            self.assertNotIn("probe says", in_child(lambda: case(set_one)), set_one)

    def test_a_filter_the_code_set_first_stays_behind_it_as_behind_a_cold_import(self):
        def case():
            self.warmed()
            deferred.install()
            warnings.simplefilter("error")       # the code's first line
            import probepkg.special               # then its import
            with warnings.catch_warnings(record=True) as seen:
                probepkg.special.say()            # warned, not raised
            after = [f[0] for f in warnings.filters[:2]]
            return [str(w.message) for w in seen], after
        seen, first = in_child(case)
        self.assertEqual(seen, ["probe says"])
        self.assertEqual(first, ["always", "error"])

    def test_a_filter_the_code_sets_after_the_import_goes_in_front(self):
        def case():
            self.warmed()
            deferred.install()
            from probepkg import user             # imports special, cold
            warnings.simplefilter("error")
            try:
                user.special.say()
            except UserWarning as e:
                return "raised: %s" % e
            return "warned"
        self.assertEqual(in_child(case), "raised: probe says")

    def test_a_call_that_never_imports_it_has_none_of_it(self):
        def case():
            self.warmed()
            deferred.install()
            import json  # noqa: F401
            import probepkg  # noqa: F401  (its __init__ imports no special)
            warnings.simplefilter("error")
            try:
                warnings.warn("probe says", UserWarning)  # as numpy's own, say
            except UserWarning:
                return "raised", builtins_wrapped()
            return "warned", builtins_wrapped()
        self.assertEqual(in_child(case), ("raised", True))

    def test_resetwarnings_before_the_import_and_import_module_the_wrappers_go_once_imported(self):
        def case():
            self.warmed()
            deferred.install()
            warnings.resetwarnings()
            after_reset = [message(f) for f in warnings.filters]
            importlib.import_module("probepkg.special")
            return after_reset, [message(f) for f in warnings.filters], builtins_wrapped()
        after_reset, after_import, wrapped = in_child(case)
        self.assertEqual((after_reset, after_import, wrapped), ([], ["probe says"], False))

    def run_warm(self, source):
        """In a child warmed as warmed(), with the hooks installed: source
        as a call runs it; its status and what it wrote on stderr."""
        def case():
            import contextlib
            import io
            from launcher import child
            self.warmed()
            deferred.install()
            err = io.StringIO()
            namespace = {"__name__": "__main__", "__builtins__": __builtins__}
            with contextlib.redirect_stderr(err):
                status = child.run_code(source, namespace, "t.sage", lambda text: text)
            return status, err.getvalue()
        return in_child(case)

    def test_a_traceback_through_a_failing_import_shows_no_frame_of_the_hook(self):
        status, err = self.run_warm(b"try:\n    import probepkg.absent\nexcept ImportError as e:\n"
                                    b"    raise RuntimeError('wrapped') from e\n")
        self.assertEqual(status, 1)
        self.assertIn("ModuleNotFoundError: No module named 'probepkg.absent'", err)
        self.assertIn("RuntimeError: wrapped", err)
        self.assertNotIn("deferred", err)
        self.assertEqual(err.count('File "'), 2)  # t.sage's line 2, then line 4

    @unittest.skipUnless(hasattr(builtins, "ExceptionGroup"), "Python 3.11 on")
    def test_an_exception_groups_members_show_no_frame_of_the_hook(self):
        status, err = self.run_warm(b"def load():\n    import probepkg.absent\nerrors = []\n"
                                    b"for _ in range(2):\n    try:\n        load()\n"
                                    b"    except ImportError as e:\n        errors.append(e)\n"
                                    b"raise ExceptionGroup('imports', errors)\n")
        self.assertEqual(status, 1)
        self.assertIn("ExceptionGroup: imports (2 sub-exceptions)", err)
        self.assertNotIn("deferred", err)
        # line 9, then each member's lines 6 and 2
        self.assertEqual(err.count('File "'), 5, err)

    def test_a_submodules_import_adds_its_packages_filters_in_the_order_they_were_added(self):
        def case():
            sys.path.insert(0, self.root)
            warnings.simplefilter("default")
            warm.run_step("two", lambda: importlib.import_module("twopkg"))
            deferred.install()
            warnings.simplefilter("error")
            import twopkg.sub  # noqa: F401  (twopkg first, as cold)
            return [message(f) for f in warnings.filters[:3]]
        self.assertEqual(in_child(case), ["second added", "first added", None])

    def test_a_warning_of_a_modules_import_names_the_line_that_imported_it(self):
        def case():
            self.warmed()
            deferred.install()
            namespace = {"__name__": "__main__", "__builtins__": __builtins__}
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                exec(compile("import probepkg.old\n", "t.sage", "exec"), namespace)
            return [(w.filename, w.lineno, str(w.message)) for w in seen]
        self.assertEqual(in_child(case), [("t.sage", 1, "probepkg.old is deprecated")])

    def test_code_that_sets_no_filter_keeps_them_where_the_imports_put_them(self):
        def case():
            self.warmed()
            deferred.install()
            with warnings.catch_warnings(record=True) as seen:
                for _ in range(2):
                    warnings.warn("probe says", UserWarning)  # "always": twice
            return len(seen)
        self.assertEqual(in_child(case), 2)

    def test_an_import_that_fails_has_imported_its_packages(self):
        def case():
            self.warmed()
            deferred.install()
            warnings.simplefilter("error")
            try:
                from probepkg.special import nope  # noqa: F401
            except ImportError:
                pass
            return message(warnings.filters[0])
        self.assertEqual(in_child(case), "probe says")

    def test_the_hooks_look_like_what_they_replace_and_a_codes_own_wrapper_stays(self):
        def case():
            import builtins
            import pickle
            self.warmed()
            deferred.install()
            seen = (builtins.__import__.__name__, importlib.import_module.__name__,
                    pickle.loads(pickle.dumps(builtins.__import__)) is builtins.__import__)
            hooked, traced = builtins.__import__, []

            def tracer(name, *args, **kwargs):
                traced.append(name)
                return hooked(name, *args, **kwargs)
            builtins.__import__ = tracer
            import probepkg.special  # noqa: F401  (the last pending: hooks go)
            import os  # noqa: F401
            return seen, builtins.__import__ is tracer, traced
        seen, kept, traced = in_child(case)
        self.assertEqual(seen, ("__import__", "import_module", True))
        self.assertTrue(kept)
        self.assertEqual(traced, ["probepkg.special", "os"])

    def test_a_filter_two_imports_add_comes_with_either(self):
        def case():
            sys.path.insert(0, self.root)
            for name in ("pa", "pb"):
                with open(os.path.join(self.root, name + ".py"), "w") as f:
                    f.write("import warnings\nwarnings.filterwarnings('ignore', message='shared')\n")
            warnings.simplefilter("default")
            warm.run_step("both", lambda: (importlib.import_module("pa"),
                                           importlib.import_module("pb")))
            return [sorted(modules) for _, _, modules in deferred.HELD]
        self.assertEqual(in_child(case), [["pa", "pb"]])

    def test_an_import_of_no_string_fails_as_it_does_without_the_hook(self):
        def case():
            said = []
            for hooked in (False, True):
                if hooked:
                    self.warmed()
                    deferred.install()
                try:
                    __import__(3)
                except TypeError as e:
                    said.append(str(e))
            return said
        before, after = in_child(case)
        self.assertEqual(after, before)

    def test_a_relative_import_names_its_package(self):
        self.assertEqual(deferred._imported("special", {"__package__": "probepkg"}, (), 1),
                         {"probepkg", "probepkg.special"})
        self.assertEqual(deferred._imported("", {"__package__": "probepkg.sub"}, ("special",), 2),
                         {"probepkg", "probepkg.special"})
        self.assertEqual(deferred._imported("a.b", None, ("c", "*"), 0), {"a", "a.b", "a.b.c"})

    def test_a_filter_no_import_added_stays_in_the_template(self):
        def case():
            warnings.simplefilter("default")
            warm.run_step("plain", lambda: warnings.filterwarnings("always", message="plain"))
            return message(warnings.filters[0]), len(deferred.HELD)
        self.assertEqual(in_child(case), ("plain", 0))


def builtins_wrapped():
    import builtins
    return hasattr(builtins.__import__, "__wrapped__")


if __name__ == "__main__":
    unittest.main()
