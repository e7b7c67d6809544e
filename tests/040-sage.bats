#!/usr/bin/env bats
# Ordinary Sage computations in the sandbox, compared exactly.

load helpers

@test "sage - calculus: integrals, derivative, limit, series, solve" {
	sage 'print(integrate(x^2*sin(x), x))
print(integrate(exp(-x^2), x, -oo, oo))
print(diff(x^x, x))
print(limit(sin(x)/x, x=0))
print(taylor(exp(x), x, 0, 4))
print(solve(x^2 - 5*x + 6 == 0, x))' 0 run
	expect_equal "$output" '-(x^2 - 2)*cos(x) + 2*x*sin(x)
sqrt(pi)
x^x*(log(x) + 1)
1
1/24*x^4 + 1/6*x^3 + 1/2*x^2 + x + 1
[
x == 3,
x == 2
]'
}

@test "sage - linear algebra: determinant, inverse, characteristic polynomial, rank" {
	sage 'M = matrix(QQ, [[2, 1], [1, 3]])
print(M.det())
print(M.inverse())
print(M.charpoly())
print(matrix(QQ, 3, 3, range(9)).rank())' 0 run
	expect_equal "$output" '5
[ 3/5 -1/5]
[-1/5  2/5]
x^2 - 5*x + 5
2'
}

@test "sage - number theory: factoring, primality, totient, continued fraction, CRT" {
	sage 'print(factor(2^64 + 1))
print(is_prime(2^127 - 1), euler_phi(100), next_prime(10^12))
print(continued_fraction(sqrt(2)))
print(CRT([2, 3], [5, 7]))' 0 run
	expect_equal "$output" '274177 * 67280421310721
True 40 1000000000039
[1; 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, ...]
17'
	expect_equal "$errors" "" "stderr"
}

@test "sage - groups and curves: symmetric group, GAP, elliptic curve" {
	sage 'G = SymmetricGroup(4)
print(G.order(), G.is_abelian(), len(G.conjugacy_classes_representatives()))
print(libgap.eval("Size(AlternatingGroup(5))"))
E = EllipticCurve([0, 0, 1, -1, 0])
print(E.conductor(), E.rank())' 0 run
	expect_equal "$output" '24 False 5
60
37 1'
	expect_equal "$errors" "" "stderr"
}

@test "sage - GAP starts from the workspace the image keeps, linked where Sage looks, and writes none into /tmp" {
	sage 'import os
print(any(n.startswith("libgap-workspace-") for n in os.listdir("/usr/local/share/sage-sandbox")) if os.path.isdir("/usr/local/share/sage-sandbox") else False)' 0 run
	[ "$output" = True ] ||
		skip "$IMAGE keeps no GAP workspace (./setup.sh adds it to the images it makes)"
	sage 'import os
print(libgap.eval("Size(SymmetricGroup(5))"))
print("-L" in libgap.eval("GAPInfo.KernelInfo.COMMAND_LINE").sage())
gap = os.path.join(os.environ["DOT_SAGE"], "gap")
print(sorted((name.split("-")[0], os.path.islink(os.path.join(gap, name))) for name in os.listdir(gap)))
print(sorted(os.listdir(os.environ["HOME"])))
print([os.path.join(r, f) for r, ds, fs in os.walk("/tmp") for f in fs
       if os.lstat(os.path.join(r, f)).st_size > 2**20])' 0 run
	# A GAP restored from a workspace runs its exit functions once, which
	# save its history: in ~/.gap where it is (9.5's GAP makes it as it
	# starts), else in ~/.gap_hist. (9.5's ~/.cache is fontconfig's, among
	# the first-use files: launcher/firstuse.py.)
	local home="['.gap_hist']"
	[ "$(sage_version)" != 9.5 ] || home="['.cache', '.gap']"
	expect_equal "$output" "120
True
[('README.txt', False), ('libgap', True)]
$home
[]"
	expect_equal "$errors" "" "stderr"
}

