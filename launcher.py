# launcher.py: runs /tmp/code.sage inside the container, as `sage file.sage`
# would, with two differences that the sandbox needs.
#
# 1. PARI's stack fits the memory limit. Sage reserves a 1 GiB PARI stack at
#    start-up; under RLIMIT_DATA that reservation fails and PARI prints
#    "Warning: not enough memory, new PARI stack" into every run's stderr.
#    Sage's one call that creates it is redirected, while sage.all imports,
#    to ask for SAGE_SANDBOX_PARI_SIZEMAX bytes instead.
# 2. No interpreter teardown after success (0.3-0.4 s of Sage's atexit work):
#    the container, and everything in it, is deleted right after anyway.
#
# Errors behave as usual: an uncaught exception prints its traceback and
# exits 1, sys.exit(n) exits n.
import os
import sys

try:
    import cypari2

    _pari_class = cypari2.Pari
    _sizemax = int(os.environ["SAGE_SANDBOX_PARI_SIZEMAX"])
    cypari2.Pari = lambda *args, **kwargs: _pari_class(1 << 20, _sizemax)
except (ImportError, KeyError, ValueError):
    _pari_class = None

import sage.all_cmdline

if _pari_class is not None:
    cypari2.Pari = _pari_class

from sage.repl.preparse import preparse_file

with open("/tmp/code.sage", encoding="utf-8") as f:
    _source = preparse_file(f.read())
# Tracebacks quote the preparsed lines, so they are kept in a file of their
# own, as Sage does.
with open("/tmp/code.sage.py", "w", encoding="utf-8") as f:
    f.write(_source)

_namespace = {"__name__": "__main__", "__file__": "/tmp/code.sage", "__builtins__": __builtins__}
exec("from sage.all_cmdline import *", _namespace)
exec(compile(_source, "/tmp/code.sage.py", "exec"), _namespace)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
