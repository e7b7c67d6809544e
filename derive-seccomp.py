#!/usr/bin/env python3
"""derive-seccomp.py: derives sage-sandbox's seccomp profile from podman's.

Usage: ./derive-seccomp.py [/usr/share/containers/seccomp.json] > seccomp.json

Podman's default profile is written for general containers. Sage needs none
of the following, and each is a way past the sandbox or into the kernel's
least-trodden code, so they are refused with EPERM:
- unshare, setns, and clone or clone3 with a CLONE_NEW* flag: new user (and
  other) namespaces expose kernel interfaces otherwise reserved to root;
- mount and the new mount API: reshaping the file system view;
- keyctl, add_key, request_key: the kernel keyring, shared across containers;
- ptrace, process_vm_readv/writev, kcmp: inspecting or changing other
  processes;
- bpf, perf_event_open, userfaultfd: frequent kernel exploit primitives;
- syslog, name_to_handle_at, open_by_handle_at, lookup_dcookie, quotactl,
  pivot_root, chroot, acct: host information or root-only operations;
- shmget, shmat, shmctl, shmdt, memfd_create, memfd_secret: memory that no
  rlimit counts (a 2 GiB SysV segment, memfd files written but not mapped,
  under --memory 256m); Sage uses none of them, and libffi falls back to a
  file in /tmp for its trampolines.
- msgget, msgsnd, msgrcv, msgctl, semget, semop, semtimedop, semctl: SysV
  message queues and semaphore sets live in the container's IPC namespace,
  not in a process: they outlive every process of a call, so a container
  that serves several calls would hand one call's to the next, and their
  kernel memory is in no limit (32,000 queues of 16 KiB each here). POSIX
  message queues are already out of reach (RLIMIT_MSGQUEUE is 0).
Whatever a call's process can do to another process of the same uid (the
launcher, pid 1, which forks the next call's process, inherits nothing of
one call into the next only if no call can change it):
- prlimit64, setpriority, sched_setscheduler, sched_setparam,
  sched_setattr, sched_setaffinity and ioprio_set act on the caller only
  (pid or who 0, which is how glibc's setrlimit, nice and Python's
  os.sched_setaffinity(0, ...) call them) and answer EPERM for any other
  process: a call's prlimit on pid 1 lowered the next call's nofile and
  fsize limits, its setpriority made every later call nice 19, its
  sched_setscheduler made them SCHED_IDLE. setpriority takes PRIO_PROCESS
  only (a process group or a user reaches other processes).
- io_setup answers ENOSYS (libaio and Python fall back): its events count
  against the host-wide fs.aio-nr (65536 for the whole machine), so one run
  could take it from every other user. io_uring is already refused.

clone3 answers ENOSYS instead, so that glibc falls back to clone, whose flags
(unlike clone3's, which sit in memory) seccomp can inspect: clone is allowed
only when (flags & 0x7E020000) == 0, that is without CLONE_NEWNS,
CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID or
CLONE_NEWNET.

socket is allowed for AF_UNIX (pipes between Sage's helpers, multiprocessing)
and nothing else: every other family answers EAFNOSUPPORT. AF_VSOCK ignores
network namespaces (on a VM it reaches the hypervisor and shares the host's
port space), AF_ALG, AF_NETLINK, AF_PACKET, AF_KEY and the rest are kernel
code Sage never needs and exploits often reach. glibc's getaddrinfo falls
back without netlink. AF_INET and AF_INET6 reach only the run's own
loopback (--network=none), and their memory is the kernel's, outside every
limit a cgroup v1 host has: 1,020 loopback TCP sockets of one process took
2.2 GiB of the host (tcp_mem, shared with the host's own connections), UDP
2.1 GiB, and a closed TCP socket keeps its unsent buffer as an orphan that
no descriptor shows.

Kernel memory that a run could otherwise take without any limit seeing it
(on cgroup v1 nothing charges it to the run):
- setsockopt SO_SNDBUF, SO_RCVBUF and their FORCE forms answer EPERM: a
  socket keeps the default buffer (net.core.wmem_default, 208 KiB), which
  the memory watchdog charges to each open descriptor. Raised to
  wmem_max (4 MiB here, doubled by the kernel), one process's 1,020 AF_UNIX
  sockets held 6.4 GiB. The level and the option are compared in their low
  32 bits, as the kernel reads them, one rule per option number, so that no
  value with high bits set slips past a "not equal". (On MIPS SOL_SOCKET
  and the option numbers differ: setsockopt and fcntl stay as podman
  allows them there.)
- splice and tee answer ENOSYS (vmsplice is already refused): a pipe's
  slots would hold references to page-cache pages, pinned, in no process.
- inotify_init and inotify_init1 answer ENOSYS: each watch pins an inode,
  counted against the account's limit (all its runs together), not the
  run's.
- setxattr, lsetxattr and fsetxattr answer EOPNOTSUPP, as on a file system
  without extended attributes (Python's shutil.copystat expects that):
  tmpfs keeps user.* attributes in kernel memory (6.0 GiB of one process's,
  before).
- fcntl's open file description locks (F_OFD_SETLK, F_OFD_SETLKW) answer
  ENOLCK, the "no locks available" of a full lock table: each byte-range
  lock is a kernel record, any readable file may hold any number, and the
  memory watchdog charges them by their owner in /proc/locks, which OFD
  locks do not have. Classic F_SETLK locks stay (SQLite takes them, on
  Sage's own databases too). fcntl's other commands are allowed one by
  one (0 to 63, 1024 to 1087), as setsockopt's options are.

Each architecture keeps only its native system call ABI: podman's profile
also lets an x86_64 process enter the kernel through the i386 (int 0x80) and
x32 ABIs, whose system call numbers and argument layouts differ, so that
a rule written for x86_64 (the socket family rule above, or clone's flags)
does not see them: socketcall(SYS_SOCKET, AF_VSOCK) through int 0x80 would
pass. Sage is 64-bit only. A system call of any other ABI meets the
profile's default action.
"""
import json
import sys