@test "sage - the code's functions and classes are __main__'s, as in a fresh Sage: pickled by dumps(), @parallel and multiprocessing" {
	sage 'import multiprocessing, sys
class Point:
    def __init__(self, x):
        self.x = x
def norm(p):
    return abs(p.x)
print(loads(dumps(Point(-3))).x, sys.modules["__main__"].norm is norm)
@parallel(2)
def twice(n):
    return Point(2 * n)
print(sorted((args[0][0], p.x) for args, p in twice([1, 2, 3])))
with multiprocessing.Pool(2) as pool:
    print(pool.map(norm, [Point(-1), Point(2)]))
print(sorted(k for k in globals() if k.startswith("__")))' 0 run
	expect_equal "$output" "-3 True
[(1, 2), (2, 4), (3, 6)]
[1, 2]
['__annotations__', '__builtins__', '__cached__', '__doc__', '__file__', '__loader__', '__name__', '__package__', '__spec__']"
	expect_equal "$errors" "" "stderr"
}

@test "sage - plotting to a PNG file in /tmp" {
	sage 'p = plot(sin(x), (x, 0, 2*pi))
p.save("/tmp/sine.png")
data = open("/tmp/sine.png", "rb").read()
print(data[:8] == b"\x89PNG\r\n\x1a\n", len(data) > 5000)' 0 run
	expect_equal "$output" "True True"
}

@test "sage - no PARI stack warning at the default limits and at 512m; PARI works within the limit" {
	sage 'print(factor(2^128 + 1))
print(pari("2^100"))
print(pari.default("parisizemax") <= 2^30 / 4)' 0 run
	expect_equal "$output" "59649589127497217 * 5704689200685129054721
1267650600228229401496703205376
True"
	expect_equal "$errors" "" "stderr (PARI warnings)"
	sage 'print(factor(2^64 + 1))' 0 run --memory 512m
	expect_equal "$errors" "" "stderr at 512m"
}

@test "sage - at --memory 256m, ordinary Sage runs without warnings (Sage 9); Sage 10's import is refused, saying to raise --memory" {
	local code='print(factor(2^64 + 1), integrate(x^2, x), matrix(QQ, [[1, 2], [3, 4]]).det())'
	if [ "$(sage_version)" != 9.5 ]; then
		# Sage 10 (passagemath 10.8) needs more than 256 MiB of data to
		# import: the limit is at fault, not the image.
		sage "$code" 125 run --memory 256m
		expect_equal "$errors" "sage-sandbox: Sage's import ran out of memory under the memory limit (--memory 256m); raise --memory (at most 8g)"
		sage "$code" 0 run --memory 512m
		expect_equal "$output" "274177 * 67280421310721 1/3*x^3 -2"
		return
	fi
	sage "$code" 0 run --memory 256m
	expect_equal "$output" "274177 * 67280421310721 1/3*x^3 -2"
	expect_equal "$errors" "" "stderr"
}

@test "sage - what Sage itself changed between versions is each version's own answer: round, gens, numpy's reprs, the backslash operator" {
	local version
	version=$(sage_version)
	case $version in
	9.5)
		# Sage 9.5 rounds half away from zero, gives a group's generators
		# as a list, has numpy 1 (a scalar prints as its value), and its
		# preparser turns A \ b into A.solve_right(b).
		sage 'print(round(9/2)); print(SymmetricGroup(3).gens())
import numpy; print(repr(numpy.float64(1.5)))' 0 run
		expect_equal "$output" '5
[(1,2,3), (1,2)]
1.5'
		sage 'A = matrix(QQ, [[1, 2], [3, 4]]); b = vector(QQ, [5, 6])
print(A \ b)' 0 run
		expect_equal "$output" '(-4, 9/2)'
		expect_equal "$errors" '' stderr
		;;
	10.8* | 10.9* | 10.1[0-9]*)
		# From Sage 10.6, round() of a rational rounds half to even; a
		# group's generators are a tuple; numpy 2's scalars print with
		# their type; Sage 10.8's preparser no longer knows A \ b, which
		# is Python's SyntaxError, quoted from the code's own line.
		sage 'print(round(9/2)); print(SymmetricGroup(3).gens())
import numpy; print(repr(numpy.float64(1.5)))' 0 run
		expect_equal "$output" '4
((1,2,3), (1,2))
np.float64(1.5)'
		sage 'A = matrix(QQ, [[1, 2], [3, 4]]); b = vector(QQ, [5, 6])
print(A \ b)' 1 run
		expect_equal "$output" ''
		expect_equal "$errors" '  File "<stdin>", line 2
    print(A \ b)
             ^
SyntaxError: unexpected character after line continuation character' stderr
		;;
	*)
		skip "no expectations recorded for Sage $version"
		;;
	esac
}
