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
  pivot_root, chroot, acct: host information or root-only operations.
clone3 answers ENOSYS instead, so that glibc falls back to clone, whose flags
(unlike clone3's, which sit in memory) seccomp can inspect: clone is allowed
only when (flags & 0x7E020000) == 0, that is without CLONE_NEWNS,
CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID or
CLONE_NEWNET.
"""
import json
import sys

EPERM, ENOSYS = 1, 38
CLONE_NEW_FLAGS = 0x7E020000

REFUSED = sorted({
    "unshare", "setns", "clone", "clone3",
    "mount", "umount", "umount2", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "chroot",
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "bpf", "perf_event_open", "userfaultfd",
    "syslog", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
    "quotactl", "acct",
})


def derive(profile):
    rules = []
    for rule in profile["syscalls"]:
        if rule["action"] != "SCMP_ACT_ALLOW":
            rules.append(rule)
            continue
        names = [n for n in rule["names"] if n not in REFUSED]
        if names:
            rules.append(dict(rule, names=names))
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
    return dict(profile, syscalls=rules)


if __name__ == "__main__":
    source = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/containers/seccomp.json"
    with open(source) as f:
        json.dump(derive(json.load(f)), sys.stdout, indent=1)
    sys.stdout.write("\n")
