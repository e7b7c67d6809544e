# launcher/mpmain.py: the main module that multiprocessing's spawn and
# forkserver children run. Such a child is a new Python: it runs the file
# __main__.__file__ names, as "__mp_main__", to find the code's functions
# and classes. Under `sage FILE` that is FILE.sage.py, the preparsed code
# beside FILE; here __file__ is the name the user gave (tracebacks quote
# the user's lines under it), a file the container does not have, and
# every child failed with FileNotFoundError. So, where a call starts such a
# child, the code as `sage FILE` would have written it (Sage's import and
# the preparsed code) is written to a file in the call's /tmp (which goes
# with the call) and named to the child in __file__'s place.
#
# Nothing is imported or wrapped until the code imports the modules that
# start such children: an audit hook (which no code can list or remove)
# waits for that import (import statements raise it; it costs 0.15-0.25 us
# for each audited event, an open() or a sys._getframe()).
# multiprocessing imported earlier would register its exit function
# before the call, and the call's process clears those (child.py).
#
# In a session the child runs the cell that started it: as in a notebook
# (where such a child runs nothing of the cells), what earlier cells
# defined is not found there.
import functools
import os
import sys

# The modules that start spawn and forkserver children: each calls
# spawn.get_preparation_data for the child's main module.
STARTERS = ("multiprocessing.popen_spawn_posix", "multiprocessing.popen_forkserver",
            "multiprocessing.forkserver")
# Where the file goes: the call's own /tmp, whatever tempfile was told.
CALL_TMP = "/tmp"
# PARI's first stack where its bound is given (bounded_pari).
PARI_STACK = 1 << 20

# The module `sage FILE` imports and the PARI stack's bound its import was
# given (install: None where none was); the call's code: the name __file__
# holds, the preparser's constants and the rest (main_is); the file
# written, once a process for each name and code: (pid, (name, code),
# path).
sage_all = None
pari_sizemax = None
main_file = None
main_code = None
written = None


def install(sage_all_name, pari_stack_max=None):
    """In the launcher, once: every call's process inherits the hook."""
    global sage_all, pari_sizemax
    sage_all, pari_sizemax = sage_all_name, pari_stack_max
    sys.addaudithook(_on_event)
    _wrap_if_loaded()


def main_is(filename, constants, preparsed, futures=()):
    """The call's code (each cell's, in a session), as the preparser gave
    it: its constants apart, and the `from __future__` lines sage-preparse
    moves to the top taken out of it (futures: child.FutureImports). Laid
    out as a file only where a child needs it (_written_main)."""
    global main_file, main_code
    main_file, main_code = filename, (constants, preparsed, tuple(futures))
    # A starter imported by importlib.import_module raised no event.
    try:
        _wrap_if_loaded()
    except Exception:  # the code broke multiprocessing itself: its own
        pass


def _on_event(event, args):
    if event == "import" and args and args[0] in STARTERS:
        _wrap()


def _wrap_if_loaded():
    if "multiprocessing.spawn" in sys.modules:
        _wrap()


def _wrap():
    """spawn.get_preparation_data wrapped, once: where a starter is being
    imported, or spawn is (every starter imports it)."""
    import multiprocessing.spawn as spawn
    real = spawn.get_preparation_data
    if getattr(real, "sandbox_wrapped", False):
        return

    @functools.wraps(real)
    def get_preparation_data(name):
        data = real(name)
        main = sys.modules.get("__main__")
        if "init_main_from_path" in data and main_code is not None and \
                getattr(main, "__file__", None) == main_file:
            path = _written_main()
            if path is not None:
                data["init_main_from_path"] = path
        return data

    get_preparation_data.sandbox_wrapped = True
    spawn.get_preparation_data = get_preparation_data


def main_text():
    """The code as sage-preparse writes FILE.sage.py: a module docstring
    and `from __future__` imports first (Python requires them there: those
    at its top, a cell's, and those taken out of it), then Sage's import,
    the constants and the rest."""
    import ast
    constants, preparsed, futures = main_code
    head = 0
    try:
        body = ast.parse(preparsed).body
    except (SyntaxError, ValueError):
        body = []
    for i, node in enumerate(body):
        docstring = i == 0 and isinstance(node, ast.Expr) and \
            isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        if not docstring and not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        if i + 1 < len(body) and body[i + 1].lineno == node.end_lineno:
            break  # a statement after it on its line, which may use the constants
        head = node.end_lineno
    from launcher.child import code_lines  # noqa: E402 (child imports this module)
    lines = code_lines(preparsed, keepends=True)
    # The file is written in UTF-8, whatever encoding line the code has
    # (its text was decoded before): the first line says so, and wins.
    return "# -*- coding: utf-8 -*-\n%s%s\n%s\n%s\n%s\n" % (
        "".join(lines[:head]), "".join(line + "\n" for line in futures), import_line(),
        constants, "".join(lines[head:]))


def bounded_pari_text(pari_class, sizemax):
    """The text of cypari2.Pari in place of PARI_CLASS (a name) while Sage
    imports: a first stack of PARI_STACK and a bound of what Sage asks
    (1 GiB in 9.5 and 10) or SIZEMAX, the lower. One text, for the
    launcher's import (bounded_pari) and a child's (import_line)."""
    return "lambda size=0, sizemax=0, *args, **kwargs: %s(%d, min(sizemax or %d, %d))" % (
        pari_class, PARI_STACK, sizemax, sizemax)


def bounded_pari(pari_class, sizemax):
    """cypari2.Pari for the launcher's import of Sage (main.py)."""
    return eval(bounded_pari_text("pari_class", sizemax), {"pari_class": pari_class})


def import_line():
    """Sage's import, as sage-preparse writes it; where the launcher's own
    was given a PARI stack within the memory limit (main.py), the child's
    is given the same, on the same line (the code's lines keep their
    numbers) and with no name left behind: a child is a new Python, under
    the same limits, and PARI's default stack would print "not enough
    memory" into its stderr, which a fresh Sage's child does not."""
    line = "from %s import *" % sage_all
    if pari_sizemax is not None:
        line = ("import cypari2 as _sandbox_pari; _sandbox_pari_class = _sandbox_pari.Pari; "
                "_sandbox_pari.Pari = %s; %s; _sandbox_pari.Pari = _sandbox_pari_class; "
                "del _sandbox_pari, _sandbox_pari_class"
                % (bounded_pari_text("_sandbox_pari_class", pari_sizemax), line))
    return line + "   # import sage library"


def _written_main():
    """The file, written once a process for each code, in the call's /tmp
    (never where tempfile's settings point: the code may have named its
    output directory); None where it cannot be (the child then fails as
    before, naming __file__)."""
    global written
    if written is not None and written[:2] == (os.getpid(), (main_file, main_code)) and \
            os.path.exists(written[2]):
        return written[2]
    import tempfile
    name = "stdin" if main_file == "<stdin>" else os.path.basename(main_file)
    try:
        path = os.path.join(tempfile.mkdtemp(dir=CALL_TMP), name + ".py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(main_text())
    except OSError:
        return None
    written = (os.getpid(), (main_file, main_code), path)
    return path
