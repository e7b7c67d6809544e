#!/usr/bin/env bats
# Files in and out of the sandbox: run --output-dir brings back what the code
# left in $SAGE_SANDBOX_OUT, over the launcher's own stream (no mount), from
# a tree treated as hostile; run --input puts host files beside the code.

load helpers

setup() {
	out=$BATS_TEST_TMPDIR/area/out
	mkdir -p "$out"
	# Beside DIR: what must not be touched.
	printf 'keep\n' >"$BATS_TEST_TMPDIR/area/sentinel"
}

# run_with_rss STATUS ARGS...: runs sage-sandbox ARGS, which must exit
# with STATUS; leaves $output (stdout) and $rss, its own peak RSS in KiB
# (VmHWM, read every 5 ms as it runs: a lower bound, short by what it
# grew in its last few ms). Not /usr/bin/time's: that is the largest of
# the process and the children it reaped, and sage-sandbox reaps its
# podman client (36 MiB) where that exits before it does, by chance.
run_with_rss() {
	local expected=$1 rc=0
	shift
	python3 -c '
import subprocess, sys, time
run = subprocess.Popen(sys.argv[2:])
peak = 0
while run.poll() is None:
    try:
        with open("/proc/%d/status" % run.pid) as status:
            peak = max([peak] + [int(l.split()[1]) for l in status if l.startswith("VmHWM:")])
    except OSError:
        pass
    time.sleep(0.005)
open(sys.argv[1], "w").write("%d\n" % peak)
sys.exit(run.returncode if run.returncode >= 0 else 128 - run.returncode)' \
		"$BATS_TEST_TMPDIR/rss" "$SAGE_SANDBOX" "$@" \
		>"$BATS_TEST_TMPDIR/stdout" 2>"$BATS_TEST_TMPDIR/stderr" || rc=$?
	output=$(cat "$BATS_TEST_TMPDIR/stdout")
	rss=$(cat "$BATS_TEST_TMPDIR/rss")
	expect_equal "$rc" "$expected" "exit status"
	[ "$rss" -gt 0 ]
}

# expect_small_rss WHAT: $rss, shown, is under 16 MiB.
expect_small_rss() {
	echo "# peak RSS of sage-sandbox $1: $rss KiB" >&3
	expect_equal "$((rss < 16384))" 1 "peak RSS under 16 MiB"
}

# prog NAME CODE: a program file; prints its path.
prog() {
	printf '%s\n' "$2" >"$BATS_TEST_TMPDIR/$1"
	printf '%s' "$BATS_TEST_TMPDIR/$1"
}

