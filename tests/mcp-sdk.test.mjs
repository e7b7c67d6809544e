// mcp-sdk.test.mjs: `sage-sandbox mcp` driven by the official MCP TypeScript
// SDK client over stdio, against the real image under rootless podman.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

// The SDK is the LM Studio plugin's dependency, installed by `make check`.
const require = createRequire(new URL("../lmstudio/package.json", import.meta.url));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const SAGE_SANDBOX = process.env.SAGE_SANDBOX ?? fileURLToPath(new URL("../sage-sandbox", import.meta.url));

// Our containers, each as [name, owner] (its owner label, "BOOT-ID:PID:START").
function ownedContainers() {
  const out = execFileSync("podman", ["ps", "-a", "--filter", "label=sage-sandbox=1", "--format", '{{.Names}} {{index .Labels "sage-sandbox.owner"}}'], {
    encoding: "utf8",
  });
  return out.split("\n").filter(Boolean).map((l) => l.split(" "));
}

function containers() {
  return ownedContainers().map(([name]) => name);
}

// Our containers that the sage-sandbox of pid started.
function containersOf(pid) {
  return ownedContainers().filter(([, owner]) => owner?.split(":")[1] === String(pid)).map(([name]) => name);
}

async function waitFor(predicate, seconds, what) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (await predicate()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.fail(`${what} within ${seconds} s`);
}

// A connected client, the server's stderr collected, and a close that
// checks nothing is left behind.
async function connect(args = []) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("SAGE_SANDBOX_")) delete env[k];
  const transport = new StdioClientTransport({ command: SAGE_SANDBOX, args: ["mcp", ...args], env, stderr: "pipe" });
  let log = "";
  transport.stderr.on("data", (d) => (log += d));
  const client = new Client({ name: "sage-sandbox-tests", version: "1.0.0" });
  await client.connect(transport);
  // Listed, every tool's structuredContent is checked by the SDK against
  // its outputSchema, as for any client that lists the tools first.
  await client.listTools();
  return {
    client,
    pid: transport.pid,
    log: () => log,
    async close() {
      await client.close();
      await waitFor(() => containers().length === 0, 20, "no container left after close");
    },
  };
}

function text(result) {
  return result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
}

// Waits until the server has a warm sandbox ready, as its log says.
async function warmed(s) {
  await waitFor(() => s.log().includes("first warm sandbox ready"), 90, "a warm sandbox ready");
}

test("handshake, tools/list, the seed example, an exception, status", { timeout: 300_000 }, async () => {
  const s = await connect();
  try {
    assert.equal(s.client.getServerVersion().name, "sage-sandbox");
    assert.ok(s.client.getServerCapabilities().tools);
    const { tools } = await s.client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["run_sagemath", "sage_sandbox_self_test", "sage_sandbox_status", "sage_sandbox_end_session"]);
    const run = tools[0];
    assert.deepEqual(run.inputSchema.required, ["code"]);
    assert.equal(run.inputSchema.properties.timeout_seconds.maximum, 60);
    assert.match(run.description, /clean sandbox|fresh, isolated sandbox/);
    assert.match(run.description, /60 s wall clock/);
    assert.ok(run.outputSchema);

    await warmed(s);
    const seed = await s.client.callTool({
      name: "run_sagemath",
      arguments: { code: readFileSync(new URL("../examples/seed.sage", import.meta.url), "utf8") },
    });
    assert.equal(seed.isError, false);
    assert.equal(text(seed), "x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4\n181118435328\n");
    assert.equal(seed.structuredContent.exit_code, 0);
    assert.equal(seed.structuredContent.ok, true);
    assert.equal(seed.structuredContent.stdout, text(seed));
    assert.equal(seed.structuredContent.sandbox.network, "none");
    assert.equal(seed._meta.warm, true);

    const failing = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print('before')\n1/0\n" } });
    assert.equal(failing.isError, true);
    assert.equal(failing.structuredContent.exit_code, 1);
    assert.match(text(failing), /^before\nTraceback/);
    assert.match(text(failing), /ZeroDivisionError/);

    const quiet = await s.client.callTool({ name: "run_sagemath", arguments: { code: "x = 2^10" } });
    assert.equal(quiet.isError, false);
    assert.match(text(quiet), /printed nothing.*print\(/);

    const status = await s.client.callTool({ name: "sage_sandbox_status", arguments: {} });
    assert.equal(status.isError, false);
    assert.equal(status.structuredContent.ok, true);
    assert.equal(status.structuredContent.rootless, true);
    assert.equal(status.structuredContent.image_available, true);
  } finally {
    await s.close();
  }
});

