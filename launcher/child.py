# launcher/child.py: the prepared child: the process a call's code runs in,
# forked from the launcher and made ready before the call comes, and how the
# code runs there as `sage FILE` would run it.
#
# The launcher and its child speak over pipes (docs/protocol.md, "The
# launcher and its child"): the call pipe brings each call as a header
# (">IIIII": its CPU seconds, its display flags, the number of the first
# image it shows, the length of its arguments, the length of its code, its
# random seed or -1) and those bytes; the done pipe takes words (done_word):
# "B" as a session's cell begins, and its STATUS after each cell, when the
# child waits for the next call, or (once, serial) just before the child
# exits with that status. The code's stdin, stdout and stderr are three
# more pipes, relayed by the launcher.
import _signal
import _thread
import ast
import atexit
import bisect
import builtins
import codecs
import ctypes
import fcntl
import functools
import gc
import hashlib
import inspect
import io
import linecache
import operator
import os
import random
import re
import resource
import struct
import sys
import threading
import tokenize
import traceback
import types
import warnings
import weakref
from contextlib import nullcontext
# Taken as the launcher starts: a session's cell may replace importlib's.
from importlib import import_module
from importlib.machinery import SourceFileLoader
from types import SimpleNamespace

# This module's own os, signal, gc and builtins: their names as the launcher
# loaded them, before any code ran. The code shares the modules, and may
# replace what they hold in its own Python (os.getpid = lambda: 1, as a
# test's mock does; signal.sigpending; builtins.isinstance = None). A
# session's steps between cells here read them, failed, and the session
# was lost or hung, where IPython's run_cell goes on (attack helper 119
# ran it in the image). Its signal is Python's C module, _signal: the
# signal module's wrappers (their enums) are Python, which reads the
# builtins the code shares. For the same reason every standard module it
# uses is imported here, not in a function: an import there reads
# sys.modules, which the code may change (sys.modules["ast"] = None made
# each later cell fail before it ran). Only Sage's and the libraries'
# are imported where they are needed: in reseed, whose failure the call
# is told of (tell_unseeded), and in between_cells.interrupted, in a try.
# sys stays the one module: its streams, hooks and argv are the code's to
# change, and are read as the code left them. What is left is the code's
# to break, as it would break a notebook's kernel: a builtin that the
# preparser or tokenize calls (len, tuple), sys._getframe; and the
# launcher's own modules, reached through sys.modules.
os = SimpleNamespace(**vars(os))
signal = SimpleNamespace(**vars(_signal))
gc = SimpleNamespace(**vars(gc))
__builtins__ = dict(vars(builtins))  # what this module's functions look up

# Python's warnings filters as it starts, before any import adds its own:
# those `sage FILE`'s python3 compiles the file under, before it imports
# Sage (whose filters would show an invalid escape's DeprecationWarning,
# which Python's ignore). Read here, as the launcher starts.
PYTHONS_FILTERS = tuple(warnings.filters)

from launcher import deferred, display, mpmain, onimport, parent, warm  # noqa: E402

CALL_HEADER = struct.Struct(">IIIIIq")
# A call's display flags: show its last expression's value; its files come
# back (images shown are kept); give formulas shown as LaTeX too.
DISPLAY_LAST, FILES_BACK, LATEX = 1, 2, 4
# A session's child's word on the done pipe: the cell's code begins.
BEGUN = b"B"


def done_word(what, call_number):
    """A word on the done pipe: BEGUN or a status, of the child's call
    CALL_NUMBER (1, 2, ...: a session's cells): the pipe is in the code's
    reach, and what the code, or a thread it left running, wrote there in
    an earlier call is then no word of this one (calls.done_words). A
    newline before it ends what the code left unended there."""
    return b"\n%s:%d\n" % (what, call_number)


MISSING_FILE_NOTE = (
    "note: the sandbox holds only this code, the image's packages and the files\n"
    "given with --input (MCP: files); nothing else of the host is there\n")


# Where the launcher moves a replaced child's ends (calls.py,
# replace_child). Above the launcher's own, below the container's
# descriptor limit.
MOVED_FDS_FROM = 512


class Pipes:
    """The pipes of one prepared child, made by the launcher before the
    fork: each side closes the other's ends."""

    def __init__(self, with_done):
        self.stdin = os.pipe()
        self.stdout = os.pipe()
        self.stderr = os.pipe()
        self.call = os.pipe()
        self.done = os.pipe() if with_done else (-1, -1)

    def launcher_ends(self):
        return (self.stdin[1], self.stdout[0], self.stderr[0], self.call[1], self.done[0])

    def close(self):
        """Both sides' ends: the fork did not happen, or its child is gone."""
        for fd in self.child_ends() + self.launcher_ends():
            if fd >= 0:
                os.close(fd)

    def child_ends(self):
        return (self.stdin[0], self.stdout[1], self.stderr[1], self.call[0], self.done[1])


# A child's call and done ends go to the highest numbers its descriptor
# limit allows, capped here: the code's files are numbered from 3 up with
# none skipped, as a fresh Sage's, and only code that opens every
# descriptor it may meets them. Not higher: a process's descriptor table
# grows to its highest number, and every fork copies it.
CHILD_FDS_BELOW = 4096


def move_to_top(fds):
    """fds moved, in order, to the highest numbers below the descriptor
    limit (or CHILD_FDS_BELOW), close-on-exec, their old numbers closed;
    one that cannot move (or is -1) stays as it is."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = CHILD_FDS_BELOW if soft == resource.RLIM_INFINITY else min(soft, CHILD_FDS_BELOW)
    placed = []
    for at, fd in enumerate(fds, start=top - len(fds)):
        if fd >= 0 and at > 2:
            try:
                moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, at)
            except OSError:
                moved = fd
            if moved != fd:
                os.close(fd)
                fd = moved
        placed.append(fd)
    return placed


def encode_call(cpu_seconds, args, code, flags=0, first_show=1, seed=None):
    """args: the A frame's bytes (each argument ends with a NUL). One
    bytes object: the launcher wipes it once sent (frames.wipe)."""
    return b"".join((CALL_HEADER.pack(max(0, cpu_seconds), flags, first_show, len(args),
                                      len(code), -1 if seed is None else seed), args, code))


def _read_exactly(fd, n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# How Python decodes a file name (os.fsdecode, whose Python reads the
# builtins the code shares), as the launcher loads.
FILE_NAMES = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def read_call(fd):
    """The next call, or None once the launcher closed the pipe: its CPU
    seconds, its arguments, its code, its display flags, the number of its
    first image, and its seed (None: fresh random state)."""
    header = _read_exactly(fd, CALL_HEADER.size)
    if header is None:
        return None
    cpu, flags, first_show, args_len, code_len, seed = CALL_HEADER.unpack(header)
    body = _read_exactly(fd, args_len + code_len)
    if body is None:
        return None
    argv = [a.decode(*FILE_NAMES) for a in body[:args_len].split(b"\0")[:-1]] or ["-"]
    return cpu, argv, body[args_len:], flags, first_show, None if seed < 0 else seed


def ends_quietly(code):
    """The code's last token is a semicolon: a notebook shows nothing of
    its last expression then (`plot(x);`)."""
    last = None
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type not in skip:
                last = token
    except (tokenize.TokenError, SyntaxError):
        return False
    return last is not None and last.type == tokenize.OP and last.string == ";"


def joined_lines(users):
    """The lines Sage's preparser joins onto the line before them: a line
    that ends in a backslash outside any string continues on the next, and
    the preparser makes the two one line. Python's tokenizer tells where
    (such a line break is the one it gives no token for; a line that is a
    backslash alone has none at all). Where it gives up, the joins it saw
    before stand (a bracket or string still open at the end); past an
    indent that matches none, it starts again at that line (each pass
    ends where the next begins: one reading in all).
    USERS are the code's lines as the preparser counts them, by
    str.splitlines (a form feed ends one too): so is the code it makes."""
    breaks = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
              tokenize.DEDENT, tokenize.ENCODING)
    joined = set()
    start = 0  # the first of the users' lines this pass tokenizes
    while True:
        last_row, last_type = None, None
        text_row = start  # the last line with a token's text
        at = start

        def readline():
            nonlocal at
            if at >= len(users):
                return ""
            at += 1
            return users[at - 1] + "\n"
        try:
            for token in tokenize.generate_tokens(readline):
                if token.type == tokenize.ENDMARKER:
                    break
                row = start + token.start[0]
                if last_row is not None and row > last_row and last_type not in breaks \
                        and token.type not in breaks:
                    joined.update(range(last_row + 1, row + 1))
                if token.type not in (tokenize.INDENT, tokenize.DEDENT):
                    # Lines with no token's text before this one's (a
                    # lone backslash each, between statements too: the
                    # tokenizer may put a DEDENT there, of no text), each
                    # continued onto the next: one line with this one.
                    if row > text_row + 1:
                        joined.update(range(text_row + 2, row + 1))
                    text_row = start + token.end[0]
                last_row, last_type = start + token.end[0], token.type
        except IndentationError as e:
            # An indent that matches none: tokenized afresh from that line,
            # so that the joins after it are seen (each shifts the lines
            # after it). Its first line cannot fail so: on, always.
            if e.lineno and e.lineno > 1:
                start += e.lineno - 1
                continue
        except (tokenize.TokenError, SyntaxError):
            pass  # a bracket or string open at the end: the joins before it stand
        return joined


# Where Python's message names a line of its own: "(detected at line 4)",
# the last of a statement's; "after function definition on line 3",
# "opening parenthesis '[' on line 3", the first of one.
DETECTED_AT = re.compile(r"(\(detected at line )(\d+)\)$")
ON_LINE = re.compile(r"( on line )(\d+)\b")
NAMES_A_LINE = re.compile(DETECTED_AT.pattern + "|" + ON_LINE.pattern)
NUMBERS = re.compile(r"\d+")


def same_words(one, other):
    """Two of Python's messages for a syntax error say the same but for
    the lines they name, if any."""
    def words(msg):
        return NUMBERS.sub("", NAMES_A_LINE.sub("", msg or ""))
    return words(one) == words(other)


class WarningsFiltered:
    """A block under these warnings filters. Not set by simplefilter, which
    deferred takes for the code's own; the list is put back whole."""

    def __init__(self, filters):
        self.filters = list(filters)

    def __enter__(self):
        # Only swapped: Python reads warnings.filters at each warning. Its
        # _filters_mutated() would clear every module's record of the
        # warnings it gave once (__warningregistry__), and Sage's import
        # would warn again where the code makes it.
        self.held = warnings.filters
        warnings.filters = self.filters

    def __exit__(self, *exc):
        warnings.filters = self.held


def quietly(function, *args):
    """function(*args) with every warning ignored (a second compile of the
    code: Python warned of its SyntaxWarnings once)."""
    with WarningsFiltered([("ignore", None, Warning, None, 0)]):
        return function(*args)

# The preparser's constants joined onto a first line that is blank or a
# comment: "_sage_const_2 = Integer(2); _sage_const_3 = Integer(3)".
JOINED_CONSTANTS = re.compile(r"_sage_const_\w+ = [^;\n]*(; _sage_const_\w+ = [^;\n]*)*")


def counted(lines):
    """How many lines count, blank lines at the end not: the preparser's
    output drops one of them (it joins its lines with newlines), which
    made the constants' line pass for code, every line after it one too
    far on (split_constants). Nor do lines that are a backslash alone
    among them: the preparser joins each onto the next, the last onto
    nothing (reviewer: a traceback quoted the backslash)."""
    n = len(lines)
    while n and (not lines[n - 1].strip() or backslash_alone(lines[n - 1])):
        n -= 1
    return n


def backslash_alone(line):
    """The line is a backslash alone (blanks around it): Python's tokenizer
    gives it no token, and the preparser joins the next line onto it."""
    return line.strip() == "\\"


def split_constants(text, preparsed):
    """The preparser's block of numeric constants, the code, and for each
    of the code's lines the user's lines it is made of (or None: each its
    own). Sage's preparse_file keeps the code line for line but for lines
    it joins (joined_lines), and puts the constants before it: joined onto
    a first line that is blank or a comment (nothing shifts), or on a line
    of their own, or, when there are many, one a line and a blank one.
    Only lines the code does not have are taken for the block, and only if
    they are constants and blanks."""
    lines = preparsed.splitlines()
    users = text.splitlines()
    joined = joined_lines(users)
    kept = [n for n in range(1, counted(users) + 1) if n not in joined]
    extra = counted(lines) - len(kept)
    constants = ""
    head = lines[:extra] if extra > 0 else []
    if head and all(not line.strip() or line.startswith("_sage_const_") for line in head):
        constants, lines = "\n".join(head), lines[extra:]
    elif extra == 0 and lines:
        # Joined onto the first line, before it: taken off it, so that
        # the line is the user's again (a `from __future__` import after
        # it must start the code, as sage-preparse makes it do).
        first = users[0] if users else ""
        joined_head = lines[0][:len(lines[0]) - len(first)]
        if lines[0].endswith(first) and JOINED_CONSTANTS.fullmatch(joined_head):
            constants, lines = joined_head, [first] + lines[1:]
    lines_of = None
    if joined and counted(lines) == len(kept):
        # Each code line's user's lines: its own, and those joined onto it.
        lines_of = {}
        for i, n in enumerate(kept, 1):
            last = n
            while last + 1 in joined:
                last += 1
            lines_of[i] = list(range(n, last + 1))
    return constants, "\n".join(lines), lines_of


# How many of the user's tokens ahead a token of the preparsed line is
# looked for: the preparser's rewrites are local (a number named, 2^3,
# [1..4]), so its own text is found nowhere near and skipped.
LOOKAHEAD = 4
# A number whole (2.5e-3; 1..5 is two, each of which the preparser
# names), a name, or a character.
TOKEN = re.compile(r"\d(?:\w|\.(?!\.))*(?:[eE][-+]\d+\w*)?|\.\d(?:\w|\.(?!\.))*|\w+|\S")


def same_token(ours, theirs):
    """A token of the preparsed line is the user's: the same text, or the
    name the preparser gave a number (_sage_const_2p5en3 for 2.5e-3)."""
    return ours == theirs or ours.startswith("_sage_const_") and (
        theirs[0].isdigit() or theirs[0] == "." and theirs[1:2].isdigit())


def statements_line(group, users):
    """The line Python names the statement of a code line the preparser
    joined of the user's lines group by: the first that is not a
    backslash alone (one has no token: the next is joined onto it)."""
    for number in group:
        if number > len(users) or not backslash_alone(users[number - 1]):
            return number
    return group[0]


