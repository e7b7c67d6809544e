# checks.py: the properties self-test verifies from inside the sandbox.
#
# sage-sandbox runs this as Python (not preparsed) in the very sandbox that
# `run` uses, with EXPECTED defined before it: the limits it configured. Each
# check prints one line, CHECK<tab>PASS|FAIL|SKIP<tab>name<tab>detail, and
# a check that raises is a FAIL: nothing here can pass by not running.
import ctypes
import errno
import fcntl
import os
import resource
import signal
import socket
import struct
import sys

# Run by hand (python3 checks.py), as root on a host, each check would do
# what the sandbox refuses: the mount check put a tmpfs over the host's
# /tmp (a reviewer's slip). Only self-test defines EXPECTED.
if "EXPECTED" not in globals():
    sys.exit("checks.py: run by 'sage-sandbox self-test' inside the sandbox; run as a "
             "program it would try what the sandbox refuses on this machine")

libc = ctypes.CDLL(None, use_errno=True)


def report(outcome, name, detail):
    print("CHECK\t%s\t%s\t%s" % (outcome, name, " ".join(str(detail).split())), flush=True)


def check(name):
    def run(function):
        try:
            passed, detail = function()
            report("SKIP" if passed == "SKIP" else "PASS" if passed else "FAIL", name,
                   detail)
        except Exception as e:  # a broken check is a failed check
            report("FAIL", name, "%s: %s" % (type(e).__name__, e))
    return run


def status_fields():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


@check("user")
def _():
    ids = os.getresuid() + os.getresgid()
    return 0 not in ids, "uid %d gid %d" % (os.getuid(), os.getgid())


@check("capabilities")
def _():
    caps = {k: int(v, 16) for k, v in status_fields().items() if k.startswith("Cap")}
    held = sorted(k for k, v in caps.items() if v)
    return not held, "held: " + ", ".join(held) if held else "none in " + ", ".join(sorted(caps))


@check("no_new_privs")
def _():
    value = status_fields()["NoNewPrivs"]
    return value == "1", "NoNewPrivs " + value


@check("seccomp")
def _():
    value = status_fields()["Seccomp"]
    return value == "2", "mode %s (2 is filter)" % value


def refused(function, *args):
    """Calls a libc function; returns (refused, detail)."""
    ctypes.set_errno(0)
    result = function(*args)
    err = ctypes.get_errno()
    if result == -1:
        return True, "refused: " + errno.errorcode.get(err, str(err))
    return False, "ALLOWED (returned %d)" % result


CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000