test("a timeout, a refusal and bad arguments", { timeout: 300_000 }, async () => {
  const s = await connect(["--timeout", "30"]);
  try {
    // 8 s: the call may start a cold sandbox while the pool's first one
    // starts too, which took over 3 s on a machine whose forks are dear.
    const slow = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print('started')\nwhile True: pass", timeout_seconds: 8 } });
    assert.equal(slow.isError, true);
    assert.equal(slow.structuredContent.exit_code, 124);
    assert.equal(slow.structuredContent.stopped_by, "timeout");
    assert.equal(slow.structuredContent.sandbox.timeout_seconds, 8);
    assert.match(text(slow), /^started\n/);
    assert.match(text(slow), /timed out after 8 s; the container was stopped; raise timeout_seconds \(at most 30\)/);
    assert.ok(slow.structuredContent.duration_ms >= 8000 && slow.structuredContent.duration_ms < 13000);

    const nul = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print(1)\u0000" } });
    assert.equal(nul.isError, true);
    assert.equal(nul.structuredContent.exit_code, 125);
    assert.match(nul.structuredContent.error, /NUL byte at offset 8/);
    const long = await s.client.callTool({ name: "run_sagemath", arguments: { code: "#".repeat(60_000) } });
    assert.equal(long.isError, true);
    assert.match(long.structuredContent.error, /larger than 50000 bytes/);

    await assert.rejects(
      s.client.callTool({ name: "run_sagemath", arguments: { code: "1", timeout_seconds: 31 } }),
      (e) => e.code === -32602 && /from 1 to 30/.test(e.message),
    );
    await assert.rejects(
      s.client.callTool({ name: "run_sagemath", arguments: { cod: "1" } }),
      (e) => e.code === -32602 && /unknown argument 'cod'/.test(e.message),
    );
    await assert.rejects(s.client.callTool({ name: "no_such_tool", arguments: {} }), (e) => e.code === -32602);
  } finally {
    await s.close();
  }
});

test("a cancelled call's container is gone within seconds", { timeout: 300_000 }, async () => {
  const s = await connect();
  try {
    await warmed(s);
    const before = new Set(containers());
    const abort = new AbortController();
    const call = s.client.callTool(
      { name: "run_sagemath", arguments: { code: "import time\nprint('started', flush=True)\ntime.sleep(100)" } },
      undefined,
      { signal: abort.signal },
    );
    // The call took the warm sandbox: it is the one that was there before.
    await new Promise((r) => setTimeout(r, 2000));
    abort.abort();
    await assert.rejects(call);
    await waitFor(() => s.log().includes("was cancelled"), 10, "the server logs the cancellation");
    await waitFor(() => [...before].every((name) => !containers().includes(name)), 10, "the cancelled call's container removed");
    // The server goes on.
    const next = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print(7*6)" } });
    assert.equal(text(next), "42\n");
  } finally {
    await s.close();
  }
});