def joined_lines_of(users, numbers, line):
    """For a code LINE the preparser made of the user's lines NUMBERS
    (each backslash-newline dropped, the rest rewritten): a function from
    a column of it (UTF-8 bytes, as ast has them) and whether it is an
    end to the user's line that text came from. The two texts' tokens are
    walked in step, in one pass: a token of the line is the user's where
    it is found a few tokens on, else the preparser's own, of the line of
    the user's next token. Tracebacks show lines only (podman.c runs
    Python with -X no_debug_ranges), so only the line matters."""
    theirs = []  # (token, user's line)
    for k, number in enumerate(numbers):
        text = users[number - 1]
        if k < len(numbers) - 1:
            text = text[:-1]  # the backslash
        theirs += [(m.group(), number) for m in TOKEN.finditer(text)]
    encoded = line.encode("utf-8")
    if len(encoded) == len(line):
        def byte(i):
            return i
    else:
        # Counted on from the last one asked (the tokens come in order).
        walked = [0, 0]  # characters, their bytes

        def byte(i):
            walked[1] += len(line[walked[0]:i].encode("utf-8"))
            walked[0] = i
            return walked[1]
    starts, ends, lines_at = [], [], []
    at = misses = 0
    for m in TOKEN.finditer(line):
        # A name looks further on the more the preparser rewrote before
        # it (ellipsis_range(...) for [1..5], R.<x>'s generators).
        ahead = LOOKAHEAD + (misses if m.group()[0].isalnum() or m.group()[0] == "_" else 0)
        for j in range(at, min(at + ahead, len(theirs))):
            if same_token(m.group(), theirs[j][0]):
                at, misses = j + 1, 0
                lines_at.append(theirs[j][1])
                break
        else:
            # The preparser's: in place of the user's next token (a number
            # it named), or before it.
            misses += 1
            lines_at.append(theirs[min(at, len(theirs) - 1)][1] if theirs else numbers[0])
        starts.append(byte(m.start()))
        ends.append(byte(m.end()))

    def line_of(column, is_end):
        if not lines_at or column > len(encoded):
            return numbers[0]
        if is_end:  # the token that ends at or before it
            i = bisect.bisect_right(ends, column) - 1
        else:  # the token it falls in (a node starts one), else the next
            i = bisect.bisect_right(starts, column) - 1
            if i < 0 or column >= ends[i]:
                i = min(i + 1, len(starts) - 1)
        return lines_at[max(i, 0)]
    return line_of


def sages_header_lines(text):
    """How many of the code's first lines sage-preparse keeps above the
    `from __future__` imports it writes (its find_position_right_after_
    module_docstring: past blank and comment lines, a line that starts
    with a quote is taken for the docstring, to its closing triple quote,
    whether Python takes it for one or not)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].strip()[0] == "#"):
        i += 1
    if i == len(lines):
        return 0
    start = lines[i].lstrip()
    if not (start[0] in "\"'" or start[:2] in ('r"', "r'")):
        return 0
    start = start.lstrip("r")
    quotes = start[:3]
    if quotes not in ("'''", '"""') or quotes in start[3:]:
        return i + 1
    j = i + 1
    while j < len(lines) and quotes not in lines[j]:
        j += 1
    return min(j + 1, len(lines))


class FutureImports:
    """The code's `from __future__` imports as sage-preparse writes them
    (find_future_imports): each line of the preparsed code below its
    header (sages_header_lines) that starts "from __future__ import ",
    whatever it is in (a string too), is taken out, its line left blank,
    and written at the top of the file, above Sage's import, in their
    order. Here every line keeps its number: the rest is compiled as it
    is, and the lines taken are put in front of its tree, at the user's
    own lines (in_front_of), so that Python takes them for the file's
    first statements, as it does there."""

    PREFIX = "from __future__ import "
    REFUSED = ('the Sage preparser can only preparse "from __future__ import ..." statements '
               'which are on a single line')

    def __init__(self, text, preparsed, lines_of, filename):
        self.taken = []  # the statements of the lines taken, at the user's lines
        self.texts = []  # the lines taken (a spawn child's file: mpmain)
        self.code = preparsed
        self.header = 0
        if "__future__" not in preparsed:
            return  # the common case: no line read
        self.header = sages_header_lines(text)
        lines = code_lines(preparsed, keepends=True)
        taken = []  # (index, the user's line) of each
        for i, line in enumerate(lines):
            at = (lines_of or {}).get(i + 1, [i + 1])[0]
            if at > self.header and line.startswith(self.PREFIX):
                statement = line.rstrip("\n")
                if statement.endswith("\\") or ("(" in statement and ")" not in statement):
                    # sage-preparse's own test of one that may go on past
                    # its line: the file is not written, nor run.
                    raise NotImplementedError(self.REFUSED)
                taken.append((i, at))
        for i, at in taken:
            statement = lines[i].rstrip("\n")
            # At the user's line, so that an error or a warning names it;
            # first in the file there, so its error is the first Python
            # finds.
            # compile(), not ast.parse: its error shows no frame of ast's.
            self.taken.extend(compile("\n" * (at - 1) + statement, filename, "exec",
                                      ast.PyCF_ONLY_AST).body)
            self.texts.append(statement)
            lines[i] = lines[i][len(statement):]
        self.code = "".join(lines)

    def in_front_of(self, tree, filename, text):
        """The lines taken, put in front of the tree, below the statements
        of sage-preparse's header. A `from __future__` import still in
        the tree below the header (indented, after another statement on
        its line, spaced otherwise) comes after Sage's import in
        sage-preparse's file: Python's SyntaxError, raised here, as the
        lines taken keep their numbers and Python looks only past the
        last of them; a feature it does not know, among those taken, is
        told first, as there."""
        left = None
        if "__future__" in self.code:  # the tree is walked only where one may be left
            left = next((node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and
                         node.module == "__future__" and node.lineno > self.header), None)
        if left is not None:
            compile(ast.Module(body=self.taken, type_ignores=[]), filename, "exec")
            users_lines = code_lines(text)
            line = users_lines[left.lineno - 1] if left.lineno <= len(users_lines) else ""
            # Python's caret, where the preparser left the line as the
            # user's (its column is the preparsed line's).
            as_given = line[left.col_offset:].startswith("from")
            raise SyntaxError("from __future__ imports must occur at the beginning of the file",
                              (filename, left.lineno, left.col_offset + 1 if as_given else None,
                               line + "\n", left.end_lineno,
                               left.end_col_offset + 1 if as_given else None))
        if self.taken:
            head = sum(1 for node in tree.body if node.lineno <= self.header)
            tree.body[head:head] = self.taken


def users_tree(preparsed, filename, lines_of, text, as_file=False):
    """The code's syntax tree, each node at the user's own line: the
    preparser's joins undone, and within a joined line at the line the
    node's text came from (joined_lines_of), so that a traceback quotes
    the part that failed, as Python would. compile() makes it: a syntax
    error is reported with no frame of ast's own, at the user's line.
    as_file: read as Python reads a file (as_compiled)."""
    try:
        tree = warning_at_users_lines(lines_of, filename, compile, as_compiled(preparsed, as_file),
                                      filename, "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as e:
        users = code_lines(text)
        code_end, users_end = len(code_lines(preparsed)), len(users)
        # Counted in the code's lines, before the user's numbers are put in.
        at_end = found_at_end_as_file_reads(e, preparsed, as_file) or \
            nothing_after_a_decorator(e, code_end)

        def detected_at(m):
            # "unterminated string literal (detected at line N)": the
            # user's N, the last of the lines that code line is made of; a
            # triple-quoted string's at the code's end, the user's end, past
            # the blank line the preparser dropped there.
            n = int(m.group(2))
            if n == code_end and e.msg.startswith("unterminated triple-quoted"):
                n = users_end
            else:
                n = (lines_of or {}).get(n, [n])[-1]
            return m.group(1) + str(n) + ")"
        e.msg = DETECTED_AT.sub(detected_at, e.msg)
        if lines_of and e.lineno in lines_of:
            e.lineno = statements_line(lines_of[e.lineno], users)

            def on_line(m):
                n = int(m.group(2))
                return m.group(1) + str(statements_line(lines_of.get(n, [n]), users))
            e.msg = ON_LINE.sub(on_line, e.msg)
        if at_end:
            # The user's last line: the preparser dropped the blank one at
            # the end, where a fresh Sage's file has it.
            e.lineno, e.end_lineno, e.text = len(users), len(users), users[-1] + "\n"
        raise
    if not lines_of:
        return tree
    users, code = code_lines(text), code_lines(preparsed)
    line_of = {}

    def users_line(number, column, is_end):
        numbers = lines_of.get(number)
        if not numbers:
            return number
        if len(numbers) == 1 or column is None:
            return numbers[0]
        if number not in line_of:
            line_of[number] = joined_lines_of(users, numbers, code[number - 1])
        return line_of[number](column, is_end)
    for node in ast.walk(tree):
        if not getattr(node, "lineno", None):
            continue
        node.lineno = users_line(node.lineno, getattr(node, "col_offset", None), False)
        if getattr(node, "end_lineno", None):
            node.end_lineno = users_line(
                node.end_lineno, getattr(node, "end_col_offset", None), True)
            # The columns stay the preparsed line's (tracebacks show none);
            # compile() still wants the end after the start.
            if node.end_lineno < node.lineno:
                node.end_lineno = node.lineno
            if node.end_lineno == node.lineno and \
                    getattr(node, "end_col_offset", None) is not None and \
                    node.end_col_offset < node.col_offset:
                node.end_col_offset = node.col_offset
    return tree


def warning_at_users_lines(lines_of, filename, function, *args):
    """function(*args) (the parse of the preparsed code), the warnings it
    gives (its SyntaxWarnings, "invalid decimal literal") shown at the
    user's line, not the joined one's number: each as the filters let
    it through, then shown as Python shows it (warnings._showwarnmsg,
    which Python's own warnings call), past a join at the first of the
    user's lines of that line."""
    show = getattr(warnings, "_showwarnmsg", None)
    if not lines_of or show is None:
        return function(*args)
    said = []
    warnings._showwarnmsg = said.append
    try:
        return function(*args)
    finally:
        if warnings._showwarnmsg == said.append:
            warnings._showwarnmsg = show
        for message in said:
            if message.filename == filename and message.lineno in lines_of:
                message.lineno = lines_of[message.lineno][0]
            show(message)


def users_syntax_error(error, text, filename, lines_of=None, as_file=False, preparsed=None):
    """A syntax error in the preparsed code, told in the user's own words:
    their line, and the caret where Python puts it in that line. The
    preparser changed the line (2^3, 1.5, R.<x>): its column means nothing
    in the user's line, so the caret comes from compiling the user's code
    as plain Python (plain_error) where that fails on the same line with
    the same words, and is left out where it does not. Where the preparser joined
    lines (lines_of), the error is on the first of them: plain Python's
    own line among them is taken, as python3 names it, and so are the
    lines its message names ("opening parenthesis '[' on line 3":
    users_tree could only name the first line of a joined one)."""
    lines = code_lines(text)
    if error.filename != filename or not error.lineno or not 0 < error.lineno <= len(lines):
        return error
    lineno = error.lineno
    joined = [group for group in (lines_of or {}).values()
              if statements_line(group, lines) == lineno]
    group = joined[0] if joined else [lineno]
    as_given = len(group) == 1 and (error.text or "").rstrip("\r\n") == lines[lineno - 1]
    if as_given and not (lines_of and NAMES_A_LINE.search(error.msg or "")):
        return as_read_from_a_file(error, as_file)
    plain = plain_error(text, group, filename, as_file, preparsed, lines_of)
    same = plain is not None and same_words(plain.msg, error.msg)
    msg = plain.msg if same else error.msg  # the user's lines (one a joined line could not name)
    if as_given:
        error.msg = msg
        return as_read_from_a_file(error, as_file)
    if same and an_f_strings_part(plain, lines):
        # Python 3.11 quotes the part of the f-string it compiled, with
        # its caret there: plain Python's part is the user's own text.
        told = type(error)(msg, (filename, plain.lineno, plain.offset, plain.text))
        told.end_lineno, told.end_offset = plain.end_lineno, plain.end_offset
        return told
    if not same and an_f_strings_part(error, lines):
        # Plain Python fails on the line's Sage first (R.<x> = QQ[]; ...):
        # the part as the preparser made it, as a fresh Sage quotes it.
        # (In the same words, plain Python's text is the user's line, or
        # the lines of the statement, taken above: an error 3.11 quotes
        # the whole line for, a conversion or a brace, is told below as
        # any other.)
        return error
    offset = end_offset = None
    at = line_of_error(error, lines, group)
    if same and marks_the_same(error, plain, lines, at):
        lineno = plain.lineno
        offset, end_offset = plain.offset, getattr(plain, "end_offset", None)
        # One that runs on past its line ((x^2 / 3)) is marked to the
        # line's end, as Python's printer marks it (syntax_error_as_c_prints).
        end_lineno = getattr(plain, "end_lineno", None) or lineno
    elif plain is not None and runs_off_its_line(error) and runs_off_its_line(plain):
        # Both ran off their line's end (x = 1 + \ at the end: the
        # preparser joins the backslash onto nothing, and the parser finds
        # nothing after the +; the user's text ends in the backslash): a
        # fresh Sage's caret past its line's end, past the user's.
        lineno, offset = plain.lineno, len(lines[plain.lineno - 1]) + 1
    elif at is not None:
        lineno = at
    elif plain is not None:
        lineno = plain.lineno
    # IndentationError and TabError stay what they are, as Python names them.
    told = type(error)(msg, (filename, lineno, offset, lines[lineno - 1] + "\n"))
    if end_offset is not None:
        told.end_lineno, told.end_offset = end_lineno, end_offset
    return told


def as_read_from_a_file(error, as_file):
    """error with its line's text as Python reads it from the file it
    compiled, where there is one (a fresh Sage's FILE.sage.py, as_file):
    the line with its newline. compile() of a string gives it without,
    and an error that runs on to a later line (a bracket left open:
    "Perhaps you forgot a comma?") is then marked to one short of the
    line's end (syntax_error_as_c_prints)."""
    if as_file and error.text is not None and not error.text.endswith("\n"):
        error.text += "\n"
    return error


def runs_off_its_line(error):
    """error's caret is past its line's text (the last of its text's
    lines), counted in characters or in bytes (Python 3.11 counts either):
    past both."""
    text = (error.text or "").rstrip("\n").split("\n")[-1].rstrip()
    return bool(error.text and error.offset) and error.offset - 1 >= len(text.encode("utf-8"))


def an_f_strings_part(error, users):
    """error is one Python 3.11 gives in an f-string: its text is not the
    user's line (that expression's, or the whole line as the preparser
    made it; 3.12 quotes the line)."""
    return (error.msg or "").startswith("f-string") and error.text is not None and \
        0 < error.lineno <= len(users) and error.text.rstrip("\n") != users[error.lineno - 1]


# The parser's errors that it finds at the end of the input, past the
# last line's text, where that is where the statement ends (a decorator's
# block left unindented by a last line that is a comment: "unexpected
# unindent").
PARSERS_END = re.compile(r"expected (an indented block|'except' or 'finally' block)|"
                         r"unexpected unindent$")


def found_at_end_as_file_reads(error, code, as_file):
    """error, from compiling code, as Python reports it where it reads a
    file (as_file): one the parser found at the end of the input (an
    indented block expected after `if y:` or `def f():`, an `except`
    after `try:`) is at column 0 there, where compile() of a string puts
    it past the last line's text; Python's printer then draws no caret.
    (The file's tokenizer counts the column in a buffer it emptied for
    a line it found none of.) Only the parser's errors at the end
    (PARSERS_END): the tokenizer's own ("unindent does not match ...",
    "unexpected EOF") stay as compile() gives them, found within a line
    (a backslash that ends the code continues onto the blank line a
    fresh Sage's file ends with: run_code). Returns whether it was so."""
    if not as_file or getattr(error, "end_offset", None) != -1 or not error.offset or \
            not PARSERS_END.match(error.msg or ""):
        return False
    lines = code_lines(code)
    if not lines or error.lineno != len(lines) or \
            error.offset not in (len(lines[-1]) + 1, len(lines[-1].encode("utf-8")) + 1):
        return False
    error.offset = 0
    return True


def nothing_after_a_decorator(error, code_end):
    """error is the parser's "invalid syntax" at the end of the input
    (column 0, on the code's last line: only a decorator with nothing
    after it gives it), which Python names at the file's last line, blank
    or a comment."""
    return error.msg == "invalid syntax" and error.offset == 0 and error.lineno == code_end


def line_of_error(error, users, group):
    """The user's line, of the lines group the preparser joined into
    error's code line, that the text at error's column came from
    (joined_lines_of), or None (one line, no column, or a column that
    names two lines: Python 3.11 counts it in characters or in bytes)."""
    text = (error.text or "").rstrip("\n")
    if len(group) < 2 or not error.offset or error.offset < 1 or "\n" in text:
        return None
    line_of = joined_lines_of(users, group, text)
    at = {line_of(column, False) for column in
          (len(text[:error.offset - 1].encode("utf-8")), error.offset - 1)}
    return at.pop() if len(at) == 1 else None


def marks_the_same(error, plain, users, at):
    """plain's caret, in the user's line, marks what error's marks in the
    preparsed line: plain's text ends with the user's line (not an
    f-string's part), it is the line error's column came from (at, where
    joined), and the token under each caret as shown is the same (or a
    number the preparser named): plain Python may fail first, in the same
    words, on Sage's syntax before it (R.<x> = QQ[]; y = x +* 2). An error
    of the compiler's own (break outside a loop) has no text to look in:
    the words and the line alone."""
    if not plain.offset or (at is not None and plain.lineno != at):
        return False
    if error.text is None or plain.text is None:
        return True
    line = users[plain.lineno - 1]
    # (Of a statement continued with backslashes, or with a string of
    # several lines, Python's text is every line of it, the error's last.)
    if plain.text.rstrip("\n").split("\n")[-1] != line:
        return False
    preparsed = error.text.rstrip("\n").split("\n")[-1]
    if not error.offset:
        return False
    # The offsets count characters, or bytes (a parser's error in a file,
    # Python 3.11): the same count in both, one of the two.
    for in_bytes in (False, True):
        theirs = token_under(line, plain.offset, in_bytes)
        ours = token_under(preparsed, error.offset, in_bytes)
        if theirs == ours if None in (theirs, ours) else same_token(ours, theirs):
            return True
    return False


def token_under(line, offset, in_bytes):
    """The token (TOKEN) of line at offset (1-based; in_bytes: of its
    UTF-8 bytes), or None past its end or on blank."""
    at = offset - 1
    if in_bytes:
        at = len(line.encode("utf-8")[:at].decode("utf-8", "ignore"))
    for m in TOKEN.finditer(line):
        if m.start() <= at < m.end():
            return m.group()
        if m.start() > at:
            break
    return None


def plain_error(text, group, filename, as_file, preparsed=None, lines_of=None):
    """Plain Python's syntax error in the user's text, where it is in the
    lines group (those of the error's code line), else None. Where plain
    Python fails first on a line before them (Sage's syntax: R.<x> =
    QQ[]), the text with the preparser's lines in place of those before
    the group (preparsed_before) is compiled instead."""
    error = compile_error(text, filename, as_file)
    if error is not None and error.lineno and error.lineno < group[0]:
        error = compile_error(preparsed_before(text, preparsed, lines_of, group[0]),
                              filename, as_file)
    return error if error is not None and error.lineno in group else None


def compile_error(text, filename, as_file):
    """The SyntaxError compiling text gives, else None (none given, or no
    text). Compiled as Python reads a file (as_compiled), warning nothing
    (quietly)."""
    if text is None:
        return None
    try:
        quietly(compile, as_compiled(text, as_file), filename, "exec")
    except SyntaxError as e:
        found_at_end_as_file_reads(e, text, as_file)
        return e
    except (ValueError, OverflowError):
        pass
    return None


def preparsed_before(text, preparsed, lines_of, first):
    """The user's text from line first on, after the preparsed code's
    lines that stand for the user's before it (what Python parsed, up to
    the error, when it compiled the preparsed code), line for line: a
    joined code line is followed by a blank line for each line joined
    onto it. None where the two do not count alike."""
    if preparsed is None:
        return None
    users, code = code_lines(text), code_lines(preparsed)
    if lines_of:
        before = []
        for number in sorted(lines_of):
            group = lines_of[number]
            if group[-1] >= first:
                break
            # The code line at its statement's line, blank lines for
            # the rest of the group.
            blank = statements_line(group, users) - group[0]
            before += [""] * blank + [code[number - 1]] + [""] * (len(group) - 1 - blank)
    elif counted(code) == counted(users):
        before = code[:first - 1]
    else:
        return None
    if len(before) != first - 1:
        return None
    return "\n".join(before + users[first - 1:])


# sage-preparse's coding line: one of the first two lines that has this
# (the second, where both have), moved to the top of the .sage.py it writes;
# and Python's own test of a file's first line for its encoding (PEP 263).
SAGES_CODING_LINE = re.compile(r"coding[:=]\s*([-\w.]+)")
PYTHONS_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)


