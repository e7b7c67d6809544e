# launcher/warm.py: the warm-up of a container that waits for its calls:
# Sage starts Maxima (ECL), GAP, matplotlib, Singular and scipy lazily, at
# their first use, in the process that uses them; in a call's process
# forked from a launcher that only imported sage.all, every call paid it
# again (a calculus cell 1-4 s, where the code itself takes 50 ms). Here
# each is used once, in the launcher, before calls' processes are forked
# from it, and every trace of that use that a call could see is put back
# as a fresh Sage has it (Traces): a call prints what a fresh `sage FILE`
# prints, byte for byte (tests/180-warm.bats).
#
# The steps use only objects no code names: Python functions, never a
# symbolic expression (Sage's symbolic library numbers each symbol it
# makes, even a temporary one, and a set of symbols prints in the order
# of those numbers: a step that made one would shift every call's),
# rings whose names start with "sandbox_warm" (Sage orders and caches by
# name and by creation: a user's `var('y')` must be the first y), and GAP
# objects through libgap only. Maxima is only started: its packages, run,
# leave globals, properties and gensyms a call's output can name. What
# the steps cannot avoid changing is recorded before each step and put
# back after it: Maxima's counters (solve's %r parameters, gensyms) and
# facts, GAP's and PARI's random state, matplotlib's rcParams, numpy's
# print options, the recursion limit, Python's warnings filters (but
# those the imports add, as a cold import does) and their "printed once"
# records. The launcher
# (calls.py) puts /tmp back, reads the signal handlers again and records
# its own state again after each step. A step must print nothing, and
# leave no thread and no shared mapping a call could write (run_step).
#
# Fork safety: a process with more than one thread cannot be forked safely
# (a lock another thread held stays held in the child). ECL's collector
# starts a marker thread per core unless GC_MARKERS=1, which it is told for
# Maxima's step only; the threads are counted after each step (run_step),
# and before each fork (calls.py).
#
# Memory: the host grants the warm-up by the data rlimit (Warmer.granted),
# and each call's process gets back what the warm-up took (inherit()).
import gc
import os
import re
import sys
import time

from launcher import deferred
from launcher import parent
from launcher import tmpreset

PREFIX = "sandbox_warm"


