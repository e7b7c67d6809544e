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
# The steps use only objects no code names: variables, functions and rings
# whose names start with "sandbox_warm" (Sage orders and caches by name and
# by creation: a user's `var('y')` must be the first y), and GAP objects
# through libgap only. What they cannot avoid changing is recorded before
# each step and put back after it: Maxima's counters (solve's %r
# parameters, gensyms) and facts, GAP's and PARI's random state,
# matplotlib's rcParams, Python's warnings filters and their "printed
# once" records. The launcher (calls.py) puts /tmp back, reads the signal
# handlers again and records its own state again after each step.
#
# Fork safety: a process with more than one thread cannot be forked safely
# (a lock another thread held stays held in the child). ECL's collector
# starts a marker thread per core unless GC_MARKERS=1, which it is told for
# the warm-up only; the threads are counted after each step (run_step),
# and before each fork (calls.py).
#
# Memory: the host grants the warm-up by the data rlimit (Warmer.granted),
# and each call's process gets back what the warm-up took (grown()).
import os
import time

PREFIX = "sandbox_warm"


def threads():
    """This process's threads; where that cannot be read, more than one
    (never forked on a guess)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1 << 30


def _maxima():
    from sage.all import SR, integrate, limit, sin, cos, exp, taylor
    t = SR.var(PREFIX + "_t")
    integrate(sin(t) ** 2, t)
    limit(sin(t) / t, **{str(t): 0})
    taylor(exp(t) * cos(t), t, 0, 4)
    (sin(t) ** 2 + cos(t) ** 2).simplify_full()


def _calculus():
    from sage.all import SR, integrate, oo, exp, log, sqrt, function, desolve, diff, solve
    from sage.all import sum as symbolic_sum
    t = SR.var(PREFIX + "_t")
    k = SR.var(PREFIX + "_k")
    integrate(1 / (t ** 3 + 1), t)
    integrate(exp(-t ** 2), t, -oo, oo)
    integrate(t * log(t), t, 1, 2)
    symbolic_sum(1 / k ** 2, k, 1, oo)
    ((t ** 2 - 1) / (t - 1)).simplify_rational()
    (sqrt(t ** 2)).simplify()
    solve(t ** 2 - 2 == 0, t)
    f = function(PREFIX + "_f")(t)
    desolve(diff(f, t, 2) + f == 0, f)
    desolve(diff(f, t) + f == 1, f)
    (1 / ((t - 1) * (t + 2))).partial_fraction()


def _gap():
    from sage.all import libgap
    libgap.eval("Size(AlternatingGroup(5))")
    # The permutation groups' Python side, and GAP's that they call.
    from sage.all import SymmetricGroup  # noqa: F401
    import sage.groups.perm_gps.permgroup  # noqa: F401


def _matplotlib():
    import io
    from sage.all import SR, plot, sin, point
    t = SR.var(PREFIX + "_t")
    graphics = plot(sin(t), (t, 0, 6)) + point((0, 0))
    figure = graphics.matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(figure).print_png(io.BytesIO())


def _singular():
    from sage.all import PolynomialRing, QQ
    ring = PolynomialRing(QQ, [PREFIX + "_a", PREFIX + "_b"])
    a, b = ring.gens()
    ring.ideal([a ** 2 + b, b ** 2 + a]).groebner_basis()


def _numerics():
    from sage.all import SR, numerical_integral, find_root, sin, cos
    t = SR.var(PREFIX + "_t")
    numerical_integral(sin(t), 0, 1)
    find_root(cos(t) - t, 0, 1)
    import scipy.integrate  # noqa: F401
    import scipy.optimize  # noqa: F401


# Each step. GAP's first: it takes for its workspace all the data rlimit
# leaves it (Sage's libgap asks for 4 GiB and settles for what it gets),
# and here it gets what it would get in a cold call's process, forked from
# this one as Sage's import left it (Warmer.step).
# Each is about as long as a cold run's start at most (a call that waits,
# waits for one: calls.py); Maxima's start and its calculus are two.
STEPS = (("gap", _gap), ("maxima", _maxima), ("calculus", _calculus),
         ("matplotlib", _matplotlib), ("singular", _singular), ("numerics", _numerics))


class Traces:
    """What one step changes that a call could see, recorded before it and
    put back after it, so that a call forked between two steps sees none
    of it either."""

    def __init__(self, name):
        import warnings
        self.name = name
        self.filters = list(warnings.filters)
        self.saved = None
        try:
            from sage.all import pari
            self.pari = pari.getrand()
        except BaseException:
            self.pari = None
        # The library is started first: its start is what a fresh Sage's
        # first use does too, counters and all.
        if name in ("maxima", "calculus"):
            from sage.interfaces.maxima_lib import maxima_lib
            self.saved = (maxima_lib.eval("%rnum"), maxima_lib.eval("?\\*gensym\\-counter\\*"),
                          maxima_lib.eval("facts()"))
        elif name == "gap":
            from sage.all import libgap
            libgap.eval("1")
            self.saved = (libgap.eval("State(GlobalMersenneTwister)"),
                          libgap.eval("State(GlobalRandomSource)"))
        elif name == "matplotlib":
            import matplotlib
            self.saved = dict(matplotlib.rcParams)

    def put_back(self):
        """Everything recorded, as it was, each item whatever became of the
        others; raises at the end if any could not be put back (the
        template is then not to be forked: calls.py)."""
        failures = []

        def attempt(what, restore):
            try:
                restore()
            except BaseException as e:
                failures.append("%s: %s: %s" % (what, type(e).__name__, str(e)[:100]))

        if self.name in ("maxima", "calculus"):
            from sage.interfaces.maxima_lib import maxima_lib
            rnum, gensyms, facts = self.saved
            attempt("Maxima's counters", lambda: (
                maxima_lib.eval("%%rnum: %s$ %%rnum_list: []$" % rnum),
                maxima_lib.lisp("(setq *gensym-counter* %s)" % gensyms)))
            if maxima_lib.eval("facts()") != facts:
                failures.append("Maxima's facts changed")
        elif self.name == "gap":
            from sage.all import libgap
            attempt("GAP's random state", lambda: (
                libgap.Reset(libgap.GlobalMersenneTwister, self.saved[0]),
                libgap.Reset(libgap.GlobalRandomSource, self.saved[1])))
        elif self.name == "matplotlib":
            import matplotlib
            attempt("matplotlib's rcParams", lambda: dict.update(matplotlib.rcParams, self.saved))
        if self.pari is not None:
            from sage.all import pari
            attempt("PARI's random state", lambda: pari.setrand(self.pari))
        import warnings
        warnings.filters[:] = self.filters
        # Every module's "printed once" record is dropped with them.
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
        self.tmp = None     # /tmp before the warm-up (tmpreset.record())
        # A call was served at once, its steps not waited for (calls.py).
        self.served_while_warming = False
        self.spent_ms = {}

    def step(self):
        """The next step: GAP's under the memory limit, as a cold call's
        process would start GAP (its workspace is then what a cold call's
        is), the rest in the room granted above it."""
        import resource
        name, run = STEPS[self.next]
        self.next += 1
        soft = self.memory if name == "gap" else self.room
        resource.setrlimit(resource.RLIMIT_DATA, (soft, self.room))
        began = time.monotonic()
        try:
            self.failed = run_step(name, run)
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


def run_step(name, step):
    """One step, and its traces put back. Returns why the step itself
    failed, or None (its traces are put back either way: the template
    serves on, the warm-up ends). Raises Unsafe where the library could
    not be started cleanly or its traces put back, or the step left a
    thread. ECL's collector is told to mark in this thread alone
    (GC_MARKERS, read once, as ECL starts)."""
    alone = threads()
    previous = os.environ.get("GC_MARKERS")
    os.environ["GC_MARKERS"] = "1"
    failed = None
    try:
        try:
            traces = Traces(name)
        except BaseException as e:
            raise Unsafe("the warm-up's %s step could not start it: %s: %s" % (
                name, type(e).__name__, str(e)[:200]))
        try:
            step()
        except BaseException as e:
            failed = "the warm-up's %s step failed: %s: %s" % (name, type(e).__name__, str(e)[:200])
        try:
            traces.put_back()
        except BaseException as e:
            raise Unsafe("the warm-up's %s step could not put back %s" % (name, e))
    finally:
        if previous is None:
            del os.environ["GC_MARKERS"]
        else:
            os.environ["GC_MARKERS"] = previous
    if threads() > alone:
        raise Unsafe("the warm-up's %s step left %d threads in the template" % (name, threads()))
    return failed
