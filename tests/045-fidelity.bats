#!/usr/bin/env bats
# What a fresh `sage FILE` shows, shown the same: tracebacks that name and
# quote the user's own lines whatever the preparser put above them, and
# what Python does at a program's end (late threads, atexit handlers,
# finalisers).
# Each case runs cold (run, or a batch below --memory 1g, whose jobs are
# forked as a run's code is) and warm (batch, in one container).

load helpers

# jobs_of FILE...: a job line per code file, its id the file's name.
jobs_of() {
	python3 -c '
import json, os, sys
for path in sys.argv[1:]:
    print(json.dumps({"id": os.path.basename(path), "code": open(path, newline="").read()}))' "$@"
}

# field_of ID FIELD: that job's FIELD in $BATS_TEST_TMPDIR/out.jsonl.
field_of() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j["id"] == sys.argv[2]:
        print(j[sys.argv[3]], end="")' "$BATS_TEST_TMPDIR/out.jsonl" "$1" "$2"
}

@test "fidelity - a traceback's line and text are the user's, whatever the first line, cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# Before issue 33 the constants' line was dropped where the preparser
	# had put them on a first line that was blank or a comment: every line
	# number one too small.
	printf '# a comment\nx1 = 2\ny1 = 3\nprint(1/0)\n' >"$dir/comment.sage"
	printf '\nx1 = 2\ny1 = 3\nprint(1/0)\n' >"$dir/blank.sage"
	printf '#!/usr/bin/env sage\nx1 = 2\ny1 = 3\nprint(1/0)\n' >"$dir/shebang.sage"
	printf '# -*- coding: utf-8 -*-\nx1 = 2\ny1 = 3\nprint(1/0)\n' >"$dir/coding.sage"
	printf 'x1 = 2\ny1 = 3\nz = 1.5\nprint(1/0)\n' >"$dir/code.sage"
	printf 's = """\n7 8\n"""\nprint(1/0)\n' >"$dir/string.sage"
	# Blank lines at the end: the preparser's output drops one (reviewer).
	printf 'x1 = 2\ny1 = 3\nz = 1\nprint(1/0)\n\n\n' >"$dir/tail.sage"
	# Many literals: the preparser's other layouts.
	python3 -c 'print("\n".join(["# many"] + ["v%d = %d" % (i, 1000 + i) for i in range(600)] + ["print(1/0)"]))' \
		>"$dir/many.sage"
	# Lines the preparser joins (a backslash at a line's end) shift nothing.
	printf '# c\nx = 1 + \\\n 2 + \\\n 3\ny = 2\nprint(x)\nraise ValueError("on line 7")\n' >"$dir/joined.sage"
	printf 'x = 1 + \\\n 2\nprint(x); eval("1/0")\n' >"$dir/joined2.sage"
	# Within a joined statement, the part that failed is quoted from its
	# own line, as Python quotes it (it quoted the statement's first).
	printf 'R.<t> = QQ[]\nf = t^2 + \\\n  2*t + \\\n  t.foo()\n' >"$dir/joined3.sage"
	# A line that is a backslash alone joins the next onto it, before the
	# first statement too: Python's tokenizer gives it no token, and
	# such lines passed for lines of their own, every line after them
	# one too far up, the error quoting the backslash (reviewer).
	printf "\\\\\nprint('a')\nraise ValueError('on line 3')\n" >"$dir/lone.sage"
	printf '# c\n\\\n\\\nprint(2)\nraise ValueError(2^5)\n' >"$dir/lone2.sage"
	printf '\\\nelse:\n    pass\n' >"$dir/lone3.sage"
	# ... at the end, after a numeric constant (every line was one too far
	# down, quoting the backslash); before a statement a message names,
	# after Sage's syntax (reviewer).
	printf 'x = 1\nraise ValueError(2)\n\\\n' >"$dir/lone4.sage"
	printf 'R.<t> = QQ[]\n\\\ndef f():\nreturn 1\n' >"$dir/lone5.sage"
	# An error at the end under a coding line of another encoding: no
	# caret, as Python reads the file (it had a string's caret).
	printf '# -*- coding: latin-1 -*-\ny = 1\nif y:\n' >"$dir/coded.sage"
	# Text the preparser puts in ([1..5] is ellipsis_range(...)) is no
	# error of the code's; CRLF line ends are newlines, as `sage FILE`
	# reads its file (Sage 9.5's preparser took the backslash before a
	# CR for its backslash operator: a syntax error).
	printf 'y = [1..5] + \\\n  [6]\nprint(y)\n' >"$dir/joined4.sage"
	printf 'x = 5 + \\\r\n  1\r\nprint(x)\r\n{}[x]\r\n' >"$dir/joined5.sage"
	# Python 3.11's own printer suggests a name, its traceback module
	# not (a Sage element's message is rewritten as C lists its names:
	# attack helper); a triple-quoted string open at the end is detected
	# at the file's last line, past the blank one the preparser drops
	# (issue 33).
	printf 'x = 5\nx.is_prim\n' >"$dir/suggest.sage"
	printf "x = 2\ns = '''abc\n\n\n" >"$dir/triple.sage"
	# A backslash that ends the code continues onto the blank line a fresh
	# Sage's file ends with: it runs. Nothing after a decorator: the
	# file's last line, as python3 names it (it named the decorator's).
	printf 'x = 2^3\nprint(x) \\' >"$dir/backslash.sage"
	printf 'y = 2^3\n@d\n\n' >"$dir/decorator.sage"
	# ... with a newline after it, the preparser joins it onto nothing:
	# "invalid syntax" past the line's end, its caret there (it had none).
	printf 'y = 2\nif y:\n    x = 1 + \\\n' >"$dir/endjoin.sage"
	# An unindent at the end: no caret, as python3 reading the file.
	printf 'class A:\n    @d\n# c\n' >"$dir/unindent.sage"
	# Too deep for compile() to make a tree of: compiled from text, as
	# sage FILE compiles it, its error Python's (attack helper).
	python3 -c 'print("y = " + "+".join(["1"] * 19000))' >"$dir/flat.sage"
	# A stack the code prints ends at its own first frame; a warning one
	# level past it is Python's "sys:1" (they named the launcher's), and so
	# is one 8 levels past it (it named launcher/child.py:1966).
	printf 'import traceback, warnings\nx = 2^3\ndef f():\n    traceback.print_stack()\nf()\nwarnings.warn("w", stacklevel=2)\nwarnings.warn("v", stacklevel=9)\n' \
		>"$dir/stack.sage"
	# The code's umask is the container's, as a fresh Sage's there (it
	# was the launcher's own 077: files 0600).
	printf 'import os\nopen("f.txt", "w").close()\nos.mkdir("d")\nprint(oct(os.umask(0o22)), oct(os.stat("f.txt").st_mode & 0o777), oct(os.stat("d").st_mode & 0o777))\n' \
		>"$dir/umask.sage"
	# One of them as a run; then all as a batch's jobs, cold (below
	# --memory 1g no template is warmed: each job's process is forked from
	# a launcher that only imported Sage, as a run's is) and warm.
	input_file=$dir/comment.sage run_ss 1 run
	expect_match "$errors" "File \"<stdin>\", line 4, in <module>"$'\n'"    print\(1/0\)"
	jobs_of "$dir"/*.sage >"$dir/jobs.jsonl"
	local how f
	for how in "--memory 768m --jobs 2" "--jobs 1"; do
		# shellcheck disable=SC2086 # each of them is words
		"$SAGE_SANDBOX" batch $how "$dir/jobs.jsonl" >"$dir/out.jsonl"
		for f in comment blank shebang coding code string tail; do
			expect_match "$(field_of $f.sage stderr)" "line 4, in <module>"$'\n'"    print\(1/0\)" "$f, $how"
		done
		expect_match "$(field_of many.sage stderr)" "line 602, in <module>"$'\n'"    print\(1/0\)"
		expect_equal "$(field_of joined.sage stdout)" 6
		expect_match "$(field_of joined.sage stderr)" "line 7, in <module>"$'\n''    raise ValueError\("on line 7"\)'
		expect_match "$(field_of joined2.sage stderr)" "line 3, in <module>"
		expect_match "$(field_of joined3.sage stderr)" "line 4, in <module>"$'\n''    t.foo\(\)'$'\n'
		expect_match "$(field_of lone.sage stderr)" "line 3, in <module>"$'\n'"    raise ValueError\\('on line 3'\\)"
		expect_match "$(field_of lone2.sage stderr)" "line 5, in <module>"$'\n''    raise ValueError\(2\^5\)'
		expect_equal "$(field_of lone3.sage stderr)" "  File \"<stdin>\", line 2"$'\n    else:\n    ^^^^\nSyntaxError: invalid syntax'
		expect_match "$(field_of lone4.sage stderr)" "line 2, in <module>"$'\n''    raise ValueError\(2\)'
		expect_equal "$(field_of lone5.sage stderr)" "  File \"<stdin>\", line 4"$'\n    return 1\n    ^\nIndentationError: expected an indented block after function definition on line 3'
		expect_equal "$(field_of endjoin.sage stderr)" "  File \"<stdin>\", line 3"$'\n    x = 1 + \\\n             ^\nSyntaxError: invalid syntax'
		expect_equal "$(field_of coded.sage stderr)" "  File \"<stdin>\", line 3"$'\n    if y:\nIndentationError: expected an indented block after \'if\' statement on line 3'
		expect_equal "$(field_of joined4.sage stdout)" "[1, 2, 3, 4, 5, 6]"
		expect_equal "$(field_of joined4.sage exit_code)" 0
		expect_match "$(field_of joined5.sage stderr)" "line 4, in <module>"
		expect_equal "$(field_of joined5.sage exit_code)" 1
		expect_match "$(field_of suggest.sage stderr)" "has no attribute 'is_prim'. Did you mean: 'is_prime'\\?$"
		expect_match "$(field_of triple.sage stderr)" '\(detected at line 4\)$'
		expect_equal "$(field_of backslash.sage stdout)" 8
		expect_equal "$(field_of backslash.sage exit_code)" 0
		expect_equal "$(field_of decorator.sage stderr)" "  File \"<stdin>\", line 3"$'\n    \nSyntaxError: invalid syntax'
		expect_equal "$(field_of unindent.sage stderr)" "  File \"<stdin>\", line 3"$'\n    # c\nIndentationError: unexpected unindent'
		expect_equal "$(field_of flat.sage stderr)" "RecursionError: maximum recursion depth exceeded during compilation"
		expect_equal "$(field_of flat.sage exit_code)" 1
		expect_equal "$(field_of stack.sage stderr)" "  File \"<stdin>\", line 5, in <module>
    f()
  File \"<stdin>\", line 4, in f
    traceback.print_stack()
sys:1: UserWarning: w
sys:1: UserWarning: v"
		expect_equal "$(field_of umask.sage stdout)" "0o22 0o644 0o755"
	done
}

@test "fidelity - a syntax error quotes the user's line with Python's caret; a file's name and ARGs" {
	dir=$BATS_TEST_TMPDIR
	printf '# first\nx = 2\ny = 3 3\n' >"$dir/bad.sage"
	run_ss 1 run "$dir/bad.sage" one two
	expect_match "$errors" "File \"$dir/bad.sage\", line 3"
	expect_match "$errors" $'\n    y = 3 3\n          \\^'
	expect_no_match "$errors" "_sage_const_"
	printf '# first\nimport sys\nprint(sys.argv[1:])\nraise ValueError(2^10)\n' >"$dir/args.sage"
	run_ss 1 run "$dir/args.sage" one two
	expect_equal "$output" "['one', 'two']"
	expect_match "$errors" "File \"$dir/args.sage\", line 4, in <module>"$'\n'"    raise ValueError\(2\^10\)"
	# A bracket still open at the end of a backslash-continued statement:
	# the line that opened it, as python3 names it.
	printf 'print(1)\ny = (1 + \\\n  2 + \\\n  3\n' >"$dir/open.sage"
	run_ss 1 run "$dir/open.sage"
	expect_equal "$errors" "  File \"$dir/open.sage\", line 2"$'\n'"    y = (1 + \\"$'\n'"        ^"$'\n'"SyntaxError: '(' was never closed"
	# Sage's own syntax before the error (plain Python fails there first):
	# the caret is still Python's, in the user's line.
	printf 'R.<x> = QQ[]\nf = x^2 + \\\n  1\ny = x +* 2\n' >"$dir/gens.sage"
	run_ss 1 run "$dir/gens.sage"
	expect_equal "$errors" "  File \"$dir/gens.sage\", line 4"$'\n    y = x +* 2\n           ^\nSyntaxError: invalid syntax'
	# An f-string's error: Python 3.11 quotes the part it compiled, the
	# user's text, not the preparser's (issue 33).
	printf 'R.<t> = QQ[]\nx = f"{2^3 +}"\n' >"$dir/fstring.sage"
	run_ss 1 run "$dir/fstring.sage"
	expect_equal "$errors" "  File \"$dir/fstring.sage\", line 2"$'\n    (2^3 +)\n          ^\nSyntaxError: f-string: invalid syntax'
	# One Python 3.11 quotes the whole line for (a conversion, a brace):
	# the user's line, as python3 gives it for the same text, never the
	# preparser's (attack helper 145).
	printf 'x = 1\ny = f"{2^3 !x}"\n' >"$dir/fline.sage"
	run_ss 1 run "$dir/fline.sage"
	expect_equal "$errors" "  File \"$dir/fline.sage\", line 2"$'\n    y = f"{2^3 !x}"\n                   ^\nSyntaxError: f-string: invalid conversion character: expected \'s\', \'r\', or \'a\''
	# A block expected at the end of the file: its last line, and no
	# caret, as python3 reads a file (compile() of a string puts one).
	printf 'y = 2^3\nif y:\n\n\n' >"$dir/end.sage"
	run_ss 1 run "$dir/end.sage"
	expect_equal "$errors" "  File \"$dir/end.sage\", line 4"$'\n    \nIndentationError: expected an indented block after \'if\' statement on line 2'
}

@test "fidelity - a frame in Sage's Cython code quotes no line, as Python's own printer shows it; a message's line is the user's, its caret Python's; cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# Python's printer (in C) looks for "sage/rings/integer.pyx" only as
	# "integer.pyx" in each sys.path entry, and quotes nothing; the
	# traceback module, which the launcher prints with, found the .pyx and
	# quoted its raise (attack helper).
	printf '# c\nx = 1/0\n' >"$dir/cython.sage"
	# "after function definition on line 4": the user's 4, past a join.
	printf '# c\nx = 1 + \\\n  2\ndef f():\nreturn 1\n' >"$dir/online.sage"
	# Whole: no line under the .pyx frame (its number is the image's; 9.5's
	# Cython names its C file too).
	local cython='^Traceback \(most recent call last\):
  File "cython.sage", line 2, in <module>
    x = 1/0
  File "sage/rings/integer.pyx", line [0-9]+, in sage.rings.integer.Integer.__truediv__( \(build/cythonized/sage/rings/integer.c:[0-9]+\))?
ZeroDivisionError: rational division by zero$'
	cd "$dir"
	run_ss 1 run cython.sage
	expect_match "$errors" "$cython"
	run_ss 1 run online.sage
	# One caret, as Python's own printer marks an IndentationError (the
	# traceback module, ours, marked the line's first word).
	expect_equal "$errors" '  File "online.sage", line 5
    return 1
    ^
IndentationError: expected an indented block after function definition on line 4'
	# The bracket's own line, within a joined statement (reviewer).
	printf 'y = 1 + \\\n  [a,\n  b)\n' >"$dir/bracket.sage"
	run_ss 1 run bracket.sage
	expect_match "$errors" "File \"bracket.sage\", line 3"
	expect_match "$errors" "opening parenthesis '\\[' on line 2\$"
	jobs_of "$dir"/cython.sage "$dir"/online.sage "$dir"/bracket.sage >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl"
	expect_match "$(field_of cython.sage stderr)" "${cython//cython.sage/[^\"]*}"
	expect_match "$(field_of online.sage stderr)" $'\n    return 1\n    \\^\nIndentationError: .* on line 4$'
	expect_match "$(field_of bracket.sage stderr)" "opening parenthesis '\\[' on line 2\$"
}

@test "fidelity - a coding line reads the code as Python reads the .sage.py: another encoding, one unknown; cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# sage-preparse writes the coding line first in the .sage.py, in
	# UTF-8, and Python decodes the file by it: a fresh Sage prints "é"
	# under latin-1 as "Ã©" (attack helper), and stops at a name it does
	# not know, or one that cannot read the file, with no line.
	printf '# -*- coding: latin-1 -*-\nprint("caf\xc3\xa9", len("\xc3\xa9"))\n' >"$dir/latin.sage"
	printf 'x = 1\n# coding: cp1252\nprint("caf\xc3\xa9")\n' >"$dir/second.sage"
	printf '# coding: foo\nprint(1)\n' >"$dir/unknown.sage"
	printf '# coding: ascii\nprint("caf\xc3\xa9")\n' >"$dir/ascii.sage"
	cd "$dir"
	run_ss 0 run latin.sage
	expect_equal "$output" "caf$(printf '\xc3\x83\xc2\xa9') 2"
	run_ss 0 run second.sage
	expect_equal "$output" "caf$(printf '\xc3\x83\xc2\xa9')"
	run_ss 1 run unknown.sage
	expect_equal "$errors" "SyntaxError: encoding problem: foo"
	expect_equal "$output" ""
	run_ss 1 run ascii.sage
	expect_equal "$errors" "SyntaxError: encoding problem: ascii"
	jobs_of "$dir"/latin.sage "$dir"/unknown.sage >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl"
	expect_equal "$(field_of latin.sage stdout)" "caf$(printf '\xc3\x83\xc2\xa9') 2"
	expect_equal "$(field_of unknown.sage stderr)" "SyntaxError: encoding problem: foo"
}

@test "fidelity - a builtin atexit handler's error shows no frame, to the code's hook too; the code's descriptors are numbered as a fresh Sage numbers them" {
	# The launcher's own descriptors are above every number the code opens
	# short of its limit (1024): 600 files get 600 numbers in a row.
	sage 'import atexit, os, sys
atexit.register(sys.exit, 9)
fds = [os.open("/dev/null", os.O_RDONLY) for i in range(600)]
print(fds[-1] - fds[0] + 1, fds == sorted(fds))' 0 run
	expect_equal "$output" "600 True"
	expect_equal "$errors" $'Exception ignored in atexit callback: <built-in function exit>\nSystemExit: 9'
	# A hook of the code's own is given no traceback either (it was given
	# the launcher's frame).
	sage 'import atexit, sys
def hook(u):
    print(u.exc_type.__name__, u.exc_traceback, u.err_msg)
sys.unraisablehook = hook
atexit.register(sys.exit, 9)' 0 run
	expect_equal "$output" "SystemExit None Exception ignored in atexit callback"
}

@test "fidelity - the code's module is the main one python3 runs sage-preparse's file as: __builtins__, sys.orig_argv, a late __future__ import, Python's own filters at compile, inspect.stack(), the locale; cold and warm" {
	# Each differed (probe helper): __builtins__ was a dict, sys.orig_argv
	# the launcher's own program, a `from __future__` import after other
	# code was a SyntaxError where sage-preparse moves it to the top, and
	# the code was compiled under Sage's warnings filters, which show an
	# invalid escape's DeprecationWarning that python3 does not; sys.path[0]
	# was '' where python3 puts the script's directory. Python ran in its
	# UTF-8 mode, where sage's wrapper starts it in the C.UTF-8 locale.
	# Its __loader__ was None, where python3 gives its file's loader.
	dir=$BATS_TEST_TMPDIR
	cat >"$dir/main.sage" <<-'CODE'
	print(__builtins__.len([1, 2]), type(__builtins__).__name__)
	import sys
	print(sys.orig_argv[0], sys.orig_argv[1:] == sys.argv)
	s = "\d"
	print(s)
	from __future__ import annotations
	def f(a: Undefined): pass
	print(f.__annotations__)
	import inspect
	print(len(inspect.stack()), inspect.getouterframes.__name__)
	import os; print(sys.path[0] == os.getcwd() == "/tmp")
	import locale; print(sys.flags.utf8_mode, locale.getpreferredencoding(), os.environ["LC_CTYPE"])
	print(type(__loader__).__name__, __loader__.name, __loader__.path == __file__)
	print(1/0)
	CODE
	expected=$'2 module\npython3 True\n\\d\n{\'a\': \'Undefined\'}\n1 getouterframes\nTrue\n0 UTF-8 C.UTF-8\nSourceFileLoader __main__ True'
	input_file=/dev/null run_ss 1 run "$dir/main.sage" arg
	expect_equal "$output" "$expected"
	expect_match "$errors" 'line 14, in <module>'$'\n''    print\(1/0\)'$'\n'
	[[ $errors != *Warning* ]] || { printf '# %s\n' "$errors" >&2; false; }
	cp "$dir/main.sage" "$dir/main2.sage"
	jobs_of "$dir/main.sage" "$dir/main2.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl" || true
	local id
	for id in main.sage main2.sage; do
		expect_equal "$(field_of $id stdout)" "$expected" "$id"
		expect_match "$(field_of $id stderr)" '^Traceback[^W]*ZeroDivisionError: rational division by zero$' "$id"
	done
}

@test "fidelity - the code recurses as deep as python3's file, in the main thread, a thread and atexit; the limit reads and sets as there; cold and warm, after a hostile job" {
	# The launcher's frames below the code took 16 levels of the limit: a
	# recursion went 981 deep where a fresh Sage's goes 997, and an
	# endless one said "[Previous line repeated 980 more times]" for 996.
	# The reference is the image's own Python running the same lines as a
	# file's top level, from inside the call (a process of its own).
	dir=$BATS_TEST_TMPDIR
	cat >"$dir/probe.py" <<-'CODE'
	import atexit, sys, threading
	def depth(n):
	    try:
	        return depth(n + 1)
	    except RecursionError:
	        return n
	def low(n):
	    if n:
	        return low(n - 1)
	    try:
	        sys.setrecursionlimit(5)
	    except RecursionError as e:
	        return str(e)
	in_thread = []
	t = threading.Thread(target=lambda: in_thread.append(depth(0)))
	t.start()
	t.join()
	print(depth(0), sys.getrecursionlimit(), in_thread, low(10))
	sys.setrecursionlimit(300)
	print(depth(0), sys.getrecursionlimit())
	sys.setrecursionlimit(1000)
	atexit.register(lambda: print("atexit", depth(0)))
	CODE
	python3 -c '
import sys
probe = open(sys.argv[1]).read()
print(probe + "import subprocess\n"
      "ref = subprocess.run([sys.executable, \"-c\", %r + \"def f(n):\\n    return f(n + 1)\\nf(0)\\n\"],"
      " capture_output=True, text=True)\n"
      "print(ref.stdout + ref.stderr.splitlines()[-2])\n"
      "def f(n):\n    return f(n + 1)\nf(0)" % probe)' "$dir/probe.py" >"$dir/deep.sage"
	check() { # STDOUT STDERR: the call's lines equal the reference's
		python3 -c '
import re, sys
out, err = sys.argv[1].split("\n"), sys.argv[2]
repeated = [line for line in err.splitlines() if "Previous line repeated" in line]
ours, ref = out[:2] + out[6:7] + repeated, out[2:6]
if len(out) != 7 or ours != ref or not re.fullmatch(r"  \[Previous line repeated 99\d more times\]", ref[3]):
    sys.exit("ours:      %r\nreference: %r\nstderr: %s" % (ours, ref, err))' "$1" "$2"
	}
	input_file=$dir/deep.sage run_ss 1 run
	check "$output" "$errors"
	cp "$dir/deep.sage" "$dir/deep2.sage"
	# A hostile job first, in the same container: the next jobs' room and
	# limit are their own.
	cat >"$dir/hostile.sage" <<-'CODE'
	import sys, threading
	sys.setrecursionlimit(40)
	sys.modules["launcher.child"].RECURSION_OFFSET = 0
	sys.modules["launcher.child"].THREAD_PADS = 500
	threading._start_new_thread = None
	sys.getrecursionlimit = sys.setrecursionlimit = None
	CODE
	jobs_of "$dir/hostile.sage" "$dir/deep.sage" "$dir/deep2.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl" || true
	local id
	for id in deep.sage deep2.sage; do
		check "$(field_of $id stdout)" "$(field_of $id stderr)"
	done
}

@test "fidelity - a thread that cannot start is told from threading's frame, as Python tells it, cold and warm" {
	# The launcher starts threads through a function of its own (their
	# padded stacks): its frame was the traceback's last before the error.
	dir=$BATS_TEST_TMPDIR
	cat >"$dir/nothread.sage" <<-'CODE'
	import resource, threading
	resource.setrlimit(resource.RLIMIT_NPROC, (1, resource.getrlimit(resource.RLIMIT_NPROC)[1]))
	threading.Thread(target=print).start()
	CODE
	check() { # STDERR
		expect_no_match "$1" "launcher"
		expect_match "$1" $'^Traceback \\(most recent call last\\):\n  File "[^"]+", line 3, in <module>\n    threading.Thread\\(target=print\\).start\\(\\)\n  File "[^"]*/threading.py", line [0-9]+, in start\n    _start_new_thread\\(self._bootstrap, \\(\\)\\)\nRuntimeError: can.t start new thread$'
	}
	input_file=$dir/nothread.sage run_ss 1 run
	check "$errors"
	cp "$dir/nothread.sage" "$dir/nothread2.sage"
	jobs_of "$dir/nothread.sage" "$dir/nothread2.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl" || true
	check "$(field_of nothread.sage stderr)"
	check "$(field_of nothread2.sage stderr)"
}