def threads():
    """This process's threads; where that cannot be read, more than one
    (never forked on a guess)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1 << 30


def _maxima():
    """Maxima's start only (ECL's, Maxima's load, Sage's set-up of it: what
    a cold call's first use does first, counters and all). Its packages
    load as a call first uses them, as in a cold call: run here, they
    would leave their globals (ode2's method, intfactor...), properties
    and gensyms used at their load, which a call's output can name."""


def _gap():
    from sage.all import libgap
    libgap.eval("Size(AlternatingGroup(5))")
    # The permutation groups' Python side, and GAP's that they call.
    from sage.all import SymmetricGroup  # noqa: F401
    import sage.groups.perm_gps.permgroup  # noqa: F401


def _matplotlib():
    """A plot of a Python function: matplotlib, its fonts, Sage's Graphics
    and the PNG path, and what the symbolic plotting path imports (sympy,
    IPython's pieces). Not a symbolic one: Sage's symbolic library numbers
    every symbol it makes, and a set of symbols prints in the order of
    those numbers; the module that turns an expression into a function
    makes five at its import (sage.symbolic.expression_conversions, on
    9.5), so imported here it would shift every symbol of every call. It
    is left to the call, which imports it as a cold one does (10 ms)."""
    import io
    import math
    from sage.all import plot, point
    graphics = plot(lambda t: math.sin(t), (0, 6)) + point((0, 0))
    figure = graphics.matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(figure).print_png(io.BytesIO())
    for name in ("sympy", "sage.interfaces.sympy", "sage.repl.ipython_extension"):
        try:
            __import__(name)
        except ImportError:
            pass


def _singular():
    from sage.all import PolynomialRing, QQ
    ring = PolynomialRing(QQ, [PREFIX + "_a", PREFIX + "_b"])
    a, b = ring.gens()
    ring.ideal([a ** 2 + b, b ** 2 + a]).groebner_basis()


def _numerics():
    """GSL's integration and scipy's root finding, on Python functions (on
    symbolic ones each would make symbols: _matplotlib)."""
    import math
    from sage.all import numerical_integral, find_root
    # A lambda: a built-in one has no argument list for Sage to read, and
    # it prints an error for every point it evaluates.
    numerical_integral(lambda t: math.sin(t), 0, 1)
    find_root(lambda t: math.cos(t) - t, 0, 1)
    import scipy.integrate  # noqa: F401
    import scipy.optimize  # noqa: F401


def _package_systems():
    """Sage's list of the image's package systems: the first time a
    feature is found missing, Sage asks for it, running
    sage-guess-package-system, `sage -p` and `sage -pip --version` (370
    ms on Sage 10 here), and keeps the answer for the process. An
    elliptic curve's rank() asks it first thing, looking for Cremona's
    database, which the images lack (rank: 450 ms in a call, 4 ms after
    this). The answer is kept, as after a cold call's first lookup: the
    same in every process of the container (the image's programs, the
    container's PATH; a call that changed its PATH before its first
    lookup would get the template's), printed only as an install hint."""
    try:
        from sage.features import package_systems
    except ImportError:
        return
    package_systems()


# Each step, in the order a busy container's calls most likely need them:
# such a call waits for one step (calls.py), and runs warmer for it.
# Maxima's first, the costliest (1.4 s of CPU) and what calculus, the code
# models write most, starts: a batch's calculus calls paid it in their own
# processes while GAP's came first (over bench/corpus.jsonl at --jobs 2,
# 7.1 jobs/s, 8.1 with Maxima's first; 16.8 s of CPU against 14.4). Each is about as long
# as a cold run's start at most. Maxima's is the first to start ECL, and
# the only one told GC_MARKERS (run_step): ECL started before it would
# start its marker threads, and the step that did would end the warm-up.
# GAP takes for its workspace all the data rlimit leaves it (Sage's libgap
# asks for 4 GiB and settles for what it gets): its step gets the room a
# cold call's process has (Warmer.step).
STEPS = (("maxima", _maxima), ("gap", _gap), ("matplotlib", _matplotlib),
         ("singular", _singular), ("numerics", _numerics),
         ("package systems", _package_systems))


def next_thread_number():
    """The number threading gives the next thread it names (Thread-N), or
    None where its counter is not the one known (Python 3.10 to 3.13). A
    step may start a thread (matplotlib's font cache starts a Timer): a
    cold call's first thread is Thread-1, and so is a warm call's. (On an
    image without the first-use files (firstuse.py), not after the code's
    first use of matplotlib's fonts: a cold call builds the cache then, and
    its Timer takes Thread-1; sage-sandbox(1).)"""
    import threading
    match = re.fullmatch(r"count\((\d+)\)",
                         repr(getattr(getattr(threading, "_counter", None), "__self__", None)))
    return int(match.group(1)) if match else None


def set_next_thread_number(number):
    import itertools
    import threading
    threading._counter = itertools.count(number).__next__


class Traces:
    """What one step changes that a call could see, recorded before it and
    put back after it, so that a call forked between two steps sees none
    of it either."""

    def __init__(self, name):
        import warnings
        self.name = name
        self.filters = list(warnings.filters)
        self.once = dict(warnings.onceregistry)
        self.saved = None
        # Which import adds each filter, from the library's start on.
        self.recorder = deferred.Recorder()
        try:
            self._record(name)
        except BaseException:
            self.recorder.stop()
            raise

    def _record(self, name):
        try:
            from sage.all import pari
            self.pari = pari.getrand()
        except BaseException:
            self.pari = None
        # What a library function sets as it runs, which a cold call has
        # only once it calls that function: Sage 10's find_root sets
        # numpy's legacy="1.25" printing (a call's np.float64(2.0) then
        # printed 2.0). And what an import sets, which no cold call has
        # but one that imports it: jedi's recursion limit of 3000 (9.5's
        # IPython imports it; a call's recursion of depth 2000 then
        # passed, where cold it raises RecursionError). Put back, a call
        # that imports IPython itself keeps 1000, where a cold one gets
        # 3000: recursion in model code is common, IPython's import is not.
        self.recursion_limit = sys.getrecursionlimit()
        self.thread_number = next_thread_number()
        self.numpy_print = None
        if "numpy" in sys.modules:
            self.numpy_print = sys.modules["numpy"].get_printoptions()
        # The library is started first: its start is what a fresh Sage's
        # first use does too, counters and all.
        if name == "maxima":
            from sage.interfaces.maxima_lib import maxima_lib
            gensyms = maxima_lib.lisp("*gensym-counter*")  # first: lisp reads it unparsed
            self.saved = (maxima_lib.eval("%rnum"), gensyms, maxima_lib.eval("facts()"),
                          maxima_lib._Interface__seq)
        elif name == "gap":
            from sage.all import libgap
            libgap.eval("1")
            self.saved = (libgap.eval("State(GlobalMersenneTwister)"),
                          libgap.eval("State(GlobalRandomSource)"))
        elif name == "matplotlib":
            # dict's own copy: rcParams' reading of "backend" would import
            # pyplot and settle the backend, which a cold call does itself
            # (and a call's pyplot then failed to load Tk headless).
            import matplotlib
            self.saved = dict.copy(matplotlib.rcParams)

    def put_back(self):
        """Everything recorded, as it was, each item whatever became of the
        others (but the filters the step's imports added); raises at the
        end if any could not be put back (the template is then not to be
        forked: calls.py)."""
        self.recorder.stop()  # first: whatever fails below, no wrapper stays
        failures = []

        def attempt(what, restore):
            try:
                restore()
            except BaseException as e:
                failures.append("%s: %s: %s" % (what, type(e).__name__, str(e)[:100]))

        if self.name == "maxima":
            from sage.interfaces.maxima_lib import maxima_lib
            rnum, gensyms, facts, names = self.saved

            def counters():
                # Set from Lisp: Maxima's own assignment of an option
                # variable would add it to myoptions, which a call can print.
                maxima_lib.lisp("(setq $%%rnum %s $%%rnum_list '((mlist)))" % int(rnum))
                maxima_lib.lisp("(setq *gensym-counter* %s)" % gensyms)
                # The names of Sage's Maxima objects: sage0, sage1...
                maxima_lib._Interface__seq = names
            attempt("Maxima's counters", counters)
            if maxima_lib.eval("facts()") != facts:
                failures.append("Maxima's facts changed")
        elif self.name == "gap":
            from sage.all import libgap
            attempt("GAP's random state", lambda: (
                libgap.Reset(libgap.GlobalMersenneTwister, self.saved[0]),
                libgap.Reset(libgap.GlobalRandomSource, self.saved[1])))
        elif self.name == "matplotlib":
            import matplotlib
            def rc():
                # But the backend: pyplot, imported by Sage's plotting,
                # swapped the rc file's TkAgg for its headless fallback as
                # it does at its import, once (a call's pyplot then loaded
                # Tk, and failed).
                backend = dict.__getitem__(matplotlib.rcParams, "backend")
                dict.update(matplotlib.rcParams, self.saved)
                dict.__setitem__(matplotlib.rcParams, "backend", backend)
            attempt("matplotlib's rcParams", rc)
        if self.pari is not None:
            from sage.all import pari
            attempt("PARI's random state", lambda: pari.setrand(self.pari))
        attempt("the recursion limit", lambda: sys.setrecursionlimit(self.recursion_limit))
        if self.thread_number is not None:
            attempt("threading's names", lambda: set_next_thread_number(self.thread_number))
        if self.numpy_print is not None:
            attempt("numpy's print options",
                    lambda: sys.modules["numpy"].set_printoptions(**self.numpy_print))
        import warnings
        # The filters the step added stay: a module's filter comes with its
        # import (sympy's "once" for its deprecations, scipy's "always" for
        # its special functions'...), which a call that uses the module
        # does not repeat; put back, the call's warnings would print as no
        # fresh Sage prints them. Those an import added are held as well
        # (deferred.py): a call whose code sets filters of its own gets
        # them as its own imports would add them. What a step adds that is
        # no import's (a library function that sets a filter as it runs)
        # stays, where a cold call has it only once it calls that function:
        # no library here does. The rest is as recorded: a step that
        # removed or reordered one gets the record back, what it added in
        # front of it (an import that added again a filter already there
        # moves it to the front in a cold process, and not here).
        added = [f for f in warnings.filters if f not in self.filters]
        self.recorder.hold(added)
        if [f for f in warnings.filters if f not in added] != self.filters:
            warnings.filters[:] = added + self.filters
        # The "printed once" records the step made go: the modules' with
        # the version the filters' change bumps, "once"'s own table put
        # back by hand.
        warnings.onceregistry.clear()
        warnings.onceregistry.update(self.once)
        warnings._filters_mutated()
        if failures:
            raise RuntimeError("; ".join(failures))


def _status(field):
    """A size from this process's status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


# What the warm-up grew this process by (data, address space), for each
# call's process's rlimits (grown()); None where no warm-up was granted.
_grant = None


def grown():
    """The data rlimit a call's process gets, and what its address space
    limit gets on top of the host's: the memory limit plus what the
    template took for the warm-up (its data and mappings are the
    template's, there before the call, and not the call's to spend), so
    that a call has the room a cold one has. (None, 0) where the host
    granted no warm-up: the container's own limits hold."""
    if _grant is None:
        return None, 0
    memory, data, space = _grant
    return memory + max(0, _status("VmData") - data), max(0, _status("VmSize") - space)


# What a call's process holds of the warm-up (data, address space), as
# counted as it starts (inherit()): its rlimits get it on top of the
# host's, and self-test's rlimit checks expect it (checks.py).
inherited = (0, 0)


# What a cold call's first collection finds: the cycles Sage's import
# left in the oldest generation (Sage 9.5's: 19 objects; 10's: none). A
# fresh `sage FILE` on 9.5 finds 38: one more cycle, which the launcher's
# own work after the import frees, and which no call can get back; the
# young generations' garbage is freed before each fork (calls.py), so
# that every call finds the same. The warm-up's collections (_traced)
# would free the import's: they are collected before the first step
# into import_garbage, held there (gc.DEBUG_SAVEALL), and let go in each
# call's process as it starts (inherit()), where the call's first
# collection finds them, as a cold call's does. (Their finalisers and
# weak references' callbacks ran here, in the first step's capture: a
# cold call's gc.collect() also counts the weak reference freed once its
# callback ran, 20 where a warm call's counts 19.) Not gc.freeze():
# a step also lets go of objects older than it (importlib.metadata's
# caches), which a frozen template never collects, and every call's
# collection then finds (20 objects on Sage 10).
import_garbage = []


def hold_import_garbage():
    """The garbage of the oldest generation, held in import_garbage rather
    than freed. The young generations' is freed first, as it was before
    the fork of the cold child prepared before (calls.py): what a cold
    call's first collection finds is the oldest generation's alone."""
    gc.collect(1)
    debug = gc.get_debug()
    before = len(gc.garbage)
    gc.set_debug(debug | gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(debug)
    import_garbage[:] = gc.garbage[before:]
    del gc.garbage[before:]


def inherit():
    """In a call's process, as it starts: grown(), inherited set, and the
    import's garbage let go."""
    global inherited
    import_garbage.clear()
    data, space = grown()
    inherited = (0 if data is None else data - _grant[0], space)
    return data, space


class Warmer:
    """The warm-up's progress: steps done, and whether the template can
    still be forked."""

    @classmethod
    def granted(cls):
        """A Warmer where the host granted a warm-up, else None. A container
        that waits for its calls (MCP's warm ones, batch's, the server's,
        sessions) is granted one by its data rlimit: the hard limit above
        the soft one (the memory limit) is the room the warm-up may take
        (podman.c)."""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or hard <= soft:
            return None
        return cls(soft, hard)

    def __init__(self, memory, room):
        global _grant
        self.memory, self.room = memory, room
        _grant = (memory, _status("VmData"), _status("VmSize"))
        self.next = 0
        self.done = False
        self.unsafe = None  # why no call's process may be forked from it
        self.failed = None  # the step that failed, and why
        # A call was served at once, its steps not waited for (calls.py).
        self.served_while_warming = False
        self.spent_ms = {}

    def step(self):
        """The next step: GAP's under the data rlimit a call's process
        gets (the memory limit and what the template's data grew by since
        the warm-up began, the steps before it: grown()),
        as a cold call's process would start GAP (its workspace is then
        what a cold call's is), the rest in the room granted above it."""
        import resource
        name, run = STEPS[self.next]
        first = self.next == 0
        self.next += 1
        soft = grown()[0] if name == "gap" else self.room
        resource.setrlimit(resource.RLIMIT_DATA, (soft, self.room))
        began = time.monotonic()
        try:
            self.failed = run_step(name, run, first)
        except Unsafe as e:
            self.unsafe = str(e)
        self.spent_ms[name] = int((time.monotonic() - began) * 1000)
        self.done = self.next == len(STEPS) or self.unsafe is not None or self.failed is not None

    def report(self):
        """The W frame's JSON: each step's milliseconds, and why it ended
        early."""
        report = {"ms": self.spent_ms}
        if self.unsafe or self.failed:
            report["why"] = self.unsafe or self.failed
        return report


class Unsafe(Exception):
    """The template is no longer as a fresh Sage: no call's process may be
    forked from it."""


# Where _Captured keeps its descriptors, and where the files a step's
# libraries keep open start (_LowNumbersHeld): above the numbers a call's
# code's files get, below the container's descriptor limit.
CAPTURE_FDS_FROM = 600


class _Captured:
    """This process's file descriptors 1 and 2 pointed at an unnamed file
    in /tmp while in the block: they carry the frames to the host (fd 1)
    and the launcher's last words (fd 2), and a library may write to them
    from C (ECL, libgap, Singular) as well as from Python. written is what
    was written, its first bytes. Raises OSError where the descriptors
    cannot be set up or put back (each put back as far as it can be)."""

    def __enter__(self):
        self._flush()
        self.saved = []
        self.file = self._high(os.open("/tmp", os.O_TMPFILE | os.O_RDWR, 0o600))
        try:
            for fd in (1, 2):
                self.saved.append(self._high(os.dup(fd)))
            for fd in (1, 2):
                os.dup2(self.file, fd)
        except BaseException:
            self._put_back()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._flush()
        finally:
            self._put_back()
        return False

    def _put_back(self):
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.saved = []
        try:
            self.written = os.pread(self.file, 200, 0)
        finally:
            os.close(self.file)

    @staticmethod
    def _high(fd):
        import fcntl
        try:
            return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, CAPTURE_FDS_FROM)
        finally:
            os.close(fd)

    @staticmethod
    def _flush():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        # The launcher's one handle: a new CDLL is a cycle of nine
        # objects, left after the step's garbage was collected (_traced).
        parent.libc.fflush(None)


class _LowNumbersHeld:
    """Every free descriptor number below CAPTURE_FDS_FROM taken while in
    the block (copies of one /dev/null), so that a file a library opens in
    a step and keeps (9.5's IPython keeps /dev/null open from its import)
    gets a number above them: a call's code's own open() calls then get 3,
    4, 5... as in a fresh Sage, where the kept file took one of them.
    Raises OSError where they cannot be taken (each taken one closed)."""

    def __enter__(self):
        self.held = []
        try:
            fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
            while fd < CAPTURE_FDS_FROM:
                self.held.append(fd)
                fd = os.dup(fd)  # the lowest free number
            os.close(fd)
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, kind, *exc):
        try:
            self._close()
        except OSError:
            if kind is None:  # else the block's own exception says more
                raise
        return False

    def _close(self):
        """Each held number closed, whatever became of the others (a step
        that closed one gets EBADF here, raised once all are closed)."""
        held, self.held = self.held, []
        failure = None
        for fd in held:
            try:
                os.close(fd)
            except OSError as e:
                failure = failure or e
        if failure:
            raise failure


