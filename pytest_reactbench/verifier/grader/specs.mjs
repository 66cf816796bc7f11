// The hidden specs: copied from /tests/specs into /app for the phase that runs them,
// and, for the end-to-end phase, the grader's own Playwright config (a port chosen
// per run, a browser that looks like a user's) and Playwright's cache of the specs
// compiled at bake time.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import { APP, ROOM, ROOM_GID, ROOM_UID, STATE, TESTS, roomTool } from "./config.mjs";
import { log, run } from "./process.mjs";

/**
 * @import { Config } from "./config.mjs"
 */

/**
 * Copy the hidden specs of one phase into /app, root-owned, over whatever is there.
 * @param {string[]} parts  folders (or files) of /tests/specs
 */
export function applySpecs(parts) {
  const specs = path.join(TESTS, "specs");
  for (const part of parts) {
    const source = path.join(specs, part);
    if (!fs.existsSync(source)) continue;
    for (const rel of walkSpecs(source, part)) {
      // Any non-directory on the way (a file, a link) goes, so the copy lands.
      let at = APP;
      for (const segment of path.dirname(rel).split("/").filter((s) => s !== ".")) {
        at = path.join(at, segment);
        const stat = fs.lstatSync(at, { throwIfNoEntry: false });
        if (stat && !stat.isDirectory()) fs.rmSync(at, { force: true });
      }
      fs.rmSync(path.join(APP, rel), { recursive: true, force: true });
    }
    fs.cpSync(source, path.join(APP, part), { recursive: true });
  }
  run("chown", ["-R", "-h", "0:0", APP]);
  run("chmod", ["-R", "go-w", ...parts.map((p) => path.join(APP, p)).filter((p) => fs.existsSync(p))]);
}

/**
 * Every file under `dir` (a folder of /tests/specs), as `prefix/...`; a spec at the
 * top of /tests/specs (a root-level spec of a mined task) is itself, as `prefix`.
 * @param {string} dir
 * @param {string} prefix
 * @returns {string[]}
 */
export function walkSpecs(dir, prefix) {
  if (!fs.lstatSync(dir).isDirectory()) return [prefix];
  /** @type {string[]} */
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...walkSpecs(path.join(dir, entry.name), rel));
    else out.push(rel);
  }
  return out;
}

/**
 * The app's port for the e2e phase, chosen per run (a spec cannot count on it), below
 * the kernel's range of ports for outgoing connections: in that range the browser's
 * own sockets took it once ("Port ... is already in use", the oracle scored 0).
 * @returns {string}
 */
export function e2ePort() {
  let low = 32768;
  try {
    low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low;
  } catch {}
  const floor = Math.min(10000, low - 1000);
  return String(floor + crypto.randomInt(Math.max(1, low - floor)));
}

// The e2e run's own Playwright config: the app's, with a browser that looks like a
// user's (no automation flag, no headless user agent, and user-browser.js in the built
// page: browser UI, screen, client hints, GPU) on a port chosen per run.
export const E2E_CONFIG = "reactbench.e2e.config.ts";
const INJECT = "user-browser-inject.mjs";
// Where the build goes and the preview serves from, whatever the app's config says.
const E2E_OUT = "dist";

/** The page script and its injector, where the e2e step's server command runs them. */
export function installUserBrowser() {
  roomTool("user-browser.js");
  roomTool(INJECT);
}
// Vite's preview server says this once it listens.
const PREVIEW_READY = String.raw`/Local:\s+https?:\/\//`;

/** @param {string} [app] */
export function writeE2eConfig(app = APP) {
  const source = `// Written by the verifier for one grading run.
import base from "./playwright.config.ts";

const port = process.env.REACTBENCH_E2E_PORT;
const url = \`http://127.0.0.1:\${port}\`;
const launch = base.use?.launchOptions ?? {};
export default {
  ...base,
  outputDir: process.env.REACTBENCH_E2E_OUTPUT,
  use: {
    ...base.use,
    baseURL: url,
    userAgent: process.env.REACTBENCH_E2E_USER_AGENT,
    launchOptions: {
      ...launch,
      // WebGL as a user's browser has it (Chromium no longer falls back to its
      // software renderer on its own); user-browser.js names a GPU for it.
      args: [...(launch.args ?? []), "--disable-blink-features=AutomationControlled", "--enable-unsafe-swiftshader"],
      ignoreDefaultArgs: ["--enable-automation"],
    },
  },
  webServer: base.webServer && {
    ...base.webServer,
    command: \`pnpm exec vite build --logLevel warn --outDir ${E2E_OUT} && node ${path.join(ROOM, INJECT)} ${E2E_OUT}/index.html \` +
      \`&& pnpm exec vite preview --outDir ${E2E_OUT} --port \${port} --strictPort\`,
    url,
    // Ready as soon as the server says so: Playwright's polling of the url alone
    // waits up to a second longer.
    wait: { stdout: ${PREVIEW_READY} },
  },
};
`;
  fs.writeFileSync(path.join(app, E2E_CONFIG), source, { mode: 0o644 });
}

