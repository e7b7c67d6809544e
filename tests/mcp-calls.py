#!/usr/bin/env python3
# mcp-calls.py: drives `sage-sandbox mcp` through a list of tool calls, one
# after another, as a client would, for the bats tests.
#
# Usage: tests/mcp-calls.py SAGE_SANDBOX CALLS.json [MCP OPTIONS...]
#
# CALLS.json is a list; each item is a tools/call's params ({"name": ...,
# "arguments": {...}}) or a number of seconds to wait. Prints one line of
# JSON per call (its result: content and structuredContent, or its error),
# then closes the server's stdin and prints {"exit": STATUS} once it exits
# (killed, and said so, if it takes more than 60 s).
import json
import subprocess
import sys
import time


def main(argv):
    server = subprocess.Popen([argv[1], "mcp", *argv[3:]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
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
        answer = request("tools/call", item)
        print(json.dumps(answer.get("result", answer.get("error"))), flush=True)
    server.stdin.close()
    try:
        status = server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        status = "killed after 60 s"
    print(json.dumps({"exit": status}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