def coding_of(text):
    """The encoding Python reads the .sage.py of `sage FILE` in, where it
    is not UTF-8 (else None): sage-preparse writes the code's coding line
    first in that file, in UTF-8, and Python decodes the file by that line
    where it is a coding comment. One Python does not know, or cannot read
    source in (UTF-16: not ASCII's bytes), is Python's SyntaxError
    ("encoding problem: NAME"), with no line."""
    coding = None
    for line in text.splitlines()[:2]:
        if SAGES_CODING_LINE.search(line):
            coding = line
    cookie = PYTHONS_COOKIE.match(coding) if coding is not None else None
    if cookie is None:
        return None
    name = python_name(cookie.group(1))
    try:
        codec = codecs.lookup(name).name
        if "\n#".encode(codec) != b"\n#":
            raise LookupError(name)
    except (LookupError, UnicodeError):
        raise SyntaxError("encoding problem: " + name) from None
    return None if codec == "utf-8" else name


def python_name(name):
    """An encoding's name as Python's tokenizer gives it (get_normal_name):
    UTF-8's and Latin-1's spellings made one, others as they are."""
    folded = name[:12].lower().replace("_", "-")
    if folded == "utf-8" or folded.startswith("utf-8-"):
        return "utf-8"
    if folded in ("latin-1", "iso-8859-1", "iso-latin-1") or \
            folded.startswith(("latin-1-", "iso-8859-1-", "iso-latin-1-")):
        return "iso-8859-1"
    return name


def decoded_by(coding, text):
    """text (UTF-8, its lines ended by newlines alone) as Python decodes it
    from a file in coding (coding_of's name): line by line, as its
    tokenizer reads (a "\x85" that "Å"'s bytes give in latin-1 ends no
    line)."""
    try:
        return "\n".join(line.encode("utf-8").decode(coding) for line in text.split("\n"))
    except UnicodeError:
        raise SyntaxError("encoding problem: " + coding) from None


def as_compiled(code, as_file):
    """code as compile() reads it as Python reads a file (as_file): its
    UTF-8 bytes (Python 3.11 counts the parser's columns past a character
    of several bytes in bytes there), but where a coding comment in its
    first two lines names another encoding (the text is then what Python
    read), or where it starts with a byte order mark (a second one: the
    bytes' would be taken for the file's, where Python refuses it)."""
    if not as_file or code.startswith("\ufeff"):
        return code
    for line in code.split("\n", 2)[:2]:
        cookie = PYTHONS_COOKIE.match(line)
        try:
            if cookie is not None and codecs.lookup(python_name(cookie.group(1))).name != "utf-8":
                return code
        except LookupError:
            return code
    return code.encode("utf-8")


def code_lines(text, keepends=False):
    """The lines of the code's text as Python reads a file's: ended by
    newlines alone (every other line break of str.splitlines the
    preparser makes one, LINE_BREAKS)."""
    lines = io.StringIO(text).readlines()
    return lines if keepends else [line[:-1] if line.endswith("\n") else line for line in lines]


# What str.splitlines ends a line at besides a newline (CR is one by
# then): Sage's preparser splits the code there and joins it with newlines.
LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class CodesLoader(SourceFileLoader):
    """The loader python3 gives the file it runs (a SourceFileLoader of
    it, so named), whose source is the code's own text: the file is not in
    the container, and Python's, reading it, would fail where warnings
    (module_globals) or linecache (a lazy entry) ask it for the source."""

    def get_source(self, fullname):
        entry = _code_lines.get(self.path)
        return "".join(entry[2]) if entry is not None else super().get_source(fullname)


CodesLoader.__name__ = CodesLoader.__qualname__ = SourceFileLoader.__name__
CodesLoader.__module__ = SourceFileLoader.__module__


def _as_pythons_bottom():
    """The function at_code_depth pads with: frames that look like what a
    fresh Python has below a file's frame, which is nothing. Python's
    warnings, given a stacklevel past the stack's bottom, name the sys
    module at line 1 ("sys:1: UserWarning: ..."), with sys's registry;
    these frames' globals are sys's and their file "sys", line 1, so a
    stacklevel past the code's first frame names the same, where it would
    otherwise name the launcher's lines, up to as many levels past as
    there are such frames (PADS). Everything it uses is an argument, never
    a name looked up in sys."""
    source = "def pad(pad, more, function, args): " \
        "return pad(pad, more - 1, function, args) if more > 0 else function(*args)\n"
    code = next(c for c in compile(source, "sys", "exec").co_consts if hasattr(c, "co_code"))
    return type(_as_pythons_bottom)(code, sys.__dict__)


_pad = _as_pythons_bottom()


def launchers_frame(frame):
    """The frame is the launcher's, not the code's: this module's, or one
    of those the code runs on (at_code_depth)."""
    return frame.f_globals is globals() or frame.f_code is _pad.__code__


def launchers_own(tb):
    """Every frame of the traceback (if any) is the launcher's: no frame of
    the code's (an error of the launcher's own compile(), not one the code
    raised; a builtin atexit handler's, raised in the frame that ran it)."""
    return past_launchers_own(tb) is None


def past_launchers_own(tb):
    """The traceback from its first frame that is not the launcher's
    (None: there is none)."""
    while tb is not None and launchers_frame(tb.tb_frame):
        tb = tb.tb_next
    return tb


def walk_stack(f):
    """traceback.walk_stack as a fresh Python's: the stack ends at the
    code's first frame (below it, the launcher's are not the code's). What
    traceback.print_stack(), format_stack(), extract_stack() and logging's
    stack_info print. As traceback's own where f is None (the same number
    of frames up: this replaces it)."""
    if f is None:
        f = sys._getframe().f_back.f_back.f_back.f_back
    while f is not None and not launchers_frame(f):
        yield f, f.f_lineno
        f = f.f_back


def outer_frames_of(getouterframes):
    """inspect.getouterframes (what inspect.stack() lists) as a fresh
    Python's: the frames end at the code's first, as walk_stack's. Named
    as it is (its name, module and docstring), with no __wrapped__."""

    # Each frame's info is made as getouterframes makes it, for the code's
    # frames only (walk_stack's): made for every frame, then cut, the
    # launcher's 60 below made inspect.stack() 7 times as slow as a fresh
    # Python's (5-7 ms).
    def outer_frames(frame, context=1):
        frames = []
        for frame, _ in walk_stack(frame) if frame is not None else ():
            info = inspect.getframeinfo(frame, context)
            if hasattr(info, "positions"):  # Python 3.11 on
                frames.append(inspect.FrameInfo(frame, *info, positions=info.positions))
            else:
                frames.append(inspect.FrameInfo(frame, *info))
        return frames
    functools.update_wrapper(outer_frames, getouterframes)
    del outer_frames.__wrapped__
    return outer_frames


_outer_frames = None  # inspect.getouterframes as this process wrapped it


# run_code's status for an uncaught KeyboardInterrupt: Python prints it,
# ends as usual (threads, atexit), then dies of SIGINT (`sage FILE`'s shell
# says 130), and so does the call's process (leave).
DIES_OF_SIGINT = -2