test("4 concurrent calls, progress, and self-test through the pool", { timeout: 300_000 }, async () => {
  const s = await connect(["--concurrency", "4", "--warm", "2"]);
  try {
    await warmed(s);
    const results = await Promise.all(
      [1, 2, 3, 4].map((n) => s.client.callTool({ name: "run_sagemath", arguments: { code: `print(factorial(${n * 5}))` } })),
    );
    const factorial = (n) => (n <= 1 ? 1n : BigInt(n) * factorial(n - 1));
    results.forEach((r, i) => {
      assert.equal(r.isError, false);
      assert.equal(text(r), `${factorial((i + 1) * 5)}\n`);
    });

    const progress = [];
    const slow = await s.client.callTool(
      { name: "run_sagemath", arguments: { code: "import time\nfor i in range(4):\n    print('line', i, flush=True)\n    time.sleep(1)" } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    assert.equal(slow.isError, false);
    assert.ok(progress.length >= 2, `got ${progress.length} progress notifications`);
    assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress));
    assert.ok(progress.some((p) => /line [0-3]/.test(p.message)), JSON.stringify(progress));

    const selfTest = await s.client.callTool({ name: "sage_sandbox_self_test", arguments: {} });
    assert.equal(selfTest.isError, false, text(selfTest));
    const checks = selfTest.structuredContent.checks;
    assert.ok(checks.length >= 25);
    assert.deepEqual(checks.filter((c) => c.outcome === "FAIL"), []);
    assert.match(text(selfTest), /self-test passed/);
  } finally {
    await s.close();
  }
});

test("with --warm 0 every call starts its own sandbox", { timeout: 300_000 }, async () => {
  const s = await connect(["--warm", "0"]);
  try {
    const r = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print(2^100)" } });
    assert.equal(text(r), "1267650600228229401496703205376\n");
    assert.equal(r._meta.warm, false);
  } finally {
    await s.close();
  }
});

test("a call at its pids or memory limit changes nothing for a call beside it or a warm sandbox", { timeout: 300_000 }, async () => {
  // 2g: 96 forked Sage processes hold 700 MiB with their page tables and
  // descriptors (memwatch.c charges them) as a rule, but up to 1401 MiB
  // seen in CI (what the parent writes between forks is copied, and each
  // child keeps the copy it was forked with): at 1g the bomb was stopped
  // for memory twice in CI; at 2g it is held by its pids limit. It is
  // frozen while the watchdog measures each child (about 13 ms each): 12 s
  // alone, 60 s of margin for a loaded machine (at 30 s, it once timed out
  // in CI).
  const s = await connect(["--warm", "3", "--concurrency", "3", "--memory", "2g"]);
  try {
    await waitFor(() => containers().length >= 3, 60, "3 warm containers");
    await new Promise((r) => setTimeout(r, 6000)); // all three import Sage
    const forkBomb = s.client.callTool({
      name: "run_sagemath",
      arguments: {
        code: "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(20)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    print('fork refused after', n, flush=True)\ntime.sleep(5)",
        timeout_seconds: 60,
      },
    });
    const hog = s.client.callTool({
      name: "run_sagemath",
      arguments: { code: "x = []\nwhile True:\n    x.append(bytearray(50 * 2**20))", timeout_seconds: 30 },
    });
    await new Promise((r) => setTimeout(r, 1500));
    const beside = await s.client.callTool({ name: "run_sagemath", arguments: { code: "import os\nos.fork() or os._exit(0)\nprint(factor(2^64+1))" } });
    assert.equal(text(beside), "274177 * 67280421310721\n");
    assert.equal(beside.isError, false);
    const bomb = await forkBomb;
    assert.match(text(bomb), /fork refused after (\d+)/);
    assert.ok(Number(text(bomb).match(/after (\d+)/)[1]) >= 80, text(bomb));
    const memory = await hog;
    const m = memory.structuredContent;
    assert.equal(memory.isError, true);
    // Which limit comes first depends on the host: the rlimit of the one
    // process (the code ends by itself, status 1, with MemoryError: nothing
    // stopped it) or the run's total (the watchdog stops it: 122,
    // memory_limit). Either way every field says which, exactly.
    if (m.exit_code === 1) {
      assert.equal(m.stopped_by, null, JSON.stringify(m));
      assert.equal(m.memory_limit_exceeded, false, JSON.stringify(m));
      assert.match(text(memory), /MemoryError/);
    } else {
      assert.equal(m.exit_code, 122, JSON.stringify(m));
      assert.equal(m.stopped_by, "memory_limit", JSON.stringify(m));
      assert.equal(m.memory_limit_exceeded, true, JSON.stringify(m));
      assert.match(m.error, /memory limit/);
    }
    // The pool, refilled meanwhile, still serves.
    await new Promise((r) => setTimeout(r, 5000));
    const after = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print(2+2)" } });
    assert.equal(text(after), "4\n");
    assert.equal(after._meta.warm, true);
  } finally {
    await s.close();
  }
});