@test "fidelity - a thread still running when the code ends is waited for, atexit runs; daemons are not" {
	dir=$BATS_TEST_TMPDIR
	cat >"$dir/thread.sage" <<-'CODE'
	import atexit, threading, time
	atexit.register(lambda: print("atexit ran"))
	threading.Thread(target=lambda: (time.sleep(1), print("late thread"))).start()
	threading.Thread(target=lambda: (time.sleep(30), print("daemon")), daemon=True).start()
	print("main done")
	CODE
	expected=$'main done\nlate thread\natexit ran'
	input_file=$dir/thread.sage run_ss 0 run
	expect_equal "$output" "$expected"
	# The plot is made before the code ends: a thread that imports after
	# the main thread ended fails in a fresh `sage FILE` too, with Python's
	# "can't register atexit after shutdown" (concurrent.futures), and so
	# it does here.
	cat >"$dir/show.sage" <<-'CODE'
	import threading, time
	p = plot(sin(x), (x, 0, 1))
	def later():
	    time.sleep(0.5r)
	    show(p)
	threading.Thread(target=later).start()
	print("main done")
	CODE
	mkdir "$dir/shown"
	input_file=$dir/show.sage run_ss 0 run --output-dir "$dir/shown"
	expect_equal "$output" "main done"
	[ -s "$dir/shown/show-1.png" ] || { ls -la "$dir/shown" >&2; false; }
	cp "$dir/thread.sage" "$dir/thread2.sage"
	jobs_of "$dir/thread.sage" "$dir/thread2.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl"
	expect_equal "$(field_of thread.sage stdout)" "$expected"
	expect_equal "$(field_of thread2.sage stdout)" "$expected"
}

