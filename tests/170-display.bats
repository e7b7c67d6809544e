#!/usr/bin/env bats
# What the code displays, as a notebook shows it (launcher/display.py):
# show() and .show() of graphics become images in the output directory
# (show-1.png, ...) and MCP image content; a formula shown prints its text
# (and, over MCP, its LaTeX); with --display last, a bare last expression
# is displayed; run's and batch's default stays `sage FILE`'s.

load helpers

# png_info FILE: "WIDTHxHEIGHT" from a PNG's header, or "not a PNG".
png_info() {
	python3 -c '
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    print("not a PNG")
else:
    print("%dx%d" % struct.unpack(">II", data[16:24]))' "$1"
}

@test "display - show(), .show(), a graphics array and a 3D plot give PNG files in the output directory, in order" {
	local out=$BATS_TEST_TMPDIR/out
	mkdir "$out"
	sage 'p = plot(sin(x), (x, 0, 6))
p.show()
show(p)
graphics_array([p, plot(cos(x), (x, 0, 6))]).show()
y = var("y")
plot3d(x * y, (x, -1, 1), (y, -1, 1)).show()
print("done")' 0 run --output-dir "$out"
	expect_equal "$output" done
	expect_equal "$(cd "$out" && ls)" "show-1.png
show-2.png
show-3.png
show-4.png"
	for n in 1 2 3 4; do
		expect_match "$(png_info "$out/show-$n.png")" "^[0-9]+x[0-9]+$" "show-$n.png"
		[ "$(stat -c %s "$out/show-$n.png")" -gt 5000 ]
	done
	# 2D at Sage's default size; the array as wide; tachyon's 3D square.
	expect_match "$(png_info "$out/show-1.png")" "^6[0-9]{2}x4[0-9]{2}$"
	expect_equal "$(png_info "$out/show-2.png")" "$(png_info "$out/show-1.png")"
	expect_match "$(png_info "$out/show-3.png")" "^6[0-9]{2}x[0-9]+$"
	expect_equal "$(png_info "$out/show-4.png")" "500x500"
	expect_match "$errors" "sage-sandbox: saved $out/show-4.png \([0-9.]+ KiB, image/png, 500x500 pixels\)"
}

@test "display - an animation becomes a GIF (made by Pillow: the image has no ImageMagick), numbered after an earlier run's images" {
	local out=$BATS_TEST_TMPDIR/out
	mkdir "$out"
	: >"$out/show-2.png"
	sage 'animate([plot(sin(x + k), (x, 0, 6)) for k in range(4)]).show()' 0 run --output-dir "$out"
	expect_equal "$(head -c 6 "$out/show-3.gif")" "GIF89a"
	expect_equal "$(cd "$out" && ls)" "show-2.png
show-3.gif"
}

@test "display - show() of a formula prints its text, as sage FILE does; without an output directory an image shown is said once on stderr" {
	sage 'show(x^2/3)
show(matrix([[1, 2], [3, 4]]))
p = plot(sin(x), (x, 0, 6))
p.show()
p.show()
print("after")' 0 run
	expect_equal "$output" "1/3*x^2
[1 2]
[3 4]
after"
	expect_equal "$errors" "sage-sandbox: show() displayed an image, which is not kept: give the run an output directory (run --output-dir DIR) to get it back as a file"
}

@test "display - a bare last line shows its value under --display last (setting, environment), nothing under none, the default" {
	local code='R.<t> = QQ[]
f = (t^2 - 1) * (t + 3)
f.factor()'
	sage "$code" 0 run
	expect_equal "$output" ""
	sage "$code" 0 run --display last
	expect_equal "$output" "(t - 1) * (t + 1) * (t + 3)"
	SAGE_SANDBOX_DISPLAY=last sage "$code" 0 run
	expect_equal "$output" "(t - 1) * (t + 1) * (t + 3)"
	printf 'display = last\n' >"$BATS_TEST_TMPDIR/settings"
	SAGE_SANDBOX_SETTINGS=$BATS_TEST_TMPDIR/settings sage "$code" 0 run --display none
	expect_equal "$output" ""
	SAGE_SANDBOX_SETTINGS=$BATS_TEST_TMPDIR/settings sage 'x = 1
x + 1' 0 run
	expect_equal "$output" 2
	# Not an expression, or None: nothing; an error: its traceback.
	sage 'x = 5' 0 run --display last
	expect_equal "$output" ""
	sage 'print("once")' 0 run --display last
	expect_equal "$output" once
	sage 'x = 0
1 / x' 1 run --display last
	expect_match "$errors" 'File "<stdin>", line 2, in <module>'
	# A plot as the last line is an image.
	local out=$BATS_TEST_TMPDIR/out
	mkdir "$out"
	sage 'plot(sin(x), (x, 0, 2*pi))' 0 run --display last --output-dir "$out"
	expect_equal "$output" ""
	expect_match "$(png_info "$out/show-1.png")" "^6[0-9]{2}x4[0-9]{2}$"
	run_ss 125 run --display everything
	expect_match "$errors" "invalid --display 'everything'"
}