test("a warm sandbox that dies while it waits is replaced", { timeout: 300_000 }, async () => {
  const s = await connect(["--warm", "1"]);
  try {
    await warmed(s);
    const [first] = containers();
    execFileSync("podman", ["rm", "-f", "-t", "0", first], { stdio: "ignore" });
    await waitFor(() => containers().some((name) => name !== first), 30, "a replacement container");
    await new Promise((r) => setTimeout(r, 5000));
    const r = await s.client.callTool({ name: "run_sagemath", arguments: { code: "print(3*3)" } });
    assert.equal(text(r), "9\n");
    assert.equal(r._meta.warm, true);
  } finally {
    await s.close();
  }
});

test("files: a plot comes back as image content, named in the text too; files go in", { timeout: 300_000 }, async () => {
  const s = await connect();
  try {
    await warmed(s);
    const code = `import os
out = os.environ["SAGE_SANDBOX_OUT"]
plot(sin(x), (x, 0, 2*pi)).save(out + "/sin.png")
plot(cos(x), (x, 0, 1)).save(out + "/cos.svg")
open(out + "/rows.txt", "w").write(open("data/in.csv").read().upper())
load("lib.sage")
print(twice(21))
`;
    const lib = Buffer.from("def twice(n):\n    return 2*n\n").toString("base64");
    const r = await s.client.callTool({
      name: "run_sagemath",
      arguments: { code, files: { "data/in.csv": "a,b\n1,2\n", "lib.sage": { base64: lib } } },
    });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.content[0].text, "42\n");
    const listing = r.content[1].text;
    assert.match(listing, /sin\.png \([0-9.]+ KiB, image\/png, \d+x\d+ pixels\); the image follows/);
    assert.match(listing, /rows\.txt \(8 bytes, text\/plain\); not kept/);
    const images = r.content.filter((c) => c.type === "image");
    assert.deepEqual(images.map((c) => c.mimeType).sort(), ["image/png", "image/svg+xml"]);
    const png = Buffer.from(images.find((c) => c.mimeType === "image/png").data, "base64");
    assert.equal(png.subarray(0, 8).toString("latin1"), "\x89PNG\r\n\x1a\n");
    const listed = r.structuredContent.files.find((f) => f.name === "sin.png");
    assert.equal(listed.size, png.length);
    assert.ok(listed.width > 100 && listed.height > 100);
    // Bad files are refused before anything runs.
    for (const files of [{ "../x": "a" }, { "/etc/x": "a" }, { "a": { base64: "!!" } }, { "sage-home": "a" }, { "a": 3 }]) {
      await assert.rejects(
        s.client.callTool({ name: "run_sagemath", arguments: { code: "print(1)", files } }),
        /-32602/,
        JSON.stringify(files),
      );
    }
  } finally {
    await s.close();
  }
});

