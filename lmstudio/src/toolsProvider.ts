// toolsProvider.ts: three tools, served by a long-lived `sage-sandbox mcp`
// started with the configured limits as flags, that return sage-sandbox's
// result object to the model.
import { text, tool, type Tool, type ToolsProviderController } from "@lmstudio/sdk";
import { createHash } from "node:crypto";
import { z } from "zod";
import { configSchematics, globalConfigSchematics } from "./config";
import { callSandboxTool } from "./sandboxServer";

// sage-sandbox counts the code in UTF-8 bytes, and so does the check here.
export const MAX_CODE_BYTES = 50_000;
// sage-sandbox enforces the timeout; this margin only covers podman's own
// start-up and clean-up before the plugin's backstop would fire.
const BACKSTOP_MARGIN_MS = 60_000;

interface Settings {
  executable: string;
  podman: string;
  image: string;
  timeoutSeconds: number;
  maxTimeoutSeconds: number;
  memory: string;
  cpus: number;
  pidsLimit: number;
  outputLimitKiB: number;
  keepSession: boolean;
}

function readSettings(ctl: ToolsProviderController): Settings {
  const chat = ctl.getPluginConfig(configSchematics);
  const global = ctl.getGlobalPluginConfig(globalConfigSchematics);
  return {
    executable: global.get("sageSandboxPath").trim() || "sage-sandbox",
    podman: global.get("podmanPath").trim(),
    image: global.get("image").trim(),
    timeoutSeconds: chat.get("timeoutSeconds"),
    maxTimeoutSeconds: chat.get("maxTimeoutSeconds"),
    memory: chat.get("memory"),
    cpus: chat.get("cpus"),
    pidsLimit: chat.get("pidsLimit"),
    outputLimitKiB: chat.get("outputLimitKiB"),
    keepSession: chat.get("keepSession"),
  };
}

// Settings become the server's flags as they are: out-of-range values are
// refused by sage-sandbox with a message, never clamped here. Only a
// slider's float noise (1.2000000000000002) is rounded to the 3 decimals it
// allows. The server's --timeout is the longest a call may ask for; each
// call names its own. One server per distinct set of flags.
function serverFlags(s: Settings): string[] {
  const flags = [
    `--timeout=${s.maxTimeoutSeconds}`,
    `--memory=${s.memory}`,
    `--cpus=${Number(s.cpus.toFixed(3))}`,
    `--pids-limit=${s.pidsLimit}`,
    `--output-limit=${s.outputLimitKiB}`,
  ];
  if (s.podman) flags.push(`--podman=${s.podman}`);
  if (s.image) flags.push(`--image=${s.image}`);
  return flags;
}

// The chat's folder, where LM Studio wants files a plugin makes; none when
// the chat has none (the SDK throws then).
function workingDirectory(ctl: ToolsProviderController): string | undefined {
  try {
    return ctl.getWorkingDirectory() || undefined;
  } catch {
    return undefined;
  }
}

// The chat's session: LM Studio tells chats apart by their folders, so a
// chat with one gets a session named after it (a hash: the folder's path
// is not the server's business); a chat without one, or with the setting
// off, gets a fresh sandbox per call.
function chatSession(ctl: ToolsProviderController, s: Settings): string | undefined {
  const folder = s.keepSession ? workingDirectory(ctl) : undefined;
  return folder ? "chat-" + createHash("sha256").update(folder).digest("hex").slice(0, 32) : undefined;
}

