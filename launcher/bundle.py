#!/usr/bin/env python3
# launcher/bundle.py: joins the launcher's modules into one program, which
# sage-sandbox compiles in and gives podman as `python -c PROGRAM MODE`:
# nothing of it is on a host mount or in the image. The program serves the
# modules' sources to `import launcher.X` from memory, then runs
# launcher.main.main(sys.argv[1:]).
#
#   launcher/bundle.py launcher/*.py > launcher.bundle.py
import base64
import json
import os
import sys
import zlib

# podman is given the program as one argument, which the kernel holds to
# 128 KiB (MAX_ARG_STRLEN: execve fails with E2BIG past it); the modules'
# sources passed that, so they travel compressed (a quarter of the size).
MAX_ARGUMENT_BYTES = 128 * 1024 - 1

PROLOGUE = '''\
# The sage-sandbox launcher, joined from launcher/*.py by launcher/bundle.py.
import base64
import importlib.abc
import importlib.util
import json
import sys
import zlib

# Each module's source by its name, compressed (bundle.py).
SOURCES = json.loads(zlib.decompress(base64.b85decode(%r)))


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name in SOURCES:
            return importlib.util.spec_from_loader(name, self, is_package=name == "launcher")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__spec__.name
        module.__file__ = "launcher/" + ("__init__" if name == "launcher" else
                                         name.rpartition(".")[2]) + ".py"
        if name == "launcher":
            module.__path__ = []
        exec(compile(SOURCES[name], module.__file__, "exec"), module.__dict__)


sys.meta_path.insert(0, Finder())
import launcher.main  # noqa: E402
launcher.main.main(sys.argv[1:])
'''


def main(paths):
    sources = {}
    for path in sorted(paths):
        name = os.path.basename(path)[:-3]
        if name == "bundle" or name.startswith("test"):
            continue
        with open(path) as f:
            sources["launcher" if name == "__init__" else "launcher." + name] = f.read()
    packed = base64.b85encode(zlib.compress(json.dumps(sources).encode(), 9)).decode("ascii")
    program = PROLOGUE % packed
    size = len(program.encode())
    if size > MAX_ARGUMENT_BYTES:
        sys.exit("bundle.py: the launcher is %d bytes, past the %d of one argument" % (
            size, MAX_ARGUMENT_BYTES))
    sys.stdout.write(program)


if __name__ == "__main__":
    main(sys.argv[1:])