def _traced(name, step, first=False):
    """The step between its traces' record and their putting back: why the
    step itself failed, or None. Raises Unsafe where the traces could not
    be recorded (the library could not be started) or put back. first:
    the first step, which holds the import's garbage first."""
    if first:
        # In the step's capture (run_step): a finaliser of that garbage
        # that printed would make the step Unsafe, as the step's own.
        try:
            hold_import_garbage()
        except BaseException as e:
            raise Unsafe("the warm-up could not hold the garbage of Sage's import: %s: %s" % (
                type(e).__name__, str(e)[:200]))
    try:
        traces = Traces(name)
    except BaseException as e:
        raise Unsafe("the warm-up's %s step could not start it: %s: %s" % (
            name, type(e).__name__, str(e)[:200]))
    failed = None
    try:
        step()
    except BaseException as e:
        failed = "the warm-up's %s step failed: %s: %s" % (name, type(e).__name__, str(e)[:200])
    try:
        # The step's garbage (cycles among what it made: 6,239 objects
        # after every step; not the import's: import_garbage), collected
        # here, first: a finaliser (a Maxima element's clears its Maxima
        # variable) may change what is put back. Left, a call's
        # gc.collect() returned 6239 where a fresh Sage's returns 0, its
        # finalisers ran in the call's process, and the collector's counts
        # stood at a full collection's threshold: the call's first few
        # thousand objects set off one, over the template's 230,000 (a
        # 2x2 matrix's eigenvalues and a recursion of 2,000, through the
        # server: 231-259 ms, now 48-72 ms).
        gc.collect()
        traces.put_back()
    except BaseException as e:
        raise Unsafe("the warm-up's %s step could not put back %s" % (name, e))
    return failed


