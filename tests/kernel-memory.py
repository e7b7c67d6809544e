# kernel-memory.py: code that makes the kernel allocate memory on its behalf,
# one route at a time, as a model's code could: the attacks of the kernel
# memory tests (120-kernel-memory.bats) and of the figures in docs/design.md.
# Run inside the sandbox as plain Python (kernel_attack in that file wraps
# it so that Sage's preparser leaves it alone), with ROUTE, PROCS and
# HOLD set before it. Each of PROCS processes makes objects until the kernel
# refuses one, prints what it made and why it stopped, then holds them for
# HOLD seconds.
import ctypes, errno, fcntl, os, select, signal, socket, struct, sys, threading, time

libc = ctypes.CDLL(None, use_errno=True)
NAME = "n" * 200


def report(made, why):
    print("%s %d: %d made, then %s" % (ROUTE, os.getpid(), made, why), flush=True)


def fill(sock):
    """Writes into a non-blocking socket until its buffer is full."""
    sock.setblocking(False)
    chunk = b"x" * 65536
    while True:
        try:
            sock.send(chunk)
        except BlockingIOError:
            return
        except OSError:
            return


def big_buffers(sock):
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, 1 << 30)
        except OSError:
            pass


def unix_pairs(kind):
    held = []
    while True:
        try:
            a, b = socket.socketpair(socket.AF_UNIX, kind)
        except OSError as e:
            return held, e
        for s in (a, b):
            big_buffers(s)
        fill(a)
        fill(b)
        held += [a, b]


def in_flight():
    # Sockets with full buffers, sent over a carrier and closed: held by the
    # carrier's queue, in no process's descriptor table. A carrier takes
    # messages until its own buffer is full, then the next one carries.
    held, made = [], 0
    carrier = None
    while True:
        try:
            if carrier is None:
                carrier, keep = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                carrier.setblocking(False)
                held += [carrier, keep]
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            big_buffers(a)
            fill(a)
        except OSError as e:
            return held, e, made
        try:
            socket.send_fds(carrier, [b"."], [a.fileno(), b.fileno()])
            made += 2
        except BlockingIOError:
            carrier = None
        except OSError as e:
            return held, e, made
        finally:
            a.close()
            b.close()


def tcp_pairs():
    held = []
    try:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(1024)
    except OSError as e:
        return held, e
    while True:
        try:
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            big_buffers(c)
            c.connect(server.getsockname())
            s, _ = server.accept()
        except OSError as e:
            return held, e
        fill(c)
        fill(s)
        held += [c, s]


def udp_sockets():
    held = []
    chunk = b"x" * 60000
    while True:
        try:
            r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            big_buffers(r)
            r.bind(("127.0.0.1", 0))
        except OSError as e:
            return held, e
        w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        w.setblocking(False)
        for _ in range(4096):
            try:
                w.sendto(chunk, r.getsockname())
            except OSError:
                break
        held += [r, w]


def pipes():
    held = []
    while True:
        try:
            r, w = os.pipe()
        except OSError as e:
            return held, e
        try:
            fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
        os.set_blocking(w, False)
        try:
            while True:
                os.write(w, b"x" * 65536)
        except OSError:
            pass
        held += [r, w]


def epoll_watches():
    # Half the descriptors are epoll instances, each watching every one of
    # the other half: descriptors squared watches.
    targets, polls = [], []
    try:
        for _ in range(400):
            targets.append(os.eventfd(0))
        made = 0
        while True:
            p = select.epoll()
            polls.append(p)
            for t in targets:
                p.register(t, select.EPOLLIN)
                made += 1
    except OSError as e:
        return targets + polls, e, made


def inotify_watches():
    held = []
    made = 0
    try:
        for i in range(100000):
            fd = libc.inotify_init1(0)
            if fd < 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            held.append(fd)
            for path in (b"/", b"/tmp", b"/usr", b"/etc", b"/proc"):
                if libc.inotify_add_watch(fd, path, 0xfff) < 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                made += 1
    except OSError as e:
        return held, e, made


def small_descriptors():
    # eventfd, timerfd, epoll and signalfd objects, a few hundred bytes each.
    held = []
    mask = (ctypes.c_uint64 * 16)(1 << (signal.SIGUSR1 - 1))
    makers = (lambda: os.eventfd(0), lambda: libc.timerfd_create(1, 0),
              lambda: libc.epoll_create1(0), lambda: libc.signalfd(-1, mask, 0))
    try:
        while True:
            for make in makers:
                fd = make()
                if fd < 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                held.append(fd)
    except OSError as e:
        return held, e


def posix_timers():
    made = 0
    timer = ctypes.c_void_p()
    while True:
        if libc.timer_create(1, None, ctypes.byref(timer)) != 0:
            return [], OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno())), made
        made += 1