# The podman profile seccomp.json was derived from: Debian 12's
# golang-github-containers-common (podman 4.3.1). tests/seccomp-regenerates.sh
# regenerates seccomp.json from it and compares.
SOURCE_SHA256 = "cc374cf23846ce1f62f4dc807a8e2b8673c783c6f56cb475467621035d281e6c"

EPERM, ENOSYS, EOPNOTSUPP, EAFNOSUPPORT = 1, 38, 95, 97
CLONE_NEW_FLAGS = 0x7E020000
AF_UNIX = 1
SOCKET_FAMILIES_ALLOWED = (AF_UNIX,)
SOL_SOCKET = 1
SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE = 7, 8, 32, 33
BUFFER_OPTIONS = (SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE)
SOCKET_OPTIONS = 128  # Linux 6.x uses fewer; higher ones get the default
LOW_32_BITS = 0xFFFFFFFF
ENOLCK = 37
F_OFD_SETLK, F_OFD_SETLKW = 37, 38
LOCK_COMMANDS = (F_OFD_SETLK, F_OFD_SETLKW)
# fcntl's commands: the classic ones, then F_LINUX_SPECIFIC_BASE (1024) on.
FCNTL_COMMANDS = list(range(64)) + list(range(1024, 1088))
MIPS = ["mips", "mipsel", "mips64", "mips64n32", "mipsel64", "mipsel64n32"]
AF_MAX = 46  # Linux 6.x; families past it do not exist and get the default

REFUSED = frozenset({
    "unshare", "setns", "clone", "clone3",
    "mount", "umount", "umount2", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "chroot",
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "bpf", "perf_event_open", "userfaultfd",
    "syslog", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
    "quotactl", "acct",
    "shmget", "shmat", "shmctl", "shmdt", "memfd_create", "memfd_secret",
    "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
})
# Refused with the errno a program that can do without them expects.
REFUSED_WITH = {
    "io_setup": ENOSYS,
    "splice": ENOSYS, "tee": ENOSYS, "inotify_init": ENOSYS, "inotify_init1": ENOSYS,
    "setxattr": EOPNOTSUPP, "lsetxattr": EOPNOTSUPP, "fsetxattr": EOPNOTSUPP,
}


