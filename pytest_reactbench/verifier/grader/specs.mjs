// The hidden specs: copied from /tests/specs into /app for the phase that runs them,
// and, for the end-to-end phase, the grader's own Playwright config (a port chosen
// per run, two profiles of a browser that looks like a user's, the specs' guard) and
// Playwright's cache of the specs compiled at bake time.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import { APP, ROOM, ROOM_GID, ROOM_UID, STATE, TESTS, VERIFIER_DIR } from "./config.mjs";
import { log, run } from "./process.mjs";
import { testKey } from "./reports.mjs";

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
// user's (no automation flag, no headless user agent, fake media devices, a desktop's
// time zone and screen, and e2e-guard.js in the specs: client hints, user-browser.js in
// every realm, "a user sees it" judged by the browser) on a port chosen per run. Each
// project of the app's runs under two profiles that differ in what a page can read;
// every test must pass under both (profileGaps).
export const E2E_CONFIG = "reactbench.e2e.config.ts";
// What the room's copies of the e2e specs import in place of "@playwright/test".
export const E2E_GUARD = "reactbench.e2e.guard.ts";
// Where the build goes and the preview serves from, whatever the app's config says.
const E2E_OUT = "dist";
// The two profiles' names, the suffix of each project's name.
export const E2E_PROFILES = ["desktop", "laptop"];

// Vite's preview server says this once it listens.
const PREVIEW_READY = String.raw`/Local:\s+https?:\/\//`;

/** @param {string} [app] */
export function writeE2eConfig(app = APP) {
  const source = `// Written by the verifier for one grading run.
import base from "./playwright.config.ts";

const port = process.env.REACTBENCH_E2E_PORT;
const url = \`http://127.0.0.1:\${port}\`;
const launch = base.use?.launchOptions ?? {};
// What a user's Chrome of this browser's version says of itself (browserIdentity):
// its agent string and client hints, the same under both profiles (two users of one
// Chrome). The client hints are e2e-guard.js's, through the DevTools protocol:
// Playwright's own userAgent option would empty the client hints of workers.
const { userAgent = "", userAgentMetadata } = JSON.parse(process.env.REACTBENCH_E2E_BROWSER || "{}");
const profiles = [
  { name: "${E2E_PROFILES[0]}",
    use: { timezoneId: "America/New_York", locale: "en-US", viewport: { width: 1280, height: 720 },
      screen: { width: 1920, height: 1080 }, deviceScaleFactor: 1 },
    reactbench: { userAgent, acceptLanguage: "en-US,en", userAgentMetadata, frame: [16, 87], taskbar: 40,
      webgl: ["Google Inc. (Intel)", "ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)"] } },
  { name: "${E2E_PROFILES[1]}",
    use: { timezoneId: "Europe/Berlin", locale: "en-US", viewport: { width: 1440, height: 760 },
      screen: { width: 1536, height: 864 }, deviceScaleFactor: 1.25 },
    reactbench: { userAgent, acceptLanguage: "en-US,en", userAgentMetadata, frame: [0, 79], taskbar: 48,
      webgl: ["Google Inc. (NVIDIA Corporation)", "ANGLE (NVIDIA Corporation, NVIDIA GeForce GTX 1650/PCIe/SSE2, OpenGL 4.5.0)"] } },
];
const projects = base.projects?.length ? base.projects : [{}];
export default {
  ...base,
  outputDir: process.env.REACTBENCH_E2E_OUTPUT,
  // The profiles side by side: one build and one preview server, a browser each.
  workers: typeof base.workers === "number" ? Math.max(base.workers, profiles.length) : base.workers ?? profiles.length,
  use: {
    ...base.use,
    baseURL: url,
    launchOptions: {
      ...launch,
      // WebGL as a user's browser has it (Chromium no longer falls back to its
      // software renderer on its own; user-browser.js names a GPU for it), a
      // desktop's camera and microphone, and a user's agent string in every realm
      // (shared and service workers are the browser's, no page's).
      args: [...(launch.args ?? []), "--disable-blink-features=AutomationControlled", "--enable-unsafe-swiftshader",
        "--use-fake-device-for-media-stream", ...(userAgent ? [\`--user-agent=\${userAgent}\`] : [])],
      ignoreDefaultArgs: ["--enable-automation"],
    },
  },
  projects: projects.flatMap((project) => profiles.map((profile) => ({
    ...project,
    name: [project.name, profile.name].filter(Boolean).join("-"),
    use: { ...project.use, ...profile.use },
    metadata: { ...project.metadata, reactbench: profile.reactbench },
  }))),
  webServer: base.webServer && {
    ...base.webServer,
    // Hidden source maps: the leak watch names a script's place by its source file.
    command: \`pnpm exec vite build --logLevel warn --sourcemap hidden --outDir ${E2E_OUT} \` +
      \`&& pnpm exec vite preview --outDir ${E2E_OUT} --port \${port} --strictPort\`,
    url,
    // Ready as soon as the server says so: Playwright's polling of the url alone
    // waits up to a second longer.
    wait: { stdout: ${PREVIEW_READY} },
  },
};
`;
  fs.writeFileSync(path.join(app, E2E_CONFIG), source, { mode: 0o644 });
  const guard = fs.readFileSync(path.join(VERIFIER_DIR, "e2e-guard.js"), "utf8");
  const userBrowser = fs.readFileSync(path.join(VERIFIER_DIR, "user-browser.js"), "utf8").trim();
  // The leak watch's source-map reading, its exports made plain declarations.
  const leaks = fs.readFileSync(path.join(VERIFIER_DIR, "e2e-leaks.mjs"), "utf8").replace(/^export /gm, "");
  fs.writeFileSync(path.join(app, E2E_GUARD),
    `const USER_BROWSER = ${JSON.stringify(userBrowser)};\nconst E2E_BUILD = ${JSON.stringify(E2E_OUT)};\n` +
    `${guard}\n${leaks}`, { mode: 0o644 });
}