@test "fidelity - threads' prints come out whole lines; the main thread's native_id is the process's; show() prints text as sage FILE does, whatever the preferences; cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# Before: print() under PYTHONUNBUFFERED wrote each piece with a write
	# of its own, and two threads' lines came out cut into each other (12
	# to 98 of 600 lines, cold); a fresh Sage's buffer takes each whole.
	# native_id was the launcher's; ascii_art drew "atan(x)".
	cat >"$dir/whole.sage" <<-'CODE'
	import os, sys, threading
	from sage.repl.rich_output import get_display_manager
	def lines(tag, stream):
	    for i in range(300r):
	        print(tag, i, "end", file=stream)
	threads = [threading.Thread(target=lines, args=(tag, stream))
	           for tag in "AB" for stream in (sys.stdout, sys.stderr)]
	for t in threads: t.start()
	for t in threads: t.join()
	print(threading.main_thread().native_id == os.getpid() == threading.get_native_id())
	preferences = get_display_manager().preferences
	preferences.text = "ascii_art"
	show(arctan(x) + sqrt(x)/3)
	preferences.text = "unicode_art"
	show(arctan(x))
	CODE
	cp "$dir/whole.sage" "$dir/whole2.sage"
	jobs_of "$dir/whole.sage" "$dir/whole2.sage" >"$dir/jobs.jsonl"
	for memory in 512m 2g; do
		"$SAGE_SANDBOX" batch --jobs 1 --memory $memory "$dir/jobs.jsonl" >"$dir/out.jsonl"
		python3 -c '
