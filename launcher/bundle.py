#!/usr/bin/env python3
# launcher/bundle.py: joins the launcher's modules into one program, which
# sage-sandbox compiles in and gives podman as `python -c PROGRAM MODE`:
# nothing of it is on a host mount or in the image. The program serves the
# modules' sources to `import launcher.X` from memory, then runs
# launcher.main.main(sys.argv[1:]) with the room a recursion has at its top
# level (launcher.child.measure_room).
#
#   launcher/bundle.py launcher/*.py > launcher.bundle.py
import base64
import json
import os
import sys
import zlib

# podman is given the program as one argument, which the kernel holds to
# 128 KiB (MAX_ARG_STRLEN: execve fails with E2BIG past it); the modules'
# sources passed that, so they travel compressed (a third of the size).
MAX_ARGUMENT_BYTES = 128 * 1024 - 1

PROLOGUE = '''\
# The sage-sandbox launcher, joined from launcher/*.py by launcher/bundle.py.
import binascii
import importlib.machinery
import json
import sys
import zlib

# Each module's source by its name, compressed (bundle.py).
SOURCES = json.loads(zlib.decompress(binascii.a2b_base64(%r)))


class Finder:
    """A meta path finder and loader of SOURCES, as import asks of one."""

    def find_spec(self, name, path=None, target=None):
        if name in SOURCES:
            return importlib.machinery.ModuleSpec(name, self, is_package=name == "launcher")
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
# room() called from the top level: what a file run by python3 has there
# (launcher.child.measure_room).
launcher.main.main(sys.argv[1:], launcher.child.room())
'''


def code_only(source):
    """The source with each line that is only a comment left blank, and
    each docstring made empty (the launcher reads none: its lines left
    blank): what is left to compress and compile is code, at its own line
    numbers."""
    import io
    import tokenize
    lines = io.StringIO(source).readlines()  # the rows tokenize counts
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    # The tokens that count, for a string's neighbours.
    code = [t.type for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    at = -1  # token's index in code
    for token in tokens:
        (row, column), (end_row, end_column) = token.start, token.end
        if token.type == tokenize.COMMENT and not lines[row - 1][:column].strip():
            lines[row - 1] = "\n"
        if token.type in (tokenize.NL, tokenize.COMMENT):
            continue
        at += 1
        # A string that is a statement of its own: a docstring, or no-op
        # (not an f-string, whose parts may do something: a STRING in 3.11).
        if token.type == tokenize.STRING and \
                "f" not in token.string[:token.string.find(token.string[-1])].lower() and \
                code[at + 1] == tokenize.NEWLINE and (
                at == 0 or code[at - 1] in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)):
            lines[row - 1] = lines[row - 1][:column] + '""' + lines[end_row - 1][end_column:]
            lines[row:end_row] = ["\n"] * (end_row - row)
    return "".join(lines)


def main(paths):
    sources = {}
    for path in sorted(paths):
        name = os.path.basename(path)[:-3]
        if name == "bundle" or name.startswith("test"):
            continue
        with open(path) as f:
            sources["launcher" if name == "__init__" else "launcher." + name] = \
                code_only(f.read())
    # Base64, whose decoder is C: base85's is Python, 5-8 ms of every
    # container's start (importlib.abc, which the finder no longer
    # derives from, cost another 12 ms: it imports importlib.resources).
    packed = base64.b64encode(zlib.compress(json.dumps(sources).encode(), 9)).decode("ascii")
    program = PROLOGUE % packed
    size = len(program.encode())
    if size > MAX_ARGUMENT_BYTES:
        sys.exit("bundle.py: the launcher is %d bytes, past the %d of one argument" % (
            size, MAX_ARGUMENT_BYTES))
    sys.stdout.write(program)


if __name__ == "__main__":
    main(sys.argv[1:])
