#!/usr/bin/env python3
# unit-checks.py: the verdicts of checks.py that depend on the host kernel,
# forced both ways (a kernel with the i386 ABI and one without), as TAP.
# checks.py runs its checks as it is read, so only the pure functions are
# taken from it, by name, and run here as they are written there.
import ast
import os
import signal
import sys

source_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "checks.py")
tree = ast.parse(open(source_path).read())
wanted = {"abi_verdict"}
module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted],
                    type_ignores=[])
space = {"signal": signal}
exec(compile(module, source_path, "exec"), space)
abi_verdict = space["abi_verdict"]

cases = [
    # (what, arguments, usable, words)
    ("a kernel with i386, our profile: SIGSYS is a refusal",
     ("i386", False, "killed by signal 31"), False, "i386: refused by seccomp (SIGSYS)"),
    ("a kernel without i386: SIGSEGV says so in words",
     ("i386", False, "killed by signal 11"), False,
     "i386: absent from this kernel (SIGSEGV without any filter)"),
    ("a kernel with i386 and a weakened profile: ALLOWED",
     ("i386", True, "returned the pid"), True, "i386: ALLOWED (getpid worked)"),
    ("x32 failing with an errno is not usable",
     ("x32", False, "returned an error"), False, "x32: not available (the call returns an error)"),
    ("another signal is a refusal that names it",
     ("x32", False, "killed by signal 9"), False, "x32: refused (killed by signal 9)"),
]
failures = 0
for number, (what, args, usable, words) in enumerate(cases, 1):
    got = abi_verdict(*args)
    ok = got == (usable, words)
    failures += not ok
    print("%s %d - abi_verdict: %s" % ("ok" if ok else "not ok", number, what))
    if not ok:
        print("#   want %r\n#   got  %r" % ((usable, words), got))
print("1..%d" % len(cases))
sys.exit(1 if failures else 0)