def refused_in_child(function, *args):
    """refused() in a child process: a namespace the kernel grants would
    otherwise be the checker's own, and (a new user namespace leaving it
    unmapped) fail the checks after it for the wrong reason."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            was_refused, detail = refused(function, *args)
            os.write(w, ("%d %s" % (was_refused, detail)).encode())
        finally:
            os._exit(0)
    os.close(w)
    answer = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        answer += chunk
    os.close(r)
    os.waitpid(pid, 0)
    was_refused, _, detail = answer.decode().partition(" ")
    return was_refused == "1", detail or "the probe died"


def namespaces_refused(kinds):
    results = [(name, refused_in_child(libc.unshare, flag)) for name, flag in kinds]
    return all(r for _, (r, _) in results), "; ".join(
        "unshare(%s) %s" % (name, detail) for name, (_, detail) in results)


@check("user_namespaces")
def _():
    return namespaces_refused([("CLONE_NEWUSER", CLONE_NEWUSER)])


@check("other_namespaces")
def _():
    return namespaces_refused([("CLONE_NEWNS", CLONE_NEWNS), ("CLONE_NEWNET", CLONE_NEWNET)])


@check("mount")
def _():
    return refused(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)


@check("ptrace")
def _():
    # In a child: where a weakened profile grants it, the prober becomes
    # its parent's tracee, and stops at each signal it is sent after.
    PTRACE_TRACEME = 0
    return refused_in_child(libc.ptrace, PTRACE_TRACEME, 0, None, None)


@check("network")
def _():
    interfaces = sorted(os.listdir("/sys/class/net"))
    with open("/proc/net/route") as f:
        routes = f.read().splitlines()[1:]
    with open("/proc/net/ipv6_route") as f:
        routes += [r for r in f.read().splitlines() if not r.endswith(" lo")]
    # Connecting a UDP socket sends nothing: it only looks up a route. The
    # profile refuses AF_INET sockets altogether (see socket_families).
    reachable = False
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1, never routed
            reachable = True
    except OSError:
        pass
    ok = interfaces == ["lo"] and not routes and not reachable
    return ok, "interfaces %s, %d routes, route out %s" % (
        ",".join(interfaces), len(routes), "FOUND" if reachable else "none")


@check("socket_families")
def _():
    # AF_VSOCK passes --network=none (it ignores network namespaces and, on a
    # VM, reaches the hypervisor); AF_INET and AF_INET6 reach only loopback,
    # whose buffers and orphaned connections are kernel memory no limit on
    # a cgroup v1 host sees; the others are kernel code Sage never uses.
    seen, leaked = [], False
    for name, kind in (("AF_VSOCK", socket.SOCK_STREAM), ("AF_NETLINK", socket.SOCK_DGRAM),
                       ("AF_PACKET", socket.SOCK_DGRAM), ("AF_ALG", socket.SOCK_SEQPACKET),
                       ("AF_INET", socket.SOCK_STREAM), ("AF_INET6", socket.SOCK_DGRAM)):
        try:
            socket.socket(getattr(socket, name), kind).close()
            leaked = True
            seen.append(name + " ALLOWED")
        except OSError as e:
            seen.append("%s %s" % (name, errno.errorcode.get(e.errno, e.errno)))
    return not leaked, "; ".join(seen)


@check("shared_memory")
def _():
    # SysV segments, message queues and semaphores, and memfd files hold
    # memory that no rlimit counts; the SysV ones outlive the processes
    # that made them, in the container's IPC namespace.
    IPC_PRIVATE, IPC_CREAT = 0, 0o1000
    shm = refused(libc.shmget, IPC_PRIVATE, 1 << 20, IPC_CREAT | 0o600)
    msg = refused(libc.msgget, IPC_PRIVATE, IPC_CREAT | 0o600)
    sem = refused(libc.semget, IPC_PRIVATE, 1, IPC_CREAT | 0o600)
    memfd = refused(libc.memfd_create, b"probe", 0)
    return shm[0] and msg[0] and sem[0] and memfd[0], "shmget %s; msgget %s; semget %s; " \
        "memfd_create %s" % (shm[1], msg[1], sem[1], memfd[1])


@check("pty_cap")
def _():
    # Each pty is host kernel memory from a pool of 4096 shared by the host:
    # the run gets a devpts instance of its own with max= set, and pexpect
    # interfaces still need at least one.
    want, held = EXPECTED["pty_max"], []
    try:
        while len(held) <= want:
            held.append(os.openpty())
        outcome = "ALLOWED"
    except OSError as e:
        outcome = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        for pair in held:
            os.close(pair[0])
            os.close(pair[1])
    return 0 < len(held) <= want, "opened %d of at most %d, then %s" % (len(held), want, outcome)


def run_machine_code(code):
    """Runs code (x86-64 machine code returning a long) in a child: returns
    "returned N" or "killed by signal N"."""
    import mmap
    pid = os.fork()
    if pid == 0:
        buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        buf.write(bytes(code))
        function = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        os._exit(0 if function() == os.getpid() else 1)
    status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        return False, "killed by signal %d" % os.WTERMSIG(status)
    return os.WEXITSTATUS(status) == 0, "returned %s" % (
        "the pid" if os.WEXITSTATUS(status) == 0 else "an error")


def abi_verdict(name, worked, detail):
    """One ABI's row part: (usable, words). A kernel built without the ABI
    faults on it (int 0x80 is SIGSEGV there, in a container or not): the
    property holds with no filter at all, and the words say so."""
    if worked:
        return True, "%s: ALLOWED (getpid worked)" % name
    if detail == "killed by signal %d" % signal.SIGSYS:
        return False, "%s: refused by seccomp (SIGSYS)" % name
    if detail == "killed by signal %d" % signal.SIGSEGV:
        return False, "%s: absent from this kernel (SIGSEGV without any filter)" % name
    if detail == "returned an error":
        # ENOSYS from a kernel without it, or an errno from a profile.
        return False, "%s: not available (the call returns an error)" % name
    return False, "%s: refused (%s)" % (name, detail)


@check("syscall_abi")
def _():
    # The i386 (int 0x80) and x32 ABIs have their own system call numbers:
    # the 64-bit rules do not see them, so they must not be usable at all.
    # Kernels differ: where one lacks an ABI, that ABI cannot be used
    # whatever the profile says, and the row says which held.
    import platform
    if platform.machine() != "x86_64":
        return True, "not x86_64: only the native ABI is in the profile's archMap"
    details, bad = [], False
    for name, code in (("i386", [0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]),  # getpid, int 0x80
                       ("x32", [0xb8, 0x27, 0, 0, 0x40, 0x0f, 0x05, 0xc3])):  # getpid | x32 bit
        usable, words = abi_verdict(name, *run_machine_code(code))
        bad = bad or usable
        details.append(words)
    # The probe itself must work where it should, or it proves nothing.
    native, detail = run_machine_code([0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3])
    bad = bad or not native
    details.append("x86_64: getpid " + ("works" if native else "BROKEN: " + detail))
    return not bad, "; ".join(details)


def outcome(function):
    """Calls function; the name of the errno it raised, or "ALLOWED"."""
    try:
        function()
        return "ALLOWED"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def libc_call(name, *args):
    ctypes.set_errno(0)
    if getattr(libc, name)(*args) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@check("socket_buffers")
def _():
    # A socket's buffers stay at the kernel's default, which the memory
    # watchdog charges to each open descriptor: raised to the most the
    # kernel allows, one process's 1,020 sockets held 6.4 GiB of the host.
    a, b = socket.socketpair()
    with a, b:
        default = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        seen = ["%s %s" % (name, outcome(lambda: a.setsockopt(socket.SOL_SOCKET, number, 1 << 24)))
                for name, number in (("SO_SNDBUF", socket.SO_SNDBUF), ("SO_RCVBUF", socket.SO_RCVBUF),
                                     ("SO_SNDBUFFORCE", 32), ("SO_RCVBUFFORCE", 33))]
        after = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    return after == default and "ALLOWED" not in " ".join(seen), "%s; send buffer %d bytes" % (
        "; ".join(seen), after)


def open_file_lock(path):
    F_OFD_SETLK = 37
    fd = os.open(path, os.O_RDWR)
    try:  # struct flock: type, whence, start, length, pid (0)
        fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 1, 0))
    finally:
        os.close(fd)


@check("kernel_objects")
def _():
    # Kernel memory that neither a descriptor's charge nor the inode cap
    # covers: pipe slots pinning page-cache pages (splice, tee), inotify
    # watches pinning inodes, extended attributes kept by tmpfs, open file
    # description locks (a kernel record each, any number per file, and no
    # owner in /proc/locks, where the watchdog counts the others).
    SPLICE_F_NONBLOCK = 2
    path = "/tmp/.sage-sandbox-xattr-%d" % os.getpid()
    source, target = os.pipe(), os.pipe()
    os.write(source[1], b"xy")  # one byte for splice to move, one for tee
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    try:
        seen = ["%s %s" % (name, outcome(attempt)) for name, attempt in (
            ("splice", lambda: libc_call("splice", source[0], None, target[1], None, 1,
                                         SPLICE_F_NONBLOCK)),
            ("tee", lambda: libc_call("tee", source[0], target[1], 1, SPLICE_F_NONBLOCK)),
            ("inotify_init1", lambda: libc_call("inotify_init1", 0)),
            ("setxattr", lambda: os.setxattr(path, "user.probe", b"x")),
            ("F_OFD_SETLK", lambda: open_file_lock(path)))]
    finally:
        os.unlink(path)
        for fd in source + target:
            os.close(fd)
    return "ALLOWED" not in " ".join(seen), "; ".join(seen)


@check("parent_unreachable")
def _():
    # Pid 1, the launcher, forks every call's process in a container that
    # serves several: nothing of a call may reach it. It catches no signal
    # (the kernel drops a signal to its namespace's init that init does not
    # catch; glibc's two internal ones ignore any sender but itself), and
    # the profile lets prlimit, setpriority, sched_set* and ioprio_set act
    # on the caller only. The code's process leads a session of its own.
    with open("/proc/1/status") as f:
        caught = int(dict(l.split(":", 1) for l in f.read().splitlines())["SigCgt"], 16)
    glibc = (1 << 31) | (1 << 32)  # signals 32 and 33, glibc's own
    PRIO_PROCESS, PRIO_PGRP, IOPRIO_WHO_PROCESS = 0, 1, 1
    seen = ["%s %s" % (name, outcome(attempt)) for name, attempt in (
        ("prlimit(1)", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE)),
        ("setpriority(pid 1)", lambda: os.setpriority(PRIO_PROCESS, 1, 19)),
        ("setpriority(group)", lambda: os.setpriority(PRIO_PGRP, 0, 19)),
        ("sched_setaffinity(1)", lambda: os.sched_setaffinity(1, os.sched_getaffinity(0))),
        ("sched_setscheduler(1)", lambda: os.sched_setscheduler(1, os.SCHED_IDLE,
                                                                os.sched_param(0))),
    ) + ((("ioprio_set(1)", lambda: libc_call("syscall", 251, IOPRIO_WHO_PROCESS, 1, 0)),)
          if os.uname().machine == "x86_64" else ())]
    own = os.getsid(0) == os.getpid()
    return caught & ~glibc == 0 and own and " ALLOWED" not in " ".join(seen), \
        "pid 1 catches %s; %s; own session %s" % (
            "no signal" if caught & ~glibc == 0 else "signals %#x" % caught, "; ".join(seen),
            "yes" if own else "NO")


@check("host_tables")
def _():
    # Kernel tables shared by the whole host: asynchronous I/O contexts
    # (fs.aio-nr, 65536 for the machine), io_uring, the kernel keyrings.
    if os.uname().machine != "x86_64":
        return True, "not x86_64: the numbers probed are x86_64's"
    seen = ["%s %s" % (name, outcome(lambda: libc_call("syscall", number, *args)))
            for name, number, args in (("io_setup", 206, (128, ctypes.byref(ctypes.c_ulong(0)))),
                                       ("io_uring_setup", 425, (8, ctypes.create_string_buffer(120))),
                                       ("add_key", 248, (b"user", b"probe", b"x", 1, -3)))]
    return "ALLOWED" not in " ".join(seen), "; ".join(seen)


@check("host_masked")
def _():
    # What would tell the host, its boot or its other tenants apart: the
    # kernel's command line, the boot id, uptime, load, every device's
    # counters. Each reads empty.
    shown = []
    for path in EXPECTED["masked"]:
        try:
            if os.path.isdir(path):
                if os.listdir(path):
                    shown.append(path)
            else:
                with open(path, "rb") as f:
                    if f.read(1):
                        shown.append(path)
        except OSError:
            pass
    return not shown, "shown: " + ", ".join(shown) if shown else \
        "%d paths read empty" % len(EXPECTED["masked"])


@check("cpu_share")
def _():
    # --cpus bounds the run as a whole: its processes together, by the
    # cpu cgroup or the watchdog's throttle. Two busy processes for 2 s
    # may use --cpus x (2 s + the 0.5 s a run may bank) at most, and 10% more
    # for the clock ticks the kernel counts CPU time in.
    cpus, cores = EXPECTED["cpus"], len(os.sched_getaffinity(0))
    if cpus >= min(cores, 2):
        return True, "--cpus %g is not less than the %d cores two processes can use" % (
            cpus, min(cores, 2))
    import time
    start, children = time.monotonic(), []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            while time.monotonic() - start < 2:
                pass
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    used, wall = usage.ru_utime + usage.ru_stime, time.monotonic() - start
    most = cpus * (wall + 0.5) * 1.1
    return used <= most, "two busy processes used %.2f CPU-s in %.2f s, at most %.2f (%s)" % (
        used, wall, most, EXPECTED["cpus_by"])


def unreaped_workers(seconds):
    """CPU seconds used in all, and the wall time, by parents forked one
    after another that each take SA_NOCLDWAIT, fork busy workers of 20 ms
    and end within a few of the watchdog's looks: each worker is freed as
    it exits, its time added to no one's. Each reports its own time in
    shared memory."""
    import mmap
    import time

    class Sigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                    ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]
    def used():
        own = resource.getrusage(resource.RUSAGE_SELF)
        parents = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + parents.ru_utime + parents.ru_stime
    sa_nocldwait, slots = 2, 4096
    shared = mmap.mmap(-1, 8 * slots)
    before = used()
    start, worker = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        parent = os.fork()
        if parent == 0:
            try:  # a forked body never returns into the checks
                libc.sigaction(signal.SIGCHLD, ctypes.byref(Sigaction(flags=sa_nocldwait)), None)
                for _ in range(8):
                    worker += 1
                    if os.fork() == 0:
                        try:
                            end = time.process_time() + 0.02
                            while time.process_time() < end:
                                pass
                            at = 8 * (worker % slots)
                            shared[at:at + 8] = struct.pack("d", time.process_time())
                        finally:
                            os._exit(0)
                    time.sleep(0.003)
            finally:
                os._exit(0)
        worker += 8
        os.waitpid(parent, 0)
    time.sleep(0.5)  # the last workers report, thawed if the throttle held them
    wall = time.monotonic() - start
    workers = sum(struct.unpack_from("d", shared, 8 * i)[0] for i in range(slots))
    return workers + used() - before, wall


@check("cpu_unreaped")
def _():
    # The same bound for CPU time no /proc file shows: only a cpu cgroup or
    # the kernel's count that the watchdog opens (memwatch.c) sees it.
    cpus, cores = EXPECTED["cpus"], len(os.sched_getaffinity(0))
    if cpus >= min(cores, 2):
        return True, "--cpus %g is not less than the %d cores two processes can use" % (
            cpus, min(cores, 2))
    if "cgroup" not in EXPECTED["cpus_by"] and "counted by the kernel" not in EXPECTED["cpus_by"]:
        return "SKIP", "Not checked: the kernel refuses to count the run's CPU time (see " \
            "perf_event_paranoid); workers freed by a short-lived parent with SA_NOCLDWAIT " \
            "are sampled at best (%s)" % EXPECTED["cpus_by"]
    used, wall = unreaped_workers(2)
    most = cpus * (wall + 0.5) * 1.1
    return used <= most, "workers freed unreaped used, with their parents, %.2f CPU-s in %.2f s, " \
        "at most %.2f (%s)" % (used, wall, most, EXPECTED["cpus_by"])


@check("realtime")
def _():
    # A real-time process runs ahead of every fair-shared one and outside
    # a cpu group's quota (CFS bandwidth): refused (no CAP_SYS_NICE, an
    # RLIMIT_RTPRIO of 0, and a delegated cpu group has no real-time
    # runtime).
    taken = []
    for policy, name in ((os.SCHED_FIFO, "SCHED_FIFO"), (os.SCHED_RR, "SCHED_RR")):
        try:
            os.sched_setscheduler(0, policy, os.sched_param(1))
            taken.append(name)
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except PermissionError:
            pass
    return not taken, "taken: %s" % ", ".join(taken) if taken else \
        "SCHED_FIFO and SCHED_RR refused (EPERM)"


@check("tmp_inodes")
def _():
    st = os.statvfs("/tmp")
    return st.f_files == EXPECTED["tmp_inodes"], "%d inodes, expected %d" % (
        st.f_files, EXPECTED["tmp_inodes"])


def mount_points():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            yield fields[4].replace("\\040", " "), fields[5].split(",")


@check("root_read_only")
def _():
    options = dict(mount_points()).get("/", [])
    try:
        os.close(os.open("/sage-sandbox-probe", os.O_CREAT | os.O_WRONLY, 0o600))
        os.unlink("/sage-sandbox-probe")
        return False, "created a file in /"
    except OSError as e:
        return "ro" in options, "mounted %s, writing gives %s" % (
            "ro" if "ro" in options else "rw", errno.errorcode.get(e.errno, e.errno))


@check("writable")
def _():
    candidates = {p for p, _ in mount_points()} | {
        "/", "/etc", "/usr", "/usr/bin", "/var", "/var/tmp", "/run", "/dev", "/dev/shm",
        "/home", "/home/sage", "/root", os.path.expanduser("~")}
    writable = []
    for directory in sorted(candidates):
        if not os.path.isdir(directory) or directory.startswith(("/proc", "/sys")):
            continue
        probe = os.path.join(directory, ".sage-sandbox-probe-%d" % os.getpid())
        try:
            os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError:
            continue
        os.unlink(probe)
        writable.append(directory)
    outside = [d for d in writable if d not in ("/tmp", "/dev/shm") and not d.startswith("/tmp/")]
    return not outside, "writable: " + ", ".join(writable)


@check("tmp_size")
def _():
    st = os.statvfs("/tmp")
    size = st.f_blocks * st.f_frsize
    return size == EXPECTED["tmp_bytes"], "%d bytes, expected %d" % (size, EXPECTED["tmp_bytes"])


@check("shm_size")
def _():
    # A second writable place, as a fresh container's /dev/shm (POSIX
    # semaphores, multiprocessing's locks): capped in bytes and inodes
    # outside --memory, as /tmp is, and no place to run a program from.
    st = os.statvfs("/dev/shm")
    size = st.f_blocks * st.f_frsize
    noexec = bool(st.f_flag & os.ST_NOEXEC)
    return size == EXPECTED["shm_bytes"] and st.f_files == EXPECTED["shm_inodes"] and noexec, \
        "%d bytes, %d inodes, %s; expected %d, %d, noexec" % (
            size, st.f_files, "noexec" if noexec else "exec", EXPECTED["shm_bytes"],
            EXPECTED["shm_inodes"])


def warm_inherited():
    """What this process holds of a warm template's warm-up (data, address
    space), as the launcher counted it at the process's start
    (launcher/warm.py; (0, 0) in a cold one): its data and address-space
    rlimits are the configured ones plus that, the data one never above
    the container's hard limit."""
    warm = sys.modules.get("launcher.warm")
    return getattr(warm, "inherited", (0, 0))