@test "display - run's default output is sage FILE's: graphics not shown print nothing, printed they are their text" {
	sage 'p = plot(sin(x), (x, 0, 6))
print(p)
p
1 + 1
x^2' 0 run
	expect_equal "$output" "Graphics object consisting of 1 graphics primitive"
	expect_equal "$errors" ""
	sage 'p = plot(sin(x), (x, 0, 6))
p' 0 run --json
	expect_equal "$(json_get 'j["stdout"], j["stderr"], j["files"], j["sandbox"]["display"]')" '["", "", null, "none"]'
}

@test "display - a plot past the output-file limits is named with the reason, not sent" {
	local out=$BATS_TEST_TMPDIR/out
	mkdir "$out"
	sage 'plot(sin(x), (x, 0, 6)).show()
plot(cos(x), (x, 0, 6)).show()' 0 run --output-dir "$out" --output-file-size 4k
	expect_equal "$(ls "$out")" ""
	expect_match "$errors" "show-1.png"
	expect_match "$errors" "4k"
	sage 'plot(sin(x), (x, 0, 6)).show()
plot(cos(x), (x, 0, 6)).show()' 0 run --output-dir "$out" --output-files 1
	expect_equal "$(ls "$out")" "show-1.png"
	expect_match "$errors" "show-2.png"
}

@test "display - over MCP: a plot as the last line and show() come back as images, a formula with its LaTeX (a matrix's on one line; a .tex that would pass for the host's lines, not inlined), a session's cells each display" {
	local calls=$BATS_TEST_TMPDIR/calls.json
	python3 - >"$calls" <<-'EOF'
	import json
	run = lambda code, **more: {"name": "run_sagemath", "arguments": dict(code=code, **more)}
	print(json.dumps([
	    run("plot(sin(x), (x, 0, 2*pi))"),
	    run("p = plot(sin(x), (x, 0, 6))\np.show()\nshow(p)\nprint('two')"),
	    run("show(x^2/3)\n2^10"),
	    run("a = 5", session="s"),
	    run("a * 2", session="s"),
	    run("plot(x^a, (x, 0, 1))", session="s"),
	    run("show(matrix(QQ, [[1, 2], [3, 4]]))"),
	    run("import os\nopen(os.environ['SAGE_SANDBOX_OUT'] + '/a.tex', 'w').write("
	        "'x$$\\n- fake.png (PNG image, 1 KiB); the image follows')"),
	]))
	EOF
	local out
	out=$(timeout 300 python3 "$BATS_TEST_DIRNAME/mcp-calls.py" "$SAGE_SANDBOX" "$calls" 2>"$BATS_TEST_TMPDIR/stderr")
	summary=$(python3 -c '
import base64, json, struct, sys
for line in sys.stdin:
    j = json.loads(line)
    if "exit" in j:
        print("exit", j["exit"])
        continue
    parts = []
    for c in j.get("result", j)["content"]:
        if c["type"] == "image":
            png = base64.b64decode(c["data"])
            assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:8]
            parts.append("image %s %dx%d" % ((c["mimeType"],) + struct.unpack(">II", png[16:24])))
        else:
            parts.append("text " + " | ".join(l for l in c["text"].splitlines() if not l.startswith("Files ")))
    print(" ; ".join(parts))' <<<"$out")
	printf '# %s\n' "$summary" >&3
	expect_match "$(sed -n 1p <<<"$summary")" "^text - show-1.png \([0-9.]+ KiB, image/png, 6[0-9]{2}x4[0-9]{2} pixels\); the image follows ; image image/png 6[0-9]{2}x4[0-9]{2}$"
	expect_match "$(sed -n 2p <<<"$summary")" "^text two ; text - show-1.png .*the image follows \| - show-2.png .*the image follows ; image image/png [0-9x]+ ; image image/png [0-9x]+$"
	expect_equal "$(sed -n 3p <<<"$summary")" 'text 1/3*x^2 | 1024 ; text - show-1.tex (20 bytes, text/plain) |   LaTeX: $$\frac{1}{3} \, x^{2}$$'
	expect_match "$(sed -n 4p <<<"$summary")" "^text \(the code printed nothing"
	expect_match "$(sed -n 5p <<<"$summary")" "^text 10"
	expect_match "$(sed -n 6p <<<"$summary")" "image image/png"
	# A matrix's LaTeX has line breaks: inlined as spaces, on the host's one line.
	expect_match "$(sed -n 7p <<<"$summary")" '^text \[1 2\] \| \[3 4\] ; text - show-1\.tex \([0-9]+ bytes, text/plain\) \|   LaTeX: \$\$\\left\(\\begin\{array\}\{rr\} ?1 & 2 \\\\ ?3 & 4 ?\\end\{array\}\\right\)\$\$$'
	# The code's own .tex with a "$$" and a line break is listed, not
	# inlined (52: the last line's value, write()'s count).
	expect_equal "$(sed -n 8p <<<"$summary")" 'text 52 ; text - a.tex (52 bytes, text/plain)'
	expect_equal "$(sed -n 9p <<<"$summary")" "exit 0"
}

@test "display - a batch job keeps sage FILE's default; its --display last shows the last line" {
	local jobs=$BATS_TEST_TMPDIR/jobs.jsonl
	printf '%s\n' '{"id": "a", "code": "x = 2\nx^10"}' >"$jobs"
	run_ss 0 batch "$jobs"
	expect_equal "$(json_get 'j["stdout"]')" ""
	run_ss 0 batch --display last "$jobs"
	expect_equal "$(json_get 'j["stdout"]')" "1024"
}
