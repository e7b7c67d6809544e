// sageSandbox.ts: runs the sage-sandbox executable and turns whatever happens
// into one JSON-serialisable object. No sandboxing happens here: sage-sandbox
// builds the container, enforces the limits and checks the settings.
import { spawn } from "child_process";

export type Result = Record<string, unknown>;

export interface RunOptions {
  input?: string;
  signal?: AbortSignal;
  status?: (text: string) => void;
  // Past this, sage-sandbox is asked to stop (SIGTERM); it enforces its own
  // timeout, so this only guards against a hung process.
  backstopMs: number;
}

// After SIGTERM sage-sandbox removes its container and prints its JSON; give
// it this long before SIGKILL.
const TERM_GRACE_MS = 10_000;
// The largest JSON sage-sandbox can print: two streams at the largest
// output limit (2048 KiB), each byte at most 6 bytes escaped (\u001b), and
// the rest of the object.
const MAX_STDOUT_BYTES = 2 * 2048 * 1024 * 6 + 1024 * 1024;
const MAX_STDERR_BYTES = 64 * 1024;

const INSTALL_HINT =
  "Install sage-sandbox (make && sudo make install in its source tree) and set its " +
  "absolute path in the plugin's global settings.";

function collect(limit: number) {
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    add(chunk: Buffer) {
      if (size < limit) chunks.push(chunk.subarray(0, limit - size));
      size += chunk.length;
    },
    text: () => Buffer.concat(chunks).toString("utf8"),
  };
}

export function runSageSandbox(executable: string, args: string[], options: RunOptions): Promise<Result> {
  return new Promise((resolve) => {
    const started = Date.now();
    const stdout = collect(MAX_STDOUT_BYTES);
    const stderr = collect(MAX_STDERR_BYTES);
    let stopReason: "aborted" | "backstop" | null = null;
    let settled = false;
    const timers: NodeJS.Timeout[] = [];

    const child = spawn(executable, args, { stdio: ["pipe", "pipe", "pipe"], shell: false });

    const finish = (result: Result) => {
      if (settled) return;
      settled = true;
      timers.forEach(clearTimeout);
      clearInterval(ticker);
      options.signal?.removeEventListener("abort", onAbort);
      resolve(result);
    };

    const stop = (reason: "aborted" | "backstop") => {
      if (stopReason || child.exitCode !== null) return;
      stopReason = reason;
      child.kill("SIGTERM");
      timers.push(setTimeout(() => child.kill("SIGKILL"), TERM_GRACE_MS));
    };
    const onAbort = () => stop("aborted");

    const ticker = setInterval(() => {
      options.status?.(`SageMath running in the sandbox: ${Math.round((Date.now() - started) / 1000)} s`);
    }, 5000);
    timers.push(setTimeout(() => stop("backstop"), options.backstopMs));
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort);

    child.stdout.on("data", stdout.add);
    child.stderr.on("data", stderr.add);
    // sage-sandbox may refuse before reading its input: a closed pipe is not
    // an error of ours.
    child.stdin.on("error", () => {});
    child.stdin.end(options.input ?? "");

    child.on("error", (err: NodeJS.ErrnoException) => {
      finish({
        ok: false,
        error:
          err.code === "ENOENT"
            ? `sage-sandbox executable '${executable}' not found`
            : `cannot start sage-sandbox '${executable}': ${err.message}`,
        hint: INSTALL_HINT,
      });
    });

    child.on("close", (code, signal) => {
      const text = stdout.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const stopped =
        stopReason === "aborted"
          ? { aborted: true, error: "the tool call was aborted; sage-sandbox stopped the run" }
          : stopReason === "backstop"
            ? { error: "sage-sandbox did not finish in time and was stopped" }
            : {};
      if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
        finish({ ...(parsed as Result), ...stopped });
        return;
      }
      finish({
        ok: false,
        error: "sage-sandbox did not print a JSON result",
        hint: "Check the sage-sandbox path in the plugin's global settings, and run `sage-sandbox status` in a terminal.",
        exit_code: code,
        signal,
        stdout: text.slice(0, 2000),
        stderr: stderr.text().slice(0, 2000),
        ...stopped,
      });
    });
  });
}
