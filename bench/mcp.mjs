#!/usr/bin/env node
// mcp.mjs: what `sage-sandbox mcp` and its warm pool buy, measured by the
// official MCP SDK client over stdio:
//   - time to the first ready warm sandbox after the server starts;
//   - tools/call of print(factor(2^64+1)), sent to result received, with a
//     warm sandbox ready (the call is made once the replacement had time to
//     get ready; each result says whether it was warm), and the same with
//     --warm 0 (a cold sandbox per call), interleaved;
//   - a session's calls after its first (the same Sage each time), on the
//     warm server, in the same rounds;
//   - the fork floor, in the same rounds: a container of the same image,
//     Sage imported, that forks a child per request, runs the code in a
//     fresh namespace and exits, timed from here over podman's pipes as
//     the calls are (a warm call at 1.0x of it is as fast as "a fresh
//     process per call" can be over podman);
//   - the LM Studio plugin's per-call time with its warm child (its bundled
//     tools provider, as LM Studio calls it);
//   - the memory one warm sandbox costs: the PSS of every process, the
//     container's included, with 4 warm sandboxes ready minus with none.
//
// With --baseline PATH it measures instead this build against another one
// (today's main, built elsewhere), a server of each with --warm 1, their
// calls interleaved round by round, the order swapped every round:
//   - a warm call: tools/call made once the warm sandbox had time to get
//     ready (4 s after anything that made one import Sage), as above;
//   - a session call: calls 2..N of session "bench" (the first starts its
//     container and is not counted),
//   - a warm call whose last line is a 2D plot: the display's cost (this
//     build renders a PNG and sends it back; a build before the display
//     backend computes the plot and shows nothing),
// and prints each build's medians and the ratio this / baseline.
//
// Run it as the account with rootless podman and the image, after
// `make check` has installed lmstudio/node_modules:
//   sudo -iu sage-sandbox; cd sage-sandbox
//   node bench/mcp.mjs [--rounds N] [--baseline PATH]
// Machines are noisy: read medians, not single figures, and compare builds
// within one run, never against another run's figures.
import { createRequire } from "node:module";
import { execFileSync, spawn } from "node:child_process";
import { accessSync, constants, readdirSync, readFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const require = createRequire(join(ROOT, "lmstudio/package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const SAGE_SANDBOX = process.env.SAGE_SANDBOX ?? join(ROOT, "sage-sandbox");
const CODE = "print(factor(2^64+1))";
const EXPECTED = "274177 * 67280421310721\n";
// A 2D plot as the cell's last line: this build displays it (a PNG back);
// a build before the display backend computes it and shows nothing.
const PLOT = "plot(sin(x), (x, 0, 2*pi))";
const options = { "--rounds": "15", "--baseline": null };
for (let i = 2; i < process.argv.length; i += 2) {
  const name = process.argv[i];
  if (!(name in options)) die(`unknown option ${name} (options: --rounds N, --baseline PATH)`);
  if (i + 1 >= process.argv.length) die(`${name} needs a value`);
  options[name] = process.argv[i + 1];
}
const ROUNDS = Number(options["--rounds"]);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) die(`--rounds ${options["--rounds"]}: not a positive integer`);
const BASELINE = options["--baseline"] === null ? null : resolve(options["--baseline"]);
if (BASELINE !== null) {
  try {
    accessSync(BASELINE, constants.X_OK);
  } catch {
    die(`--baseline ${options["--baseline"]}: not an executable file`);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function die(message) {
  console.error(`bench/mcp.mjs: ${message}`);
  process.exit(2);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function startServer(args, build = SAGE_SANDBOX) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("SAGE_SANDBOX_")) delete env[k];
  const started = performance.now();
  const transport = new StdioClientTransport({ command: build, args: ["mcp", ...args], env, stderr: "pipe" });
  let log = "";
  let readyAt = null;
  transport.stderr.on("data", (d) => {
    log += d;
    if (readyAt === null && log.includes("first warm sandbox ready")) readyAt = performance.now();
  });
  const client = new Client({ name: "sage-sandbox-bench", version: "1" });
  await client.connect(transport);
  return { client, started, ready: () => readyAt, log: () => log };
}

async function timedCall(client, session, code = CODE) {
  const t0 = performance.now();
  const r = await client.callTool({ name: "run_sagemath", arguments: { code, ...(session ? { session } : {}) } });
  const ms = performance.now() - t0;
  const text = r.content.map((c) => c.text ?? "").join("");
  if (code === CODE && text !== EXPECTED) throw new Error(`unexpected output: ${JSON.stringify(text)}`);
  if (r.isError) throw new Error(`the call failed: ${JSON.stringify(r.content)}`);
  return { ms, warm: r._meta?.warm === true, images: r.content.filter((c) => c.type === "image").length };
}

// The fork floor's server: what a fresh process per call costs at least.
const FLOOR_SERVER = `
import os, sys, json
import sage.all_cmdline
from sage.repl.preparse import preparse_file
os.write(1, b"R\\n")
for line in sys.stdin.buffer:
    code = json.loads(line)
    pid = os.fork()
    if pid == 0:
        ns = {"__name__": "__main__"}
        exec("from sage.all_cmdline import *", ns)
        exec(compile(preparse_file(code), "<floor>", "exec"), ns)
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    os.write(1, b"\\0END\\n")
`;

async function startFloor() {
  const status = JSON.parse(execFileSync(SAGE_SANDBOX, ["status", "--json"], { encoding: "utf8" }));
  const child = spawn("podman", ["run", "--rm", "-i", "--network=none", "--log-driver=none",
    "--read-only", "--tmpfs=/tmp", "--env=HOME=/tmp", "--env=DOT_SAGE=/tmp/dot-sage",
    status.image, status.sage.python, "-c", FLOOR_SERVER], { stdio: ["pipe", "pipe", "inherit"] });
  let buffered = "";
  let waiter = null;
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d) => {
    buffered += d;
    if (waiter) waiter();
  });
  const until = (marker) => new Promise((resolve) => {
    const check = () => {
      const at = buffered.indexOf(marker);
      if (at < 0) return;
      const text = buffered.slice(0, at);
      buffered = buffered.slice(at + marker.length);
      waiter = null;
      resolve(text);
    };
    waiter = check;
    check();
  });
  await until("R\n");
  return {
    async call() {
      const t0 = performance.now();
      child.stdin.write(JSON.stringify(CODE) + "\n");
      const text = await until("\0END\n");
      const ms = performance.now() - t0;
      if (text !== EXPECTED) throw new Error(`floor: unexpected output: ${JSON.stringify(text)}`);
      return ms;
    },
    async close() {
      child.stdin.end();
      await new Promise((r) => child.on("exit", r));
    },
  };
}

function pssKiB() {
  let total = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const m = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").match(/^Pss:\s+(\d+) kB/m);
      if (m) total += Number(m[1]);
    } catch {
      // gone, or not ours to read
    }
  }
  return total;
}

