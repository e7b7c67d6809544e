#!/usr/bin/env python3
# mcp-raw.py: `sage-sandbox mcp` fed raw bytes, as no SDK would send them:
# every bad message gets its JSON-RPC answer and the server goes on. Prints
# "ok" and exits 0, or names the first answer that was wrong.
import json
import os
import select
import subprocess
import sys
import time

server = subprocess.Popen([sys.argv[1], "mcp", *sys.argv[2:]], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
pending = b""


def send(raw):
    server.stdin.write(raw)
    server.stdin.flush()


def answer_line(timeout=30):
    """The next line the server writes, as its bytes."""
    global pending
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([server.stdout], [], [], left)[0]:
            sys.exit("no answer within %d s" % timeout)
        chunk = os.read(server.stdout.fileno(), 65536)
        if not chunk:
            sys.exit("the server closed stdout; stderr: %s" % server.stderr.read().decode())
        pending += chunk
    line, pending = pending.split(b"\n", 1)
    return line


def answer(timeout=30):
    """The next line the server writes, parsed; it must be one JSON-RPC
    message of strict UTF-8."""
    message = json.loads(answer_line(timeout).decode("utf-8", errors="strict"))
    assert message.get("jsonrpc") == "2.0", message
    return message


def expect_error(raw, code, id_=None, words=""):
    send(raw)
    message = answer()
    error = message.get("error")
    if not error or error["code"] != code or message["id"] != id_ or words not in error["message"]:
        sys.exit("for %r: expected error %d (id %r, %r), got %r" % (raw[:80], code, id_, words, message))


def ping(n):
    send(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n)
    message = answer()
    if message != {"jsonrpc": "2.0", "id": n, "result": {}}:
        sys.exit("ping %d: got %r" % (n, message))


send(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
     b'"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n')
init = answer()
assert init["result"]["protocolVersion"] == "2024-11-05", init
send(b'{"jsonrpc":"2.0","id":"v","method":"initialize","params":{"protocolVersion":"1999-01-01"}}\n')
assert answer()["result"]["protocolVersion"] == "2025-06-18"
send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

expect_error(b"not json\n", -32700, None, "not JSON")
expect_error(b'{"jsonrpc":"2.0","id":1,"method":"ping"\n', -32700)
expect_error(b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}\n', -32700)  # invalid UTF-8
expect_error(b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}\n', -32700)  # a surrogate
expect_error(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n', -32600, None, "batch")
expect_error(b"[]\n", -32600, None, "batch")
expect_error(b"3\n", -32600)
expect_error(b'"ping"\n', -32600)
expect_error(b"null\n", -32600)
expect_error(b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', -32600, None, "id")
expect_error(b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', -32600, None, "id")
expect_error(b'{"jsonrpc":"1.0","id":5,"method":"ping"}\n', -32600, 5, "2.0")
expect_error(b'{"id":6,"method":"ping"}\n', -32600, 6)
expect_error(b'{"jsonrpc":"2.0","id":7}\n', -32600, 7, "method")
expect_error(b'{"jsonrpc":"2.0","id":8,"method":42}\n', -32600, 8)
expect_error(b'{"jsonrpc":"2.0","id":9,"method":"resources/list"}\n', -32601, 9, "resources/list")
expect_error(b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":[1]}\n', -32602, 10)
expect_error(b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{}}\n', -32602, 11, "name")
# A NUL ends neither a tool's name nor an output directory early (review 148).
expect_error(b'{"jsonrpc":"2.0","id":111,"method":"tools/call","params":'
             b'{"name":"sage_sandbox_status\\u0000x"}}\n', -32602, 111, "unknown tool")
expect_error(b'{"jsonrpc":"2.0","id":112,"method":"tools/call","params":{"name":"run_sagemath",'
             b'"arguments":{"code":"1"},"_meta":{"sage-sandbox/output-dir":"/tmp\\u0000/x"}}}\n',
             -32602, 112, "NUL")
expect_error(b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"run_sagemath"}}\n',
             -32602, 12, "code")
expect_error(b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"run_sagemath",'
             b'"arguments":{"code":1}}}\n', -32602, 13, "code")
expect_error(b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"run_sagemath",'
             b'"arguments":{"code":"1","timeout_seconds":0}}}\n', -32602, 14, "timeout_seconds")
expect_error(b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"run_sagemath",'
             b'"arguments":{"code":"1","timeout_seconds":"5"}}}\n', -32602, 15, "timeout_seconds")
expect_error(b'{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"sage_sandbox_status",'
             b'"arguments":{"x":1}}}\n', -32602, 16, "unknown argument 'x'")
expect_error(b'{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"run_sagemath",'
             b'"arguments":"print(1)"}}\n', -32602, 17, "object")
expect_error(b'{"jsonrpc":"2.0","id":18,"method":"initialize","params":{}}\n', -32602, 18,
             "protocolVersion")
ping(19)

# Notifications get no answer, known or not, well-formed params or not; a
# response from the client is not answered either. The ping after each
# shows that nothing came before its answer.
send(b'{"jsonrpc":"2.0","method":"notifications/whatever","params":{"a":1}}\n')
send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}\n')
send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}\n')
send(b'{"jsonrpc":"2.0","id":77,"result":{}}\n')
send(b"\n\r\n   \n")  # blank lines
ping(20)

# A line over the cap (4 MiB) is answered once, when it ends, and the line
# is not held: the server's memory stays far below the line's size.
chunk = b"x" * (1 << 20)
send(b'{"jsonrpc":"2.0","id":21,"method":"ping","params":{"pad":"')
for _ in range(64):
    send(chunk)
with open("/proc/%d/status" % server.pid) as f:
    rss_kib = int([line for line in f if line.startswith("VmHWM:")][0].split()[1])
send(b'"}}\n')
expect_error(b"", -32600, None, "longer than 4194304 bytes")
if rss_kib > 32 * 1024:
    sys.exit("the server's peak RSS was %d KiB while a 64 MiB line streamed in" % rss_kib)
ping(22)

# A message split across writes, and two messages in one write.
send(b'{"jsonrpc":"2.0",')
time.sleep(0.2)
send(b'"id":23,"method":"ping"}\n{"jsonrpc":"2.0","id":24,"method":"ping"}\n')
assert answer()["id"] == 23
assert answer()["id"] == 24

# String ids are echoed as strings, and a long id whole.
send(b'{"jsonrpc":"2.0","id":"a-\xc3\xa9","method":"ping"}\n')
assert answer()["id"] == "a-\u00e9"

# U+2028 and U+2029 are line ends to JavaScript: never written raw, in an
# echoed id (JSON's escape: the id comes back equal) or in an error message
# that quotes the request (shown as \xNN, as every message is).
send('{"jsonrpc":"2.0","id":"a\u2028b","method":"x\u2029"}\n'.encode())
raw = answer_line()
message = json.loads(raw.decode("utf-8", errors="strict"))
if (b"\xe2\x80\xa8" in raw or b"\xe2\x80\xa9" in raw or b'"a\\u2028b"' not in raw or
        message["id"] != "a\u2028b" or r"x\xe2\x80\xa9" not in message["error"]["message"]):
    sys.exit("U+2028 or U+2029 written raw, or lost: %r" % raw)

# End of input: the server stops and exits 0 within seconds.
server.stdin.close()
try:
    status = server.wait(timeout=20)
except subprocess.TimeoutExpired:
    sys.exit("the server did not exit within 20 s of the end of its input")
if status != 0:
    sys.exit("the server exited %d at the end of its input; its stderr:\n%s" % (
        status, server.stderr.read().decode(errors="replace")[-6000:]))
print("ok")