test("display: a plot as the last line comes back as an image, with no path in the code; show() of a formula with its LaTeX", { timeout: 300_000 }, async () => {
  const s = await connect();
  try {
    await warmed(s);
    const r = await s.client.callTool({ name: "run_sagemath", arguments: { code: "plot(sin(x), (x, 0, 2*pi))" } });
    assert.equal(r.isError, false, text(r));
    const images = r.content.filter((c) => c.type === "image");
    assert.equal(images.length, 1, JSON.stringify(r.content.map((c) => c.type)));
    assert.equal(images[0].mimeType, "image/png");
    const png = Buffer.from(images[0].data, "base64");
    assert.equal(png.subarray(0, 8).toString("latin1"), "\x89PNG\r\n\x1a\n");
    assert.ok(png.readUInt32BE(16) > 100 && png.readUInt32BE(20) > 100, "its pixel size");
    assert.match(r.content[0].text, /show-1\.png \([0-9.]+ KiB, image\/png, \d+x\d+ pixels\); the image follows/);
    assert.deepEqual(r.structuredContent.files.map((f) => f.name), ["show-1.png"]);
    const formula = await s.client.callTool({ name: "run_sagemath", arguments: { code: "show(x^2/3)\n2^10" } });
    assert.equal(formula.content[0].text, "1/3*x^2\n1024\n");
    // What the call got, named: mcp's default is last (it said "none").
    assert.equal(formula.structuredContent.sandbox.display, "last");
    assert.match(text(formula), /LaTeX: \$\$\\frac\{1\}\{3\} \\, x\^\{2\}\$\$/);
  } finally {
    await s.close();
  }
});

// ---- sessions ---------------------------------------------------------------

const run = (s, session, code, more = {}) =>
  s.client.callTool({ name: "run_sagemath", arguments: { code, ...(session ? { session } : {}), ...more } });
const endSession = (s, session) => s.client.callTool({ name: "sage_sandbox_end_session", arguments: { session } });

test("sessions: state kept over 3 calls, two sessions isolated, nothing of a call's processes or SAGE_SANDBOX_OUT left, end_session", { timeout: 300_000 }, async () => {
  const s = await connect(["--warm", "0"]);
  try {
    const one = await run(s, "alg", `R.<x> = QQ[]
f = x^2 - 2
def twice(n):
    return 2*n
import os, subprocess
subprocess.Popen(["sleep", "300"])
os.system("sleep 301 &")
open("/tmp/kept.txt", "w").write("kept")
open(os.environ["SAGE_SANDBOX_OUT"] + "/once.txt", "w").write("once")
print("one")`);
    assert.equal(one.isError, false, text(one));
    assert.equal(text(one).split("\n")[0], "one");
    assert.deepEqual(one.structuredContent.session, { name: "alg", calls: 1, state_kept: true, interrupted: false });
    assert.deepEqual(one.structuredContent.files.map((f) => f.name), ["once.txt"]);

    const two = await run(s, "alg", `import os
g = f * (x + 1)
live = [p for p in os.listdir("/proc") if p.isdigit() and open("/proc/%s/stat" % p).read().split(")")[1].split()[0] != "Z"]
print(g.factor(), twice(21))
print(len(live), open("/tmp/kept.txt").read(), os.listdir(os.environ["SAGE_SANDBOX_OUT"]))`);
    // The launcher and the session's Sage: the sleeps did not outlive
    // their call; the file in /tmp stays, the one sent back does not.
    assert.equal(text(two), "(x + 1) * (x^2 - 2) 42\n2 kept []\n");
    assert.equal(two.structuredContent.session.calls, 2);
    assert.equal(two._meta.warm, true);

    const three = await run(s, "alg", "print(g(3), f.roots(RR)[0][0] < 0)");
    assert.equal(text(three), "28 True\n");
    assert.equal(three.structuredContent.session.calls, 3);

    const other = await run(s, "other", "import os\nprint('f' in globals(), os.path.exists('/tmp/kept.txt'))");
    assert.equal(text(other), "False False\n");
    const fresh = await run(s, null, "print('f' in globals())");
    assert.equal(text(fresh), "False\n");
    assert.equal(fresh.structuredContent.session, undefined);

    const ended = await endSession(s, "alg");
    assert.deepEqual(ended.structuredContent, { session: "alg", ended: true, calls: 3 });
    assert.match(text(ended), /session alg ended after 3 calls/);
    const again = await run(s, "alg", "print('f' in globals())");
    assert.equal(text(again), "False\n");
    assert.equal(again.structuredContent.session.calls, 1);
    const none = await endSession(s, "never-opened");
    assert.equal(none.structuredContent.ended, false);
    assert.equal(none.isError, false);

    await assert.rejects(run(s, "no spaces", "1"), (e) => e.code === -32602 && /session is a name/.test(e.message));
    await assert.rejects(run(s, "x".repeat(65), "1"), (e) => e.code === -32602);
    await assert.rejects(
      s.client.callTool({ name: "sage_sandbox_end_session", arguments: {} }),
      (e) => e.code === -32602 && /needs arguments.session/.test(e.message),
    );
  } finally {
    await s.close();
  }
});

