# launcher/main.py: the container's first process: says it started, imports
# Sage, says it is ready, makes the namespace every call's code runs in,
# and serves its calls (calls.py) in the mode it was started for.
#
# Two differences from `sage FILE` that the sandbox needs:
# 1. PARI's stack fits the memory limit. Sage reserves a 1 GiB PARI stack at
#    start-up; under RLIMIT_DATA that reservation fails and PARI prints
#    "Warning: not enough memory, new PARI stack" into every run's stderr.
#    Sage's one call that creates it is redirected, while sage.all imports,
#    to ask for at most SAGE_SANDBOX_PARI_SIZEMAX bytes instead; so is it
#    in the code's multiprocessing spawn and forkserver children
#    (mpmain.py).
# 2. No interpreter teardown (0.3-0.4 s of Sage's atexit work): the
#    container, and everything in it, is deleted right after anyway.
#
# It runs under the image's own Sage Python (found by image.c), on Sage 9.5
# and 10.x. The Sage internals it uses (cypari2.Pari for PARI's stack,
# sage.all_cmdline, the preparser) are looked up here, at start-up: where
# one moved, the sandbox says so in a K frame, never in a traceback mixed
# into a run's output.
import builtins
import errno
import os
import signal
import sys
import types

# Python has taken its string hash seed from here (podman.c), the same in
# every container; the code and what it starts see a fresh Sage's
# environment.
os.environ.pop("PYTHONHASHSEED", None)

from launcher import calls, child, display, firstuse, gapspace, mpmain, parent  # noqa: E402
from launcher.frames import ProtocolError, Reader, Writer  # noqa: E402

# Where sage-sandbox's environment points (podman.c): made here, empty.
DIRECTORIES = ("/tmp/sage-home", "/tmp/dot-sage", "/tmp/sage-sandbox-out")


def cannot_start(writer, why):
    """Sage cannot start here: the host refuses the run, naming the image."""
    writer.send(b"K", " ".join(why.split()).encode("utf-8", "replace")[:4000])
    os._exit(3)


# What a library's loader says where mapping it failed for want of memory.
MAPPING_FAILED = ("Cannot allocate memory", "failed to map segment")


def ran_out_of_memory(e):
    """Whether an exception from Sage's import is the memory limit's doing,
    in any of the forms it takes there: a MemoryError; an OSError with
    ENOMEM (Sage 10 at 256 MiB fails listing a package's directory); an
    ImportError or OSError (ctypes') whose loader could not map a library;
    or an exception one of these caused, or a group holding one. Asked with
    the memory all but gone: a MemoryError while asking is an answer."""
    group = getattr(builtins, "BaseExceptionGroup", ())  # Python 3.11 on
    try:
        pending, seen = [e], []
        while pending:
            e = pending.pop()
            if e is None or any(e is s for s in seen):
                continue
            seen.append(e)
            if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM):
                return True
            if isinstance(e, (ImportError, OSError)) and any(sign in str(e) for sign in MAPPING_FAILED):
                return True
            pending += [e.__cause__, e.__context__]
            if isinstance(e, group):
                pending += e.exceptions
        return False
    except MemoryError:
        return True
    except Exception:
        return False  # (a message that cannot be made)


def import_sage(writer):
    """Imports Sage with PARI's stack within the memory limit; returns the
    name of the module `sage FILE` imports, the preparser and the PARI
    stack's bound (None where none was given)."""
    try:
        import cypari2
        pari_class = cypari2.Pari
        sizemax = int(os.environ["SAGE_SANDBOX_PARI_SIZEMAX"])
        cypari2.Pari = mpmain.bounded_pari(pari_class, sizemax)
    except Exception:
        # Without it Sage still runs; PARI may warn about its stack. (Out
        # of memory here, Sage's import then says so.)
        pari_class = sizemax = None
    try:
        # sage.all_cmdline is what `sage FILE` imports (9.5 and 10.x); an
        # older or reorganised Sage may have only sage.all.
        try:
            import sage.all_cmdline  # noqa: F401
            sage_all = "sage.all_cmdline"
        except ModuleNotFoundError as e:
            if e.name != "sage.all_cmdline":
                raise
            import sage.all  # noqa: F401
            sage_all = "sage.all"
    except BaseException as e:
        # Out of memory (Sage 10 needs more than 256 MiB to import: where
        # it runs out varies, a MemoryError, a directory that cannot be
        # listed, a library that cannot be mapped) is the memory limit's
        # doing, not the image's: the host says to raise it.
        if ran_out_of_memory(e):
            cannot_start(writer, "memory: Sage's import ran out of memory under the memory limit")
        cannot_start(writer, "%s cannot import Sage: %s: %s" % (sys.executable, type(e).__name__, e))
    finally:
        if pari_class is not None:
            cypari2.Pari = pari_class
    try:
        from sage.repl.preparse import preparse_file
    except ImportError:
        try:
            from sage.misc.preparser import preparse_file  # Sage before 9
        except ImportError:
            cannot_start(writer, "this Sage has no preparser where sage-sandbox looks for one "
                         "(sage.repl.preparse.preparse_file); sage-sandbox supports Sage 9.5 "
                         "and 10.x")
    return sage_all, preparse_file, sizemax