for _name, _want in sorted(EXPECTED["rlimits"].items()):
    @check("rlimit_" + _name)
    def _(name=_name, want=_want):
        got = resource.getrlimit(getattr(resource, "RLIMIT_" + name.upper()))
        extra = dict(zip(("data", "as"), warm_inherited())).get(name, 0)
        if not extra:
            return got == (want, want), "%s, expected %s" % (got, (want, want))
        detail = "%s, expected %s: %d and the %d the warm template held at this process's " \
            "start" % (got, (want + extra, want + extra), want, extra)
        if name == "as":
            return got == (want + extra, want + extra), detail
        # Never above the container's hard limit: the memory limit and the
        # room granted the warm-up.
        room = EXPECTED["warm_up_room"]
        return got == (want + extra, want + extra) and extra <= room, \
            "%s, at most %d" % (detail, want + room)


def cgroup_value(v2_file, v1_file):
    for path in ("/sys/fs/cgroup/" + v2_file, "/sys/fs/cgroup/" + v1_file):
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
    return None


for _name, _v2, _v1 in (("memory", "memory.max", "memory/memory.limit_in_bytes"),
                        ("pids", "pids.max", "pids/pids.max")):
    _want = EXPECTED["cgroup"].get(_name)
    if _want is None:
        report("SKIP", "cgroup_" + _name, "Not checked: podman cannot apply a %s cgroup on this "
               "host; %s instead." % (_name, {
                   "memory": "the data and address-space rlimits and the memory watchdog hold it",
                   "pids": "the nproc rlimit and the run's own uid hold it"}[_name]))
        continue

    @check("cgroup_" + _name)
    def _(want=_want, v2=_v2, v1=_v1):
        got = cgroup_value(v2, v1)
        return got == str(want), "%s, expected %s" % (got, want)
