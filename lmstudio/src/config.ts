// config.ts: the plugin's settings in LM Studio's UI. Each maps to one
// sage-sandbox flag with the same range; sage-sandbox itself checks them and
// refuses a bad value with a message the model and the user can read.
import { createConfigSchematics } from "@lmstudio/sdk";

export const MEMORY_SIZES = ["256m", "512m", "1g", "2g", "4g", "8g"];

// Application-wide: where things are.
export const globalConfigSchematics = createConfigSchematics()
  .field(
    "sageSandboxPath",
    "string",
    {
      displayName: "sage-sandbox executable",
      subtitle: "Name on PATH or absolute path (LM Studio may not see your shell's PATH)",
    },
    "sage-sandbox",
  )
  .field(
    "podmanPath",
    "string",
    { displayName: "Podman executable", subtitle: "Empty: sage-sandbox's default (podman)" },
    "",
  )
  .field(
    "image",
    "string",
    { displayName: "Sage image", subtitle: "Empty: sage-sandbox's default image" },
    "",
  )
  .build();

// Per chat: the limits of each run.
export const configSchematics = createConfigSchematics()
  .field(
    "timeoutSeconds",
    "numeric",
    { displayName: "Default timeout (seconds)", int: true, min: 1, max: 600 },
    60,
  )
  .field(
    "maxTimeoutSeconds",
    "numeric",
    {
      displayName: "Longest timeout the model may ask for (seconds)",
      subtitle: "A call asking for more is refused with this maximum, and nothing runs",
      int: true,
      min: 1,
      max: 600,
    },
    120,
  )
  .field(
    "memory",
    "select",
    { displayName: "Memory limit", options: MEMORY_SIZES },
    "1g",
  )
  .field("cpus", "numeric", { displayName: "CPUs", min: 0.1, max: 4, step: 0.1 }, 1)
  .field(
    "pidsLimit",
    "numeric",
    { displayName: "Processes and threads", int: true, min: 16, max: 512 },
    96,
  )
  // 32 KiB a stream, about 8,000 tokens: what a local model's context can
  // take in one tool result, not sage-sandbox's 256 KiB.
  .field(
    "outputLimitKiB",
    "numeric",
    // sage-sandbox mcp takes at most 384: an answer must fit MCP's 10 MiB.
    { displayName: "Output limit per stream (KiB)", int: true, min: 16, max: 384 },
    32,
  )
  // A session per chat (sage-sandbox mcp's sessions): the model builds on
  // its earlier calls instead of resending them.
  .field(
    "keepSession",
    "boolean",
    {
      displayName: "Keep Sage's state between calls",
      subtitle:
        "Calls in this chat share one Sage: variables and files stay until it has been idle 15 minutes. Needs a chat with a folder",
    },
    true,
  )
  .build();