def run_code(source, namespace, filename, preparse_file, show_last=False, begin=None,
             cell=False):
    """The code as `sage FILE` runs it, in the namespace made before it
    came; returns the exit status (DIES_OF_SIGINT: none, see there).
    show_last: a last statement that is a bare expression has its value
    displayed, as a notebook cell's. begin(): called as the code
    begins, once it is compiled: from there a KeyboardInterrupt is the
    code's, with the code's frames. cell: a session's cell, text that a
    notebook compiles as it is (no coding line applies)."""
    text, preparsed, lines_of, as_file = "", None, None, False
    # The builtins the code shares with Python, as __main__'s: where none
    # are named, exec() would give it this module's own (see its top).
    namespace.setdefault("__builtins__", builtins)
    try:
        # A byte order mark starts many files saved on Windows: not code.
        # Line ends as `sage FILE` reads its file, in text mode: CRLF and
        # CR are newlines (Sage 9.5's preparser takes a backslash before a
        # CR for its backslash operator).
        text = source.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        text = LINE_BREAKS.sub("\n", text)
        coding = None if cell else coding_of(text)
        # The constants run first, so that the code's lines keep their
        # numbers, and tracebacks quote the user's own lines.
        constants, preparsed, lines_of = split_constants(text, preparse_file(text))
        if coding is not None:  # what Python reads of what the preparser wrote
            text, constants, preparsed = (decoded_by(coding, part)
                                          for part in (text, constants, preparsed))
        # Compiled as Python reads a file (as_compiled; of a coding line's
        # file, the text it decoded), and its errors at the end placed as
        # there; a notebook compiles a cell as text, and moves no
        # `from __future__` import.
        as_file = not cell
        futures = None
        # Compiled under the filters python3 compiles `sage FILE`'s file
        # under (PYTHONS_FILTERS); a cell under the session's, as a
        # notebook compiles it.
        with nullcontext() if cell else WarningsFiltered(PYTHONS_FILTERS):
            if not cell:
                futures = FutureImports(text, preparsed, lines_of, filename)
                preparsed = futures.code
            if not cell and preparsed.endswith("\\") and \
                    compile_error(preparsed + "\n\n", filename, as_file) is None:
                # A fresh Sage's file has a blank line after the code: a
                # backslash that ends the code continues onto it, and runs.
                # Where that too fails (x = 1 + \), the error is told as
                # python3 reading the user's file tells it, at its own lines.
                preparsed += "\n\n"
            # What multiprocessing's spawn and forkserver children run.
            mpmain.main_is(filename, constants, preparsed,
                           futures.texts if futures is not None else ())
            linecache.cache[filename] = _code_lines[filename] = (
                len(text), None, code_lines(text, keepends=True), filename)
            # compile() checks a tree it is given node by node, recursively: a
            # flat sum of a thousand terms passes its limit, and one of 19,000
            # cannot be made a tree at all. From text, as `sage FILE` compiles
            # it, there is no such check, and the error past its own limit is
            # Python's "during compilation" (a joined statement's lines are
            # then at its first; no value shown).
            code = tree = last = None
            try:
                tree = users_tree(preparsed, filename, lines_of, text, as_file)
            except RecursionError:
                pass
            if tree is not None:
                if futures is not None:
                    futures.in_front_of(tree, filename, text)
                if show_last and tree.body and isinstance(tree.body[-1], ast.Expr) and \
                        not ends_quietly(preparsed):
                    last = tree.body.pop()
                try:
                    code = compile(tree, filename, "exec")
                    if last is not None:
                        last = compile(ast.Expression(last.value), filename, "eval")
                except RecursionError:
                    code = None
            if code is None:
                code, last = compile(as_compiled(preparsed, as_file), filename, "exec"), None
        if begin is not None:
            begin()
        if constants:
            at_code_depth(exec, compile(constants, filename, "exec"), namespace)
        at_code_depth(exec, code, namespace)
        if last is not None:
            value = at_code_depth(eval, last, namespace)
            display.show_last(value)
        flush_io()
        return 0
    except SystemExit as e:
        flush_io()
        return exit_status(e)
    except BaseException as e:
        # Told below, once no exception is being handled, as Python tells
        # it (a hook's own print_exc() finds none).
        kind, value, tb = type(e), e, e.__traceback__
        flush_io()
        # Python dies of SIGINT for a KeyboardInterrupt itself only: not
        # for a subclass (Sage's alarm() raises one, AlarmInterrupt).
        status = DIES_OF_SIGINT if type(e) is KeyboardInterrupt else 1
    # Telling it may fail too (the code closed stderr, or its exception
    # cannot be printed): the status is the same.
    try:
        # The first frames are this module's: not the user's (this
        # function's; begin_cell's, where a KeyboardInterrupt the code's own
        # thread sent comes as a session's cell begins: then the handler's
        # frame, cysignals', is the first shown, as it is where one comes
        # at the code's first line).
        shown = past_launchers_own(tb)
        if isinstance(value, SyntaxError) and shown is None:
            # The code's own, from compile(): not one its code raised. Told
            # as compile() gave it where the telling in the user's words
            # fails (a line no rule foresaw): never nothing.
            try:
                value = users_syntax_error(value, text, filename, lines_of, as_file, preparsed)
            except Exception:
                pass
            kind, shown = type(value), None
        # As Python's PyErr_Print: the sys.last_ names (cleared before the
        # end's finalisers, as Python's teardown does), then the hook.
        sys.last_type, sys.last_value, sys.last_traceback = kind, value, shown
        if sys.version_info >= (3, 12):
            sys.last_exc = value
        # Missing is not None: Python calls a None hook, and tells the
        # TypeError that gives.
        hook = getattr(sys, "excepthook", _MISSING)
        if hook is not _MISSING and hook is not getattr(sys, "__excepthook__", None):
            status = call_codes_excepthook(hook, kind, value, shown, status)
        else:
            if hook is _MISSING:
                print("sys.excepthook is missing", file=sys.stderr)
            try:
                print_users_exception(kind, value, shown)
            except Exception:
                tell_lost_stderr(value)
                raise
            if isinstance(value, (FileNotFoundError, ModuleNotFoundError)) or (
                    isinstance(value, OSError) and "did not find file" in str(value)):
                sys.stderr.write(MISSING_FILE_NOTE)
    except BaseException:
        pass
    finally:
        # This frame and the traceback hold each other, and with it the
        # code's frames and what they hold: let go, for the end's
        # finalisers (finish_as_python_does).
        kind = value = tb = shown = None
    return status


def exit_status(e):
    """The status of SystemExit e, as Python's: an int (a subclass's too)
    is the exit code. No other number is, a Sage Integer neither:
    sys.exit(3) in a .sage file is preparsed to sys.exit(Integer(3)),
    which a fresh Sage prints and exits 1 for (numpy's int64 and gmpy2's
    mpz too: a harness's sys.exit(failures.sum()) must not pass)."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        # Its value, as Python reads it, not its own __int__'s.
        code = int.__index__(code)
        # Past a C long, Python's exit code is -1: 255.
        return code & 0xFF if -(1 << 63) <= code < (1 << 63) else 0xFF
    # As Python's: the code's str on sys.stderr (on C's stderr where there
    # is none), then a newline, on C's stderr where sys.stderr fails.
    err = getattr(sys, "stderr", None)
    try:
        if err is None:
            os.write(2, str(code).encode("utf-8", "backslashreplace"))
        else:
            err.write(str(code))
    except BaseException:
        pass
    try:
        err.write("\n")
    except BaseException:
        try:
            os.write(2, b"\n")
        except OSError:
            pass
    return 1


def tell_lost_stderr(value):
    """Python's words where an uncaught exception cannot be printed on
    sys.stderr (closed, missing, not a file): a dump of the exception,
    then "lost sys.stderr", on C's stderr."""
    try:
        dump = ctypes.pythonapi._PyObject_Dump
        dump.argtypes, dump.restype = [ctypes.py_object], None
        dump(value)
        os.write(2, b"lost sys.stderr\n")
    except Exception:
        pass


def call_codes_excepthook(hook, kind, value, tb, status):
    """The code's own sys.excepthook tells its uncaught exception, as
    Python calls it; where the hook fails, Python's words for that (a
    SystemExit from it is the status). Returns the status."""
    try:
        hook(kind, value, tb)
        return status
    except SystemExit as e:
        return exit_status(e)
    except BaseException as e:
        failed, error, its_tb = type(e), e, e.__traceback__
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    print("Error in sys.excepthook:", file=sys.stderr)
    print_users_exception(failed, error, its_tb.tb_next if its_tb else its_tb)
    print("\nOriginal exception was:", file=sys.stderr)
    print_users_exception(kind, value, tb)
    return status


def leave(status):
    """The end of the call's process, with status: os._exit, or, for
    DIES_OF_SIGINT, as Python's after an uncaught KeyboardInterrupt: its
    handler reset, SIGINT sent to itself (where the code blocked it, the
    process lives on to exit 130)."""
    if status == DIES_OF_SIGINT:
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            pass
        status = 128 + signal.SIGINT  # as Python, where the signal did not end it
    os._exit(status)


def print_users_exception(kind, value, tb, out=None):
    """Python's print of an exception the code raised, on out (stderr),
    with no frame of the import hooks' (deferred.unhooked): a cold call
    has none. Nothing where stderr is None, as Python."""
    out = sys.stderr if out is None else out
    if out is None:
        return
    tb = deferred.unhooked(value, tb)
    with as_python_prints(value, tb):
        lines = None
        if sys.version_info >= (3, 13):  # Python's printer is the traceback module...
            try:
                lines = list(traceback.TracebackException(
                    type(value), value, tb, compact=True,
                    limit=getattr(traceback, "BUILTIN_EXCEPTION_LIMIT", None)).format())
            except Exception:
                # ...and C's where the module fails. Modelled for a limit
                # that is no int only (what the code sets); C's own print
                # has no carets, which this one still draws. The images
                # run 3.11, whose printer is C's (the path below).
                pass
        if lines is None:
            told = traceback.TracebackException(type(value), value, tb, limit=c_traceback_limit(),
                                                compact=True)
            as_c_prints(told, value)
            lines = told.format()
        for line in lines:
            out.write(line)


def c_traceback_limit():
    """sys.tracebacklimit as Python's own printer in C reads it (an
    exception's before 3.13, and 3.13's where the traceback module's print
    fails; an unraisable one's on every version: tell_unraisable), for the
    traceback module: an int only (the code's sys.tracebacklimit = 0 is
    Sage's Integer(0), which C ignores), else 1000; the last that many
    frames (the module's first, where the limit is positive); none at 0
    or less."""
    limit = getattr(sys, "tracebacklimit", None)
    # Its value as C reads it: no comparison of an int subclass's own.
    limit = operator.index(limit) if issubclass(type(limit), int) else 1000
    return -min(limit, sys.maxsize) if limit > 0 else 0


def _unread(filename):
    """Whether Python's own printer (in C) quotes no line of filename where
    the traceback module, which prints ours, would: a relative name that
    is not a file from the working directory, such as Cython's
    "sage/rings/integer.pyx". The C printer then looks only for its last
    part in each sys.path entry; the traceback module for all of it, and
    finds Sage's .pyx files. Not the code's own lines (registered in
    linecache with no date, as a loader's are), nor a "<...>" name, which
    neither reads."""
    if sys.version_info >= (3, 13):  # Python's printer is the traceback module
        return False
    entry = linecache.cache.get(filename)
    if filename in _code_lines or (entry is not None and len(entry) == 4 and entry[1] is None) or \
            (filename.startswith("<") and filename.endswith(">")) or os.path.isabs(filename):
        return False
    if os.path.exists(filename):
        return False
    tail = os.path.basename(filename)
    return not any(isinstance(place, str) and os.path.exists(os.path.join(place, tail))
                   for place in sys.path)


# The code's lines, by its file's name, as run_code gave them to linecache.
_code_lines = {}


class as_python_prints:
    """While Python's print of value (tb its traceback) is made by the
    traceback module, it reads and prints as Python's own printer (in C,
    before 3.13): the files whose lines the C printer would not quote
    (_unread) have none, and linecache is as it was after; the code's own
    lines are there (put back where the code cleared linecache: Python's
    printer reads them from the file, which a fresh Sage has on disk)."""

    def __init__(self, value, tb):
        names = {}  # in order, each once
        for trace in [tb] + [each.__traceback__ for each in deferred.printed_with(value)]:
            while trace is not None:
                names[trace.tb_frame.f_code.co_filename] = None
                trace = trace.tb_next
        self.names = [name for name in names if _unread(name)]

    def __enter__(self):
        for name, entry in _code_lines.items():
            # (Not a lazy entry the code's own lookups left: one of 1.)
            if len(linecache.cache.get(name, ())) != 4:
                linecache.cache[name] = entry
        self.kept = {name: linecache.cache[name] for name in self.names
                     if name in linecache.cache}
        for name in self.names:
            linecache.cache[name] = (0, None, [], name)

    def __exit__(self, *exception):
        for name in self.names:
            linecache.cache.pop(name, None)
        linecache.cache.update(self.kept)


def syntax_error_as_c_prints(self, stype):
    """The lines of a SyntaxError's print (its place, its text, the caret,
    its message) for a traceback.TracebackException (self) by the rules of
    Python's own printer before 3.13 (pythonrun.c, print_exception) where
    the module's differ: a subclass (IndentationError, TabError) has one
    caret, as no end is read for it; an error that runs on past its line
    is marked to that line's end; the marks never run past the text and
    are at least one; tabs and form feeds lead no line; the line with the
    offset is the one shown of a text of several; no message, no colon;
    with no line number, or places that are no numbers (the code's own
    SyntaxError), printed as any other exception (str(value))."""
    try:
        lines = _syntax_error_lines(self)
    except (TypeError, ValueError, OverflowError):
        lines = None
    if lines is None:
        message = getattr(self, "_str", self.msg)  # str(value), as the module keeps it
    else:
        yield from lines
        message = self.msg
    try:
        message = "" if message is None else str(message)
    except Exception:
        yield stype + ": <exception str() failed>\n"
        return
    yield stype + (": " + message if message else "") + "\n"


def as_c_prints(told, value):
    """told (a traceback.TracebackException of value) and those chained to
    it, their suggested names added as C adds them (c_suggestion, before
    3.12), their syntax errors printed by C's rules (syntax_error_as_c_prints):
    each made one that does (its own class, not the module's, which other
    threads print with meanwhile), with the places of its exception as C
    reads them (c_reads; the module keeps them as strings)."""
    seen, todo = set(), [(told, value)]
    while todo:
        each, exception = todo.pop()
        if each is None or id(each) in seen:
            continue
        seen.add(id(each))
        each.__class__ = SyntaxErrorAsCPrints
        if sys.version_info < (3, 12) and isinstance(exception, (NameError, AttributeError)):
            suggestion = c_suggestion(exception)
            if suggestion is not None:
                each._str += ". Did you mean: '%s'?" % suggestion
        if isinstance(exception, SyntaxError):
            try:
                each.c_places = c_reads(type(exception), exception.lineno, exception.offset,
                                        exception.end_lineno, exception.end_offset)
            except Exception:  # C clears whatever its reading raised
                each.c_places = None
                each.lineno = None  # C's printer reads none: as any other exception
        todo += [(each.__cause__, getattr(exception, "__cause__", None)),
                 (each.__context__, getattr(exception, "__context__", None)),
                 *zip(getattr(each, "exceptions", None) or (),
                      getattr(exception, "exceptions", None) or ())]