def run_step(name, step, first=False):
    """One step, and its traces put back. Returns why the step itself
    failed, or None (its traces are put back either way: the template
    serves on, the warm-up ends). Raises Unsafe where the library could
    not be started cleanly or its traces put back, the step printed
    anything (a cold call's first use would print it, and a warm one
    would not), left a thread, or left this process a shared mapping a
    call could write (tmpreset.shared_mappings: every call's process would
    inherit it, and share it with the next). ECL's collector is told to
    mark in this thread alone (GC_MARKERS, read once, as ECL starts), in
    Maxima's step only: GAP keeps a copy of the environment it started
    with, which a call can print."""
    alone = threads()
    previous = os.environ.get("GC_MARKERS")
    if name == "maxima":
        os.environ["GC_MARKERS"] = "1"
    captured = _Captured()
    try:
        with _LowNumbersHeld():
            try:
                with captured:
                    failed = _traced(name, step, first)
            except OSError as e:
                raise Unsafe("the warm-up's %s step's output could not be held back: %s" % (
                    name, e))
    except OSError as e:
        raise Unsafe("the warm-up's %s step could not hold the low descriptor numbers: %s" % (
            name, e))
    finally:
        if previous is None:
            os.environ.pop("GC_MARKERS", None)
        else:
            os.environ["GC_MARKERS"] = previous
    if captured.written:
        raise Unsafe("the warm-up's %s step printed %r" % (name, captured.written))
    if threads() > alone:
        raise Unsafe("the warm-up's %s step left %d threads in the template" % (name, threads()))
    shared = tmpreset.shared_mappings()
    if shared:
        raise Unsafe("the warm-up's %s step left a shared mapping of %s" % (name, shared[0]))
    return failed
