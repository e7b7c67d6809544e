// plugin.test.js: the tools provider as LM Studio calls it, with a fake
// controller, against the real `sage-sandbox mcp` and the real Sage image.
"use strict";
const { test, afterEach } = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const path = require("node:path");
const { toolsProvider, MAX_CODE_BYTES, closeSandboxServers } = require("../dist/test-entry.js");

const SAGE_SANDBOX = process.env.SAGE_SANDBOX || path.resolve(__dirname, "../../sage-sandbox");

// The controller LM Studio hands to a tools provider: here only the two
// config getters the plugin uses, with the defaults of config.ts.
function fakeController(chat = {}, global = {}, workingDirectory = null) {
  const chatValues = {
    timeoutSeconds: 60,
    maxTimeoutSeconds: 120,
    memory: "1g",
    cpus: 1,
    pidsLimit: 96,
    outputLimitKiB: 32,
    keepSession: true,
    ...chat,
  };
  const globalValues = { sageSandboxPath: SAGE_SANDBOX, podmanPath: "", image: "", ...global };
  return {
    getPluginConfig: () => ({ get: (key) => chatValues[key] }),
    getGlobalPluginConfig: () => ({ get: (key) => globalValues[key] }),
    // As the SDK does for a chat without a folder: it throws.
    getWorkingDirectory: () => {
      if (!workingDirectory) throw new Error("no working directory");
      return workingDirectory;
    },
  };
}

function fakeContext(signal = new AbortController().signal) {
  const statuses = [];
  return { statuses, status: (t) => statuses.push(t), warn: () => {}, signal, callId: 1 };
}

async function tools(chat, global) {
  const list = await toolsProvider(fakeController(chat, global));
  return Object.fromEntries(list.map((t) => [t.name, t]));
}

function ourContainers() {
  return execFileSync("podman", ["ps", "-a", "--filter", "label=sage-sandbox=1", "--format", "{{.Names}}"])
    .toString()
    .trim();
}

// Each test ends its servers, and they leave no container behind.
afterEach(async () => {
  await closeSandboxServers();
  for (let i = 0; i < 40 && ourContainers() !== ""; i++) await new Promise((r) => setTimeout(r, 250));
  assert.equal(ourContainers(), "", "no container left once the servers are closed");
});

const SEED = `R.<x> = QQ[]
f = x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4
print(f.factor())
print(f.discriminant())
`;

test("the bundled entry point registers both config schematics and the tools provider", async () => {
  const { main } = require("../dist/index.js");
  const calls = [];
  const context = {
    withConfigSchematics: (s) => (calls.push(["config", s]), context),
    withGlobalConfigSchematics: (s) => (calls.push(["global", s]), context),
    withToolsProvider: (p) => (calls.push(["tools", p]), context),
  };
  await main(context);
  assert.deepEqual(calls.map(([kind]) => kind).sort(), ["config", "global", "tools"]);
  const provider = calls.find(([kind]) => kind === "tools")[1];
  const list = await provider(fakeController());
  assert.equal(list.length, 3);
});

test("provides run_sagemath, sage_sandbox_self_test and sage_sandbox_status", async () => {
  const list = await toolsProvider(fakeController());
  assert.deepEqual(list.map((t) => t.name), ["run_sagemath", "sage_sandbox_self_test", "sage_sandbox_status"]);
  for (const t of list) assert.ok(t.description.length > 100, `${t.name} has a description for the model`);
});

test("run_sagemath: the seed example returns the factorisation and the discriminant", async () => {
  const { run_sagemath } = await tools();
  const ctx = fakeContext();
  const result = await run_sagemath.implementation({ code: SEED }, ctx);
  assert.equal(result.ok, true);
  assert.equal(result.exit_code, 0);
  assert.equal(result.stdout, "x^6 - 2*x^5 - 13*x^4 + 8*x^3 + 32*x^2 - 8*x - 4\n181118435328\n");
  assert.equal(result.sandbox, undefined, "the sandbox's settings are status's, not repeated per call");
  assert.equal(result.truncated.max_bytes_per_stream, 32 * 1024, "the default output limit fits a model's context");
  assert.ok(ctx.statuses.length >= 1, "progress shown with ctx.status");
});

test("run_sagemath: an exception comes back as ok false with the traceback", async () => {
  const { run_sagemath } = await tools();
  const result = await run_sagemath.implementation({ code: "1/0" }, fakeContext());
  assert.equal(result.ok, false);
  assert.equal(result.exit_code, 1);
  assert.match(result.stderr, /ZeroDivisionError/);
});