# Python 3.11's finder of a name to suggest (Python/suggestions.c), as C
# runs it: at most this many names looked at, names compared by their
# UTF-8 bytes up to this long, a move costing 2 and a change of case 1.
SUGGEST_MAX_NAMES = 750
SUGGEST_MAX_BYTES = 40
MOVE_COST, CASE_COST = 2, 1


def c_suggestion(exception):
    """The name Python's own printer (C, 3.11) suggests after a NameError's
    or an AttributeError's message (". Did you mean: 'path'?"), or None:
    the traceback module gives none before 3.12, and C's finder is not
    exported, so this is its rules: an AttributeError's object's dir(); a
    NameError's frame (its traceback's last) and that frame's local
    names, then its globals, then its builtins; of those classes exactly. Nothing of the exception
    is changed, and its message is not read again."""
    if type(exception) not in (AttributeError, NameError):
        return None  # C's rule: the classes themselves, no subclass
    try:
        name = exception.name
        if type(name) is not str:
            return None
        if type(exception) is AttributeError:
            # (None is also what an object C was not given reads as: the
            # None's attributes, for which an error names None, win.)
            return closest(dir(exception.obj), name)
        last = exception.__traceback__
        if last is None:
            return None
        while last.tb_next is not None:
            last = last.tb_next
        frame = last.tb_frame
        for names in (frame.f_code.co_varnames, frame.f_globals, frame.f_builtins):
            found = closest(list(names), name)
            if found is not None:
                return found
    except Exception:
        pass
    return None


