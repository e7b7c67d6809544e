#!/usr/bin/env bats
# Warm templates (launcher/warm.py): a container that serves calls starts
# Maxima, GAP, matplotlib, Singular and scipy once, before its calls'
# processes are forked, and puts back every trace of it. A call prints
# exactly what a cold one prints, byte for byte: bench/corpus.jsonl (the
# code models write: calculus, solving with free parameters, differential
# equations, plots, groups, number theory, a syntax error...) cold, and
# warm through batch, the server and MCP, as a container's first call and
# later ones, after a hostile call. And --seed: the same code with the same
# seed prints the same, cold or warm, first call or later (PARI's gp, a
# program of its own, stands for the interfaces seeded as they start).

load helpers

CORPUS=$BATS_TEST_DIRNAME/../bench/corpus.jsonl
RUNDIR=/tmp/sage-sandbox-$(id -u)

setup() {
	unset SAGE_SANDBOX_SERVER XDG_RUNTIME_DIR
	log=$BATS_TEST_TMPDIR/serve.log
	mkdir -p "$RUNDIR" && chmod 0700 "$RUNDIR"
}

teardown() {
	"$SAGE_SANDBOX" serve --stop >/dev/null 2>&1 || true
	wait_no_containers 30
	[ ! -e "$RUNDIR/server.sock" ]
}

# A call that tries to leave the template changed for the next: Maxima's
# counters and facts, GAP's globals and random state, PARI's, matplotlib's
# rcParams, warnings, Sage's variables, files in DOT_SAGE.
HOSTILE='y, z = var("y z")
print(solve([x + y + z == 1], [x, y, z]))
assume(x > 0)
maxima_calculus.eval("%rnum: 100")
maxima_calculus.lisp("(setq *gensym-counter* 99999)")
libgap.eval("Reset(GlobalMersenneTwister, 7)")
libgap.eval("sandbox_left := 1")
pari("setrand(7)")
import matplotlib, warnings, os
matplotlib.rcParams["lines.linewidth"] = 9
warnings.simplefilter("ignore")
open(os.environ["DOT_SAGE"] + "/left", "w").write("x")'

# warm_server_up: a server whose first sandbox has finished its warm-up.
warm_server_up() {
	"$SAGE_SANDBOX" serve "$@" 2>"$log" &
	local i
	for ((i = 0; i < 1200; i++)); do
		grep -q "first sandbox warmed" "$log" && return 0
		sleep 0.1
	done
	printf '# the server never said it was warm:\n%s\n' "$(cat "$log")" >&2
	return 1
}

# Prints "ID STATUS" then stdout and stderr as JSON, one line per job, from
# batch result lines or MCP result lines.
normalise() {
	python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    j = j.get("structuredContent", j)
    print(json.dumps([j["id"] if "id" in j else None, j["exit_code"], j["stdout"], j["stderr"]]))
'
}