@test "output-dir - a plot and a text file come back, listed with size, sha256, media type and pixels" {
	local p
	p=$(prog plot.sage 'import os
out = os.environ["SAGE_SANDBOX_OUT"]
print(sorted(os.listdir(out)))
plot(sin(x), (x, 0, 2*pi)).save(out + "/sin.png")
os.makedirs(out + "/tables")
open(out + "/tables/primes.txt", "w").write(str(prime_range(30)))
print("saved")')
	run_ss 0 run --json --output-dir "$out" "$p"
	expect_equal "$(json_get 'j["stdout"]')" "[]
saved"
	expect_equal "$(json_get '[f["name"] for f in j["files"]]')" '["sin.png", "tables/primes.txt"]'
	expect_equal "$(json_get 'j["files"][0]["media_type"]')" image/png
	expect_equal "$(json_get 'j["files"][1]["media_type"]')" text/plain
	expect_equal "$(json_get 'j["files"][0]["size"]')" "$(stat -c %s "$out/sin.png")"
	expect_equal "$(json_get 'j["files"][0]["sha256"]')" "$(sha256sum "$out/sin.png" | cut -d' ' -f1)"
	# The pixel size is the PNG's own, read by another tool.
	expect_equal "$(json_get '"%dx%d" % (j["files"][0]["width"], j["files"][0]["height"])')" \
		"$(python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print("%dx%d" % struct.unpack(">II", d[16:24]))' "$out/sin.png")"
	expect_equal "$(json_get 'j["files"][1]["width"]')" null
	expect_equal "$(cat "$out/tables/primes.txt")" "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29]"
	expect_equal "$(json_get 'j["files_not_saved"]')" "[]"
	# Text mode notes them on stderr, after the code's own output.
	rm -r "$out"/*
	run_ss 0 run --output-dir "$out" "$p"
	expect_equal "$output" "[]
saved"
	expect_match "$errors" "saved $out/sin.png \\([0-9.]+ KiB, image/png, [0-9]+x[0-9]+ pixels\\)"
	expect_match "$errors" "saved $out/tables/primes.txt \\(36 bytes, text/plain\\)"
	# Without --output-dir nothing is transferred, and the JSON says so.
	run_ss 0 run --json "$p"
	expect_equal "$(json_get 'j["files"]')" null
}

@test "output-dir - a name that holds a character no one sees is saved as it is, and shown escaped" {
	local p out=$BATS_TEST_TMPDIR/out
	# A zero-width space and a tag character: "ab.txt" to a reader, raw.
	p=$(prog unseen.sage 'import os
out = os.environ["SAGE_SANDBOX_OUT"]
open(os.path.join(out, "a\u200bb\U000E0041.txt"), "w").write("x")')
	mkdir "$out"
	run_ss 0 run --output-dir "$out" "$p"
	[ -f "$out/$(printf 'a\342\200\213b\363\240\201\201.txt')" ]
	expect_equal "$errors" "sage-sandbox: saved $out/a\\xe2\\x80\\x8bb\\xf3\\xa0\\x81\\x81.txt (1 bytes, text/plain)"
}

@test "output-dir - the hostile tree: links, FIFO, 5000 files, a 200 MB file, 200 levels, bad names, a file being written" {
	local p before
	p=$(prog hostile.sage 'import os, subprocess, time
out = os.environ["SAGE_SANDBOX_OUT"]
os.symlink("/etc/passwd", out + "/passwd")
os.symlink("../../../../sentinel", out + "/up")
os.mkfifo(out + "/fifo")
open(out + "/one", "w").write("1")
os.link(out + "/one", out + "/two")
open(out + "/a\nb", "w").write("newline")
open(out + "/..x", "w").write("dots")
open(out + "/e\u202eftx.tex", "w").write("shown as exft.tex")
open(os.fsencode(out) + b"/bad\xff", "w").write("latin")
try:
    with open(out + "/huge.bin", "wb") as f:
        for i in range(200):
            f.write(b"\0" * (1 << 20))
except OSError as e:
    print("huge stopped:", e.strerror)
d = out
for i in range(200):
    d += "/d"
    os.mkdir(d)
open(d + "/deep", "w").write("deep")
# Sorted last, so that the other paths are the ones listed first.
os.mkdir(out + "/zz-many")
for i in range(5000):
    open(out + "/zz-many/%04d" % i, "w").write("x")
# A process that goes on writing after the code ends.
subprocess.Popen(["sh", "-c", "while :; do echo more >> " + out + "/growing; done"])
time.sleep(1)
print("done", flush=True)
sys.exit(int(3))')
	before=$(sha256sum /etc/passwd)
	# The run's own result and status survive.
	run_with_rss 3 run --json --output-dir "$out" "$p"
	expect_equal "$(json_get 'j["exit_code"]')" 3
	expect_match "$(json_get 'j["stdout"]')" "huge stopped: File too large"
	# Regular files with one name, within the caps.
	local names
	names=$(json_get '[f["name"] for f in j["files"] if not f["name"].startswith("zz-many/")]')
	expect_equal "$names" '["..x", "growing"]'
	expect_equal "$(json_get 'len(j["files"]) <= 100')" true
	expect_equal "$(json_get 'sum(f["size"] for f in j["files"]) <= 64 << 20')" true
	# What came is what is listed: the writer was stopped before the walk.
	expect_equal "$(json_get '[f["sha256"] for f in j["files"] if f["name"] == "growing"][0]')" \
		"$(sha256sum "$out/growing" | cut -d' ' -f1)"
	local reasons
	reasons=$(json_get '"\n".join(d["name"] + ": " + d["reason"] for d in j["files_not_saved"])')
	expect_match "$reasons" "passwd: a symbolic link"
	expect_match "$reasons" "up: a symbolic link"
	expect_match "$reasons" "fifo: not a regular file"
	expect_match "$reasons" "one: a hard link"
	expect_match "$reasons" 'a\\x0ab: its name is not printable'
	expect_match "$reasons" 'bad\\xff: its name is not printable'
	expect_match "$reasons" 'e\\xe2\\x80\\xaeftx\.tex: its name is not printable'
	expect_match "$reasons" "huge.bin: larger than the cap of 64m"
	expect_match "$reasons" "d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/: more than 16 directories deep"
	expect_match "$reasons" "past the cap of 100 files"
	expect_equal "$(json_get 'j["files_not_saved_count"] > 4900')" true
	# Nothing outside DIR: the sentinel as it was, no other entry beside
	# DIR, /etc/passwd unchanged; nothing half-written inside it.
	expect_equal "$(cat "$BATS_TEST_TMPDIR/area/sentinel")" keep
	expect_equal "$(ls -A "$BATS_TEST_TMPDIR/area" | tr '\n' ' ')" "out sentinel "
	expect_equal "$(sha256sum /etc/passwd)" "$before"
	expect_equal "$(find "$out" -name '.sage-sandbox-partial-*' -o -type l -o -type p | wc -l)" 0
	# Bounded memory: the peak RSS of sage-sandbox (KiB), far below what it
	# received (64 MiB of huge.bin was offered, then 5000 files).
	expect_small_rss "receiving the hostile tree"
}

@test "output-dir - the largest allowed file comes back whole in bounded memory" {
	local p
	p=$(prog big.sage 'import os
with open(os.environ["SAGE_SANDBOX_OUT"] + "/big.bin", "wb") as f:
    for i in range(64):
        f.write(os.urandom(1 << 20))
print("ok")')
	run_with_rss 0 run --json --output-dir "$out" "$p"
	expect_equal "$(json_get 'j["files"][0]["size"]')" $((64 << 20))
	expect_equal "$(json_get 'j["files"][0]["sha256"]')" "$(sha256sum "$out/big.bin" | cut -d' ' -f1)"
	expect_small_rss "receiving 64 MiB"
}

@test "output-dir - caps are settings: files, file size, total" {
	local p
	p=$(prog caps.sage 'import os
out = os.environ["SAGE_SANDBOX_OUT"]
for i in range(5):
    open(out + "/f%d" % i, "w").write("x" * 1000 * (i + 1))
print("ok")')
	run_ss 0 run --json --output-dir "$out" --output-files 2 "$p"
	expect_equal "$(json_get '[f["name"] for f in j["files"]]')" '["f0", "f1"]'
	expect_match "$(json_get 'j["files_not_saved"][0]["reason"]')" "past the cap of 2 files; raise --output-files"
	rm "$out"/*
	run_ss 0 run --json --output-dir "$out" --output-file-size 2k "$p"
	expect_equal "$(json_get '[f["name"] for f in j["files"]]')" '["f0", "f1"]'
	expect_match "$(json_get 'j["files_not_saved"][0]["reason"]')" "larger than the cap of 2k a file"
	rm "$out"/*
	SAGE_SANDBOX_OUTPUT_SIZE=6000b run_ss 0 run --json --output-dir "$out" "$p"
	expect_equal "$(json_get '[f["name"] for f in j["files"]]')" '["f0", "f1", "f2"]'
	expect_match "$(json_get 'j["files_not_saved"][0]["reason"]')" "the files together would pass 6000b"
}

@test "output-dir - existing files are kept unless --output-overwrite; links in DIR are never followed" {
	local p
	p=$(prog w.sage 'import os
out = os.environ["SAGE_SANDBOX_OUT"]
open(out + "/mine.txt", "w").write("new")
open(out + "/link.txt", "w").write("new")
os.mkdir(out + "/sub")
open(out + "/sub/x", "w").write("new")
print("ok")')
	printf 'old' >"$out/mine.txt"
	ln -s ../sentinel "$out/link.txt"
	mkdir "$BATS_TEST_TMPDIR/elsewhere"
	ln -s ../../elsewhere "$out/sub"
	run_ss 0 run --json --output-dir "$out" "$p"
	expect_equal "$(cat "$out/mine.txt")" old
	expect_match "$(json_get '" ".join(d["reason"] for d in j["files_not_saved"])')" \
		"mine.txt exists; remove it or use --output-overwrite"
	run_ss 0 run --json --output-dir "$out" --output-overwrite "$p"
	expect_equal "$(cat "$out/mine.txt")" new
	# The link itself is replaced, its target untouched.
	expect_equal "$(cat "$BATS_TEST_TMPDIR/area/sentinel")" keep
	[ -f "$out/link.txt" ] && [ ! -L "$out/link.txt" ]
	# A directory that is a link is not entered.
	expect_match "$(json_get 'j["files_not_saved"][0]["reason"]')" "a directory on its path is a symbolic link"
	expect_equal "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ""
}

@test "output-dir - what was saved before a timeout comes back; exit 124" {
	local p
	p=$(prog slow.sage 'import os, time
open(os.environ["SAGE_SANDBOX_OUT"] + "/partial.txt", "w").write("step 1\n")
print("started", flush=True)
time.sleep(600)')
	run_ss 124 run --json --timeout 8 --output-dir "$out" "$p"
	expect_equal "$(json_get 'j["stopped_by"]')" timeout
	expect_equal "$(json_get '[f["name"] for f in j["files"]]')" '["partial.txt"]'
	expect_equal "$(cat "$out/partial.txt")" "step 1"
}

@test "output-dir - a bad DIR is refused before anything runs" {
	local p
	p=$(prog ok.sage 'print(1)')
	run_ss 125 run --output-dir "$BATS_TEST_TMPDIR/missing" "$p"
	expect_equal "$errors" "sage-sandbox: output directory $BATS_TEST_TMPDIR/missing does not exist; create it first (mkdir -p DIR), or name another"
	run_ss 125 run --output-dir "$BATS_TEST_TMPDIR/area/sentinel" "$p"
	expect_match "$errors" "is not a directory"
	mkdir "$BATS_TEST_TMPDIR/ro"
	chmod 555 "$BATS_TEST_TMPDIR/ro"
	run_ss 125 run --json --output-dir "$BATS_TEST_TMPDIR/ro" "$p"
	expect_match "$(json_get 'j["error"]')" "is not writable"
	run_ss 125 run --output-overwrite "$p"
	expect_match "$errors" "--output-overwrite needs --output-dir"
	run_ss 125 run --output-dir
	expect_match "$errors" "option --output-dir needs a directory"
	[ -z "$(our_containers)" ]
}

@test "input - load() of a second file, a CSV, a directory's tree, a file named through a link" {
	mkdir -p "$BATS_TEST_TMPDIR/proj/data"
	printf 'def double(n):\n    return 2*n\n' >"$BATS_TEST_TMPDIR/proj/helpers.sage"
	printf 'x,y\n1,2\n3,4\n' >"$BATS_TEST_TMPDIR/proj/data/points.csv"
	printf 'print("module")\nVALUE = 7\n' >"$BATS_TEST_TMPDIR/mymod.py"
	ln -s "$BATS_TEST_TMPDIR/mymod.py" "$BATS_TEST_TMPDIR/linked.py"
	local p
	p=$(prog main.sage 'import csv
load("proj/helpers.sage")
print(double(21))
rows = list(csv.DictReader(open("proj/data/points.csv")))
print(sum(int(r["y"]) for r in rows))
import linked
print(linked.VALUE)')
	run_ss 0 run --input "$BATS_TEST_TMPDIR/proj/" --input "$BATS_TEST_TMPDIR/linked.py" "$p"
	expect_equal "$output" "42
6
module
7"
}

@test "input - a link inside the tree, a FIFO, clashing names and too many files are refused, nothing run" {
	mkdir -p "$BATS_TEST_TMPDIR/tree"
	printf 'a' >"$BATS_TEST_TMPDIR/tree/a.txt"
	ln -s /etc/passwd "$BATS_TEST_TMPDIR/tree/passwd"
	local p
	p=$(prog main.sage 'print("ran")')
	run_ss 125 run --input "$BATS_TEST_TMPDIR/tree" "$p"
	expect_equal "$errors" "sage-sandbox: input $BATS_TEST_TMPDIR/tree/passwd is a symbolic link; links inside an input directory are not followed; copy the file it points to instead, or remove it"
	expect_equal "$output" ""
	rm "$BATS_TEST_TMPDIR/tree/passwd"
	mkfifo "$BATS_TEST_TMPDIR/tree/fifo"
	run_ss 125 run --input "$BATS_TEST_TMPDIR/tree" "$p"
	expect_match "$errors" "tree/fifo is not a regular file or a directory"
	rm "$BATS_TEST_TMPDIR/tree/fifo"
	mkdir -p "$BATS_TEST_TMPDIR/other/tree" "$BATS_TEST_TMPDIR/third"
	printf 'b' >"$BATS_TEST_TMPDIR/other/tree/a.txt"
	run_ss 125 run --input "$BATS_TEST_TMPDIR/tree/" --input "$BATS_TEST_TMPDIR/other/tree" "$p"
	# Each named as it was given (the first was named by its path in
	# the sandbox), and the path they share (attack helper).
	expect_equal "$errors" "sage-sandbox: inputs $BATS_TEST_TMPDIR/tree/a.txt and $BATS_TEST_TMPDIR/other/tree/a.txt would both be tree/a.txt in the sandbox; give each input its own name"
	printf 'c' >"$BATS_TEST_TMPDIR/third/tree"
	run_ss 125 run --input "$BATS_TEST_TMPDIR/tree" --input "$BATS_TEST_TMPDIR/third/tree" "$p"
	expect_equal "$errors" "sage-sandbox: inputs $BATS_TEST_TMPDIR/tree/a.txt and $BATS_TEST_TMPDIR/third/tree cannot both be in the sandbox: tree would be a file and a directory; give each input its own name"
	mkdir "$BATS_TEST_TMPDIR/lots"
	for i in $(seq 101); do : >"$BATS_TEST_TMPDIR/lots/$i"; done
	run_ss 125 run --json --input "$BATS_TEST_TMPDIR/lots" "$p"
	expect_match "$(json_get 'j["error"]')" "more than 100 input files"
	run_ss 125 run --input "$BATS_TEST_TMPDIR/nothing-here" "$p"
	expect_match "$errors" "cannot read input .*nothing-here: No such file or directory"
	[ -z "$(our_containers)" ]
}