def queued_signals():
    # sigqueue, not kill: a real-time signal that kill cannot queue is only
    # marked pending, with no memory behind it.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    made = 0
    while made < 10 ** 7:
        if libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), ctypes.c_void_p(0)) != 0:
            return [], OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno())), made
        made += 1
    return [], "ten million queued", made


def inodes():
    # Empty files, directories and symlinks, 200-byte names: inodes and
    # dentries, no data blocks.
    base = "/tmp/i%d" % os.getpid()
    os.mkdir(base)
    made = 0
    try:
        while True:
            d = "%s/%s%d" % (base, NAME, made)
            os.mkdir(d)
            for i in range(100):
                p = "%s/%s%d" % (d, NAME[:190], i)
                if i % 3 == 0:
                    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
                elif i % 3 == 1:
                    os.mkdir(p)
                else:
                    os.symlink(NAME, p)
                made += 1
    except OSError as e:
        return [], e, made


def xattrs():
    base = "/tmp/x%d" % os.getpid()
    os.mkdir(base)
    made = 0
    value = b"v" * 65536
    try:
        while True:
            p = "%s/%d" % (base, made)
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
            for i in range(16):
                os.setxattr(p, "user.%d" % i, value)
            made += 1
    except OSError as e:
        return [], e, made


def threads():
    made = 0
    stop = threading.Event()
    try:
        while True:
            threading.Thread(target=stop.wait, daemon=True).start()
            made += 1
    except (RuntimeError, OSError) as e:
        return [stop], e, made


def locks(command=fcntl.F_SETLK):
    # Byte-range locks on every other byte, from the end down, so that each
    # goes first in its file's list and costs no walk: one kernel record
    # each, as fast as fcntl returns.
    made = 0
    held = []
    try:
        while True:
            fd = os.open("/tmp/l%d-%d" % (os.getpid(), len(held)), os.O_CREAT | os.O_RDWR, 0o600)
            held.append(fd)
            for i in range(20000, 0, -2):
                fcntl.fcntl(fd, command, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, i, 1, 0))
                made += 1
    except OSError as e:
        return held, e, made


def mappings():
    # One reservation split into as many mappings as the kernel allows (its
    # vm.max_map_count, 65530 a process): every other page made readable.
    # Each mapping is kernel memory (about 300 bytes), in no PSS, and the
    # process holds no descriptor for it.
    page, count = 4096, 65536
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    MAP_PRIVATE_ANONYMOUS_NORESERVE, PROT_READ = 0x22 | 0x4000, 1
    base = libc.mmap(None, page * 2 * count, 0, MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        return [], OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    for made in range(count):
        if libc.mprotect(base + page * 2 * made, page, PROT_READ) != 0:
            return [None] * made, OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return [None] * count, "all of them"


def mappings_then_fill():
    # The watchdog outrun: every process makes mappings (so that each
    # measure of it is slow), then the first eight fill 450 MiB each as
    # fast as they can, between two looks.
    held, why = mappings()
    if INDEX < 8:
        try:
            block = bytearray(450 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            held.append(block)
            why = "and filled 450 MiB"
        except MemoryError:
            why = "and could not fill 450 MiB"
    return held, why


def idle():
    return [], "nothing to make", 0


ROUTES = {
    "idle": idle,
    "unix-stream": lambda: unix_pairs(socket.SOCK_STREAM),
    "unix-dgram": lambda: unix_pairs(socket.SOCK_DGRAM),
    "in-flight": in_flight, "tcp": tcp_pairs, "udp": udp_sockets, "pipes": pipes,
    "epoll": epoll_watches, "inotify": inotify_watches, "descriptors": small_descriptors,
    "timers": posix_timers, "signals": queued_signals, "inodes": inodes, "xattrs": xattrs,
    "threads": threads, "locks": locks, "ofd-locks": lambda: locks(37),
    "mappings": mappings, "mappings-then-fill": mappings_then_fill,
}


def attack():
    result = ROUTES[ROUTE]()
    held, why = result[0], result[1]
    made = result[2] if len(result) > 2 else len(held)
    report(made, why)
    time.sleep(HOLD)


# Every process starts at once, when all are forked: the watchdog sees the
# run's objects appear together, as fast as the kernel makes them.
start_r, start_w = os.pipe()
children = []
INDEX = 0
for k in range(PROCS):
    INDEX = k
    try:
        pid = os.fork()
    except OSError as e:
        print("fork %d: %s" % (k, e), flush=True)
        break
    if pid == 0:
        try:
            os.close(start_w)
            os.read(start_r, 1)
            os.close(start_r)
            attack()
        except BaseException as e:
            print("%s %d: failed: %r" % (ROUTE, os.getpid(), e), flush=True)
        finally:
            os._exit(0)
    children.append(pid)
os.close(start_w)
os.close(start_r)
for pid in children:
    os.waitpid(pid, 0)