function containers() {
  return execFileSync("podman", ["ps", "-a", "--filter", "label=sage-sandbox=1", "--format", "{{.Names}}"], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
}

async function waitNoContainers() {
  for (let i = 0; i < 80 && containers().length; i++) await sleep(250);
}

// With --baseline: this build and the baseline, a warm server of each, their
// warm and session calls interleaved. Every call is made 4 s after anything
// that made a warm sandbox import Sage (a warm call's replacement), so that
// no call of one build competes with the other's import.
async function compareBuilds() {
  const builds = { "this build": SAGE_SANDBOX, baseline: BASELINE };
  const names = Object.keys(builds);
  const servers = {};
  const times = {};
  for (const b of names) {
    servers[b] = await startServer(["--warm", "1"], builds[b]);
    times[b] = { warm: [], session: [], plot: [], images: 0, notWarm: 0 };
  }
  const deadline = performance.now() + 180000;
  for (const b of names) {
    while (servers[b].ready() === null) {
      if (performance.now() > deadline) die(`${b}: no warm sandbox ready after 180 s: ${servers[b].log()}`);
      await sleep(50);
    }
  }
  for (const b of names) await timedCall(servers[b].client, "bench"); // starts the session's sandbox
  for (let i = 0; i < ROUNDS; i++) {
    const order = i % 2 ? [...names].reverse() : names;
    await sleep(4000);
    for (const b of order) times[b].session.push((await timedCall(servers[b].client, "bench")).ms);
    for (const b of order) {
      await sleep(4000);
      const w = await timedCall(servers[b].client);
      if (w.warm) times[b].warm.push(w.ms);
      else times[b].notWarm++;
    }
    for (const b of order) {
      await sleep(4000);
      const p = await timedCall(servers[b].client, null, PLOT);
      times[b].images += p.images;
      if (p.warm) times[b].plot.push(p.ms);
      else times[b].notWarm++;
    }
    console.error(`round ${i + 1}: ` + names.map((b) => `${b} warm ${times[b].warm.at(-1)?.toFixed(1) ?? "-"} ms, `
      + `session ${times[b].session.at(-1).toFixed(1)} ms`).join("; "));
  }
  for (const b of names) await servers[b].client.close();

  const ms = (xs) => (xs.length ? `${median(xs).toFixed(1)} ms` : "-");
  const range = (xs) => (xs.length ? ` (${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)})` : "");
  const ratio = (a, b) => (a.length && b.length ? (median(a) / median(b)).toFixed(3) : "-");
  const [me, base] = names.map((b) => times[b]);
  console.log(`rounds: ${ROUNDS}, code: ${CODE}`);
  console.log(`this build: ${SAGE_SANDBOX}`);
  console.log(`baseline:   ${BASELINE}`);
  console.log("medians, min-max in brackets; warm calls that found no ready sandbox are left out:\n");
  console.log("| measured | this build | baseline | this / baseline |");
  console.log("|---|---:|---:|---:|");
  console.log(`| tools/call, warm sandbox ready (${me.warm.length} / ${base.warm.length} calls) | `
    + `${ms(me.warm)}${range(me.warm)} | ${ms(base.warm)}${range(base.warm)} | ${ratio(me.warm, base.warm)} |`);
  console.log(`| session call, 2nd on (${me.session.length} / ${base.session.length} calls) | `
    + `${ms(me.session)}${range(me.session)} | ${ms(base.session)}${range(base.session)} | ${ratio(me.session, base.session)} |`);
  console.log(`| tools/call of ${PLOT} as the last line, warm (${me.plot.length} / ${base.plot.length} calls; `
    + `images back: ${me.images} / ${base.images}) | `
    + `${ms(me.plot)}${range(me.plot)} | ${ms(base.plot)}${range(base.plot)} | ${ratio(me.plot, base.plot)} |`);
  console.log(`\nwarm calls that found no ready sandbox: this build ${me.notWarm}, baseline ${base.notWarm}`);
}

// Without --baseline: this build against --warm 0, the fork floor and the
// plugin, and the memory of a warm sandbox.
async function measureAll() {
  // 1 and 2: warm and cold servers and the fork floor side by side, calls
  // interleaved.
  const floor = await startFloor();
  const warm = await startServer(["--warm", "1"]);
  const cold = await startServer(["--warm", "0"]);
  while (warm.ready() === null) await sleep(50);
  const firstReadyMs = warm.ready() - warm.started;
  const warmTimes = [];
  const coldTimes = [];
  const floorTimes = [];
  const sessionTimes = [];
  let notWarm = 0;
  await timedCall(warm.client, "bench"); // the session's first call starts its sandbox
  for (let i = 0; i < ROUNDS; i++) {
    await sleep(4000); // the replacement imports Sage meanwhile
    floorTimes.push(await floor.call());
    const w = await timedCall(warm.client);
    if (w.warm) warmTimes.push(w.ms);
    else notWarm++;
    sessionTimes.push((await timedCall(warm.client, "bench")).ms);
    coldTimes.push((await timedCall(cold.client)).ms);
  }
  await warm.client.close();
  await cold.client.close();
  await floor.close();
  await waitNoContainers();

  // 3: the plugin, bundled as LM Studio bundles it.
  const out = join(mkdtempSync(join(tmpdir(), "sage-sandbox-bench-")), "plugin.js");
  execFileSync(join(ROOT, "lmstudio/node_modules/.bin/esbuild"), [
    join(ROOT, "lmstudio/test/entry.ts"), "--bundle", "--platform=node", "--format=cjs", `--outfile=${out}`, "--log-level=warning",
  ]);
  const plugin = require(out);
  const settings = { timeoutSeconds: 60, maxTimeoutSeconds: 120, memory: "1g", cpus: 1, pidsLimit: 96, outputLimitKiB: 32 };
  const controller = {
    getPluginConfig: () => ({ get: (k) => settings[k] }),
    getGlobalPluginConfig: () => ({ get: (k) => ({ sageSandboxPath: SAGE_SANDBOX, podmanPath: "", image: "" })[k] }),
  };
  const runTool = (await plugin.toolsProvider(controller)).find((t) => t.name === "run_sagemath");
  const ctx = { status: () => {}, warn: () => {}, signal: new AbortController().signal, callId: 1 };
  const pluginTimes = [];
  let pluginFirst = null;
  for (let i = 0; i < ROUNDS; i++) {
    const t0 = performance.now();
    const r = await runTool.implementation({ code: CODE }, ctx);
    const ms = performance.now() - t0;
    if (r.stdout !== EXPECTED) throw new Error(`plugin: ${JSON.stringify(r)}`);
    if (i === 0) pluginFirst = ms;
    else pluginTimes.push(ms);
    await sleep(4000);
  }
  await plugin.closeSandboxServers();
  await waitNoContainers();

  // 4: memory of 4 warm sandboxes against none.
  const idle = await startServer(["--warm", "0"]);
  await sleep(3000);
  const pssNone = pssKiB();
  await idle.client.close();
  await waitNoContainers();
  const four = await startServer(["--warm", "4"]);
  for (let i = 0; i < 240 && containers().length < 4; i++) await sleep(250);
  await sleep(15000); // all four have imported Sage
  const pssFour = pssKiB();
  await four.client.close();
  await waitNoContainers();

  const fmt = (x) => x.toFixed(1).padStart(8);
  console.log(`rounds: ${ROUNDS}, code: ${CODE}`);
  console.log(`first warm sandbox ready after start:        ${fmt(firstReadyMs)} ms`);
  console.log(`tools/call, warm pool (median of ${warmTimes.length}):        ${fmt(median(warmTimes))} ms  (min ${warmTimes.length ? Math.min(...warmTimes).toFixed(1) : "-"}, max ${warmTimes.length ? Math.max(...warmTimes).toFixed(1) : "-"}; ${notWarm} found no ready sandbox)`);
  console.log(`tools/call, --warm 0 (median of ${coldTimes.length}):        ${fmt(median(coldTimes))} ms`);
  console.log(`warm / cold:                                 ${(median(warmTimes) / median(coldTimes)).toFixed(3).padStart(8)}`);
  console.log(`fork floor (median of ${floorTimes.length}):                  ${fmt(median(floorTimes))} ms  (min ${Math.min(...floorTimes).toFixed(1)}, max ${Math.max(...floorTimes).toFixed(1)})`);
  console.log(`warm / fork floor:                           ${(median(warmTimes) / median(floorTimes)).toFixed(3).padStart(8)}`);
  console.log(`session call, 2nd on (median of ${sessionTimes.length}):       ${fmt(median(sessionTimes))} ms`);
  console.log(`session / warm:                              ${(median(sessionTimes) / median(warmTimes)).toFixed(3).padStart(8)}`);
  console.log(`plugin call, first (starts its server):      ${fmt(pluginFirst)} ms`);
  console.log(`plugin call, warm child (median of ${pluginTimes.length}):     ${fmt(median(pluginTimes))} ms`);
  console.log(`plugin / warm:                               ${(median(pluginTimes) / median(warmTimes)).toFixed(3).padStart(8)}`);
  console.log(`memory per warm sandbox (PSS, 4 vs 0):       ${fmt((pssFour - pssNone) / 4 / 1024)} MiB`);
}

if (BASELINE) await compareBuilds();
else await measureAll();