def socket_rules():
    rules = [{"names": ["socket"], "action": "SCMP_ACT_ALLOW",
              "args": [{"index": 0, "value": family, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}
             for family in SOCKET_FAMILIES_ALLOWED]
    # No "not one of" in the OCI format: one refusal per other family.
    rules += [{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": EAFNOSUPPORT,
               "args": [{"index": 0, "value": family, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}
              for family in range(AF_MAX) if family not in SOCKET_FAMILIES_ALLOWED]
    return rules


PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1
# System calls that may act on another process, and which of their
# arguments must be what makes them act on the caller alone.
SELF_ONLY = {
    "prlimit64": ((0, 0),),
    "setpriority": ((0, PRIO_PROCESS), (1, 0)),
    "sched_setscheduler": ((0, 0),),
    "sched_setparam": ((0, 0),),
    "sched_setattr": ((0, 0),),
    "sched_setaffinity": ((0, 0),),
    "ioprio_set": ((0, IOPRIO_WHO_PROCESS), (1, 0)),
}


def self_only_rules():
    rules = []
    for name, wanted in sorted(SELF_ONLY.items()):
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW",
                      "args": [{"index": i, "value": v, "valueTwo": 0, "op": "SCMP_CMP_EQ"}
                               for i, v in wanted]})
        # Any one argument off makes it EPERM (a rule each: the format
        # has no "or").
        rules += [{"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM,
                   "args": [{"index": i, "value": v, "valueTwo": 0, "op": "SCMP_CMP_NE"}]}
                  for i, v in wanted]
    return rules


def low_bits_equal(index, value):
    return {"index": index, "value": LOW_32_BITS, "valueTwo": value, "op": "SCMP_CMP_MASKED_EQ"}


def setsockopt_rules():
    rules = []
    for option in range(SOCKET_OPTIONS):
        rule = {"names": ["setsockopt"], "action": "SCMP_ACT_ALLOW",
                "args": [low_bits_equal(1, SOL_SOCKET), low_bits_equal(2, option)],
                "excludes": {"arches": MIPS}}
        if option in BUFFER_OPTIONS:
            rule.update(action="SCMP_ACT_ERRNO", errnoRet=EPERM)
        rules.append(rule)
    rules.append({"names": ["setsockopt"], "action": "SCMP_ACT_ALLOW",
                  "includes": {"arches": MIPS}})
    return rules


def fcntl_rules():
    rules = []
    for command in FCNTL_COMMANDS:
        rule = {"names": ["fcntl"], "action": "SCMP_ACT_ALLOW",
                "args": [low_bits_equal(1, command)], "excludes": {"arches": MIPS}}
        if command in LOCK_COMMANDS:
            rule.update(action="SCMP_ACT_ERRNO", errnoRet=ENOLCK)
        rules.append(rule)
    rules.append({"names": ["fcntl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": MIPS}})
    return rules


def derive(profile):
    rules = []
    for rule in profile["syscalls"]:
        # podman's own socket rules (for AF_NETLINK audit) give way to ours.
        ours = REFUSED | set(REFUSED_WITH) | set(SELF_ONLY) | {"socket", "setsockopt", "fcntl"}
        names = [n for n in rule["names"] if n not in ours]
        if rule["action"] != "SCMP_ACT_ALLOW" and not ours & set(rule["names"]):
            rules.append(rule)
        elif names:
            rules.append(dict(rule, names=names))
    rules += self_only_rules()
    rules += socket_rules()
    rules += setsockopt_rules()
    rules += fcntl_rules()
    for errno_value in sorted(set(REFUSED_WITH.values())):
        rules.append({"names": sorted(n for n, e in REFUSED_WITH.items() if e == errno_value),
                      "action": "SCMP_ACT_ERRNO", "errnoRet": errno_value})
    refused = sorted(n for n in REFUSED if n not in ("clone", "clone3"))
    rules.append({"names": refused, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS})
    # The flags are clone's first argument, but its second on s390.
    for index, arches in ((0, {"excludes": {"arches": ["s390", "s390x"]}}),
                          (1, {"includes": {"arches": ["s390", "s390x"]}})):
        rules.append(dict({
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": index, "value": CLONE_NEW_FLAGS, "valueTwo": 0,
                      "op": "SCMP_CMP_MASKED_EQ"}],
        }, **arches))
        # No "masked not equal" in the OCI format: one refusal per flag,
        # else a refused clone would get the default ENOSYS.
        for bit in (1 << b for b in range(32) if CLONE_NEW_FLAGS >> b & 1):
            rules.append(dict({
                "names": ["clone"],
                "action": "SCMP_ACT_ERRNO",
                "errnoRet": EPERM,
                "args": [{"index": index, "value": bit, "valueTwo": bit,
                          "op": "SCMP_CMP_MASKED_EQ"}],
            }, **arches))
    arch_map = [{"architecture": a["architecture"], "subArchitectures": []}
                for a in profile.get("archMap", [])]
    return dict(profile, archMap=arch_map, syscalls=rules)


if __name__ == "__main__":
    source = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/containers/seccomp.json"
    with open(source) as f:
        json.dump(derive(json.load(f)), sys.stdout, indent=1)
    sys.stdout.write("\n")