import json, re, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    out, err = j["stdout"].splitlines(), j["stderr"].splitlines()
    assert j["exit_code"] == 0, j
    assert out[-3:] == ["True", "1/3*sqrt(x) + arctan(x)", "arctan(x)"], (sys.argv[2], j["id"], out[-3:])
    for name, got in (("stdout", out[:-3]), ("stderr", err)):
        cut = [l for l in got if not re.fullmatch(r"[AB] \d+ end", l)]
        assert len(got) == 600 and not cut, (sys.argv[2], j["id"], name, len(got), cut[:5])' \
			"$dir/out.jsonl" "--memory $memory"
	done
}

@test "fidelity - an uncaught KeyboardInterrupt is told, atexit runs, then the call dies of SIGINT (130), cold and warm; a subclass exits 1; the code's excepthook, None too; an exit code past a C long" {
	dir=$BATS_TEST_TMPDIR
	# A fresh `sage FILE` prints the traceback, runs its atexit handlers,
	# then dies of SIGINT (Python's own end): its shell says 130. Before,
	# the call ended with status 1.
	cat >"$dir/interrupt.sage" <<-'CODE'
	import atexit
	atexit.register(lambda: print("atexit ran"))
	print("before")
	raise KeyboardInterrupt
	CODE
	printf 'print("next")\n' >"$dir/next.sage"
	input_file=$dir/interrupt.sage run_ss 130 run
	expect_equal "$output" $'before\natexit ran'
	expect_equal "$errors" $'Traceback (most recent call last):\n  File "<stdin>", line 4, in <module>\n    raise KeyboardInterrupt\nKeyboardInterrupt'
	cp "$dir/interrupt.sage" "$dir/interrupt2.sage"
	jobs_of "$dir/interrupt.sage" "$dir/interrupt2.sage" "$dir/next.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 --order input "$dir/jobs.jsonl" >"$dir/out.jsonl" || true
	for id in interrupt.sage interrupt2.sage; do
		expect_equal "$(field_of $id exit_code) $(field_of $id signal)" "130 SIGINT"
		expect_equal "$(field_of $id stdout)" $'before\natexit ran'
		expect_match "$(field_of $id stderr)" $'line 4, in <module>\n    raise KeyboardInterrupt\nKeyboardInterrupt$'
	done
	expect_equal "$(field_of next.sage exit_code) $(field_of next.sage stdout)" "0 next"
	# Only KeyboardInterrupt itself: Sage's alarm() raises a subclass, and
	# `sage FILE` exits 1 there. A sys.excepthook of the code's tells it.
	printf 'alarm(0.5)\nwhile True: pass\n' >"$dir/alarm.sage"
	input_file=$dir/alarm.sage run_ss 1 run
	expect_match "$errors" $'\ncysignals.signals.AlarmInterrupt$'
	printf 'import sys\nsys.excepthook = lambda k, v, t: print("hook", k.__name__, v)\nraise ValueError("v")\n' \
		>"$dir/hook.sage"
	input_file=$dir/hook.sage run_ss 1 run
	expect_equal "$output|$errors" "hook ValueError v|"
	# A hook set to None is called, as Python calls it (it was told as a
	# missing one); an int past a C long exits 255, as Python's (it exited
	# 0, the value modulo 256).
	printf 'import sys\nsys.excepthook = None\nraise ValueError("v")\n' >"$dir/none.sage"
	input_file=$dir/none.sage run_ss 1 run
	expect_equal "$errors" "Error in sys.excepthook:
TypeError: 'NoneType' object is not callable

Original exception was:
Traceback (most recent call last):
  File \"<stdin>\", line 3, in <module>
    raise ValueError(\"v\")
ValueError: v"
	printf 'raise SystemExit(int(2)**64)\n' >"$dir/big.sage"
	input_file=$dir/big.sage run_ss 255 run
	expect_equal "$output|$errors" "|"
}

@test "fidelity - what the code's globals hold is finalised at its end, as Python's teardown does: __del__ prints, a file left open is sent whole" {
	dir=$BATS_TEST_TMPDIR
	# Python 3.11 prints these lines for this file: every finaliser of
	# __main__'s objects runs (in the order they were made) before any
	# global is let go; an error in one is "Exception ignored in".
	cat >"$dir/del.sage" <<-'CODE'
	import atexit, os
	class Noisy:
	    def __init__(self, name): self.name = name
	    def __del__(self):
	        print("del", self.name, _hidden.name)
	        if self.name == "b": raise ValueError("in del")
	a = Noisy("a")
	_hidden = Noisy("_hidden")
	b = Noisy("b")
	f = open(os.environ["SAGE_SANDBOX_OUT"] + "/left-open.txt", "w")
	f.write("unflushed " + str(factor(2^32+1)))
	atexit.register(lambda: print("atexit ran"))
	print("main done")
	CODE
	expected=$'main done\natexit ran\ndel a _hidden\ndel _hidden _hidden\ndel b _hidden'
	mkdir "$dir/out"
	input_file=$dir/del.sage run_ss 0 run --output-dir "$dir/out"
	expect_equal "$output" "$expected"
	expect_match "$errors" "Exception ignored in: <function Noisy.__del__ at 0x[0-9a-f]+>"
	expect_match "$errors" 'line 6, in __del__'
	expect_match "$errors" 'ValueError: in del'
	expect_equal "$(cat "$dir/out/left-open.txt")" "unflushed 641 * 6700417"
	# The teardown's order is the order they were made, not the globals':
	# e, a name Sage bound first, kept its early place there and came
	# first. And a daemon thread still running a function of the code's
	# holds its globals: Python finalises none of them (a fresh Sage prints
	# "end" alone; "del c" was printed). Sage 10 and 9.5 print these.
	cat >"$dir/order.sage" <<-'CODE'
	class C:
	    def __init__(self, n): self.n = n
	    def __del__(self): print("del", self.n)
	a = C("a")
	e = C("e")
	d = C("d")
	x = d
	print("end")
	CODE
	cat >"$dir/thread.sage" <<-'CODE'
	import threading, time
	class C:
	    def __del__(self): print("del c")
	c = C()
	threading.Thread(target=lambda: (time.sleep(30r), print("daemon")), daemon=True).start()
	print("end")
	CODE
	# Nor where a running thread holds what reaches them, running the
	# library's code: a Thread subclass of the code's, a server with the
	# code's handler class, an event loop with the code's coroutine (each
	# printed "del c": review helper 135). One that holds nothing of the
	# code's (libthread) leaves c to be finalised.
	cat >"$dir/subclass.sage" <<-'CODE'
	import threading
	class C:
	    def __del__(self): print("del c")
	c = C()
	go = threading.Event()
	class Waiting(threading.Thread):
	    def stop(self): go.set()
	Waiting(target=go.wait, args=(30r,), daemon=True).start()
	print("end")
	CODE
	cat >"$dir/server.sage" <<-'CODE'
	import threading, socketserver
	class C:
	    def __del__(self): print("del c")
	c = C()
	class Echo(socketserver.BaseRequestHandler):
	    def handle(self): pass
	server = socketserver.UnixStreamServer("echo.sock", Echo)
	threading.Thread(target=server.serve_forever, daemon=True).start()
	print("end")
	CODE
	cat >"$dir/loop.sage" <<-'CODE'
	import threading, asyncio, time
	class C:
	    def __del__(self): print("del c")
	c = C()
	loop = asyncio.new_event_loop()
	async def nap(): await asyncio.sleep(30r)
	threading.Thread(target=loop.run_forever, daemon=True).start()
	task = asyncio.run_coroutine_threadsafe(nap(), loop)
	time.sleep(0.2r)
	print("end")
	CODE
	cat >"$dir/libthread.sage" <<-'CODE'
	import threading
	class C:
	    def __del__(self): print("del c")
	c = C()
	go = threading.Event()
	threading.Thread(target=go.wait, args=(30r,), daemon=True).start()
	print("end")
	CODE
	# Where nothing of the code's refers back to its globals (its class
	# from a module), they are freed in their order, each value as its last
	# name goes: e's place is Sage's, x's value is d's.
	cat >"$dir/nocycle.sage" <<-'CODE'
	import types, sys
	m = types.ModuleType("mymod")
	exec("class C:\n def __init__(self, n): self.n = n\n def __del__(self): print('del', self.n)", m.__dict__)
	sys.modules["mymod"] = m
	from mymod import C
	a = C('a'); e = C('e'); d = C('d'); x = d
	print("end")
	CODE
	input_file=$dir/order.sage run_ss 0 run
	expect_equal "$output" $'end\ndel a\ndel e\ndel d'
	input_file=$dir/nocycle.sage run_ss 0 run
	expect_equal "$output" $'end\ndel e\ndel a\ndel d'
	input_file=$dir/thread.sage run_ss 0 run
	expect_equal "$output|$errors" "end|"
	input_file=$dir/subclass.sage run_ss 0 run
	expect_equal "$output|$errors" "end|"
	input_file=$dir/server.sage run_ss 0 run
	expect_equal "$output|$errors" "end|"
	# Warm, in one container, the same.
	cp "$dir/del.sage" "$dir/del2.sage"
	jobs_of "$dir/del.sage" "$dir/del2.sage" "$dir/order.sage" "$dir/nocycle.sage" "$dir/thread.sage" \
		"$dir/subclass.sage" "$dir/server.sage" "$dir/loop.sage" "$dir/libthread.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 "$dir/jobs.jsonl" >"$dir/out.jsonl"
	expect_equal "$(field_of del.sage stdout)" "$expected"
	expect_equal "$(field_of del2.sage stdout)" "$expected"
	expect_match "$(field_of del2.sage stderr)" "Exception ignored in: <function Noisy.__del__"
	expect_equal "$(field_of order.sage stdout)" $'end\ndel a\ndel e\ndel d'
	expect_equal "$(field_of nocycle.sage stdout)" $'end\ndel e\ndel a\ndel d'
	expect_equal "$(field_of thread.sage stdout)|$(field_of thread.sage stderr)" "end|"
	for id in subclass.sage server.sage loop.sage; do
		expect_equal "$(field_of $id stdout)|$(field_of $id stderr)" "end|" "$id"
	done
	expect_equal "$(field_of libthread.sage stdout)|$(field_of libthread.sage stderr)" $'end\ndel c|'
}

@test "fidelity - Python's own exit hooks run for the code: logging's handlers, weakref.finalize; a failed last flush exits 120; only an int is an exit code (Sage's Integer is printed, 1); cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# Sage's import registered logging's and weakref.finalize's hooks
	# before the fork, and the child cleared them with the template's:
	# a MemoryHandler's records and a finalizer's print were lost.
	# (Each alone: their order at the end is Sage's import's, which
	# registers both on Sage 10 and neither on 9.5.)
	cat >"$dir/hooks.sage" <<-'CODE'
	import atexit, weakref
	class Thing: pass
	thing = Thing()
	weakref.finalize(thing, print, "finalized")
	atexit.register(print, "atexit ran")
	print("main done")
	CODE
	cat >"$dir/logs.sage" <<-'CODE'
	import logging, logging.handlers, sys
	log = logging.getLogger("mine")
	log.addHandler(logging.handlers.MemoryHandler(100, target=logging.StreamHandler(sys.stdout)))
	log.warning("buffered record")
	print("main done")
	CODE
	expected=$'main done\natexit ran\nfinalized'
	input_file=$dir/hooks.sage run_ss 0 run
	expect_equal "$output" "$expected"
	input_file=$dir/logs.sage run_ss 0 run
	expect_equal "$output" $'main done\nbuffered record'
	# A sys.stdout whose flush raises: Python tells it as unraisable as its
	# teardown flushes, and exits 120 (it was 0, with nothing said).
	cat >"$dir/flush.sage" <<-'CODE'
	import sys
	class Stream:
	    def write(self, text): return sys.__stdout__.write(text)
	    def flush(self): raise ValueError("no flush")
	sys.stdout = Stream()
	print("printed")
	CODE
	input_file=$dir/flush.sage run_ss 120 run
	expect_equal "$output" "printed"
	expect_match "$errors" $'^Exception ignored in: <__main__.Stream object at 0x[0-9a-f]+>\nTraceback [(]most recent call last[)]:\n  File "<stdin>", line 4, in flush\n    def flush[(]self[)]: raise ValueError[(]"no flush"[)]\nValueError: no flush$'
	# numpy's integer is no exit code to Python: printed, status 1 (it
	# exited 0, a harness's failure count read as success).
	printf 'import numpy\nsys.exit(numpy.array([0r, 0r]).sum())\n' >"$dir/numpy.sage"
	input_file=$dir/numpy.sage run_ss 1 run
	expect_equal "$output|$errors" "|0"
	printf 'sys.exit(3)\n' >"$dir/integer.sage"
	input_file=$dir/integer.sage run_ss 1 run
	expect_equal "$output|$errors" "|3"
	# Warm, in one container, the same.
	cp "$dir/hooks.sage" "$dir/hooks2.sage"
	jobs_of "$dir/hooks.sage" "$dir/hooks2.sage" "$dir/logs.sage" "$dir/flush.sage" \
		"$dir/numpy.sage" "$dir/integer.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 --order input "$dir/jobs.jsonl" >"$dir/out.jsonl" || true
	expect_equal "$(field_of hooks.sage stdout)" "$expected"
	expect_equal "$(field_of hooks2.sage stdout)" "$expected"
	expect_equal "$(field_of logs.sage stdout)" $'main done\nbuffered record'
	expect_equal "$(field_of flush.sage exit_code) $(field_of flush.sage stdout)" "120 printed"
	expect_match "$(field_of flush.sage stderr)" "^Exception ignored in: <__main__.Stream object"
	expect_equal "$(field_of numpy.sage exit_code) $(field_of numpy.sage stderr)" "1 0"
	expect_equal "$(field_of integer.sage exit_code) $(field_of integer.sage stderr)" "1 3"
}