def main(argv, room_at_top=None):
    mode = argv[0] if argv else "once"
    writer, reader = Writer(1), Reader(0)
    writer.send(b"S")
    if mode not in calls.MODES:
        cannot_start(writer, "the launcher was started in an unknown mode %r" % mode)
    # The launcher's own directories for the owner alone; the code's files
    # then with the umask podman gave the container (022), as a fresh
    # Sage's there: a file it writes is 0644, and os.umask() says so.
    inherited = os.umask(0o077)
    try:
        for directory in DIRECTORIES:
            os.makedirs(directory, exist_ok=True)
    except OSError as e:
        cannot_start(writer, "cannot make %s in the container's /tmp: %s" % (directory, e.strerror))
    os.umask(inherited)
    # Not dumpable: the code, the same uid, cannot open this process's
    # /proc entries (its descriptors, the frame stream) or trace it.
    parent.set_dumpable(False)
    # The import is not to be interrupted by anything the host did not send.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sage_all, preparse_file, pari_sizemax = import_sage(writer)
    child.note_sages_import()
    # What Sage's first use of Maxima, GAP and matplotlib leaves in HOME
    # and DOT_SAGE, as a warm container's has it, cold or warm.
    try:
        firstuse.install()
    except BaseException as e:
        if ran_out_of_memory(e):
            cannot_start(writer, "memory: the first-use files could not be copied under the "
                         "memory limit")
        cannot_start(writer, "cannot copy %s into the container's /tmp: %s: %s" % (
            firstuse.KEPT, type(e).__name__, e))
    child.prepare_reseed()
    # GAP, where a call or the warm-up first uses it, from the image's
    # saved workspace (0.15 s, where its library took 1.3 s and its save).
    gapspace.install()
    # multiprocessing's spawn and forkserver children, where a call starts
    # them, get the call's code as `sage FILE` would have it on disk.
    mpmain.install(sage_all, pari_sizemax)
    # The handlers Sage installed, for every call's process to get back;
    # this process catches no signal from here on (parent.py). SIGINT's
    # Python-level one is cysignals' own, as Sage sets it (the import ran
    # with SIGINT ignored): it raises KeyboardInterrupt through sig_check(),
    # which clears cysignals' note of the interrupt; Python's default one
    # would leave it, and a session's next cell would be interrupted at
    # its first sig_on().
    try:
        from cysignals.signals import python_check_interrupt as on_interrupt
    except ImportError:
        on_interrupt = signal.default_int_handler
    handlers = parent.Handlers(python={signal.SIGINT: on_interrupt})
    handlers.drop_all()
    try:
        from sage.version import version
    except ImportError:
        version = "unknown"
    writer.send(b"R", version.encode("ascii", "replace")[:64])
    # What the code runs in, as `sage FILE` gives it: the __main__
    # module, Sage's names in it, made once here (45 ms: as long as the
    # fork itself) for every call's process to inherit. A module, and the
    # one sys.modules names, as Python's own __main__ is: pickle finds the
    # code's functions and classes there by name, so multiprocessing's
    # pools, @parallel's results and dumps() of the code's objects work.
    # Its __builtins__ is the module, as a main module's is (elsewhere
    # Python puts the module's dict there).
    import builtins
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    namespace = module.__dict__
    namespace.update(__builtins__=builtins, __annotations__={}, __cached__=None)
    exec("from %s import *" % sage_all, namespace)
    # What reports the code's errors, imported once here: each child has it.
    import linecache  # noqa: F401
    import numbers  # noqa: F401
    import traceback  # noqa: F401
    # show() and the last expression: images, not "Graphics object ...".
    display.install()
    # What the launcher's frames below the code take of the recursion
    # limit, given back to the code (child.recurse_as_at_top).
    child.measure_room(room_at_top)
    launcher = calls.Launcher(mode, reader, writer, handlers, namespace, preparse_file)
    try:
        launcher.serve()
    except ProtocolError:
        os._exit(2)