@test "warm - the corpus cold and warm, byte for byte: batch, the server and MCP, first call and later, after a hostile call" {
	local cold=$BATS_TEST_TMPDIR/cold.jsonl jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	# The corpus, and last a call's descriptors of no file: a warm call
	# holds none a cold one does not (a replaced child's ends, its pidfd):
	# none but pipes, and at most the five a serial container's call has
	# (its stdin, stdout and stderr, its call and done pipes; an MCP warm
	# sandbox's has no done pipe), none among the numbers the code's own
	# open() calls get (3, 4, 5... as in a fresh Sage). Files the warm-up's
	# libraries keep open (9.5's IPython's /dev/null) are theirs, as their
	# modules are, at numbers from 600 up (the man page, Warm templates).
	local corpus=$BATS_TEST_TMPDIR/corpus.jsonl
	cat "$CORPUS" >"$corpus"
	python3 -c 'import json, sys; print(json.dumps({"id": "descriptors", "code": sys.argv[1]}))' '
import os
kinds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        kinds.append(os.readlink("/proc/self/fd/" + fd).split(":")[0])
    except OSError:
        pass
print(sorted(k for k in kinds if k != "pipe" and not k.startswith("/")), kinds.count("pipe") <= 5)
print("descriptors the code opens:", [os.open("/dev/null", os.O_RDONLY) for _ in range(12)])' >>"$corpus"
	# Threads' names: a step's thread (matplotlib's font cache starts a
	# Timer) must not number a call's first Thread-2. And the room the
	# code has to recurse: the launcher's frames below the code are more
	# in a warm call than in a cold one (child.py, CODE_DEPTH).
	python3 -c 'import json, sys; print(json.dumps({"id": "thread-names", "code": sys.argv[1]}))' '
import threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(t.name, threading.Thread().name)' >>"$corpus"
	python3 -c 'import json, sys; print(json.dumps({"id": "recursion-room", "code": sys.argv[1]}))' '
def d(n):
    return 0 if n == 0 else 1 + d(n - 1)
deepest = 0
for n in range(900, 1000):
    try:
        d(n); deepest = n
    except RecursionError:
        break
print("deepest recursion:", deepest)' >>"$corpus"
	# The filters the warm-up's imports added come with the code's own
	# imports, in front of the filters it set before, and not at all
	# where it imports nothing that adds them (deferred.py): warned, not
	# raised; raised, not ignored; printed, not silenced. And Maxima's
	# options as a fresh Maxima lists them (the warm-up's counters put
	# back from Lisp).
	python3 -c 'import json, sys; print(json.dumps({"id": "warnings-set-first", "code": sys.argv[1]}))' '
import warnings
warnings.simplefilter("error")
import numpy as np
def outcome(f):
    try:
        f()
        return "ok"
    except Warning as e:
        return type(e).__name__
print("polyfit:", outcome(lambda: np.polyfit([1, 2, 3], [1, 2, 3], 5)))
print("matrix:", outcome(lambda: np.matrix([[1, 2]])))
warnings.resetwarnings()
warnings.filterwarnings("ignore")
import scipy.special as sc
sc.seterr(all="warn")
print(sc.gamma(-1.0))
print(maxima_calculus.eval("myoptions"))' >>"$corpus"
	# A catch_warnings() block puts back the filters it found: those an
	# import inside it added leave with it, set a filter there or not
	# (attack helper: warm, scipy's "always" came back with the block,
	# and the warning printed three times where cold prints it once).
	python3 -c 'import json, sys; print(json.dumps({"id": "warnings-in-a-block", "code": sys.argv[1]}))' '
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import scipy.special as sc
with warnings.catch_warnings(record=True):
    import numpy as np
sc.seterr(all="warn")
for i in range(3):
    print(sc.gamma(-1.0))
for d in (5, 6):
    np.polyfit([1, 2, 3], [1, 2, 3], d)
print(len(warnings.filters))' >>"$corpus"
	# A failing import's traceback: no frame of the launcher's hook that
	# waits for those imports.
	python3 -c 'import json, sys; print(json.dumps({"id": "import-missing", "code": sys.argv[1]}))' '
try:
    from scipy import no_such_part
except ImportError as e:
    print("caught:", e)
import no_such_module_here' >>"$corpus"
	# The garbage a call's first collection finds: the warm-up's is
	# collected in the template (a warm call found 6239 objects more),
	# the import's is not (Sage 9.5's 19; none on 10), nor what a step
	# let go of that was made before it (importlib.metadata's caches).
	python3 -c 'import json, sys; print(json.dumps({"id": "garbage", "code": sys.argv[1]}))' '
import gc
gc.set_debug(gc.DEBUG_SAVEALL)
gc.collect()
print("garbage:", sorted(type(o).__name__ for o in gc.garbage))' >>"$corpus"
	# HOME and DOT_SAGE as listed by the code: the files of Sage's first
	# use of Maxima, GAP and matplotlib (Maxima's binary directory, GAP's
	# workspace link and history, the font list) are there in every
	# container, cold or warm (launcher/firstuse.py), not only where the
	# warm-up used them (attack helper 166). Each container has its own
	# host name, which Sage 10 puts in the workspace link's name.
	python3 -c 'import json, sys; print(json.dumps({"id": "first-use-files", "code": sys.argv[1]}))' '
import socket, subprocess
listing = subprocess.run(["find", "dot-sage", "sage-home", "-printf", "%p %M %s %l\n"], cwd="/tmp",
                         capture_output=True, text=True).stdout
print("\n".join(sorted(listing.replace(socket.gethostname(), "HOST").splitlines())))' >>"$corpus"
	# The order the kernel lists them in: tmpfs lists by the order of
	# making, which the reset between calls keeps (attack helper 169).
	# Sage's temporary directory has a name of its own in each container.
	python3 -c 'import json, sys; print(json.dumps({"id": "listing-order", "code": sys.argv[1]}))' '
import os, re
print([re.sub(r"^sage_\w+$", "sage_*", name) for name in os.listdir("/tmp")])
print(os.listdir(os.environ["DOT_SAGE"]), os.listdir(os.environ["HOME"]))
print(os.listdir(os.environ["DOT_SAGE"] + "/maxima"))' >>"$corpus"
	# A thread the code starts after its first plot: matplotlib's font
	# list is the image's, so no cold call builds it, and no timer
	# thread of that build takes the name Thread-1.
	python3 -c 'import json, sys; print(json.dumps({"id": "thread-after-plot", "code": sys.argv[1]}))' '
import threading
plot(sin(x), (x, 0, 1)).save("/tmp/first.png")
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(t.name, threading.active_count())' >>"$corpus"
	# An uncaught KeyboardInterrupt: Python's end, death by SIGINT (130).
	python3 -c 'import json, sys; print(json.dumps({"id": "interrupt-uncaught", "code": sys.argv[1]}))' '
import atexit
atexit.register(lambda: print("atexit ran"))
raise KeyboardInterrupt' >>"$corpus"
	# Cold: below --memory 1g no template is warmed, and each job runs as
	# a run does, in a child forked from a launcher that only imported Sage.
	run_ss 0 batch --memory 768m --jobs 2 --order input "$corpus"
	printf '%s\n' "$output" | normalise >"$cold"
	[ "$(wc -l <"$cold")" -ge 40 ]
	# ... which is what a cold run prints, for three whose output names
	# Maxima's symbols (r1, _K1) or asks Maxima a question, one that
	# prints sets of symbolic variables (their order follows the numbers
	# Sage gives symbols as they are made), and the descriptors (a run's
	# child has no done pipe: the code's numbers must not depend on it),
	# threads' names and the room to recurse.
	local id ids="solve-free-two desolve-second integrate-parameter symbol-order descriptors
		thread-names recursion-room warnings-set-first warnings-in-a-block import-missing
		interrupt-uncaught"
	for id in $ids; do
		python3 -c 'import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if j["id"] == sys.argv[2]:
        sys.stdout.write(j["code"])' "$corpus" "$id" >"$BATS_TEST_TMPDIR/$id.sage"
	done
	# Two at a time, as the batch ran them.
	printf '%s\n' $ids | xargs -P 2 -I '{}' sh -c '"$1" run --json <"$2/{}.sage" >"$2/{}.json" || true' \
		sh "$SAGE_SANDBOX" "$BATS_TEST_TMPDIR"
	for id in $ids; do
		expect_equal "$(python3 -c 'import json, sys; j = json.load(open(sys.argv[2]))
print(json.dumps([sys.argv[1], j["exit_code"], j["stdout"], j["stderr"]]))' "$id" "$BATS_TEST_TMPDIR/$id.json")" \
			"$(grep -F "[\"$id\"," "$cold")"
	done

	# Batch: the hostile job first, then the corpus, in one container;
	# its first jobs run while it warms.
	python3 -c 'import json, sys
print(json.dumps({"id": "hostile", "code": sys.argv[1]}))' "$HOSTILE" >"$jobs"
	cat "$corpus" >>"$jobs"
	run_ss 0 batch --jobs 1 --order input "$jobs"
	printf '%s\n' "$output" | normalise | grep -v '^\["hostile"' >"$BATS_TEST_TMPDIR/batch.jsonl"
	diff "$cold" "$BATS_TEST_TMPDIR/batch.jsonl"

	# The server, once warm: its first call the hostile one, then each.
	warm_server_up --warm 1
	expect_match "$(cat "$log")" "first sandbox warmed for GAP, Maxima, matplotlib, Singular and scipy [0-9]+ ms after start"
	printf '%s\n' "$HOSTILE" | "$SAGE_SANDBOX" run >/dev/null
	python3 - "$SAGE_SANDBOX" "$corpus" >"$BATS_TEST_TMPDIR/served.jsonl" <<-'EOF'
		import json, subprocess, sys
		for line in open(sys.argv[2]):
		    job = json.loads(line)
		    r = subprocess.run([sys.argv[1], "run", "--json"], input=job["code"].encode(),
		                       capture_output=True)
		    j = json.loads(r.stdout)
		    print(json.dumps([job["id"], j["exit_code"], j["stdout"], j["stderr"]]))
	EOF
	diff "$cold" "$BATS_TEST_TMPDIR/served.jsonl"
	[ "$(grep -c "^sage-sandbox serve: run [0-9]* for pid" "$log")" -ge 40 ]
	"$SAGE_SANDBOX" serve --stop

	# MCP: each call has a sandbox of its own, destroyed after it (a
	# hostile call goes first in the containers above, which serve one
	# call after another), and one warms in about 8 CPU-s,
	# two at once. Two warm ones, given time to warm, for two of the corpus
	# whose output names Maxima's symbols; then three more as they come,
	# in sandboxes still warming or not yet started. The rest of the
	# corpus went warm through batch and the server above.
	local calls=$BATS_TEST_TMPDIR/calls.json some=$BATS_TEST_TMPDIR/some.jsonl
	grep -E '^\{"id": "(solve-free-two|desolve-second|integrate-parameter|maxima-names|plot-2d)"' \
		"$corpus" >"$some"
	[ "$(wc -l <"$some")" -eq 5 ]
	python3 - "$some" >"$calls" <<-'EOF'
		import json, sys
		# The second warms beside the first, a little behind it.
		calls = ["first sandbox warmed", 3]
		for line in open(sys.argv[1]):
		    calls.append({"name": "run_sagemath", "arguments": {"code": json.loads(line)["code"]}})
		print(json.dumps(calls))
	EOF
	out=$(timeout 300 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" --display none --warm 2 2>"$BATS_TEST_TMPDIR/stderr")
	printf '%s\n' "$out" | sed '$d' | normalise | python3 -c '
import json, sys
ids = [json.loads(l)["id"] for l in open(sys.argv[1])]
for i, line in zip(ids, sys.stdin):
    print(json.dumps([i] + json.loads(line)[1:]))' "$some" >"$BATS_TEST_TMPDIR/mcp.jsonl"
	[ "$(wc -l <"$BATS_TEST_TMPDIR/mcp.jsonl")" -eq 5 ]
	diff <(grep -F -f <(sed 's/^{"id": \("[^"]*"\).*/[\1,/' "$some") "$cold") "$BATS_TEST_TMPDIR/mcp.jsonl"
	# The first two came from the pool, warmed.
	printf '%s\n' "$out" | sed -n 1,2p | python3 -c 'import json, sys
assert [json.loads(l)["_meta"]["warm"] for l in sys.stdin] == [True, True]'
}

# Generators of libraries, each seeded as it is imported (Singular's at
# Sage's import), that a template holds: sympy's and Singular's, which
# --seed seeds too; and PolyBoRi's, which draws anew in each call.
LIBRARIES='import sympy
from sage.libs.singular.function import singular_function
print(sympy.randprime(10^8, 10^9), sympy.Dummy("d").dummy_index,
      singular_function("random")(1, 10^9))'
# (By module name: Sage 9.5's package holds a function of that name.)
POLYBORI='import importlib
interpolate = importlib.import_module("sage.rings.polynomial.pbori.interpolate")
print(interpolate.generator.random())'

# each_differs A B: each word of A differs from the same word of B.
each_differs() {
	local -a a b
	read -r -d '' -a a <<<"$1" || true
	read -r -d '' -a b <<<"$2" || true
	[ "${#a[@]}" -ge 4 ] && [ "${#a[@]}" -eq "${#b[@]}" ] || {
		printf '# not the same words:\n%s\n%s\n' "$1" "$2" >&2
		return 1
	}
	local k
	for ((k = 0; k < ${#a[@]}; k++)); do
		[ "${a[k]}" != "${b[k]}" ] || {
			printf '# word %d repeated: %s\n' "$k" "${a[k]}" >&2
			return 1
		}
	done
}

SEEDED='import random as python_random, numpy, ctypes
print(ctypes.CDLL(None).rand())
print(random_matrix(ZZ, 3, 3))
print(random(), python_random.random(), numpy.random.rand(2))
print(random_prime(10^20), ZZ.random_element(10^30), GF(101).random_element())
print(SymmetricGroup(6).random_element())
print(RR.random_element(), QQ.random_element(10, 10))
print(set(["apple", "banana", "cherry", "date"]))
print(gp.eval("random(10^9)"))
'"$LIBRARIES"

@test "warm - --seed: the same seeded output cold, through the server (first call and later), MCP and batch; fresh state without a seed" {
	# Cold, seeded, beside two unseeded cold runs, which differ.
	local seeded_file=$BATS_TEST_TMPDIR/seeded
	# (fd 3 closed: bats would wait for it on a failure before the wait.)
	printf '%s\n' "$SEEDED" | timeout 300 "$SAGE_SANDBOX" run --seed 42 >"$seeded_file" 3>&- &
	local seeding=$!
	sage "$SEEDED" 0 run
	local fresh=$output
	sage "$SEEDED" 0 run
	[ "$output" != "$fresh" ]
	wait "$seeding"
	local seeded
	seeded=$(cat "$seeded_file")
	[ -n "$seeded" ]

	# The rest through the server (cold runs are the slowest step).
	warm_server_up --warm 1
	local i
	for i in 1 2 3; do
		sage "$SEEDED" 0 run --seed 42
		expect_equal "$output" "$seeded"
	done
	SAGE_SANDBOX_SEED=42 sage "$SEEDED" 0 run
	expect_equal "$output" "$seeded"
	local settings=$BATS_TEST_TMPDIR/settings
	printf 'seed = 42\n' >"$settings"
	SAGE_SANDBOX_SETTINGS=$settings sage "$SEEDED" 0 run --json
	expect_equal "$(json_get 'j["stdout"]')" "$seeded"
	expect_equal "$(json_get 'j["sandbox"]["seed"]')" 42
	sage "$SEEDED" 0 run --seed 43
	[ "$output" != "$seeded" ]
	sage "$SEEDED" 0 run
	fresh=$output
	sage "$SEEDED" 0 run
	[ "$output" != "$fresh" ]
	# Each library's generator alone draws anew in each call of a
	# container: seeded once in the template, each repeated in every call
	# (attack helper).
	sage "$LIBRARIES
$POLYBORI" 0 run
	fresh=$output
	sage "$LIBRARIES
$POLYBORI" 0 run
	each_differs "$fresh" "$output"
	"$SAGE_SANDBOX" serve --stop

	local jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	python3 -c 'import json, sys
for i in range(4):
    print(json.dumps({"id": i, "code": sys.argv[1], "seed": 42}))
print(json.dumps({"id": "none", "code": sys.argv[1], "seed": None}))
print(json.dumps({"id": "batch", "code": sys.argv[1]}))
for i in range(2):
    print(json.dumps({"id": "libraries-%d" % i, "code": sys.argv[2], "seed": None}))' \
		"$SEEDED" "$LIBRARIES
$POLYBORI" >"$jobs"
	run_ss 0 batch --jobs 1 --seed 7 --order input "$jobs"
	printf '%s\n' "$output" | python3 -c 'import json, sys
lines = [json.loads(l) for l in sys.stdin]
assert [j["stdout"] for j in lines[:4]] == [sys.argv[1]] * 4, lines
assert lines[4]["stdout"] != sys.argv[1] and lines[4]["sandbox"]["seed"] is None
assert lines[5]["sandbox"]["seed"] == 7
first, second = (j["stdout"].split() for j in lines[6:8])
assert len(first) == 4 and all(a != b for a, b in zip(first, second)), lines[6:8]' "$seeded
"

	local calls=$BATS_TEST_TMPDIR/calls.json
	python3 -c 'import json, sys
call = {"name": "run_sagemath", "arguments": {"code": sys.argv[1], "seed": 42}}
print(json.dumps([call, 15, call, call]))' "$SEEDED" >"$calls"
	out=$(timeout 200 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" --display none 2>/dev/null)
	printf '%s\n' "$out" | sed '$d' | python3 -c 'import json, sys
outs = [json.loads(l)["structuredContent"]["stdout"] for l in sys.stdin]
assert outs == [sys.argv[1]] * 3, outs' "$seeded
"
}

@test "warm - a seed imports nothing the code does not: seeded at --memory 300m as unseeded" {
	# The seed imported numpy and sympy to seed them, which a fresh Sage
	# does not: at --memory 300m numpy's OpenBLAS could not start, and the
	# run failed with only its message (attack helper). Seeded as the
	# code's own import of them ends, the same for the same seed.
	local code='import sys
print(randint(1, 10^9), "numpy" in sys.modules, "sympy" in sys.modules)'
	sage "$code" 0 run --memory 300m
	expect_match "$output" '^[0-9]+ False False$'
	sage "$code" 0 run --seed 5 --memory 300m
	local seeded=$output
	expect_match "$seeded" '^[0-9]+ False False$'
	sage "$code" 0 run --seed 5 --memory 300m
	expect_equal "$output" "$seeded"
	code='import numpy, sympy
print(randint(1, 10^9), numpy.random.randint(10^9), sympy.Dummy("d").dummy_index)'
	sage "$code" 0 run --seed 5
	seeded=$output
	sage "$code" 0 run --seed 5
	expect_equal "$output" "$seeded"
	sage "$code" 0 run --seed 6
	[ "$output" != "$seeded" ]
	# Finders of the code's own first, as a tuple: the seed's finder was
	# passed over (unseeded), recursed into one that asks the others, or
	# failed on the tuple (attack helper).
	sage 'import sys, importlib.machinery
class Own:
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, path, target)
class Asking:
    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if finder is not self else None
            if spec is not None:
                return spec
sys.meta_path = tuple([Asking(), Own()] + sys.meta_path)
'"$code" 0 run --seed 5
	expect_equal "$output" "$seeded"
}

@test "warm - a seed out of range is refused, with the fix: flag, environment, batch job, MCP" {
	sage 'print(1)' 125 run --seed -1
	expect_equal "$errors" "sage-sandbox: invalid --seed '-1': allowed is none, or an integer from 0 to 4294967295; see sage-sandbox --help"
	SAGE_SANDBOX_SEED=4294967296 sage 'print(1)' 125 run
	expect_equal "$errors" "sage-sandbox: invalid SAGE_SANDBOX_SEED '4294967296': allowed is none, or an integer from 0 to 4294967295; see sage-sandbox --help"
	printf '%s\n' '{"id": 1, "code": "print(1)", "seed": "7"}' >"$BATS_TEST_TMPDIR/jobs.jsonl"
	run_ss 1 batch "$BATS_TEST_TMPDIR/jobs.jsonl"
	expect_equal "$(json_get 'j["exit_code"]')" 125
	expect_match "$(json_get 'j["error"]')" "seed must be an integer from 0 to 4294967295 or null"
	local calls=$BATS_TEST_TMPDIR/calls.json
	printf '%s\n' '[{"name": "run_sagemath", "arguments": {"code": "print(1)", "seed": -3}}]' >"$calls"
	out=$(timeout 60 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" --warm 0 2>/dev/null)
	expect_match "$(sed -n 1p <<<"$out")" "seed must be an integer from 0 to 4294967295"
}

@test "warm - below --memory 1g nothing is warmed; a call that comes while a container warms runs at once in the child prepared before" {
	"$SAGE_SANDBOX" serve --warm 1 --memory 768m 2>"$log" &
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q "first warm sandbox ready" "$log" && break
		sleep 0.1
	done
	sleep 10
	expect_no_match "$(cat "$log")" "warmed"
	sage 'print(integrate(sin(x)^2, x))' 0 run
	expect_equal "$output" "1/2*x - 1/4*sin(2*x)"
	"$SAGE_SANDBOX" serve --stop
	# At 1g: a run as soon as the sandbox is ready comes during the
	# warm-up and is answered, as the template stood.
	"$SAGE_SANDBOX" serve --warm 1 2>"$log" &
	for ((i = 0; i < 600; i++)); do
		grep -q "first warm sandbox ready" "$log" && break
		sleep 0.1
	done
	sage 'print(factor(2^64 + 1))' 0 run
	expect_equal "$output" "274177 * 67280421310721"
	for ((i = 0; i < 600; i++)); do
		grep -q "first sandbox warmed" "$log" && break
		sleep 0.1
	done
	expect_match "$(cat "$log")" "first sandbox warmed"
	expect_no_match "$(cat "$log")" "ended early"
	# A warm call's data rlimit: the memory limit and what the warm-up
	# took, as hard as soft: not to be raised to the container's room.
	sage 'import resource
soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
print(soft == hard, 2^30 < soft < 2.5 * 2^30)
try:
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard + 1))
except ValueError as e:
    print(e)' 0 run
	expect_equal "$output" "True True
not allowed to raise maximum limit"
}
