# launcher/deferred.py: the warnings filters that the warm-up's imports
# added, held back from the template and added to a call's filters when
# its code imports what added them, as a cold call's import would.
#
# A module's import adds its filters in front of those there (scipy's
# "always" for its special functions' warnings, numpy's for RankWarning,
# scipy.sparse's "ignore" for numpy's matrix warning, sympy's "once"...).
# In a cold call that happens only if the code imports the module, and
# then after the filters the code set before: code that starts with
# warnings.simplefilter("error") or filterwarnings("ignore") (common in
# model-written code) still has scipy's "always" in front of it once it
# imports scipy.special, and has no scipy.sparse filter at all where it
# never imports scipy. A warm call's modules were imported by the warm-up,
# before the code: had their filters stayed in the template, every call
# would have them, behind its own, and the same code would raise where a
# cold call warns, or be silent where it raises.
#
# So each filter a warm-up step's import added is held here, with the
# modules whose import added it: the module that set it and those whose
# import was importing it then (an import of any of them, cold, would
# have added it). A call has none of them until an import statement (the
# code's, or a library's in Python) or importlib.import_module names one
# of those modules or a package of one (a cold import imports the package
# first); then they are added as that import would have added them, in
# the order the warm-up's imports added them. Not seen: an import made
# from C (Cython's) or by a package's lazy attribute (scipy.special after
# import scipy), and a module that a cold import of another would import
# too (cold, import scipy.special imports numpy; warm, numpy's filters
# wait for an import that names numpy); a filter only such an import
# would add is missing from the call, as from a cold call that never
# imports its module.
#
# The hooks are Python functions, seen in place of builtins.__import__ and
# importlib.import_module while a filter waits. A failing import (a module
# the image lacks) raises through a hook's frame: the tracebacks the
# launcher prints (the code's uncaught error, a thread's, an unraisable
# one) leave it out (unhooked), as a cold call's has no such frame; one
# the code formats itself shows it. A module's warning with a stacklevel
# passes over it (the hooks' filename, below).
import builtins
import importlib
import sys
import warnings

# (filter as warnings.filters holds it, appended, frozenset of module
# names), in the order the warm-up's imports added them.
HELD = []

_pending = []    # a call's held filters whose module it has not imported
_watched = set()  # the modules of _pending's filters: an import of one adds some
_tops = set()     # their top-level packages: an import of no other's adds none
_own = {}        # the functions wrapped, to put back once none is pending
_installed = []  # once per process: a session's later cells find it done
_hook_codes = set()  # the hooks' code: their frames in a traceback are not shown


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
    """While a warm-up step runs: which import added each filter. The
    filters themselves are added as ever; hold() then takes them out of
    the template's."""

    def __init__(self):
        self.added = {}
        self.own = getattr(warnings, "_add_filter", None)
        if self.own is None:
            return  # another warnings module: nothing is held

        def add_filter(*item, append):
            modules = importing_modules(sys._getframe(1))
            self.own(*item, append=append)
            if modules:
                self.added[tuple(item)] = (len(self.added), append, frozenset(modules))
        warnings._add_filter = add_filter

    def stop(self):
        if self.own is not None:
            warnings._add_filter = self.own

    def hold(self, added):
        """Of added (the filters the step added, in the list's order), those
        an import added, held; returns the rest, which stay."""
        stay, held = [], []
        for item in added:
            how = self.added.get(tuple(item))
            if how is None:
                stay.append(item)
            else:
                held.append((how[0], item, how[1], how[2]))
        # In the order the imports added them (the list has the last first).
        for _, item, append, modules in sorted(held, key=lambda h: h[0]):
            HELD[:] = [h for h in HELD if h[0] != item]
            HELD.append((item, append, modules))
        return stay


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
    _watched.clear()
    _watched.update(*(h[2] for h in _pending))
    _tops.clear()
    _tops.update(name.partition(".")[0] for name in _watched)


def _arrive(names):
    """The pending filters an import of names adds, added as it would add
    them: each in front (or at the end, appended), in the order the
    warm-up's imports added them."""
    arrived = [h for h in _pending if h[2] & names]
    if not arrived:
        return
    _pending[:] = [h for h in _pending if not h[2] & names]
    _watch()
    for item, append, _ in arrived:
        warnings._add_filter(*item, append=append)
    if not _pending:
        for (module, attribute), own in _own.items():
            setattr(module, attribute, own)
        _own.clear()


def install():
    """In a call's process, before its code: the held filters wait for the
    code's imports (see the opening comment). Nothing where none is
    held."""
    if not HELD or _installed or not hasattr(warnings, "_add_filter"):
        return
    _installed.append(True)
    _pending[:] = HELD
    _watch()
    own_import, own_import_module = builtins.__import__, importlib.import_module

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        module = own_import(name, globals, locals, fromlist, level)
        # Every import statement comes here: the common one (absolute, of
        # no watched module's package) is told by one lookup.
        if _pending and (level or name.partition(".")[0] in _tops):
            try:
                _arrive(_imported(name, globals, fromlist, level))
            except Exception:
                pass
        return module

    def import_module(name, package=None):
        module = own_import_module(name, package)
        if _pending:
            _arrive({module.__name__})
        return module

    # A module's warning with a stacklevel names the line that imported
    # it: Python's warnings pass over importlib's own frames (a filename
    # with "importlib" and "_bootstrap" in it), and so over the hooks', as
    # a cold call has no frame there.
    for hook in (import_, import_module):
        hook.__code__ = hook.__code__.replace(
            co_filename="<frozen importlib._bootstrap: sage-sandbox's import hook>")
    _hook_codes.update((import_.__code__, import_module.__code__))
    _own.update({(builtins, "__import__"): own_import,
                 (importlib, "import_module"): own_import_module})
    builtins.__import__ = import_
    importlib.import_module = import_module


def unhooked(value, tb):
    """tb, the traceback of exception value, without the import hooks'
    frames, and so the tracebacks of the exceptions chained to value (its
    cause, its context), in place."""
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
    seen = set()
    chained = value
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        for each in (chained.__cause__, chained.__context__):
            if each is not None and each.__traceback__ is not None:
                each.__traceback__ = strip(each.__traceback__)
        chained = chained.__cause__ or chained.__context__
    return strip(tb)