/**
 * The e2e command of config.json may name the app's Playwright config or none: it
 * gets ours.
 * @param {string} cmd
 */
export const withE2eConfig = (cmd) =>
  /playwright\s+test/.test(cmd)
    ? cmd.replace(/(playwright\s+test)((\s+(-c|--config)[=\s]\S+)?)/, `$1 -c ${E2E_CONFIG}`)
    : cmd;

// Playwright compiles its config and the specs (Babel) at every run unless its cache
// holds them, keyed by path and content: compiled here once, at the paths and with the
// contents of the e2e run. Each e2e room gets its own copy.
const E2E_TRANSFORMS = path.join(STATE, "e2e-transforms");

/**
 * The room's own copy of the compiled e2e files, where the bake made them.
 * @returns {{ PLAYWRIGHT_TRANSFORM_CACHE_DIR?: string }}
 */
export function e2eTransforms() {
  if (!fs.existsSync(E2E_TRANSFORMS)) return {};
  const copy = path.join(ROOM, "tmp", "playwright-transforms");
  const copied = run("cp", ["-a", E2E_TRANSFORMS, copy], { cwd: "/" });
  const owned = run("chown", ["-R", `${ROOM_UID}:${ROOM_GID}`, copy], { cwd: "/" });
  return copied.code === 0 && owned.code === 0 ? { PLAYWRIGHT_TRANSFORM_CACHE_DIR: copy } : {};
}

/**
 * Chromium's major version, for a user agent like a user's: read once at bake time.
 * @returns {string}
 */
export function userAgent() {
  let version;
  try {
    version = fs.readFileSync(path.join(STATE, "chromium-version"), "utf8").trim();
  } catch {
    version = chromiumVersion();
  }
  return `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${version || "130"}.0.0.0 Safari/537.36`;
}

/** @returns {string} the major version of the image's Chromium ("": none) */
export const chromiumVersion = () => /(\d+)\./.exec(run("chromium", ["--version"], { cwd: "/" }).stdout)?.[1] ?? "";

/**
 * At bake time: the e2e specs and our config compiled into Playwright's cache
 * (a failure only makes each e2e run compile them itself).
 * @param {Config} config
 */
export function compileE2eSpecs(config) {
  const e2eDir = config.test.e2e_specs;
  if (!config.test.e2e_cmd || !fs.existsSync(path.join(TESTS, "specs", e2eDir))) return;
  const added = [path.join(APP, e2eDir), path.join(APP, E2E_CONFIG)];
  // The base has its own: the cache would be of files the grading replaces.
  if (added.some((p) => fs.existsSync(p))) return;
  const scratch = path.join(STATE, "e2e-compile");
  fs.mkdirSync(scratch, { recursive: true, mode: 0o700 });
  try {
    applySpecs([e2eDir]);
    writeE2eConfig();
    const listed = run("bash", ["-c", `${withE2eConfig(config.test.e2e_cmd)} --list`], {
      cwd: config.test.cwd ?? APP,
      timeoutMs: 300_000,
      env: {
        CI: "1",
        npm_config_verify_deps_before_run: "false",
        pnpm_config_verify_deps_before_run: "false",
        PLAYWRIGHT_TRANSFORM_CACHE_DIR: E2E_TRANSFORMS,
        PLAYWRIGHT_JSON_OUTPUT_NAME: path.join(scratch, "list.json"),
        REACTBENCH_REPORTS: scratch,
        REACTBENCH_E2E_PORT: "4173",
        REACTBENCH_E2E_OUTPUT: path.join(scratch, "results"),
      },
    });
    if (listed.code === 0) log("e2e specs compiled for Playwright's cache");
    else {
      // Only slower: each e2e run compiles them itself.
      log(`e2e specs not compiled ahead (exit ${listed.code}): ${(listed.stdout + listed.stderr).slice(-400)}`);
      fs.rmSync(E2E_TRANSFORMS, { recursive: true, force: true });
    }
  } finally {
    for (const p of [...added, scratch]) fs.rmSync(p, { recursive: true, force: true });
  }
}