export async function toolsProvider(ctl: ToolsProviderController): Promise<Tool[]> {
  const runSagemath = tool({
    name: "run_sagemath",
    description: text`
      Run SageMath code and return what it printed. Use it for exact and symbolic mathematics:
      algebra, calculus, number theory, linear algebra, groups, polynomials, elliptic curves.
      Sage syntax works (R.<x> = QQ[], x^2). What the code prints comes back in "stdout", and,
      as in a notebook, the value of a bare expression on the last line; errors and tracebacks
      come back in "stderr" with ok false. Graphics shown with show() or .show(), or left as
      the last line (plot(sin(x), (x, 0, 2*pi))), are saved as images (show-1.png, ...) in
      this chat's folder, with no path to choose: "saved_files" gives their paths.
      Calls in this chat usually share one Sage session: variables, functions, rings, imports
      and files in the working directory stay for your next call, so build on them instead of
      resending them; "session.state_kept" in each result says whether they survived (a call
      past its memory or output limit, or one that could not be interrupted at its timeout,
      ends the session and its state). Without "session" in the result each call starts
      fresh. Background processes never outlive their call. There is no network and no file
      from the user but those given in "files"; each call runs under time, memory and output
      limits: "stopped_by" names what stopped it and "error" says what to change.
      Code is at most 50,000 bytes. To keep another file (a table, a plot under a name of your
      own), save it in the directory named by the environment variable SAGE_SANDBOX_OUT, e.g.
      import os; save(p, os.environ["SAGE_SANDBOX_OUT"] + "/sin.svg"): it is saved in this
      chat's folder too; "files" lists each with its size and, for images, its pixel size.
    `,
    parameters: {
      code: z
        .string()
        .refine((code) => Buffer.byteLength(code, "utf8") <= MAX_CODE_BYTES, {
          message: `code must be at most ${MAX_CODE_BYTES} bytes of UTF-8`,
        }),
      timeout_seconds: z.number().int().min(1).max(600).optional(),
      files: z
        .record(z.string())
        .optional()
        .describe("text files put beside the code first, by relative path: {\"data.csv\": \"a,b\\n1,2\\n\"}"),
    },
    implementation: async ({ code, timeout_seconds, files }, ctx) => {
      const s = readSettings(ctl);
      const timeout = timeout_seconds ?? Math.min(s.timeoutSeconds, s.maxTimeoutSeconds);
      if (timeout > s.maxTimeoutSeconds)
        return {
          ok: false,
          error: `timeout_seconds ${timeout} is above the longest the user allows, ${s.maxTimeoutSeconds} s; nothing was run`,
          hint: `ask for at most ${s.maxTimeoutSeconds} seconds, or split the computation`,
        };
      ctx.status("Running SageMath in the sandbox");
      const session = chatSession(ctl, s);
      const result = await callSandboxTool(
        s.executable,
        serverFlags(s),
        "run_sagemath",
        {
          code,
          timeout_seconds: timeout,
          ...(files ? { files } : {}),
          ...(session ? { session } : {}),
        },
        {
          signal: ctx.signal,
          status: ctx.status,
          backstopMs: timeout * 1000 + BACKSTOP_MARGIN_MS,
          outputDir: workingDirectory(ctl),
        },
      );
      // The sandbox's settings are the same on every call: the model gets
      // them from sage_sandbox_status, not repeated in every result.
      delete result.sandbox;
      return result;
    },
  });

  const selfTest = tool({
    name: "sage_sandbox_self_test",
    description: text`
      Check that the SageMath sandbox works: runs a small factorisation in it and verifies,
      from inside, each security property (no network, read-only files, no root, limits).
      Use it when run_sagemath fails for reasons other than the code.
    `,
    parameters: {},
    implementation: async (_params, ctx) => {
      const s = readSettings(ctl);
      ctx.status("Running the sandbox self-test");
      return callSandboxTool(s.executable, serverFlags(s), "sage_sandbox_self_test", {}, {
        signal: ctx.signal,
        status: ctx.status,
        backstopMs: s.maxTimeoutSeconds * 1000 + BACKSTOP_MARGIN_MS,
      });
    },
  });

  const status = tool({
    name: "sage_sandbox_status",
    description: text`
      Report whether the SageMath sandbox can run here: podman and its version, whether it is
      rootless, whether the Sage image is present, and the limits in force. Runs no code.
      Use it first when run_sagemath reports that it could not run.
    `,
    parameters: {},
    implementation: async (_params, ctx) => {
      const s = readSettings(ctl);
      return callSandboxTool(s.executable, serverFlags(s), "sage_sandbox_status", {}, {
        signal: ctx.signal,
        backstopMs: BACKSTOP_MARGIN_MS,
      });
    },
  });

  return [runSagemath, selfTest, status];
}
