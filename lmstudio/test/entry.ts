// entry.ts: what the tests load, bundled by esbuild as `lms dev` bundles the
// plugin.
export { toolsProvider, MAX_CODE_BYTES } from "../src/toolsProvider";
export { closeSandboxServers } from "../src/sandboxServer";
export { configSchematics, globalConfigSchematics } from "../src/config";