@test "fidelity - libc's rand() starts where a fresh Sage's starts, cold and warm" {
	# Sage 10's import leaves libc's generator as glibc starts it, and a
	# fresh Sage's rand() is 1804289383 every time; 9.5's import seeds it,
	# each run its own. Every call used to draw its own (probe helper).
	# The reference: the image's Python importing what `sage FILE`
	# imports, from inside the call.
	sage 'import ctypes, subprocess, sys
fresh = subprocess.run([sys.executable, "-c",
                        "import sage.all_cmdline, ctypes; print(ctypes.CDLL(None).rand())"],
                       capture_output=True, text=True)
print(ctypes.CDLL(None).rand(), *fresh.stdout.split())
print(fresh.stderr[-500:], file=sys.stderr)' 0 run
	local ours fresh
	read -r ours fresh <<<"$output"
	[ -n "$fresh" ] || {
		printf '# the reference printed nothing: %s\n' "$errors" >&2
		return 1
	}
	local code='import ctypes; print(ctypes.CDLL(None).rand())'
	python3 -c 'import json, sys
for i in range(3):
    print(json.dumps({"id": i, "code": sys.argv[1]}))' "$code" >"$BATS_TEST_TMPDIR/jobs.jsonl"
	run_ss 0 batch --jobs 1 --order input "$BATS_TEST_TMPDIR/jobs.jsonl"
	local warm
	warm=$(printf '%s\n' "$output" | python3 -c 'import json, sys
print(" ".join(json.loads(l)["stdout"].strip() for l in sys.stdin))')
	if [ "$fresh" = 1804289383 ]; then
		expect_equal "$ours $warm" "$fresh $fresh $fresh $fresh"
	else
		[ "$ours" != "$fresh" ]
		python3 -c 'import sys; w = sys.argv[1].split(); assert len(set(w)) == 3, w' "$warm"
	fi
	# Seeded, the same in every call.
	run_ss 0 batch --jobs 1 --seed 5 --order input "$BATS_TEST_TMPDIR/jobs.jsonl"
	python3 -c 'import json, sys
w = [json.loads(l)["stdout"] for l in sys.stdin]
assert len(w) == 3 and len(set(w)) == 1, w' <<<"$output"
}

@test "fidelity - multiprocessing's spawn and forkserver children find the code's functions, cold and warm" {
	dir=$BATS_TEST_TMPDIR
	# Such a child is a new Python that runs the file __main__.__file__
	# names (under `sage FILE`, FILE.sage.py); before, it was the name the
	# user gave, which the container does not have: FileNotFoundError in
	# every child, and the pool waited until the timeout.
	# The file is laid out as sage-preparse lays it out: a __future__
	# import stays first.
	cat >"$dir/pool.sage" <<-'CODE'
	from __future__ import annotations
	import multiprocessing
	def square(n):
	    return n^2
	if __name__ == "__main__":
	    for method in ("spawn", "forkserver"):
	        with multiprocessing.get_context(method).Pool(2) as pool:
	            print(method, pool.map(square, [1, 2, 3]))
	CODE
	expected=$'spawn [1, 4, 9]\nforkserver [1, 4, 9]'
	input_file=$dir/pool.sage run_ss 0 run --timeout 60
	expect_equal "$output" "$expected"
	# A child imports Sage under the run's limits, as the launcher did:
	# with PARI's stack within them, so that PARI prints no "not enough
	# memory" warning (a fresh Sage's child prints none).
	expect_equal "$errors" ""
	# A later call in the same container writes its own code for its
	# children: the second job's squares are cubes.
	sed 's/n^2/n^3/' "$dir/pool.sage" >"$dir/cubes.sage"
	jobs_of "$dir/pool.sage" "$dir/cubes.sage" >"$dir/jobs.jsonl"
	"$SAGE_SANDBOX" batch --jobs 1 --timeout 60 "$dir/jobs.jsonl" >"$dir/out.jsonl"
	expect_equal "$(field_of pool.sage stdout)" "$expected"
	expect_equal "$(field_of cubes.sage stdout)" $'spawn [1, 8, 27]\nforkserver [1, 8, 27]'
	expect_equal "$(field_of pool.sage stderr)$(field_of cubes.sage stderr)" ""
}
