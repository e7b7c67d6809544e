# launcher/deferred.py: the warnings filters that the warm-up's imports
# added, which a warm call's code that sets filters of its own gets as a
# cold call's imports would add them.
#
# A module's import adds its filters in front of those there (scipy's
# "always" for its special functions' warnings, numpy's for RankWarning,
# scipy.sparse's "ignore" for numpy's matrix warning, sympy's "once"...).
# In a cold call that happens when the code imports the module, after the
# filters the code set before: code that starts with
# warnings.simplefilter("error") or filterwarnings("ignore") (common in
# model-written code) still has scipy's "always" in front of it once it
# imports scipy.special, and has no scipy.sparse filter at all where it
# never imports scipy. A warm call's modules were imported by the warm-up,
# before the code, with their filters: the code's own would go in front of
# them, and the same code would raise where a cold call warns, or be
# silent where it raises.
#
# So each filter a warm-up step's import added is recorded here (held),
# with the modules whose import added it: the module that set it and
# those whose import was importing it then (an import of any of them,
# cold, would have added it). The template keeps the filters where the
# imports put them, and so does a call, for as long as its code sets no
# filter: code that leaves the filters alone sees what a cold call sees
# once it has imported those modules, which it does, from Sage's Cython
# too, wherever their warnings can come. A warnings.catch_warnings() block
# puts back, as it ends, the list it found: the filters an import inside
# it added leave with it, as cold (and once the code set a filter in it,
# those of modules it has not imported). When the code first sets one
# (simplefilter, filterwarnings, resetwarnings), the held filters whose
# modules it has not imported leave the list; an import statement (the
# code's, or a library's in Python) or importlib.import_module that names
# one of those modules or a package of one (a cold import imports the
# package first) adds them back as that import would, in front, in the
# order the warm-up's imports added them. Not seen after that point: an
# import made from C (Cython's) or by a package's lazy attribute
# (scipy.special after import scipy), and a module that a cold import of
# another would import too (cold, import scipy.special imports numpy;
# warm, numpy's filters wait for an import that names numpy): the filters
# only such an import would add are missing.
#
# The hooks are Python functions, seen in place of builtins.__import__ and
# importlib.import_module while a filter waits, and of
# warnings.catch_warnings's __enter__ and __exit__ (named as those). A failing
# import (a module the image lacks) raises through a hook's frame: the
# tracebacks the launcher prints (the code's uncaught error, a thread's, an
# unraisable one) leave it out (unhooked), as a cold call's has no such
# frame; one the code formats itself shows it. A module's warning with a
# stacklevel passes over it (the hooks' filename, below).
import builtins
import functools
import importlib
import importlib.util
import sys
import threading
import warnings

# (filter as warnings.filters holds it, appended, frozenset of the names of
# the modules whose import added it), in the order the warm-up's imports
# added them.
HELD = []

_pending = []     # a call's held filters whose module it has not imported
_watched = frozenset()  # the modules of _pending's filters: an import of one adds some
_tops = frozenset()     # their top-level packages: an import of no other's adds none
_own = {}         # (module, attribute): the function the hook replaced
_hooks = {}       # attribute: the hook in its place
_own_add = []     # warnings' own _add_filter, once installed
_hook_codes = set()  # the hooks' code (not_shown): their frames in a traceback are not shown
_installed = []   # once per process: a session's later cells find it done
_waiting = []     # the code set a filter: the pending ones left the list
_lock = threading.RLock()  # threads of the code may import at once
# warnings.catch_warnings() blocks under way, by id: the held filters
# pending as each began (by id: a subclass may not hash).
_blocks = {}


def importing_modules(frame):
    """The modules whose import is under way at frame: each module-level
    code object on the stack, innermost first; none of the launcher's."""
    names = []
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            if isinstance(name, str) and name != "__main__" and \
                    name.split(".")[0] != "launcher":
                names.append(name)
        frame = frame.f_back
    return names


