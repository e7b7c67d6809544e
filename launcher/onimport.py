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
# Every import of a module not yet in sys.modules, Python's or C's
# (Cython's), a statement or importlib.import_module, goes through
# importlib's _find_and_load, which the interpreter looks up on importlib's
# module at each import. While an action waits, that function is wrapped:
# as each import ends, the actions of the modules whose import has ended
# run. Not before the top-level package's import ends: sympy's and
# numpy's __init__ import the modules whose generators are seeded, and
# what the rest of that import draws from them is drawn before the seed,
# as where the package was imported before the call (a warm template's).
# (A library that imports numpy or sympy and then draws from their
# generators in its own import would draw after the seed in a cold call,
# before it in a warm one: none of the images' is known to. Another
# thread that imports the module meanwhile may draw before the actions
# run: it waits for this thread's import, and goes on as it ends.)
# Nothing the code puts in sys.meta_path or sys.path_hooks comes before
# it, and no finder or loader of the code's sees anything else; a
# _find_and_load of the code's own is wrapped, and put back. The
# wrapper's frame is importlib's to Python (its file is named
# importlib's): tracebacks and warnings pass over it as over importlib's
# own. What the code can see of this: _find_and_load is the wrapper until
# the last module waited for is imported (with Sage's interfaces among
# them, in most seeded calls to the end), one frame more at each level of
# an import (a traceback the code prints itself of
# importlib.import_module, a stack it walks, a recursion near the limit).
import os
import sys
import threading

from launcher import deferred

_bootstrap = sys.modules["_frozen_importlib"]  # what the interpreter imports through
_importlibs = _bootstrap._find_and_load
# What the wrapper was put over each time, the last last: importlib's, or
# a hook of the code's own (a session's cell's), which may call the
# wrapper in turn (it took the wrapper for importlib's). Each is called
# once an import: the wrapper, called again for the same name from inside
# the last, calls the one before it (attack and review helpers: a hook
# was dropped, or called twice, or without end).
_chain = []
# How deep each thread's wrapper is in each name's import, along _chain.
_importing_here = threading.local()
_pending = {}  # module name -> the actions that wait for its import to end
# The code's threads may import at once; a finalizer or signal handler
# that imports may run while this thread holds it.
_lock = threading.RLock()


def _find_and_load(name, import_):
    depths = _importing_here.__dict__.setdefault("depths", {})
    depth = depths.get(name, 0)
    try:
        depths[name] = depth + 1
        module = (_chain[-1 - depth] if depth < len(_chain) else _importlibs)(name, import_)
    finally:
        if depth:
            depths[name] = depth
        else:
            depths.pop(name, None)
    if _pending and depth == 0:
        _run_ready()
    return module


def _importing(module):
    return getattr(getattr(module, "__spec__", None), "_initializing", False)


def imported(name):
    """Whether module name's import has ended, and its top-level
    package's: a module is in sys.modules while it runs (this thread's
    import of its package under way, or another thread's of it)."""
    module = sys.modules.get(name)
    top = sys.modules.get(name.partition(".")[0])
    return module is not None and not _importing(module) and not _importing(top)


def _run_ready():
    """The actions of the modules whose import has ended, each once; the
    wrapper leaves importlib with the last."""
    # Not waited for: another thread holding it may wait for a module this
    # thread is importing (a finalizer's import). The next import runs them.
    if not _lock.acquire(blocking=False):
        return
    actions = []
    try:
        for name in list(_pending):  # (a loop: a comprehension is a frame more)
            if imported(name):
                actions += _pending.pop(name, ())
        if not _pending:
            _unwrap()
    finally:
        _lock.release()
    # Each runs, whatever the one before raised: a seed never fails the
    # code's import, and an interrupt (a timeout's) is raised once all
    # have run, the module imported.
    interrupted = None
    for action in actions:
        try:
            action()
        except Exception:
            pass
        except BaseException as e:
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted


def _unwrap():
    """What the wrapper was last put over, back; where the code put its own
    over the wrapper, that stays (and calls the wrapper, which does
    nothing more while nothing waits)."""
    if _bootstrap._find_and_load is _find_and_load:
        _bootstrap._find_and_load = _chain.pop() if _chain else _importlibs


def after_import(name, action):
    """action() once the import of module name ends (its top-level
    package's, where that imports it), in the importing thread."""
    with _lock:
        _pending.setdefault(name, []).append(action)
        if _bootstrap._find_and_load is not _find_and_load:
            _chain.append(_bootstrap._find_and_load)
            _bootstrap._find_and_load = _find_and_load


def forget():
    """Drops every waiting action: a session's next cell has a seed of its
    own, or none."""
    with _lock:
        _pending.clear()
        _unwrap()


# Named as importlib's own file: CPython leaves the wrapper's frame out of
# an import's traceback, and warnings' stacklevel passes over it; the
# launcher's own tracebacks leave out its frames and those it calls (an
# interrupt can land in any: deferred.not_shown).
_find_and_load.__code__ = _find_and_load.__code__.replace(
    co_filename="<frozen importlib._bootstrap>")
deferred.not_shown(_find_and_load.__code__, _importing.__code__, imported.__code__,
                   _run_ready.__code__, _unwrap.__code__)


def _after_fork_in_child():
    """A fork while another thread held the lock leaves it held for good
    in the child: a new one."""
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)