// Files of the e2e folder that may import Playwright.
const SCRIPT = /\.[cm]?[jt]sx?$/;
// "@playwright/test" where a module names what it imports or re-exports.
const PLAYWRIGHT_IMPORT = /(\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\bimport\s+)(["'])@playwright\/test\2/g;

/**
 * The room's copies of the e2e specs import e2e-guard.js (E2E_GUARD, beside our
 * config) where they import "@playwright/test"; /tests keeps them as they are.
 * @param {string} dir  the e2e folder of /app
 * @param {string} [app]
 */
export function guardE2eSpecs(dir, app = APP) {
  const top = path.join(app, dir);
  if (!fs.existsSync(top)) return;
  for (const rel of walkSpecs(top, ".")) {
    const file = path.join(top, rel);
    if (!SCRIPT.test(file) || !fs.lstatSync(file).isFile()) continue;
    const source = fs.readFileSync(file, "utf8");
    let guard = path.relative(path.dirname(file), path.join(app, E2E_GUARD.replace(/\.ts$/, "")));
    if (!guard.startsWith(".")) guard = `./${guard}`;
    const guarded = source.replace(PLAYWRIGHT_IMPORT, (_, lead, quote) => `${lead}${quote}${guard}${quote}`);
    if (guarded !== source) fs.writeFileSync(file, guarded);
  }
}

/**
 * The tests of Playwright's report that did not run under every profile: each spec
 * needs a passing result of each profile's project (of each project of the app's).
 * The keys are those of reports.mjs's playwrightResults, whose status they replace.
 * @param {import("./reports.mjs").PlaywrightReport | null | undefined} report
 * @returns {Map<string, string>}
 */
export function profileGaps(report) {
  /** @type {Map<string, string>} */
  const gaps = new Map();
  const root = report?.config?.rootDir ?? APP;
  const suffix = new RegExp(`(^|-)(${E2E_PROFILES.join("|")})$`);
  /**
   * @param {import("./reports.mjs").PlaywrightSuite} suite
   * @param {string[]} trail
   */
  const visit = (suite, trail) => {
    for (const spec of suite.specs ?? []) {
      /** @type {Map<string, Set<string>>} */
      const ran = new Map();
      for (const test of /** @type {{ projectName?: string, results?: { status: string }[] }[]} */ (spec.tests ?? [])) {
        const name = String(test.projectName ?? "");
        const base = name.replace(suffix, "");
        const profile = suffix.exec(name)?.[2] ?? "";
        if (!ran.has(base)) ran.set(base, new Set());
        if ((test.results ?? []).some((r) => r.status === "passed")) ran.get(base)?.add(profile);
      }
      const missing = [...ran.values()].flatMap((passed) => E2E_PROFILES.filter((p) => !passed.has(p)));
      if (!ran.size || !missing.length) continue;
      const rel = path.relative(APP, path.resolve(root, String(spec.file ?? suite.file ?? "")));
      gaps.set(testKey(rel, [...trail, spec.title]), `failed under the ${[...new Set(missing)].join(" and ")} profile`);
    }
    for (const child of suite.suites ?? []) visit(child, [...trail, child.title]);
  };
  for (const suite of report?.suites ?? []) visit(suite, []);
  return gaps;
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
 * The image's Chromium version ("156.0.8078.129"), read once at bake time.
 * @returns {string}
 */
export function browserVersion() {
  try {
    return fs.readFileSync(path.join(STATE, "chromium-version"), "utf8").trim();
  } catch {
    return chromiumVersion();
  }
}

/** @returns {string} the version of the image's Chromium ("": none) */
export const chromiumVersion = () => /\d+\.\d+\.\d+\.\d+/.exec(run("chromium", ["--version"], { cwd: "/" }).stdout)?.[0] ?? "";

// Chrome's GREASE brand: "Not", a character, "A", a character, "Brand", and a low
// version, each picked by the major version, as are the places of the three brands.
const GREASE_CHARACTERS = [" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_"];
const GREASE_VERSIONS = ["8", "99", "24"];
const BRAND_ORDERS = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];

/**
 * What a user's Google Chrome of the browser's version says of itself, as the e2e
 * profiles claim it: the agent string (Chrome's reduced one) and the client hints,
 * whose brand list is made as Chrome makes it for that major version (the GREASE
 * brand and the order of the three), so that none of it is unlike a real Chrome's.
 * @param {string} version  the browser's ("156.0.8078.129"; a major alone will do)
 */
export function browserIdentity(version) {
  const [major = 0, , build = 0, patch = 0] = version.split(".").map((part) => Number(part) || 0);
  const full = `${major}.0.${build}.${patch}`;
  const g = GREASE_CHARACTERS.length;
  const grease = `Not${GREASE_CHARACTERS[major % g] ?? " "}A${GREASE_CHARACTERS[(major + 1) % g] ?? " "}Brand`;
  const greaseVersion = GREASE_VERSIONS[major % GREASE_VERSIONS.length] ?? "8";
  const order = BRAND_ORDERS[major % BRAND_ORDERS.length] ?? [0, 1, 2];
  /** @param {[string, string][]} named  grease, Chromium, the brand */
  const list = (named) => {
    /** @type {{ brand: string, version: string }[]} */
    const brands = [];
    named.forEach(([brand, v], i) => {
      brands[order[i] ?? i] = { brand, version: v };
    });
    return brands;
  };
  return {
    userAgent: `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Safari/537.36`,
    userAgentMetadata: {
      brands: list([[grease, greaseVersion], ["Chromium", `${major}`], ["Google Chrome", `${major}`]]),
      fullVersionList: list([[grease, `${greaseVersion}.0.0.0`], ["Chromium", full], ["Google Chrome", full]]),
      fullVersion: full,
      // Chrome on Linux names no platform version.
      platform: "Linux", platformVersion: "", architecture: "x86", model: "", mobile: false, bitness: "64", wow64: false,
      formFactors: ["Desktop"],
    },
  };
}

/**
 * At bake time: the e2e specs and our config compiled into Playwright's cache
 * (a failure only makes each e2e run compile them itself).
 * @param {Config} config
 */
export function compileE2eSpecs(config) {
  const e2eDir = config.test.e2e_specs;
  if (!config.test.e2e_cmd || !fs.existsSync(path.join(TESTS, "specs", e2eDir))) return;
  const added = [path.join(APP, e2eDir), path.join(APP, E2E_CONFIG), path.join(APP, E2E_GUARD)];
  // The base has its own: the cache would be of files the grading replaces.
  if (added.some((p) => fs.existsSync(p))) return;
  const scratch = path.join(STATE, "e2e-compile");
  fs.mkdirSync(scratch, { recursive: true, mode: 0o700 });
  try {
    applySpecs([e2eDir]);
    writeE2eConfig();
    guardE2eSpecs(e2eDir);
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