class Recorder:
    """While a warm-up step runs: which imports added each filter (the
    filters themselves are added as ever), then held in HELD."""

    def __init__(self):
        self.added = {}
        self.own = getattr(warnings, "_add_filter", None)
        if self.own is None:
            return  # another warnings module: nothing is held

        def add_filter(*item, append):
            modules = importing_modules(sys._getframe(1))
            self.own(*item, append=append)
            if modules:
                # Added again by another import (numpy's "size changed"
                # filters are added by more than one package): an import
                # of either adds it, cold.
                order, _, before = self.added.get(item, (len(HELD) + len(self.added), 0, ()))
                self.added[item] = (order, append, frozenset(before) | frozenset(modules))
        warnings._add_filter = add_filter

    def stop(self):
        if self.own is not None:
            warnings._add_filter = self.own
            self.own = None

    def hold(self, added):
        """Of added (the filters the step added), those an import added
        are held, in the order they were added; they stay in the list."""
        held = []
        for item in added:
            how = self.added.get(tuple(item))
            if how is not None:
                held.append((how[0], tuple(item), how[1], how[2]))
        for _, item, append, modules in sorted(held, key=lambda h: h[0]):
            before = [h for h in HELD if h[0] == item]
            HELD[:] = [h for h in HELD if h[0] != item]
            HELD.append((item, append, modules.union(*(h[2] for h in before))))


def _imported(name, globals_, fromlist, level):
    """The modules an import statement imports, cold: those it names (its
    package's, for a relative one), its from-list's as submodules too, and
    the packages of each, which an import imports first."""
    if level:
        package = (globals_ or {}).get("__package__") or ""
        parts = package.rsplit(".", level - 1)
        base = parts[0] if len(parts) == level else ""
        name = base + "." + name if name else base
    named = [name] + [name + "." + item for item in fromlist or ()
                      if isinstance(item, str) and item != "*"]
    names = set()
    for each in named:
        parts = each.split(".")
        names.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return names


def _watch():
    global _watched, _tops
    watched = frozenset().union(*(h[2] for h in _pending))
    _watched, _tops = watched, frozenset(name.partition(".")[0] for name in watched)


def _put_back_hooks():
    """The functions the hooks replaced, where a hook is still there (code
    that wrapped one keeps its wrapper: ours, under it, does nothing more)."""
    for (module, attribute), function in list(_own.items()):
        if getattr(module, attribute, None) is _hooks.get(attribute):
            setattr(module, attribute, function)
    _own.clear()


def _arrive(names):
    """The pending filters an import of names adds (each of them now in
    sys.modules), added as it would add them: each in front (or at the
    end, appended), in the order the warm-up's imports added them."""
    names = {name for name in names if name in sys.modules}
    with _lock:
        arrived = [h for h in _pending if h[2] & names]
        if not arrived:
            return
        _pending[:] = [h for h in _pending if not h[2] & names]
        _watch()
        if _waiting:
            for item, append, _ in arrived:
                _own_add[0](*item, append=append)
        if not _pending:
            _put_back_hooks()


def _code_sets_a_filter():
    """The code's first filter of its own: the held filters whose modules it
    has not imported leave the list, to come back with those imports."""
    with _lock:
        if _waiting:
            return
        _waiting.append(True)
        held = [item for item, _, _ in _pending]
        if held:
            warnings.filters[:] = [f for f in warnings.filters if f not in held]
            warnings._filters_mutated()


