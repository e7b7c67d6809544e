# launcher/onimport.py: actions that wait for the code's import of a module
# to end (child.reseed's seeds for the generators numpy, sympy and Sage's
# interfaces make as they are imported).
#
# A fresh Sage imports neither numpy nor sympy: a seed that imported them
# to seed them made the call pay their import (and at --memory 300m,
# numpy's OpenBLAS could not start, where the code never used it). So a
# module not yet imported is seeded as its import ends, if the code
# imports it at all.
#
# While an action waits, a finder sits first in sys.meta_path: it finds a
# waited-for module (and its top-level package) as the finders after it
# do, and gives its spec a loader that runs the module's own loader, then
# the actions whose modules are imported. Not before the top-level
# package's import ends: sympy's and numpy's __init__ import the modules
# whose generators are seeded, and what the rest of that import draws
# from them is drawn before the seed, as where the package was imported
# before the call (a warm template's). The module's __loader__ and its
# spec's are its own loader again before it runs. What the code can see
# of this: the finder in sys.meta_path until the last action has run, and
# one more frame in a traceback that an import raises through.
import sys
import threading

_pending = {}  # module name -> the actions that wait for its import to end
_tops_importing = set()  # top-level packages whose import (through the finder) is under way
_lock = threading.Lock()  # the code's threads may import at once


def _top(name):
    return name.partition(".")[0]


class _Finder:
    """In sys.meta_path while actions wait: the spec the other finders
    give a waited-for module or its top-level package, with a _Telling
    loader."""

    def find_spec(self, name, path=None, target=None):
        with _lock:
            watched = name in _pending or name in {_top(n) for n in _pending}
        if not watched:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Telling(spec.loader)
        return spec


class _Telling:
    """A module's loader, which runs the actions its import ends."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        spec = module.__spec__
        spec.loader = module.__loader__ = self.loader
        name = spec.name
        top = name == _top(name)
        if top:
            _tops_importing.add(name)
        try:
            self.loader.exec_module(module)
        finally:
            if top:
                _tops_importing.discard(name)
        if top or _top(name) not in _tops_importing:
            _imported()


_finder = _Finder()


def _imported():
    """The actions of the modules now imported, each once; the finder
    leaves sys.meta_path with the last."""
    with _lock:
        ready = [name for name in _pending if name in sys.modules]
        actions = [action for name in ready for action in _pending.pop(name)]
        if not _pending:
            _leave()
    for action in actions:
        try:
            action()
        except Exception:
            pass  # a seed must never fail the code's import


def _leave():
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass  # the code took it out: nothing more waits anyway


def after_import(name, action):
    """action() once the import of module name ends (its top-level
    package's, where that imports it), in the importing thread."""
    with _lock:
        _pending.setdefault(name, []).append(action)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def forget():
    """Drops every waiting action: a session's next cell has a seed of its
    own, or none."""
    with _lock:
        _pending.clear()
        _leave()
