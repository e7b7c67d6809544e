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
# waits for that import (import statements raise it; it costs about
# 0.1 us for each audited event, an open() or a sys._getframe()).
# multiprocessing imported earlier would register its exit function
# before the call, and the call's process clears those (child.py).
import os
import sys

# The modules that start spawn and forkserver children: each calls
# spawn.get_preparation_data for the child's main module.
STARTERS = ("multiprocessing.popen_spawn_posix", "multiprocessing.popen_forkserver",
            "multiprocessing.forkserver")

# The module `sage FILE` imports (install); the call's main module as it
# writes it: the name __file__ holds, and the text (main_is); the copy
# written, once a process for each text: (pid, text, path).
sage_all = None
main_file = None
main_text = None
written = None


def install(sage_module):
    """In the launcher, once: every call's process inherits the hook."""
    global sage_all
    sage_all = sage_module
    sys.addaudithook(_on_event)


def main_is(filename, preparsed):
    """The call's code, as the preparser gave it: what `sage FILE` would
    have in FILE.sage.py."""
    global main_file, main_text
    main_file = filename
    main_text = "from %s import *   # import sage library\n%s\n" % (sage_all, preparsed)


def _on_event(event, args):
    if event != "import" or not args or args[0] not in STARTERS:
        return
    spawn = sys.modules.get("multiprocessing.spawn")
    if spawn is None:
        import multiprocessing.spawn as spawn
    real = spawn.get_preparation_data
    if getattr(real, "sandbox_wrapped", False):
        return

    def get_preparation_data(name):
        data = real(name)
        main = sys.modules.get("__main__")
        if "init_main_from_path" in data and main_text is not None and \
                getattr(main, "__file__", None) == main_file:
            path = _copy()
            if path is not None:
                data["init_main_from_path"] = path
        return data

    get_preparation_data.sandbox_wrapped = True
    get_preparation_data.__wrapped__ = real
    spawn.get_preparation_data = get_preparation_data


def _copy():
    """The file, written once a process for each cell; None where it cannot
    be (the child then fails as it did, naming __file__)."""
    global written
    if written is not None and written[:2] == (os.getpid(), main_text):
        return written[2]
    import tempfile
    name = "stdin" if main_file == "<stdin>" else os.path.basename(main_file)
    try:
        directory = tempfile.mkdtemp()
        path = os.path.join(directory, name + ".py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(main_text)
    except OSError:
        return None
    written = (os.getpid(), main_text, path)
    return path
