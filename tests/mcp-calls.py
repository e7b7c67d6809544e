#!/usr/bin/env python3
# mcp-calls.py: drives `sage-sandbox mcp` through a list of tool calls, one
# after another, as a client would, for the bats tests.
#
# Usage: tests/mcp-calls.py SAGE_SANDBOX CALLS.json [MCP OPTIONS...]
#
# CALLS.json is a list; each item is a tools/call's params ({"name": ...,
# "arguments": {...}}), a number of seconds to wait, or a string to wait
# for in the server's stderr (at most 300 s; the server's stderr is copied
# to this script's as it comes). Prints one line of
# JSON per call (its result: content and structuredContent, or its error),
# then closes the server's stdin and prints {"exit": STATUS} once it exits
# (killed, and said so, if it takes more than 60 s).
import json
import subprocess
import sys
import threading
import time


def main(argv):
    server = subprocess.Popen([argv[1], "mcp", *argv[3:]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = []
    said_more = threading.Condition()

    def copy_stderr():
        for line in server.stderr:
            sys.stderr.buffer.write(line)
            sys.stderr.flush()
            with said_more:
                said.append(line.decode(errors="replace"))
                said_more.notify_all()
        with said_more:
            said.append(None)
            said_more.notify_all()

    copier = threading.Thread(target=copy_stderr, daemon=True)
    copier.start()

    def wait_for(text):
        with said_more:
            if not said_more.wait_for(lambda: None in said or any(text in l for l in said if l),
                                      300):
                sys.exit("the server never said %r" % text)
            if not any(text in l for l in said if l):
                sys.exit("the server closed its stderr without saying %r" % text)
    ids = iter(range(1, 1 << 30))

    def request(method, params):
        number = next(ids)
        server.stdin.write((json.dumps({"jsonrpc": "2.0", "id": number, "method": method,
                                        "params": params}) + "\n").encode())
        server.stdin.flush()
        while True:
            line = server.stdout.readline()
            if not line:
                sys.exit("the server closed its stdout")
            message = json.loads(line)
            if message.get("id") == number:
                return message

    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "mcp-calls", "version": "1"}})
    for item in json.load(open(argv[2])):
        if isinstance(item, (int, float)):
            time.sleep(item)
            continue
        if isinstance(item, str):
            wait_for(item)
            continue
        answer = request("tools/call", item)
        print(json.dumps(answer.get("result", answer.get("error"))), flush=True)
    server.stdin.close()
    try:
        status = server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        status = "killed after 60 s"
    copier.join(5)
    print(json.dumps({"exit": status}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