test("sessions: a timeout interrupts the call and keeps the state; a call that ignores the interrupt ends the session", { timeout: 300_000 }, async () => {
  // A first call whose timeout passes while its session's container and
  // Sage start runs nothing, and says so; the session goes on. Before, its
  // code ran and it was called interrupted. A hot start can take less than
  // the shortest timeout (1 s): a podman whose run waits 2 s makes it longer.
  const dir = mkdtempSync(join(tmpdir(), "mcp-slow-"));
  const slowPodman = join(dir, "podman");
  writeFileSync(slowPodman, '#!/bin/sh\ncase " $* " in *" run "*) sleep 2 ;; esac\nexec podman "$@"\n');
  chmodSync(slowPodman, 0o755);
  const slow = await connect(["--warm", "0", "--podman", slowPodman]);
  try {
    const early = await run(slow, "e", "print('ran')", { timeout_seconds: 1 });
    assert.equal(early.isError, true, text(early));
    assert.equal(early.structuredContent.stopped_by, "timeout");
    assert.equal(early.structuredContent.stdout, "", text(early));
    assert.match(text(early), /timed out at its timeout of 1 s before the code began .*nothing was run; the session's state is kept/);
    const next = await run(slow, "e", "print('next')");
    assert.equal(text(next), "next\n");
    assert.equal(next.structuredContent.session.calls, 2);
  } finally {
    await slow.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const s = await connect(["--warm", "0", "--timeout", "30"]);
  try {
    const set = await run(s, "t", "kept = 42\nprint('set')");
    assert.equal(text(set), "set\n", text(set));

    const loop = await run(s, "t", "import time\nprint('start', flush=True)\nwhile True:\n    time.sleep(int(1))", { timeout_seconds: 3 });
    assert.equal(loop.isError, true);
    assert.equal(loop.structuredContent.stopped_by, "timeout");
    assert.deepEqual(loop.structuredContent.session, { name: "t", calls: 2, state_kept: true, interrupted: true });
    assert.match(text(loop), /^start\n/);
    assert.match(text(loop), /KeyboardInterrupt/);
    assert.match(text(loop), /interrupted \(KeyboardInterrupt\) at its timeout of 3 s; the session's state is kept/);

    // PARI's C loop: cysignals turns SIGINT into KeyboardInterrupt there too.
    const pari = await run(s, "t", "print(factor(2^1024 + 1))", { timeout_seconds: 3 });
    assert.equal(pari.structuredContent.session.state_kept, true, text(pari));
    assert.equal(pari.structuredContent.session.interrupted, true);

    const after = await run(s, "t", "print(kept)");
    assert.equal(text(after), "42\n");
    assert.equal(after.structuredContent.session.calls, 4);

    const deaf = await run(s, "t", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", { timeout_seconds: 3 });
    assert.equal(deaf.isError, true);
    assert.equal(deaf.structuredContent.session.state_kept, false);
    // A busy loop reaches its CPU seconds (3 x 1 CPU) about when its
    // timeout comes: either interrupts it.
    assert.match(text(deaf), /did not stop within 2 s of its interrupt at its (timeout|CPU time) of 3 s; the session ended and its state is lost/);
    assert.match(text(deaf), /session t ended with this call, its 5th: its state is lost/);
    assert.ok(deaf.structuredContent.duration_ms < 9000, JSON.stringify(deaf.structuredContent));

    const anew = await run(s, "t", "print('kept' in globals())");
    assert.equal(text(anew), "False\n");
    assert.equal(anew.structuredContent.session.calls, 1);
  } finally {
    await s.close();
  }
});

test("sessions: one past --sessions is refused with the reason; an idle session ends; memory", { timeout: 300_000 }, async () => {
  const s = await connect(["--warm", "0", "--sessions", "1", "--session-idle", "10", "--memory", "512m"]);
  try {
    const a = await run(s, "a", "v = 1\nprint(v)");
    assert.equal(text(a), "1\n");
    // A session's CPU rlimit bounds its life; the launcher holds each call
    // to its own share.
    const rl = await run(s, "a", "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))");
    assert.equal(text(rl), "(3600, 3600)\n");
    const b = await run(s, "b", "print(2)");
    assert.equal(b.isError, true);
    assert.equal(b.structuredContent.exit_code, 125);
    assert.match(b.structuredContent.error, /1 session is open, this server's most \(--sessions 1\); session b was not started/);
    assert.match(b.structuredContent.hint, /sage_sandbox_end_session/);
    // A call without a session is not one of them.
    assert.equal(text(await run(s, null, "print(3)")), "3\n");

    await waitFor(() => s.log().includes("session a ended after 10 s without a call"), 30, "the idle session's end");
    await waitFor(() => containers().length === 0, 20, "the idle session's container removed");
    const later = await run(s, "b", "x = []\ntry:\n    while True:\n        x.append(bytearray(50 * 2**20))\nexcept MemoryError:\n    del x\n    print('MemoryError')\nw = 5");
    // The rlimit refuses the allocation: the cell fails, the session lives.
    assert.equal(text(later), "MemoryError\n", text(later));
    assert.equal(later.structuredContent.session.state_kept, true);
    const total = await run(s, "b", `import os, time
pids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        x = bytearray(200 * 2**20)
        time.sleep(30)
        os._exit(0)
    pids.append(pid)
time.sleep(30)`, { timeout_seconds: 20 });
    // Six processes of 200 MiB each: the watchdog's total, past 512m, ends
    // the session, which says so.
    assert.equal(total.structuredContent.stopped_by, "memory_limit", text(total));
    assert.equal(total.structuredContent.session.state_kept, false);
    const gone = await run(s, "b", "print('w' in globals())");
    assert.equal(text(gone), "False\n");
  } finally {
    await s.close();
  }
});

// Each stopped_by a call can end with must be in the outputSchema's enum,
// or the SDK refuses the result (connect lists the tools).
test("a call whose session is ended under it, and one whose container is removed from outside: results the schema takes", { timeout: 300_000 }, async () => {
  const running = (what) => () => {
    try {
      execFileSync("pgrep", ["-fx", what]);
      return true;
    } catch {
      return false;
    }
  };
  const s = await connect(["--warm", "0"]);
  try {
    const long = run(s, "long", "import subprocess\nprint('started', flush=True)\nsubprocess.run(['sleep', '62'])");
    await waitFor(running("sleep 62"), 90, "the session's call running");
    const ended = await endSession(s, "long");
    assert.equal(ended.structuredContent.ended, true);
    const cut = await long;
    assert.equal(cut.isError, true);
    assert.equal(cut.structuredContent.stopped_by, "session_ended", text(cut));
    assert.equal(cut.structuredContent.exit_code, 143);

    const doomed = run(s, null, "import subprocess\nprint('started', flush=True)\nsubprocess.run(['sleep', '63'])");
    await waitFor(running("sleep 63"), 90, "the call running");
    execFileSync("podman", ["rm", "-f", "-t", "0", ...containersOf(s.pid)]);
    const broke = await doomed;
    assert.equal(broke.isError, true);
    assert.equal(broke.structuredContent.stopped_by, "sandbox_broke", text(broke));
    assert.equal(broke.structuredContent.exit_code, 137);
    assert.equal(broke.structuredContent.stdout, "started\n");
    assert.match(text(broke), /the sandbox was killed from outside before the code ended/);
  } finally {
    await s.close();
  }
});
