// sandboxServer.ts: one long-lived `sage-sandbox mcp` child per distinct
// sandbox settings, spoken to with the official MCP SDK client, so that a
// call is served by a warm sandbox instead of paying Sage's start-up. Every
// outcome, a dead or missing executable included, becomes one
// JSON-serialisable object with `error` and `hint`: never an exception.
// No sandboxing happens here: sage-sandbox does all of it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import path from "node:path";

export type Result = Record<string, unknown>;

export interface CallOptions {
  signal?: AbortSignal;
  status?: (text: string) => void;
  // Past this the call is cancelled; sage-sandbox enforces the sandbox's own
  // timeout, so this only guards against a hung server.
  backstopMs: number;
  // Keep the files the code saves in $SAGE_SANDBOX_OUT here (the chat's
  // working directory); without it only images come back, as MCP content.
  outputDir?: string;
}

// A server unused this long is ended; the next call starts another.
const IDLE_MS = 10 * 60_000;
// Of the server's stderr, what is kept to explain a failure.
const MAX_LOG_CHARS = 8_000;

const INSTALL_HINT =
  "Install sage-sandbox (make && sudo make install in its source tree) and set its " +
  "absolute path in the plugin's global settings.";
const CHECK_HINT =
  "Check the sage-sandbox path in the plugin's global settings, and run `sage-sandbox status` in a terminal.";

interface Server {
  client: Client;
  connected: Promise<void>;
  log: string;
  inFlight: number;
  idleTimer?: NodeJS.Timeout;
  closed: boolean;
}

const servers = new Map<string, Server>();

function startServer(key: string, executable: string, flags: string[]): Server {
  // Only PATH and the like reach sage-sandbox through the SDK's default
  // environment; its own settings come as flags.
  const transport = new StdioClientTransport({ command: executable, args: ["mcp", ...flags], stderr: "pipe" });
  const client = new Client({ name: "sage-sandbox-lmstudio", version: "0.2.0" });
  const server: Server = { client, connected: Promise.resolve(), log: "", inFlight: 0, closed: false };
  transport.stderr?.on("data", (chunk: Buffer) => {
    server.log = (server.log + chunk.toString("utf8")).slice(-MAX_LOG_CHARS);
  });
  // A server that exits or dies is forgotten: the next call starts another.
  client.onclose = () => {
    server.closed = true;
    clearTimeout(server.idleTimer);
    if (servers.get(key) === server) servers.delete(key);
  };
  server.connected = client.connect(transport);
  servers.set(key, server);
  return server;
}

function getServer(executable: string, flags: string[]): Server {
  const key = JSON.stringify([executable, flags]);
  const existing = servers.get(key);
  if (existing && !existing.closed) return existing;
  return startServer(key, executable, flags);
}

function release(server: Server) {
  server.inFlight--;
  if (server.inFlight > 0 || server.closed) return;
  clearTimeout(server.idleTimer);
  server.idleTimer = setTimeout(() => void server.client.close(), IDLE_MS);
  server.idleTimer.unref();
}

// sage-sandbox's own refusal of its options, in its words: its first line
// on stderr that says why ("sage-sandbox: invalid --memory '16g': ...").
function refusalFrom(log: string): string | undefined {
  const line = log.split("\n").find((l) => l.startsWith("sage-sandbox: "));
  return line?.slice("sage-sandbox: ".length);
}

function failure(err: unknown, executable: string, server: Server, signal?: AbortSignal): Result {
  const e = err as { code?: unknown; message?: string };
  if (signal?.aborted) return { ok: false, aborted: true, error: "the tool call was aborted; sage-sandbox stopped the run" };
  if (e?.code === "ENOENT") return { ok: false, error: `sage-sandbox executable '${executable}' not found`, hint: INSTALL_HINT };
  if (e?.code === "EACCES") return { ok: false, error: `cannot start sage-sandbox '${executable}': ${e.message}`, hint: INSTALL_HINT };
  // The SDK's own timeout (ErrorCode.RequestTimeout).
  if (e?.code === -32001) return { ok: false, error: "sage-sandbox did not finish in time and the call was cancelled", hint: CHECK_HINT };
  // The server's answer to a call it could not take (-32602: bad params).
  if (typeof e?.code === "number" && e.code !== -32000)
    return { ok: false, error: (e.message ?? "").replace(/^MCP error -?\d+: /, ""), hint: CHECK_HINT };
  const refusal = refusalFrom(server.log);
  if (refusal) return { ok: false, error: refusal, hint: CHECK_HINT };
  return {
    ok: false,
    error: `sage-sandbox did not answer as an MCP server: ${e?.message ?? String(err)}`,
    hint: `${CHECK_HINT} The plugin needs a sage-sandbox with the mcp command.`,
    stderr: server.log.slice(-2000),
  };
}

// Calls one of sage-sandbox's tools and returns its structured result: the
// same object `sage-sandbox run --json` (or self-test, status) prints.
export async function callSandboxTool(
  executable: string,
  flags: string[],
  tool: string,
  args: Record<string, unknown>,
  options: CallOptions,
): Promise<Result> {
  const server = getServer(executable, flags);
  server.inFlight++;
  clearTimeout(server.idleTimer);
  try {
    await server.connected;
    const meta = options.outputDir ? { "sage-sandbox/output-dir": options.outputDir } : undefined;
    const result = await server.client.callTool({ name: tool, arguments: args, _meta: meta }, undefined, {
      signal: options.signal,
      timeout: options.backstopMs,
      onprogress: (p) => options.status?.(`SageMath: ${p.message ?? `${p.progress} s`}`),
    });
    const structured = result.structuredContent;
    if (structured && typeof structured === "object" && !Array.isArray(structured)) {
      const object = structured as Result;
      // Where each file that came back now is, for the model to name.
      if (options.outputDir && Array.isArray(object.files))
        object.saved_files = object.files.map((f) => path.join(options.outputDir!, (f as { name: string }).name));
      return object;
    }
    return { ok: false, error: "sage-sandbox answered without a result object", hint: CHECK_HINT };
  } catch (err) {
    return failure(err, executable, server, options.signal);
  } finally {
    release(server);
  }
}

// Ends every server: their sandboxes are stopped and their containers
// removed (the plugin's end; tests).
export async function closeSandboxServers(): Promise<void> {
  const all = [...servers.values()];
  servers.clear();
  await Promise.all(all.map((s) => s.client.close().catch(() => {})));
}
