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
clone3 answers ENOSYS instead, so that glibc falls back to clone, whose flags
(unlike clone3's, which sit in memory) seccomp can inspect: clone is allowed
only when (flags & 0x7E020000) == 0, that is without CLONE_NEWNS,
CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID or
CLONE_NEWNET.

socket is allowed for AF_UNIX (pipes between Sage's helpers, multiprocessing),
AF_INET and AF_INET6 (loopback is all --network=none leaves) and nothing
else: every other family answers EAFNOSUPPORT. AF_VSOCK ignores network
namespaces (on a VM it reaches the hypervisor and shares the host's port
space), AF_ALG, AF_NETLINK, AF_PACKET, AF_KEY and the rest are kernel code
Sage never needs and exploits often reach. glibc's getaddrinfo falls back
without netlink.

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

EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
CLONE_NEW_FLAGS = 0x7E020000
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
SOCKET_FAMILIES_ALLOWED = (AF_UNIX, AF_INET, AF_INET6)
AF_MAX = 46  # Linux 6.x; families past it do not exist and get the default

REFUSED = sorted({
    "unshare", "setns", "clone", "clone3",
    "mount", "umount", "umount2", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "chroot",
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "bpf", "perf_event_open", "userfaultfd",
    "syslog", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
    "quotactl", "acct",
    "shmget", "shmat", "shmctl", "shmdt", "memfd_create", "memfd_secret",
})


def socket_rules():
    rules = [{"names": ["socket"], "action": "SCMP_ACT_ALLOW",
              "args": [{"index": 0, "value": family, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}
             for family in SOCKET_FAMILIES_ALLOWED]
    # No "not one of" in the OCI format: one refusal per other family.
    rules += [{"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": EAFNOSUPPORT,
               "args": [{"index": 0, "value": family, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}
              for family in range(AF_MAX) if family not in SOCKET_FAMILIES_ALLOWED]
    return rules


def derive(profile):
    rules = []
    for rule in profile["syscalls"]:
        # podman's own socket rules (for AF_NETLINK audit) give way to ours.
        names = [n for n in rule["names"] if n not in REFUSED and n != "socket"]
        if rule["action"] != "SCMP_ACT_ALLOW" and "socket" not in rule["names"]:
            rules.append(rule)
        elif names:
            rules.append(dict(rule, names=names))
    rules += socket_rules()
    refused = [n for n in REFUSED if n not in ("clone", "clone3")]
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