def closest(names, name):
    """The name of names nearest to name as suggestions.c measures it, or
    None: none near enough (a third of the bytes involved changed at
    most), too many names to look at, or one that is no str (C gives up)."""
    if len(names) >= SUGGEST_MAX_NAMES:
        return None
    wrong = name.encode("utf-8", "surrogatepass")
    best, best_distance = None, sys.maxsize
    for candidate in names:
        if not isinstance(candidate, str):
            return None
        if candidate == name:
            continue
        right = candidate.encode("utf-8", "surrogatepass")
        most = min((len(wrong) + len(right) + 3) * MOVE_COST // 6, best_distance - 1)
        distance = levenshtein(wrong, right, most)
        if distance <= most and (best is None or distance < best_distance):
            best, best_distance = candidate, distance
    return best


def levenshtein(a, b, most):
    """suggestions.c's distance of two byte strings, or most + 1 where it
    is more than most."""
    if a == b:
        return 0
    while a and b and a[0] == b[0]:
        a, b = a[1:], b[1:]
    while a and b and a[-1] == b[-1]:
        a, b = a[:-1], b[:-1]
    if not a or not b:
        return (len(a) + len(b)) * MOVE_COST
    if len(a) > SUGGEST_MAX_BYTES or len(b) > SUGGEST_MAX_BYTES:
        return most + 1
    if len(b) < len(a):
        a, b = b, a
    if (len(b) - len(a)) * MOVE_COST > most:
        return most + 1
    row = [MOVE_COST * (i + 1) for i in range(len(a))]
    result = 0
    for b_index, code in enumerate(b):
        distance = result = b_index * MOVE_COST
        minimum = sys.maxsize
        for index, other in enumerate(a):
            substitute = distance + substitution_cost(code, other)
            distance = row[index]
            result = min(min(result, distance) + MOVE_COST, substitute)
            row[index] = result
            minimum = min(minimum, result)
        if minimum > most:
            return most + 1
    return result


def substitution_cost(a, b):
    """suggestions.c's cost of one byte for another: none, a change of
    ASCII case, or a move."""
    if a & 31 != b & 31:
        return MOVE_COST
    if a == b:
        return 0
    if 65 <= a <= 90:
        a += 32
    if 65 <= b <= 90:
        b += 32
    return CASE_COST if a == b else MOVE_COST


def c_reads(kind, lineno, offset, end_lineno, end_offset):
    """A syntax error's line number, offset, end line and end offset as
    pythonrun.c's parse_syntax_error reads them: ints (a Sage Integer is
    none: TypeError, and C prints the exception as any other), each
    within a C long (else OverflowError); no end of its own but for
    SyntaxError itself."""

    def number(value, absent):
        if value is None and absent is not None:
            return absent
        if not issubclass(type(value), int):  # its type, as C checks it
            raise TypeError(value)
        value = operator.index(value)  # the int itself: no method of a subclass's
        if not -2**63 <= value < 2**63:
            raise OverflowError(value)
        return value
    lineno = number(lineno, None)
    offset = number(offset, -1)
    if kind is not SyntaxError:
        return lineno, offset, lineno, -1
    return lineno, offset, number(end_lineno, lineno), number(end_offset, -1)


def _syntax_error_lines(self):
    """syntax_error_as_c_prints's lines before the message: None where C's
    printer reads no line number (it prints the exception as any other)."""
    places = getattr(self, "c_places", None)
    if places is None:  # not the exception's own: the module's strings
        places = c_reads(self.exc_type, self.lineno and int(self.lineno), self.offset,
                         self.end_lineno and int(self.end_lineno), self.end_offset)
    lineno, offset, end_lineno, end_offset = places
    lines = ['  File "%s", line %d\n' % ("<string>" if self.filename is None else self.filename,
                                        lineno)]
    try:
        text = None if self.text is None else self.text.encode("utf-8")
    except (AttributeError, UnicodeError):  # no str: C's printer fails there
        text = None
    if text is None:
        return lines
    # C's arithmetic as it is: offsets in characters, lengths in bytes.
    if end_lineno > lineno:
        end_offset = len(text)
    end_offset = min(end_offset, len(text) + 1)
    marks = end_offset - offset if 0 < end_offset and offset < end_offset else 1
    stripped = text.lstrip(b" \t\f")
    offset -= 1 + len(text) - len(stripped)
    text = stripped
    length = len(text) - text.endswith(b"\n")
    offset = min(offset, length)
    while 0 <= text.find(b"\n") < offset:
        skipped = text.find(b"\n") + 1
        text, length, offset = text[skipped:], length - skipped, offset - skipped
    lines.append("    " + text.decode("utf-8") + ("" if text[length:length + 1] == b"\n" else "\n"))
    if offset >= 0:
        lines.append("    " + " " * offset + "^" * marks + "\n")
    return lines


class SyntaxErrorAsCPrints(traceback.TracebackException):
    """A traceback.TracebackException whose syntax error is printed by C's
    rules (as_c_prints)."""
    _format_syntax_error = syntax_error_as_c_prints


def tell_unraisable(u):
    """Python's default sys.unraisablehook (an error in __del__, in the
    wait for threads at the end), with the user's lines: its traceback
    without the exceptions chained to it, and "Name: " even where the
    exception says nothing."""
    err_msg, obj, kind, value, tb = (u.err_msg, u.object, u.exc_type, u.exc_value,
                                     u.exc_traceback)
    # Python gives an exception that has no traceback (a builtin's, such as
    # atexit.register(sys.exit, 9)'s) the frame that was running: the
    # launcher's own, which runs the atexit handlers here. Python runs them
    # after the last frame is gone, and shows none.
    if launchers_own(tb):
        tb = None
    try:
        out = sys.stderr
        if obj is not None:
            try:
                shown = repr(obj)
            except BaseException:
                shown = "<object repr() failed>"
            out.write("%s: %s\n" % (err_msg or "Exception ignored in", shown))
        elif err_msg:
            out.write("%s:\n" % err_msg)
        if tb is not None:
            tb = deferred.unhooked(value, tb)
            with as_python_prints(value, tb):
                frames = "".join(traceback.format_tb(tb, limit=c_traceback_limit()))
            if frames:  # as Python's: no header where the limit shows none
                out.write("Traceback (most recent call last):\n" + frames)
        if kind is None:
            return
        module = getattr(kind, "__module__", None)
        name = getattr(kind, "__qualname__", "<unknown>")
        if not isinstance(module, str):
            name = "<unknown>" + name  # as CPython writes it
        elif module not in ("builtins", "__main__"):
            name = module + "." + name
        if value is not None:
            try:
                name += ": " + str(value)
            except BaseException:
                name += ": <exception str() failed>"
        out.write(name + "\n")
        out.flush()
    except BaseException:
        pass


def tell_in_users_lines():
    """Uncaught errors of the code's threads and atexit handlers told as
    the main code's are, with the user's lines quoted: Python's own
    printers for those (written in C) read source from disk, and the
    code's lines are only in linecache. The words are Python's. A stack
    the code prints or lists ends at its own frames (walk_stack,
    outer_frames_of)."""

    def thread_error(args):
        if args.exc_type is SystemExit:
            return  # as Python: a thread's sys.exit() ends the thread only
        name = args.thread.name if args.thread is not None else threading.get_ident()
        # As Python's: where stderr is None, the thread's own from its
        # start, else nothing.
        out = sys.stderr
        if out is None:
            out = getattr(args.thread, "_stderr", None)
            if out is None:
                return
        try:
            print("Exception in thread %s:" % name, file=out, flush=True)
            print_users_exception(args.exc_type, args.exc_value, args.exc_traceback, out)
            out.flush()
        except BaseException:
            pass

    threading.excepthook = thread_error
    sys.unraisablehook = tell_unraisable
    traceback.walk_stack = walk_stack
    global _outer_frames
    if inspect.getouterframes is not _outer_frames:
        _outer_frames = inspect.getouterframes = outer_frames_of(inspect.getouterframes)


def finish_as_python_does(namespace, before):
    """What a Python program does at its end that can be seen, without the
    interpreter's teardown (the launcher's child leaves with os._exit, for
    speed): wait for the threads that are not daemons (a thread's late
    print or show() is the code's output), run the code's atexit
    handlers, then finalise what only the code's globals hold, as the
    teardown's collector finalises __main__'s objects before it lets go
    of any global: an object's __del__ (its print, its error's
    "Exception ignored in"), a file left open flushed (under
    $SAGE_SANDBOX_OUT, a file sent back whole). Only values the code
    bound (before: the namespace before the code; None: none, a
    session's), each once, in the teardown's order, none where a thread
    still running holds the globals (held_by_the_code_alone), and only
    those nothing else refers to: sys.stdout kept in a global,
    or Sage's maxima, is still in use (finalised, the one would close
    the code's output, the other quit Maxima, which a fresh Sage's
    atexit quits first). Daemon threads are left, as Python leaves them,
    but still run meanwhile. The call's deadline bounds the wait: the
    host stops the call there."""
    try:
        threading._shutdown()
    except BaseException as e:
        # Where the wait itself is interrupted (a thread's SIGINT to the
        # process), Python tells it as unraisable. The rest of the end goes on.
        tell_as_unraisable(e, threading)
    # Python runs them once its last frame is gone: a builtin handler's
    # error (atexit.register(sys.exit, 9)) has no traceback, where here it
    # gets this frame. tell_unraisable leaves it out; a hook of the code's
    # own is given none, as Python gives it.
    hook = sys.unraisablehook

    def as_python_tells(u):
        if launchers_own(u.exc_traceback):
            u = type(u)((u.exc_type, u.exc_value, None, u.err_msg, u.object))
        return hook(u)
    if hook is not tell_unraisable:
        sys.unraisablehook = as_python_tells
    try:
        # The handlers, and the finalisers below, called from C (no frame
        # between), as deep as the code ran and on _pad's frames, as the
        # code (a warning's stacklevel past them names "sys:1").
        at_code_depth(atexit._run_exitfuncs)
    except BaseException:
        pass
    if sys.unraisablehook is as_python_tells:  # not one a handler put there
        sys.unraisablehook = hook
    # As Python's teardown, before it finalises __main__: the last
    # uncaught exception's traceback would keep the code's frames alive.
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        sys.__dict__.pop(name, None)
    if before is None:
        return
    try:
        held = held_by_the_code_alone(namespace, before)
        if held:
            finalise = ctypes.pythonapi.PyObject_CallFinalizer
            finalise.argtypes, finalise.restype = [ctypes.py_object], None
            for value in held:
                at_code_depth(finalise, value)  # once: the object is marked finalised
    except BaseException:
        pass


def tell_as_unraisable(e, obj):
    """e, raised in what Python's C code calls at the end (the wait for
    threads, the last flush), told as Python tells it there: unraisable,
    in obj, through the hook, the code's own or ours (tell_unraisable),
    without this module's frame."""
    told = SimpleNamespace(exc_type=type(e), exc_value=e,
                           exc_traceback=e.__traceback__.tb_next,
                           err_msg=None, object=obj)
    try:
        if sys.unraisablehook is sys.__unraisablehook__:  # takes its own type only
            tell_unraisable(told)
        else:
            sys.unraisablehook(told)
    except BaseException:
        pass


def flush_as_python_does():
    """Python's last flush of sys.stdout and sys.stderr at its end (one
    that is closed, None or missing is left): False where one failed,
    and Python's exit status is then 120. stdout's error is told as
    unraisable ("Exception ignored in"), stderr's is not."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            if stream.closed:
                continue
        except BaseException:
            pass  # no closed: Python takes it for open
        try:
            stream.flush()
        except BaseException as e:  # a SystemExit too: Python's C calls it
            flushed = False
            if name == "stdout":
                tell_as_unraisable(e, stream)
    # Python's own streams, where the code put others in their place:
    # their teardown closes them, and what they held goes out then, an
    # error unsaid and the status unchanged (as python3 ends).
    for name in ("__stdout__", "__stderr__"):
        stream = getattr(sys, name, None)
        if stream is not None and stream is not getattr(sys, name.strip("_"), None):
            try:
                stream.flush()
            except BaseException:
                pass
    return flushed


def flush_io():
    """Python's flush of sys.stderr, then sys.stdout, as the code ends and
    before its uncaught exception or exit message is told (flush_io in
    pythonrun.c): a line the code had not ended comes before them, and
    before what the end's threads and handlers print. Errors unsaid."""
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


# What Sage's import left that a fresh Sage's code finds as it begins,
# and a call's process puts back (note_sages_import): whether it
# registered weakref.finalize's atexit hook (the warm-up's finalizers can
# register it too), and whether it seeded libc's rand().
_sage_registered_finalize = False
# Seeded until noted otherwise: without the note (the launcher's unit
# tests, a libc other than glibc) each call draws its own, as before.
_sage_seeded_libc = True
# glibc's first random() from the state a process starts with (seed 1).
GLIBC_FIRST_RANDOM = 1804289383


def note_sages_import():
    """Right after Sage's import, before anything else draws from libc:
    whether it registered weakref.finalize's atexit hook (Sage 10's
    import does, and logging's after it; 9.5's registers neither, and the
    code's first use of them does), and whether it seeded libc's rand()
    (9.5's does, each run its own; 10's leaves it as glibc starts it, so
    that a fresh Sage's rand() is 1804289383, glibc's first, every time).
    The draw that tells is put back where it was glibc's first; another
    libc's, or one the import seeded, counts as seeded: each call then
    draws its own, as before."""
    global _sage_registered_finalize, _sage_seeded_libc
    _sage_registered_finalize = weakref.finalize._registered_with_atexit
    try:
        _sage_seeded_libc = parent.libc.random() != GLIBC_FIRST_RANDOM
        if not _sage_seeded_libc:
            parent.libc.srandom(1)
    except (AttributeError, OSError):
        pass


def register_pythons_exit_hooks():
    """Python's own atexit hooks (cleared at the fork with the template's
    teardown), for what the code makes of them: logging's shutdown (the
    code's handlers flushed and closed: a MemoryHandler's records
    printed) and weakref.finalize's (the code's finalizers that run at
    exit: a finalize(obj, print, ...) prints). The template's finalizers,
    Sage's, are teardown no output shows: they are left, as the rest of
    it. Where Sage's import registered a hook, it is registered here,
    before the code's own, in that order; where it did not, weakref's
    registers itself at the code's first finalizer, as in a fresh Sage,
    and logging's, where the warm-up imported logging, is registered here
    all the same (the code's import of it would have: only its place
    among the code's own hooks can differ)."""
    finalize = weakref.finalize
    for info in finalize._registry.values():
        info.atexit = False
    if _sage_registered_finalize:
        atexit.register(finalize._exitfunc)
    else:
        finalize._registered_with_atexit = False
    logging = sys.modules.get("logging")
    if logging is not None:
        atexit.register(logging.shutdown)


def held_by_the_code_alone(namespace, before):
    """The values with a finaliser that the code bound (not as before),
    each once, that nothing but the namespace refers to, in the order
    Python's teardown finalises them (the collector's, in_collectors_order,
    where the namespace is in a cycle: in_a_cycle; else its own); none
    where a thread still running holds it (globals_in_use). Fast where
    there are none (a call's usual end): one pass of identity checks over
    Sage's thousands of names."""
    candidates = {}  # id: value
    for name, value in namespace.items():
        if (before.get(name, _MISSING) is not value and id(value) not in candidates and
                getattr(type(value), "__del__", None) is not None):
            candidates[id(value)] = value
    if not candidates:
        return []
    names_of = dict.fromkeys(candidates, 0)  # id: how many names hold it
    for value in namespace.values():
        if id(value) in names_of:
            names_of[id(value)] += 1
    held = []
    for key in list(candidates):
        value = candidates.pop(key)
        # Its references: the names', `value` and getrefcount's own.
        if sys.getrefcount(value) == names_of[key] + 2:
            held.append(value)
    if not held or globals_in_use(namespace):
        return []
    if len(held) < 2:
        return held
    if not in_a_cycle(namespace):
        # Once its module goes, the namespace is freed at once: each value
        # as its last name goes, in the namespace's order (a fresh Sage's,
        # where the code's class comes from a module of its own).
        last_name = {id(v): i for i, v in enumerate(namespace.values()) if id(v) in names_of}
        return sorted(held, key=lambda v: last_name[id(v)])
    return in_collectors_order(held)


def in_a_cycle(namespace):
    """Whether something the code made refers back to its globals (a
    function, class, lambda or generator of its own, through its
    __globals__): the teardown's collector then frees the namespace, and
    finalises what it holds in its order (in_collectors_order). Not the
    module, nor a frame of the launcher's that has it as a local. A read
    of every object, no reference taken: no page copied."""
    for referrer in gc.get_referrers(namespace):
        if not (type(referrer) is types.ModuleType or
                (type(referrer) is types.FrameType and referrer.f_globals is not namespace)):
            return True
    return False


def globals_in_use(namespace):
    """Whether a thread still running (a daemon, which Python leaves
    running) holds the code's globals: runs a function of the code's (a
    frame on its stack), is to (a Thread's target, a Timer's function),
    or holds what reaches them (a Thread subclass of the code's, a server
    serving the code's handler class, an event loop with the code's
    coroutine: reaches). Python's teardown then finds them all still
    reachable and finalises none of them (a fresh Sage prints no
    __del__'s line)."""
    me = _get_ident()
    frames = sys._current_frames()
    # This thread's own out first: kept in frames, a cycle (this frame's
    # locals) would hold the caller's frame, and the values in its locals.
    frames.pop(me, None)
    # (A running frame's references are not gc's to give: walked here.)
    for frame in frames.values():
        while frame is not None:
            if frame.f_globals is namespace:
                return True
            frame = frame.f_back
    mine = threading.current_thread()
    others = [thread for thread in threading.enumerate() if thread is not mine]
    for thread in others:
        for held in (getattr(thread, "_target", None), getattr(thread, "function", None)):
            if getattr(held, "__globals__", None) is namespace:
                return True
    return bool(others) and reaches(others, namespace)


# How many references reaches follows at most: past it, the namespace
# counts as reached (nothing finalised: what the thread holds is large,
# most likely the code's too), rather than the call's end growing with it.
REACHES_MOST = 1000000


def reaches(held, namespace):
    """Whether what is held (Thread objects) refers, in any number of
    steps, to the namespace: through a function (its __globals__, closure,
    defaults), an instance and its class, a bound method, a container, a
    generator's or coroutine's frame. Not through a module, nor a class of
    the library's (what they hold is the library's own, and reaches
    everything): only the code's classes are looked into; nor through what
    the collector does not track (numbers, strings: they hold nothing). A
    read of each object's references (gc's): the walk runs no object's
    code (what another thread let go of meanwhile is finalised as the walk
    lets go of it at its end)."""
    dict_of = types.ModuleType.__dict__["__dict__"].__get__
    module_dicts = {id(d): d for d in (dict_of(module) for module in list(sys.modules.values())
                                       if issubclass(type(module), types.ModuleType))}  # held, as seen below
    # The code's classes' __module__: its __name__, as a class statement
    # finds it (builtins' where the code deleted its own).
    own = namespace.get("__name__", builtins.__name__)
    # Each object looked at is held here, not its id alone: the other
    # threads run meanwhile, and an object of theirs freed after its look
    # could give its id to a new one the walk would then skip.
    seen = {}
    left = REACHES_MOST
    while held:
        obj = held.pop()
        if obj is namespace:
            return True
        kind = type(obj)
        if (id(obj) in seen or id(obj) in module_dicts or issubclass(kind, types.ModuleType) or
                (issubclass(kind, type) and not is_str(module_of(obj), own))):
            continue
        seen[id(obj)] = obj
        # (A list of millions: not copied to be counted.)
        if (kind is list or kind is tuple or kind is dict or kind is set) and len(obj) > left:
            return True
        referents = _get_referents(obj)
        left -= len(referents) + 1
        if left < 0:
            return True
        held += [referent for referent in referents if _is_tracked(referent)]
    return False


def is_str(value, text):
    """value is the str text (compared only as str: an __eq__ of the
    code's is not run)."""
    return type(value) is str and type(text) is str and value == text


def module_of(cls):
    """cls's __module__ as its dict has it: no property of a metaclass's
    run (the code's could raise, or print)."""
    try:
        return type.__dict__["__module__"].__get__(cls)
    except Exception:
        return None


def in_collectors_order(values):
    """values in the order Python's teardown finalises them: its last
    collection's, which merges the young generations after the oldest
    (the oldest, then the youngest, then the middle one), each in the
    order its objects were made; not the namespace's order, where a name
    Sage had bound before (e, x) keeps its early place. Looked up in the
    young generations' lists (the call's own objects, few); the oldest's
    is listed only where two or more are in it: listing it takes a
    reference to each of the template's objects there, which copies their
    pages (on Sage 10, 117,000 objects: 18 MB and 30 ms)."""
    wanted = {id(v) for v in values}
    order = {}  # id: (the generation's place in the collection, the object's in the lists)

    def look_up(generation, place):
        for obj in gc.get_objects(generation):
            if id(obj) in wanted:
                order[id(obj)] = (place, len(order))
    try:
        look_up(0, 1)
        look_up(1, 2)
        if len(values) - len(order) >= 2:
            look_up(2, 0)
    except MemoryError:
        # A generation's list of millions, past the data rlimit (the
        # collector off, the code's objects all young): those not yet
        # found come first (as the oldest generation's), in the order
        # given, and are still finalised.
        pass
    # One in none of the young lists is in the oldest: first (one the
    # collector does not track, a C type's, would come last).
    return sorted(values, key=lambda v: order.get(id(v), (0, 0)))


# Python generators (random.Random) that libraries make as they are
# imported, each seeded from the kernel: a template that imported them
# would give every child the same numbers, where fresh containers differ.
# Named one by one (module, attribute path): every such module-level one
# of the images' Python files; a generator a library seeded on purpose
# (Random(0)) repeats in a fresh Sage too, and is left alone.
KERNEL_SEEDED = (("sympy.core.random", "rng"), ("sympy.core.random", "_assumptions_rng"),
                 ("sympy.core.symbol", "Dummy._prng"),
                 ("sage.rings.polynomial.pbori.interpolate", "generator"))


# Taken as the launcher starts, before any code could replace it.
RANDOM_SEED = random.Random.seed


def seed_of(seed, name, bits):
    """A seed of bits bits for the generator name, mixed from all of
    seed's: each generator its own, the same for the same seed."""
    digest = hashlib.sha256(("%d %s" % (seed, name)).encode()).digest()
    return int.from_bytes(digest[:(bits + 7) // 8], "big") & ((1 << bits) - 1)


def reseed(seed=None):
    """Random state of this process's own. The launcher's was drawn once, at
    Sage's import; every child forked from it would repeat its numbers (a
    serial container's calls would all print the same random()), where
    fresh containers differ (but libc's rand() where Sage's import left it
    alone: put back to glibc's start, which a fresh Sage repeats). Sage's
    randstate (its random(), GMP's, and PARI's and GAP's, which it seeds
    as each is first used through Sage), Python's random module, numpy's,
    the libraries' (KERNEL_SEEDED: sympy's, PolyBoRi's) and Singular's
    draw new seeds from the kernel, or all come from seed (and the
    programs of Sage's interfaces, as they start: seed_interfaces): the
    same code with the same seed prints the same, cold or warm, first
    call or later (GAP's and PARI's own generators, used directly, start
    where a fresh Sage's do: warm.py puts them back). A module not yet
    imported is seeded as the code's import of it ends (onimport). What
    seeds each is taken as first seen (seeder). Raises where seeding
    fails anyway: child_main then runs no code (tell_unseeded)."""
    onimport.forget()  # what a session's earlier seeded cell left waiting
    seeder("random.seed", lambda: random.seed)(seed)
    # numpy's global generator and sympy's: seeded now, or as they are
    # imported (their seeding at import draws from the kernel); fresh
    # where they are already imported (each fork would repeat the
    # launcher's).
    seed_at_import("numpy.random", seed_numpy, seed)
    for module in dict.fromkeys(module for module, _ in KERNEL_SEEDED):
        seed_at_import(module, functools.partial(seed_generators, module), seed)
    seed_sages(seed)


def forget_last_seed():
    """What a session's earlier seeded cell left for the cells after it:
    its seeds waiting for imports, and those of the interfaces' programs
    not yet started. A cell without a seed has them fresh."""
    onimport.forget()
    seed_interfaces(None)


# What seeding calls, by its dotted name, as the launcher first saw it:
# before the code (the child's first reseed(): random.seed, Sage's), or as
# the code's import of numpy ended, before the code had it, else at the
# first seeded cell after an unseeded one imported it (numpy's, taken from
# numpy.random.mtrand, which numpy.random's seed is). A session's cell
# that replaced one left later seeded cells unseeded, saying nothing where
# the replacement did not raise, and ran the code's replacement as the
# launcher seeded (attack helpers).
_seeders = {}


def seeder(name, get):
    """What seeds name: get() the first time it is asked for (a cell that
    deleted it since fails no later seed)."""
    if name not in _seeders:
        _seeders[name] = get()
    return _seeders[name]


def seed_at_import(module, seed_it, seed):
    """seed_it(seed) now where module is imported; else, with a seed, as
    the code's import of it ends (without one, its import draws from the
    kernel: fresh)."""
    if onimport.imported(module):
        seed_it(seed)
    elif seed is not None:
        onimport.after_import(module, functools.partial(seed_it, seed))


def seed_numpy(seed):
    """numpy's global generator (numpy.random.rand() and the rest), from
    64 bits of seed: through mtrand's seed, which numpy.random's is, and
    which a cell that replaces numpy.random.seed before the launcher first
    sees it does not reach."""
    seeder("numpy.random.mtrand.seed", lambda: sys.modules["numpy.random.mtrand"].seed)(
        None if seed is None else [seed & 0xFFFFFFFF, seed >> 32])


def seed_generators(module, seed):
    """module's generators of KERNEL_SEEDED, each its own seed; sympy's
    Dummy symbols' first number, which its module draws once, as it is
    imported."""
    for name, path in KERNEL_SEEDED:
        if name != module:
            continue
        generator = sys.modules.get(module)
        try:
            for part in path.split(".") if generator is not None else ():
                generator = getattr(generator, part)
            if isinstance(generator, random.Random):
                # Random's own seed, not the generator's attribute, which
                # a session's cell may have replaced (attack helper).
                RANDOM_SEED(generator, None if seed is None else
                            seed_of(seed, module + "." + path, 64))
        except Exception:
            pass  # another version of the library: its generator as it is
    if module == "sympy.core.symbol":
        dummy = getattr(sys.modules.get(module), "Dummy", None)
        try:
            dummy._base_dummy_index = dummy._prng.randint(10**6, 9*10**6)
        except Exception:
            pass


def seed_sages(seed):
    """Sage's random state, libc's, ECL's, the programs of Sage's
    interfaces and Singular's."""
    try:
        randstate = seeder("sage.misc.randstate.randstate", lambda: import_module(
            "sage.misc.randstate").randstate)
        set_random_seed = seeder("sage.misc.randstate.set_random_seed", lambda: import_module(
            "sage.misc.randstate").set_random_seed)
    except ImportError:  # no Sage: the launcher's unit tests
        return
    # libc's rand(): where Sage's import left it unseeded (note_sages_import),
    # as glibc starts it, as in a fresh Sage; else (or with a seed) from a
    # randstate of its own, so that the call's (Sage's own sequence for
    # set_random_seed(seed)) draws nothing for it. Sage seeds libc from
    # the call's as it first uses libc's. And ECL's *random-state*, where
    # a warm launcher started ECL (a cold run's ECL draws its own at its
    # start).
    if seed is None and not _sage_seeded_libc:
        parent.libc.srandom(1)
    else:
        randstate(seed).set_seed_libc(True)
    set_random_seed(seed)
    seed_interfaces(seed)
    if "sage.interfaces.maxima_lib" in sys.modules:
        seeder("sage.libs.ecl.ecl_eval", lambda: import_module("sage.libs.ecl").ecl_eval)(
            "(setq *random-state* (make-random-state t))")
    # Singular's (its random(), Sage's libsingular functions, and factory's
    # under it), which Singular seeds at Sage's import from the clock, in
    # seconds: every child of a template repeated it.
    # Through the system() the template made (prepare_reseed) where Sage's
    # import loaded Singular; else (the warm-up's Groebner step loaded it,
    # or the template's failed) each process makes its own, importing
    # Sage's module of Singular's functions, which 9.5's import does not:
    # left out, a seeded run's Singular kept its clock's seed, and every
    # child of a template the seed the template drew (attack helper).
    system = _singular_system
    if system is None and (seed is not None or "sage.libs.singular.singular" in sys.modules):
        try:
            system = singular_system()
        except Exception:  # no Singular, or another: the call runs
            pass
    if system is not None:
        try:
            system("random", 1 + (seed_of(seed, "singular", 29) if seed is not None else
                                  int.from_bytes(os.urandom(4), "big") & 0x1FFFFFFF))
        except Exception:
            pass  # another Singular: its own seed stays


# Singular's system() function, for reseed(): made and called once in the
# template (prepare_reseed), which every call's process inherits.
_singular_system = None


def singular_system():
    """Singular's system() function, through Sage's module of them."""
    return import_module("sage.libs.singular.function").singular_function("system")


def prepare_reseed():
    """In the template, after Sage's import: what reseed() needs of
    Singular, where the import loaded it. Each call's process made it
    itself, on pages the fork had just shared, after the last call's end,
    where the host holds the call's share again (end_serial_call): 9.5's
    import of the function module, 6.4 ms of CPU in each process, and the
    first system() call, which makes Sage's default ring for it, 1.2 ms
    on 9.5 and 3.5 ms on 10. A process then holds what it held before:
    the module, the function, that ring and Singular's handle on it, only
    seeded by the call's own reseed()."""
    global _singular_system
    if "sage.libs.singular.singular" not in sys.modules:
        return
    try:
        system = singular_system()
        system("random", 1)
    except Exception:  # another Singular: each process tries its own (reseed)
        return
    _singular_system = system


# The interfaces that run a program of their own (gap, maxima, singular,
# gp, as opposed to libgap and Maxima's library) and seed it, as it starts,
# from their _seed, else from a fresh randstate (Sage's rand_seed). (Not
# R's: Sage 10's R object refuses attributes that start with _.)
SEEDED_INTERFACES = (("sage.interfaces.gap", "gap"), ("sage.interfaces.maxima", "maxima"),
                     ("sage.interfaces.singular", "singular"), ("sage.interfaces.gp", "gp"))


def seed_interfaces(seed):
    """Those programs seeded from seed as they start: --seed's same output
    covers gap.Random() and maxima's random() too (Sage itself seeds them
    from set_random_seed's state in doctests only). Its own number for
    each (29 bits, as Sage's seeds for them), mixed from all of seed's.
    Without a seed, fresh: a session's earlier seeded cell set them."""
    for module, name in SEEDED_INTERFACES:
        seed_at_import(module, functools.partial(seed_interface, module, name), seed)


def seed_interface(module, name, seed):
    """The seed interface name's program starts from, where it is not
    started (None: fresh)."""
    # An image whose interface is missing or other is left as it is: the
    # seed must never stop the call.
    try:
        interface = getattr(sys.modules[module], name)
        if interface._expect is None:  # not started: it seeds itself as it starts
            interface._seed = None if seed is None else seed_of(seed, name, 29)
    except Exception:
        pass


# An interrupt (a session's timeout) can land in a seed an import ran
# (onimport): its traceback shows none of these, as a cold call's has none.
deferred.not_shown(seeder.__code__, seed_numpy.__code__, seed_generators.__code__,
                   seed_interface.__code__)


def unblock_signals(held=()):
    """The call came: the last call's processes are gone (the launcher
    hands a call on only then). The signals they sent as they died, held
    blocked since the fork (calls.py, prepare_child), are thrown away, and
    the code runs with none blocked, as in a fresh container, but those
    HELD (a session's SIGINT, until its cell begins: cell_begins)."""
    while True:
        pending = signal.sigpending()
        if not pending:
            break
        signal.sigtimedwait(pending, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)


def cell_begins():
    """A session's cell's code begins: its SIGINT, held since the last
    cell ended (run_cell), is let through, to the handlers the cell had
    (between_cells). An interrupt held meanwhile was the last cell's, come
    as it ended: thrown away. The launcher sends this cell's only once
    told it began (calls.CellWatch)."""
    global _cell_began
    try:
        _between_cells.end()
        while signal.SIGINT in signal.sigpending():
            signal.sigtimedwait([signal.SIGINT], 0)
    finally:
        # Whatever is raised on the way: a thread's SIGINT that tripped
        # Python's flag between cells, handled only once the cell's handler
        # is back, is the cell's KeyboardInterrupt, and it comes here, at
        # any step above. Left blocked, run_cell would take the block for
        # the code's own, and hold it in every later cell.
        if not _code_held_sigint:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        # Only from here is the mask the code's (run_cell reads it): one
        # raised before, the code never ran.
        _cell_began = True


def begin_cell(tell_begun):
    """A session's cell's code begins (run_code's begin): its SIGINT let
    through (cell_begins); the launcher told (tell_begun: the BEGUN word),
    which interrupts a session's cell only once told (calls.CellWatch):
    from here, its SIGINT is the code's; and only then what a finalizer
    may run in (cell_is_interruptible)."""
    try:
        cell_begins()
    finally:  # begun, though interrupted as it began (cell_begins)
        landed = whole_though_interrupted(tell_begun, cell_is_interruptible)
    if landed is not None:
        raise landed


def whole_though_interrupted(*steps):
    """Each of steps done whole, though a KeyboardInterrupt (a SIGINT a
    thread of the code's sends) lands in it: the step is done again (a
    second BEGUN word reads as the first; the collector's steps are the
    same twice). The first that landed is returned, for the caller to
    raise once all are done: it is the cell's, as one in cell_begins is."""
    landed = None
    for step in steps:
        while True:
            try:
                step()
                break
            except KeyboardInterrupt as e:
                if landed is None:
                    landed = e
    return landed


def cell_is_interruptible():
    """The launcher was told the session's cell began (begin_cell):
    from here its interrupt at the cell's timeout stops whatever runs, a
    finalizer (__del__) of the code's too. So only now are they let run:
    the collector is back on, as the code left it (run_cell), and what was
    replaced between cells is let go (_replaced)."""
    global _collector_back
    if _code_collects:
        gc.enable()
    # Only from here is the collector's state the code's (run_cell reads
    # it); one raised before, it is as the last cell left it.
    _collector_back = True
    _replaced.clear()


class between_cells:
    """From a session's cell's end to the next one's begin, a SIGINT does
    nothing, as a notebook's idle kernel's: the main thread holds it by its
    mask (run_cell), but a thread the code left running takes one sent to
    the process (by itself: os.kill(os.getpid(), SIGINT)), and cysignals'
    handler there has Python raise KeyboardInterrupt in the main thread
    at its next line, wherever that is: in the launcher's reading of the
    next call (the session lost) or in its frames (shown in a traceback).
    So Python's handler for it is one that only clears cysignals' note of
    the interrupt (which would interrupt the next cell's first sig_on());
    the C-level action stays the cell's (cysignals', or Python's own where
    the code set a handler), and both are given back at the begin."""

    def __init__(self):
        self.kept = None  # (the Python-level handler, the C-level action)

    # (Each step in a try: the code may have changed the signal module;
    # the launcher's session must not fail for it.)
    # An interrupt may raise at any step of either (signal.signal runs a
    # pending handler before it swaps): run_cell and cell_begins then call
    # them again, or the cell's code is interrupted as it begins. So kept
    # is read only where nothing is kept, and cleared only once both are
    # back: a second begin() keeps the cell's handlers, not the launcher's
    # (which it would give the next cell for its own), and installs the
    # launcher's, which the first may not have reached; a second end()
    # gives back the same.
    def begin(self):
        try:
            if self.kept is None:
                action = parent.SigactionBuffer()
                if parent.sigaction(signal.SIGINT, None, action) != 0:
                    return
                self.kept = (signal.getsignal(signal.SIGINT), action)
            signal.signal(signal.SIGINT, self.interrupted)
        except Exception:
            # Nothing kept (the code broke what reads it): the cell's
            # handlers stay, and its next cell is interrupted by them. A
            # swap now would leave the launcher's in place for good.
            if self.kept is None:
                return
            # The cell's own handler, run for a pending SIGINT before the
            # swap, raised (it is the cell's: thrown away, as a
            # KeyboardInterrupt as it ends is); the signal is spent, so the
            # swap is made again. Without it the cell's handler stayed, and
            # a thread's SIGINT raised its error in the launcher's frames.
            try:
                signal.signal(signal.SIGINT, self.interrupted)
            except Exception:
                pass
        finally:
            if self.kept is not None:
                parent.sigaction(signal.SIGINT, self.kept[1], None)

    def end(self):
        if self.kept is None:
            return
        handler, action = self.kept
        try:
            if not callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN):
                handler = signal.default_int_handler  # one Python did not set
            signal.signal(signal.SIGINT, handler)
        except Exception:
            pass
        finally:
            # Its handler back, an interrupt tripped meanwhile raises
            # (cell_begins): Sage's C-level action comes back all the same.
            parent.sigaction(signal.SIGINT, action, None)
            self.kept = None

    @staticmethod
    def interrupted(sig, frame):
        try:
            from cysignals.signals import python_check_interrupt
            python_check_interrupt(sig, frame)
        except BaseException:  # its KeyboardInterrupt: the note is cleared
            pass


_between_cells = between_cells()


# A session's last cell ended with SIGINT blocked by its own code: the
# next begins so, as the next cell of a notebook would.
_code_held_sigint = False
# A session's last cell ended with Python's cyclic collector on (not
# gc.disable()d by its code): it is off between cells (run_cell), and on
# again once the next can be interrupted (cell_is_interruptible).
_code_collects = True
# This cell's collector was given back (cell_is_interruptible), so its
# state at the cell's end is the code's.
_collector_back = False
# What child_main and run_code replace between a session's cells (sys.argv,
# the cell's line cache entry, __file__), which the code may have made its
# own objects: let go only once the next cell can be interrupted
# (cell_is_interruptible). Let go where it was replaced, a slow __del__ ran
# with SIGINT held, as a collected cycle's did (run_cell).
_replaced = []
# This cell's code began (cell_begins), so the mask at its end is the
# code's: a cell that never began (its syntax error, or an interrupt
# raised by cell_begins' own unblock) leaves _code_held_sigint as it was,
# not the launcher's block for the code's (which held SIGINT in every later
# cell: their timeouts could not interrupt them, and the session was lost).
_cell_began = False


def tell_unseeded(seed, error, session):
    """A call that cannot be seeded (reseed raised) does not run: why, on
    its stderr; status 1, as its own error's. (In a session, an earlier
    cell may have broken what seeding reaches that the launcher did not
    take before the code: numpy's modules in sys.modules, the launcher's
    own.)"""
    try:
        why = "%s: %s" % (type(error).__name__, error)
    except BaseException:  # an error whose str raises
        why = "an error that cannot be told"
    cause = "an earlier cell of the session may have replaced what sets it; " \
        "end the session, or run without seed" if session else "run without seed"
    note = "sage-sandbox: the code did not run: its seed %d could not be set (%s); %s\n" % (
        seed, why, cause)
    try:
        sys.stderr.write(note)
        sys.stderr.flush()
    except BaseException:
        try:
            os.write(2, note.encode("utf-8", "backslashreplace"))
        except OSError:
            pass
    return 1


def run_cell(function, *args):
    """function(*args) (run_code, for a session's cell): its status,
    with SIGINT held from the cell's end until the next cell begins
    (cell_begins). The launcher's interrupt, where it comes as the
    cell ends, is the cell's wherever it lands (its status:
    DIES_OF_SIGINT), never a KeyboardInterrupt in the launcher's frames,
    which would end the session. Held by a mask, not a handler: Sage's
    own (cysignals) is what interrupts its C code; and the mask is the
    main thread's, where the launcher sends it (calls.interrupt)."""
    global _code_held_sigint, _code_collects, _cell_began, _collector_back
    me = os.getpid()
    status = code_held = code_collects = None
    _cell_began = _collector_back = False
    while True:
        try:
            if status is None:
                status = function(*args)
            if os.getpid() != me:
                return status  # a process the code forked: it leaves (leave)
            # The code's own mask, read apart from the change: an interrupt
            # raised by the change (Python checks for one as it returns)
            # comes after it, and a second look would see ours.
            if code_held is None:
                code_held = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []) \
                    if _cell_began else _code_held_sigint
            # No collection between cells: a finalizer (__del__) of a cycle
            # the cell left ran in the launcher's reading of the next call,
            # with SIGINT held, and a slow one could not be interrupted: the
            # next cell never began, and the session was lost at its timeout
            # (attack helper 121). Off before SIGINT is held, so a
            # collection that runs now is still the cell's to interrupt.
            if code_collects is None:
                code_collects = gc.isenabled() if _collector_back else _code_collects
            gc.disable()
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            _between_cells.begin()
            _code_held_sigint = code_held
            _code_collects = code_collects
            return status
        except BaseException as e:
            # Once the code returned, whatever the cell's own handler raises
            # for a SIGINT as the cell ends (sys.exit in it) is thrown away,
            # as a KeyboardInterrupt then is: it escaped, and the session
            # was lost.
            if status is None:
                if not isinstance(e, KeyboardInterrupt):
                    raise
                status = DIES_OF_SIGINT


# How many frames deep the code's own starts. The launcher's frames below
# it are fewer in a cold call than in a warm one (child_main is 5 frames
# deep cold, 8 in a serial container's next call's child, 7 in a warm
# session's), and they count against the recursion limit: a recursion 3
# levels shallower raised RecursionError warm, and the traceback's
# "[Previous line repeated N more times]" said so. Padded up to this
# depth, every call's code has the same room, cold or warm: above the
# deepest the launcher reaches (child_main, run_cell, run_code,
# at_code_depth, then PADS: 11 + PADS), with room for 2 frames more, and
# as low as that allows (a fresh `sage FILE` runs its code at depth 1).
# The launcher's recursion limit is raised by as many (RECURSION_OFFSET).
# How many of the frames right below the code's are _pad's: a warning's
# stacklevel up to this many past the code's first frame names "sys:1",
# as Python's past its stack's bottom. With 3, one of 5 past named a
# launcher's line (launcher/child.py:1966); 50 cost 3 us more per call
# and thread, and nothing that walks the code's stack walks them
# (walk_stack, outer_frames_of).
PADS = 50
CODE_DEPTH = 11 + PADS + 2
# A value no namespace holds.
_MISSING = object()
# This thread's id, as the launcher's import found it: code that replaced
# threading's or _thread's (gevent's monkey-patching) has the ids of its own.
_get_ident = _thread.get_ident
# The collector's, as the launcher's import found them: the code may
# replace gc's (globals_in_use runs after it).
_get_referents, _is_tracked = gc.get_referents, gc.is_tracked


def at_code_depth(function, *args, here=None):
    """function(*args) with the frame it runs (the code's, where function
    is exec or eval) at CODE_DEPTH: below it, PADS frames that look like the
    bottom of a fresh Python's stack (_pad), and below those this
    function's own, as many as it takes, the same lines cold and warm;
    where the caller is already too deep for that, PADS deeper than it.
    here: this frame's depth, known to its own recursion (the stack is
    walked once: each sys._getframe() is an event the code's audit hooks
    see, and Python's own calls raise none)."""
    if here is None:
        here, frame = 0, sys._getframe()
        while frame is not None:
            here, frame = here + 1, frame.f_back
    if CODE_DEPTH - here - 1 > PADS:
        return at_code_depth(function, *args, here=here + 1)
    # _pad's first frame is one deeper than here, its last more deeper
    # still, and function's one deeper than that.
    return _pad(_pad, max(PADS - 1, CODE_DEPTH - here - 2), function, args)


# The room the code has to recurse in, as a fresh `sage FILE`'s. The
# launcher's frames below the code (CODE_DEPTH) and the exec that runs it
# take CODE_DEPTH of the recursion limit's levels that a file's top level
# has free (with 16: a recursion went 981 deep where `sage FILE`'s goes
# 997, and an endless one said "[Previous line repeated 980 more times]"
# where Python says 996). The call's process raises the limit by what they take
# (RECURSION_OFFSET, measured as the launcher starts) and gives the code a
# sys.getrecursionlimit and sys.setrecursionlimit that count as if they
# took none (recurse_as_at_top). A thread the code starts has as many
# more levels taken at its bottom (_pad's frames: its stack ends above
# them, as the main one ends above the launcher's), so that it has the
# room a fresh Python's thread has.
RECURSION_OFFSET = 0  # levels the launcher takes below the code's frame
THREAD_PADS = -1      # _pad frames below a thread's, past the first; -1: none


def room(n=0):
    """How much deeper than the frame that calls it a recursion can go:
    the depth of its RecursionError."""
    try:
        return room(n + 1)
    except RecursionError:
        return n


def measure_room(room_at_top):
    """RECURSION_OFFSET and THREAD_PADS, from room_at_top: room() called
    from the launcher program's top level, as from a file's (bundle.py);
    None where the launcher was not started as that program (its tests):
    then nothing changes."""
    global RECURSION_OFFSET, THREAD_PADS
    if room_at_top is None:
        return
    probe = {"room": room}
    at_code_depth(exec, compile("here = room()", "<room>", "exec"), probe)
    RECURSION_OFFSET = max(0, room_at_top - probe["here"])
    # What one _pad frame, and its call of the thread's function, take.
    one_pad = room() - _pad(_pad, 0, room, ())
    THREAD_PADS = RECURSION_OFFSET - one_pad if RECURSION_OFFSET >= one_pad else -1


def recurse_as_at_top():
    """The recursion limit raised by RECURSION_OFFSET for the code, which
    reads and sets it as Python's own; threads started with
    threading.Thread get THREAD_PADS. Once per process."""
    if not RECURSION_OFFSET:
        return
    get_limit, set_limit = sys.getrecursionlimit, sys.setrecursionlimit
    offset = RECURSION_OFFSET
    # The limit last set through setrecursionlimit, and what the code
    # asked for: where the two are not one offset apart (a limit near the
    # int's end; one right above the caller, which takes one level more
    # here), the code reads what it asked for, until the limit changes.
    told = [None, None]

    def getrecursionlimit():
        limit = get_limit()
        return told[1] if limit == told[0] else limit - offset

    def setrecursionlimit(new_limit, /):
        try:
            limit = operator.index(new_limit)
        except TypeError:
            limit = None
        if limit is None or not 1 <= limit <= 0x7fffffff:
            return set_limit(new_limit)  # Python's own error
        real = min(limit + offset, 0x7fffffff)
        refused = None
        try:
            set_limit(real)
        except RecursionError as e:
            refused = re.fullmatch(r"(cannot set the recursion limit to )(\d+)"
                                   r"( at the recursion depth )(\d+)(: .*)", str(e))
            if refused is None:
                raise
        if refused is not None:
            # The depth of the code's frame that called: this one's is
            # one more, which Python's, in C, has not.
            depth = int(refused[4]) - offset - 1
            if limit <= depth:
                # Raised here, out of the handler: no context of ours.
                raise RecursionError("%s%d%s%d%s" % (refused[1], limit, refused[3], depth,
                                                     refused[5]))
            # Python takes it there: a limit right above the caller's.
            real = limit + offset + 1
            set_limit(real)
        told[:] = real, limit

    for mine, pythons in ((getrecursionlimit, get_limit), (setrecursionlimit, set_limit)):
        functools.update_wrapper(mine, pythons)
        del mine.__wrapped__
    deferred.not_shown(setrecursionlimit.__code__)
    sys.getrecursionlimit, sys.setrecursionlimit = getrecursionlimit, setrecursionlimit
    set_limit(get_limit() + offset)
    # Python 3.13 starts threading's threads otherwise: not padded there.
    if THREAD_PADS >= 0 and getattr(threading, "_start_new_thread", None) is _thread_start:
        def start_new_thread(function, args, kwargs=None):
            if kwargs is not None:
                return _thread_start(function, args, kwargs)
            return _thread_start(_pad, (_pad, THREAD_PADS, function, args))
        # A thread that cannot start ("can't start new thread") is told
        # from threading's frame, as where Python's, in C, raises it.
        deferred.not_shown(start_new_thread.__code__)
        threading._start_new_thread = start_new_thread


_thread_start = _thread.start_new_thread  # what threading starts its threads with


def stdio_as_at_a_terminal():
    """sys.stdout and sys.stderr made anew on descriptors 1 and 2, as
    Python makes them at a terminal: text over a BufferedWriter, flushed
    at each line's end. The launcher's are unbuffered (PYTHONUNBUFFERED:
    it must never hold back bytes a call's process would inherit), and
    under them print() wrote each argument, separator and end with a
    write of its own, between which another thread's print came in: two
    threads' lines came out cut into each other, where a fresh Sage's
    buffer takes each print whole. Line by line, a line still arrives as
    it is printed, and one printed before a timeout, a crash or
    os._exit() is kept; a line not yet ended waits, as at a terminal."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, "__%s__" % name, None)
        if old is None:
            continue
        stream = io.open(fd, "w", buffering=1, encoding=old.encoding, errors=old.errors,
                         newline="\n", closefd=False)
        stream.buffer.raw.name = "<%s>" % name  # as Python names its own
        setattr(sys, name, stream)
        setattr(sys, "__%s__" % name, stream)


def main_thread_as_started():
    """The main thread's native_id, which Python leaves at the forking
    process's (the launcher's) in a fork: threading's main_thread() and
    current_thread() say this process, as in a fresh Sage."""
    set_native_id = getattr(threading.main_thread(), "_set_native_id", None)
    if set_native_id is not None:
        set_native_id()


def child_main(pipes, handlers, namespace, preparse_file, session, stale=()):
    """The prepared child: made ready before its call comes, then runs it
    (a session's child runs every cell of the session). stale: the
    launcher's descriptors it must not keep. Never returns."""
    for fd in stale:
        os.close(fd)
    # A session and process group of its own: kill(0, ...) and
    # setpriority(PRIO_PGRP, 0, ...) from the code reach nothing of the
    # launcher's.
    os.setsid()
    handlers.restore()
    parent.set_dumpable(True)
    reseed()
    # The one rlimit podman cannot set (it has no name for it): the code's
    # address space, which counts the shared mappings RLIMIT_DATA does not.
    address_space = int(os.environ.get("SAGE_SANDBOX_RLIMIT_AS", resource.RLIM_INFINITY))
    data, grown_space = warm.inherit()
    if address_space != resource.RLIM_INFINITY:
        address_space += grown_space
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if data is not None:
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    stdin, stdout, stderr, call, done = pipes.child_ends()
    # Over the launcher's own 0 and 1 (the frame streams): the code must
    # reach none of the launcher's descriptors.
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for fd in pipes.child_ends()[:3] + pipes.launcher_ends():
        if fd >= 0:
            os.close(fd)
    stdio_as_at_a_terminal()
    main_thread_as_started()
    # The call and done ends too, above any the code opens: a fresh Sage
    # has neither, so the code's open() calls get the numbers they get
    # there, warm or cold. Where one cannot move, it stays.
    call, done = move_to_top([call, done])
    first_call = True
    call_number = 0
    me = os.getpid()

    def tell_begun():
        try:
            os.write(done, done_word(BEGUN, call_number))
        except OSError:
            pass
    began = functools.partial(begin_cell, tell_begun)

    while True:
        try:
            got = read_call(call)
        except KeyboardInterrupt:
            # The code's own SIGINT, from a thread it left running (the
            # launcher's is held between cells: run_cell): nothing to stop.
            continue
        if got is None:
            os._exit(0)  # no call came: the sandbox was stopped while waiting
        if first_call:
            unblock_signals([signal.SIGINT] if session else [])
            # Only the code's own handlers run at its end (or a process it
            # forked, in a session too): Sage's and the launcher's were
            # registered before the fork, and are the teardown a fresh
            # sage's exit would do, which no output shows.
            atexit._clear()
            register_pythons_exit_hooks()
            tell_in_users_lines()
            recurse_as_at_top()
            if not session and sys.path[:1] == [""]:
                # A script's directory, as python3 puts it first for
                # `sage FILE`'s file: the working directory, which stays
                # there after an os.chdir. A session's is a notebook's.
                sys.path[0] = os.getcwd()
        cpu_seconds, argv, code, flags, first_show, seed = got
        call_number += 1
        unseeded = None
        if seed is not None:
            try:
                reseed(seed)
            except BaseException as e:
                # A session's earlier cell broke what seeding needs
                # (tell_unseeded): this cell does not run unseeded.
                unseeded = e
        else:
            try:
                forget_last_seed()
            except Exception:
                pass  # the same: a cell without a seed runs whatever it finds
        display.configure(bool(flags & FILES_BACK), bool(flags & LATEX), first_show)
        if first_call and not session:
            # The call's CPU time, where it is less than the container's:
            # a warm sandbox was started for the longest call it may
            # serve. The rlimit counts whole seconds from the fork: the
            # preparation's whole seconds (none, in practice) are added,
            # its fraction of one counts as the code's. A session's cells
            # are watched by the launcher instead: an rlimit counts a
            # process's whole life.
            cpu_soft, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
            usage = resource.getrusage(resource.RUSAGE_SELF)
            want = int(usage.ru_utime + usage.ru_stime) + cpu_seconds
            if 0 < cpu_seconds and (cpu_hard == resource.RLIM_INFINITY or want < cpu_hard):
                resource.setrlimit(resource.RLIMIT_CPU, (want, want))
        first_call = False
        # Tracebacks name the file as the user gave it, with the user's lines.
        filename = "<stdin>" if argv[0] == "-" else argv[0]
        if session:
            # (As the code left them: sys.argv deleted, linecache.cache not
            # a dict.)
            _replaced.extend((namespace.get("__file__"), vars(sys).get("argv"),
                              vars(sys).get("orig_argv")))
            try:
                _replaced.append(linecache.cache.get(filename))
            except Exception:
                pass
        namespace["__file__"] = filename
        if not session:
            # A script's loader, as python3 gives the file it runs (a
            # module made by types.ModuleType has None; a notebook's cell
            # has none either).
            namespace["__loader__"] = CodesLoader("__main__", filename)
        sys.argv = argv
        # Python's own command line, as `sage FILE` runs it (python3 and
        # its file), not the launcher's (its whole program, its mode).
        sys.orig_argv = ["python3"] + argv
        # The warm-up's imports' filters, as the code's own imports would
        # add them (a cold call's first, once; a session's first cell's).
        deferred.install()
        # A session's cells keep what they bound: no copy holds it.
        before = None if session else dict(namespace)
        if unseeded is not None:  # a cell that never began, as a syntax error's
            status = tell_unseeded(seed, unseeded, session)
        elif session:
            status = run_cell(run_code, code, namespace, filename, preparse_file,
                              bool(flags & DISPLAY_LAST), began, True)
        else:
            status = run_code(code, namespace, filename, preparse_file,
                              bool(flags & DISPLAY_LAST))
        if not session or os.getpid() != me:
            # A session's cell is a notebook's: its threads run on.
            finish_as_python_does(namespace, before)
        before = None
        if not flush_as_python_does() and not session and status != DIES_OF_SIGINT:
            status = 120  # Python's, as its teardown ends
        if os.getpid() != me:
            # A process the code forked that ran to the end of the code:
            # it ends there, as under `sage FILE`, and says nothing on the
            # done pipe (the launcher would take the call for ended).
            leave(status)
        if session and status == DIES_OF_SIGINT:
            status = 1  # a cell's: the session's Sage goes on, as a notebook's
        if not session:
            # The launcher is told before the exit: a serial container's
            # forks the next call's child while the kernel tears this one
            # down (calls.py, end_serial_call); a once container's ends
            # without waiting for that. A death by a signal is not told:
            # the launcher waits for it.
            if done >= 0 and status >= 0:
                try:
                    os.write(done, done_word(b"%d" % status, call_number))
                except OSError:
                    pass
            leave(status)
        while True:
            try:
                os.write(done, done_word(b"%d" % status, call_number))
                break
            except KeyboardInterrupt:
                continue
            except OSError:
                # The code closed or replaced it (os.closerange(3, ...)):
                # the session cannot go on, as a notebook's kernel whose
                # sockets its code closed; said, not left to guess.
                note = "note: the code closed the session's pipe to sage-sandbox " \
                    "(descriptor %d); the session ends\n" % done
                try:
                    os.write(2, note.encode())
                except OSError:
                    pass
                os._exit(70)