def install():
    """In a call's process, before its code: the held filters stay where
    they are until the code sets one of its own (see the opening comment).
    Nothing where none is held."""
    if not HELD or _installed or not hasattr(warnings, "_add_filter"):
        return
    _installed.append(True)
    # The held filters as the list holds them: a later step that added one
    # again put an equal tuple there, and a block's end removes by identity.
    try:
        current = {f: f for f in warnings.filters}
    except TypeError:  # a filter that does not hash: equal ones are not told apart
        current = {}
    _pending[:] = [(current.get(item, item), append, modules) for item, append, modules in HELD]
    _watch()
    own_import, own_import_module = builtins.__import__, importlib.import_module
    own_add, own_reset = warnings._add_filter, warnings.resetwarnings
    _own_add[:] = [own_add]

    @functools.wraps(own_import)
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        # Every import statement comes here: the common one (absolute, of
        # no watched module's package) is told by one lookup. One that
        # fails has imported its packages all the same, cold.
        try:
            return own_import(name, globals, locals, fromlist, level)
        finally:
            if _pending and (level or (isinstance(name, str) and
                                       name.partition(".")[0] in _tops)):
                try:
                    _arrive(_imported(name, globals, fromlist, level))
                except Exception:
                    pass

    @functools.wraps(own_import_module)
    def import_module(name, package=None):
        try:
            return own_import_module(name, package)
        finally:
            if _pending:
                try:
                    _arrive(_imported(importlib.util.resolve_name(name, package), None, (), 0))
                except Exception:
                    pass

    def add_filter(*item, append):
        _code_sets_a_filter()
        warnings._add_filter = own_add
        return own_add(*item, append=append)

    @functools.wraps(own_reset)
    def resetwarnings():
        _code_sets_a_filter()
        warnings.resetwarnings = own_reset
        return own_reset()

    # A catch_warnings() block puts back, as it ends, the list it found.
    # Cold, the filters an import inside it added leave with it; warm,
    # that list held them (the warm-up's import added them), and so do
    # those of modules the code never imported, once it set a filter in
    # the block: as it ends, those leave the list again.
    own_enter, own_exit = warnings.catch_warnings.__enter__, warnings.catch_warnings.__exit__

    @functools.wraps(own_enter)
    def __enter__(self):
        entered = own_enter(self)
        with _lock:
            _blocks[id(self)] = [item for item, _, _ in _pending]
        return entered

    @functools.wraps(own_exit)
    def __exit__(self, *exception):
        own_exit(self, *exception)
        try:
            with _lock:
                pending = _blocks.pop(id(self), ())
                still = {id(item) for item, _, _ in _pending}
                gone = {id(item) for item in pending if _waiting or id(item) not in still}
                # The held filters themselves, by identity: a filter of the
                # code's own that equals one stays.
                if gone and any(id(f) in gone for f in warnings.filters):
                    warnings.filters[:] = [f for f in warnings.filters if id(f) not in gone]
                    warnings._filters_mutated()
        except Exception:
            pass

    # A module's warning with a stacklevel names the line that imported
    # it: Python's warnings pass over importlib's own frames (a filename
    # with "importlib" and "_bootstrap" in it), and so over the hooks', as
    # a cold call has no frame there.
    for hook in (__import__, import_module):
        hook.__code__ = hook.__code__.replace(
            co_filename="<frozen importlib._bootstrap: sage-sandbox's import hook>")
    _hook_codes.update((__import__.__code__, import_module.__code__, __enter__.__code__,
                        __exit__.__code__))
    _hooks.update({"__import__": __import__, "import_module": import_module})
    _own.update({(builtins, "__import__"): own_import,
                 (importlib, "import_module"): own_import_module})
    builtins.__import__ = __import__
    importlib.import_module = import_module
    # Not put back with the import hooks: a block under way ends through it.
    warnings.catch_warnings.__enter__ = __enter__
    warnings.catch_warnings.__exit__ = __exit__
    warnings._add_filter = add_filter
    warnings.resetwarnings = resetwarnings


def not_shown(*codes):
    """Frames of these codes are left out of the tracebacks the code's
    errors print, as the hooks' are: a function of the launcher's in the
    place of one of Python's, written in C, which has no frame."""
    _hook_codes.update(codes)


def unhooked(value, tb):
    """tb, the traceback of exception value, without the import hooks'
    frames, and so, in place, the tracebacks of every exception that
    printing value prints: those chained to it (its cause, its context)
    and an exception group's members, and theirs."""
    def strip(tb):
        while tb is not None and tb.tb_frame.f_code in _hook_codes:
            tb = tb.tb_next
        at = tb
        while at is not None and at.tb_next is not None:
            if at.tb_next.tb_frame.f_code in _hook_codes:
                at.tb_next = at.tb_next.tb_next
            else:
                at = at.tb_next
        return tb
    if not _hook_codes:
        return tb
    for each in printed_with(value):
        if each.__traceback__ is not None:
            each.__traceback__ = strip(each.__traceback__)
    return strip(tb)


def printed_with(value):
    """The exceptions that printing value prints besides it, each once:
    those chained to it (its cause, its context) and an exception group's
    members, and theirs."""
    group = getattr(builtins, "BaseExceptionGroup", ())  # Python 3.11 on
    seen, todo = {id(value)}, [value] if isinstance(value, BaseException) else []
    while todo:
        at = todo.pop()
        members = at.exceptions if isinstance(at, group) else ()
        for each in (at.__cause__, at.__context__, *members):
            if isinstance(each, BaseException) and id(each) not in seen:
                seen.add(id(each))
                todo.append(each)
                yield each