test("run_sagemath: timeout_seconds and the chat's limits reach sage-sandbox as flags", async () => {
  const { run_sagemath } = await tools({ memory: "512m", cpus: 1.2000000000000002, pidsLimit: 40, outputLimitKiB: 16 });
  const result = await run_sagemath.implementation(
    {
      code: "import resource, time\nfor r in ('DATA', 'NPROC', 'CPU'):\n    print(resource.getrlimit(getattr(resource, 'RLIMIT_' + r))[0r])\ntime.sleep(60)",
      // A cold call's timeout counts from its start, Sage's start-up included:
      // 3 s was sometimes spent before the code ran.
      timeout_seconds: 10,
    },
    fakeContext(),
  );
  assert.equal(result.timed_out, true);
  assert.equal(result.stopped_by, "timeout");
  assert.equal(result.exit_code, 124);
  // 512 MiB; 40 processes; ceil(10 s x 1.2 cpus x 1.25) CPU seconds.
  assert.equal(result.stdout, "536870912\n40\n15\n");
  assert.equal(result.truncated.max_bytes_per_stream, 16 * 1024);
});

test("run_sagemath: the largest answer (2 x 384 KiB of control characters) fits the SDK's 10 MiB message", async () => {
  const { run_sagemath } = await tools({ outputLimitKiB: 384 });
  const result = await run_sagemath.implementation(
    // Statements, not a bare last expression: the value of write() would
    // be shown as a notebook shows it, one line past the limit.
    { code: "import sys\n_ = sys.stdout.write(chr(1) * (384 * 1024))\n_ = sys.stderr.write(chr(1) * (384 * 1024))" },
    fakeContext(),
  );
  assert.equal(result.ok, true, result.error);
  assert.equal(result.stdout.length, 384 * 1024);
  assert.equal(result.stderr.length, 384 * 1024);
  const over = await (await tools({ outputLimitKiB: 385 })).run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.match(over.error, /^--output-limit 385 is above mcp's largest, 384/);
});

test("run_sagemath: a timeout above the user's maximum is refused with it, and nothing runs", async () => {
  const { run_sagemath } = await tools({ maxTimeoutSeconds: 30 });
  const result = await run_sagemath.implementation({ code: "print(1)", timeout_seconds: 31 }, fakeContext());
  assert.equal(result.ok, false);
  assert.match(result.error, /timeout_seconds 31 is above the longest the user allows, 30 s; nothing was run/);
  assert.equal(result.stdout, undefined);
  const within = await run_sagemath.implementation({ code: "print(1)", timeout_seconds: 30 }, fakeContext());
  assert.equal(within.ok, true);
  // A default above the maximum is held to it.
  const { run_sagemath: held } = await tools({ timeoutSeconds: 600, maxTimeoutSeconds: 20 });
  const result2 = await held.implementation({ code: "print(2)" }, fakeContext());
  assert.equal(result2.ok, true);
  assert.equal(result2.stdout, "2\n");
});

test("run_sagemath: the parameters are checked as LM Studio checks them", async () => {
  const { run_sagemath } = await tools();
  assert.doesNotThrow(() => run_sagemath.checkParameters({ code: "print(1)", timeout_seconds: 600 }));
  assert.throws(() => run_sagemath.checkParameters({ code: "#".repeat(MAX_CODE_BYTES + 1) }));
  // Bytes, as sage-sandbox counts them: 25,001 two-byte characters are too many.
  assert.throws(() => run_sagemath.checkParameters({ code: "é".repeat(25_001) }));
  assert.doesNotThrow(() => run_sagemath.checkParameters({ code: "é".repeat(25_000) }));
  assert.throws(() => run_sagemath.checkParameters({ code: "print(1)", timeout_seconds: 0 }));
  assert.throws(() => run_sagemath.checkParameters({ code: "print(1)", timeout_seconds: 1.5 }));
  assert.throws(() => run_sagemath.checkParameters({ timeout_seconds: 5 }));
});

test("run_sagemath: an abort cancels the call, its container is removed, the server goes on", async () => {
  const { run_sagemath } = await tools();
  const abort = new AbortController();
  const pending = run_sagemath.implementation({ code: "import time\ntime.sleep(120)" }, fakeContext(abort.signal));
  await new Promise((r) => setTimeout(r, 4000));
  const running = ourContainers().split("\n").filter(Boolean);
  assert.ok(running.length >= 1, "the call's container exists before the abort");
  const abortedAt = Date.now();
  abort.abort();
  const result = await pending;
  const seconds = (Date.now() - abortedAt) / 1000;
  assert.ok(seconds < 2, `returned ${seconds} s after the abort`);
  assert.equal(result.ok, false);
  assert.equal(result.aborted, true);
  // Of the containers there at the abort, the call's goes: the others are
  // warm ones, which the call did not touch.
  let gone = false;
  for (let i = 0; i < 40 && !gone; i++) {
    const now = ourContainers().split("\n");
    gone = running.filter((name) => now.includes(name)).length < running.length;
    if (!gone) await new Promise((r) => setTimeout(r, 250));
  }
  assert.ok(gone, "the cancelled call's container is removed within 10 s");
  const next = await run_sagemath.implementation({ code: "print(6*7)" }, fakeContext());
  assert.equal(next.stdout, "42\n");
});

test("run_sagemath: a second call is served by the same warm server, fast", async () => {
  const { run_sagemath } = await tools();
  const first = await run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.equal(first.ok, true);
  // The replacement gets ready (about 2 s), then warm (launcher/warm.py:
  // 5-7 s more here). A call that comes during a warm-up step waits for
  // that step, up to about 2 s (sage-sandbox(1), Warm templates).
  await new Promise((r) => setTimeout(r, 15000));
  const started = Date.now();
  const second = await run_sagemath.implementation({ code: "print(factor(2^64+1))" }, fakeContext());
  const ms = Date.now() - started;
  assert.equal(second.stdout, "274177 * 67280421310721\n");
  // Not a performance assertion (bench/ measures that): a cold start here
  // takes over 800 ms, so this only tells a warm sandbox from a cold one.
  assert.ok(ms < 600, `the second call took ${ms} ms`);
});

test("run_sagemath: a missing sage-sandbox gives ok false with a hint, not an exception", async () => {
  const { run_sagemath } = await tools({}, { sageSandboxPath: "/nonexistent/sage-sandbox" });
  const result = await run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.equal(result.ok, false);
  assert.equal(result.error, "sage-sandbox executable '/nonexistent/sage-sandbox' not found");
  assert.match(result.hint, /absolute path/);
});

test("run_sagemath: an executable that is not an MCP server gives ok false with a hint", async () => {
  // /bin/echo stands for a wrong executable configured as sage-sandbox.
  const { run_sagemath } = await tools({}, { sageSandboxPath: "/bin/echo" });
  const result = await run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.equal(result.ok, false);
  assert.match(result.error, /^sage-sandbox did not answer as an MCP server/);
  assert.match(result.hint, /mcp command/);
});

test("run_sagemath: invalid settings are refused by sage-sandbox with the reason", async () => {
  const { run_sagemath } = await tools({ memory: "16g" });
  const result = await run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.equal(result.ok, false);
  assert.match(result.error, /^invalid --memory '16g'/);
  const bad = await (await tools({ maxTimeoutSeconds: 0 })).run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.match(bad.error, /^invalid --timeout '0'/);
});

test("run_sagemath: a missing image is reported with how to get one", async () => {
  const { run_sagemath } = await tools({}, { image: "localhost/no-such-image:1" });
  const result = await run_sagemath.implementation({ code: "print(1)" }, fakeContext());
  assert.equal(result.ok, false);
  assert.match(result.error, /image 'localhost\/no-such-image:1' is not present locally/);
  assert.match(result.hint, /setup\.sh image/);
});

test("sage_sandbox_self_test: every property passes in the sandbox", async () => {
  const { sage_sandbox_self_test } = await tools();
  const result = await sage_sandbox_self_test.implementation({}, fakeContext());
  assert.equal(result.ok, true);
  const outcomes = Object.fromEntries(result.checks.map((c) => [c.name, c.outcome]));
  assert.equal(outcomes.factorisation, "PASS");
  assert.equal(outcomes.user_namespaces, "PASS");
  assert.equal(outcomes.network, "PASS");
});

test("sage_sandbox_status: podman rootless and the image present", async () => {
  const { sage_sandbox_status } = await tools();
  const result = await sage_sandbox_status.implementation({}, fakeContext());
  assert.equal(result.ok, true);
  assert.equal(result.rootless, true);
  assert.equal(result.image_available, true);
  assert.equal(result.settings.memory.value, "1g");
});

test("a plot and a text file come back into the chat's working directory, and files go in", async () => {
  const fs = require("node:fs");
  const os = require("node:os");
  const crypto = require("node:crypto");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plugin-files-"));
  try {
    const list = await toolsProvider(fakeController({}, {}, dir));
    const run = list.find((t) => t.name === "run_sagemath");
    const code = `import os
out = os.environ["SAGE_SANDBOX_OUT"]
plot(sin(x), (x, 0, 2*pi)).save(out + "/sin.png")
open(out + "/sum.txt", "w").write(str(sum(int(r.split(",")[1]) for r in open("data.csv").read().split()[1:])))
print("saved")
`;
    const result = await run.implementation({ code, files: { "data.csv": "a,b\n1,2\n3,40\n" } }, fakeContext());
    assert.equal(result.ok, true, JSON.stringify(result));
    assert.deepEqual(result.saved_files, [path.join(dir, "sin.png"), path.join(dir, "sum.txt")]);
    assert.equal(fs.readFileSync(path.join(dir, "sum.txt"), "utf8"), "42");
    const png = fs.readFileSync(path.join(dir, "sin.png"));
    assert.equal(png.subarray(0, 8).toString("latin1"), "\x89PNG\r\n\x1a\n");
    const listed = result.files.find((f) => f.name === "sin.png");
    assert.equal(listed.media_type, "image/png");
    assert.equal(listed.size, png.length);
    assert.equal(listed.sha256, crypto.createHash("sha256").update(png).digest("hex"));
    assert.ok(listed.width > 100 && listed.height > 100, "the pixel size is given");
    // A second run does not replace the user's file: it says why instead.
    const again = await run.implementation({ code: `import os
open(os.environ["SAGE_SANDBOX_OUT"] + "/sum.txt", "w").write("0")
print(1)
` }, fakeContext());
    assert.equal(fs.readFileSync(path.join(dir, "sum.txt"), "utf8"), "42");
    assert.match(again.files_not_saved[0].reason, /exists/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a plot as the last line comes back into the chat's folder as show-N.png, with no path in the code", async () => {
  const fs = require("node:fs");
  const os = require("node:os");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plugin-show-"));
  try {
    const list = await toolsProvider(fakeController({}, {}, dir));
    const run = list.find((t) => t.name === "run_sagemath");
    const first = await run.implementation({ code: "plot(sin(x), (x, 0, 2*pi))" }, fakeContext());
    assert.equal(first.ok, true, JSON.stringify(first));
    assert.deepEqual(first.saved_files, [path.join(dir, "show-1.png")]);
    const png = fs.readFileSync(path.join(dir, "show-1.png"));
    assert.equal(png.subarray(0, 8).toString("latin1"), "\x89PNG\r\n\x1a\n");
    assert.ok(png.readUInt32BE(16) > 100 && png.readUInt32BE(20) > 100, "its pixel size");
    // The next one is numbered after it: the first is kept.
    const second = await run.implementation({ code: "p = plot(cos(x), (x, 0, 1))\np.show()" }, fakeContext());
    assert.deepEqual(second.saved_files, [path.join(dir, "show-2.png")]);
    assert.deepEqual(fs.readFileSync(path.join(dir, "show-1.png")), png);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("calls in one chat share a Sage session; another chat, or the setting off, starts fresh", async () => {
  const fs = require("node:fs");
  const os = require("node:os");
  const one = fs.mkdtempSync(path.join(os.tmpdir(), "plugin-chat-"));
  const two = fs.mkdtempSync(path.join(os.tmpdir(), "plugin-chat-"));
  const run = async (chat, folder, code) =>
    (await toolsProvider(fakeController(chat, {}, folder)))
      .find((t) => t.name === "run_sagemath")
      .implementation({ code }, fakeContext());
  try {
    const first = await run({}, one, "R.<x> = QQ[]\na = 6*7\nprint(a)");
    assert.equal(first.stdout, "42\n", JSON.stringify(first));
    assert.equal(first.session.calls, 1);
    assert.match(first.session.name, /^chat-[0-9a-f]{32}$/);
    const second = await run({}, one, "print(a, (x^2 - 1).factor())");
    assert.equal(second.stdout, "42 (x - 1) * (x + 1)\n", JSON.stringify(second));
    assert.equal(second.session.calls, 2);
    assert.equal(second.session.state_kept, true);
    const other = await run({}, two, "print('a' in globals())");
    assert.equal(other.stdout, "False\n");
    assert.notEqual(other.session.name, first.session.name);
    const off = await run({ keepSession: false }, one, "print('a' in globals())");
    assert.equal(off.stdout, "False\n");
    assert.equal(off.session, undefined);
  } finally {
    fs.rmSync(one, { recursive: true, force: true });
    fs.rmSync(two, { recursive: true, force: true });
  }
});
