// What the grader works on: its folders (each can be moved by an environment
// variable, for tests outside an image), the task's tests/config.json, and the rules
// of what a submission may contribute (admission.json, beside this file; the miner
// reads them too). Read once, when the grader is loaded.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { HarnessError } from "./errors.mjs";

export const APP = process.env.REACTBENCH_APP ?? "/app";
export const TESTS = process.env.REACTBENCH_TESTS ?? "/tests";
export const LOGS = process.env.REACTBENCH_LOGS ?? "/logs/verifier";
export const STATE = process.env.REACTBENCH_STATE ?? "/opt/reactbench/state";
// The grader's own folder: this file's, every module of the grader's is in it.
export const VERIFIER_DIR = path.dirname(fileURLToPath(import.meta.url));

/**
 * What the grader and the harness agree on (contract.json, which the harness reads
 * too: pytest_reactbench/verifier/contract.py).
 * @typedef {object} Contract
 * @property {string} grader  progress.json's `grader`
 * @property {number} grade_version  grade.json's format; the harness refuses another
 * @property {number} harness_error_exit  the exit code of a harness error
 * @property {string[]} before_submission  the phases before the submission is in play
 * @property {string} react_doctor  the React Doctor the gate is pinned to
 * @property {string} home  where the grader is in the image
 */
/** @type {Contract} */
export const CONTRACT = JSON.parse(fs.readFileSync(path.join(VERIFIER_DIR, "contract.json"), "utf8"));
export const GRADE_VERSION = CONTRACT.grade_version;

// The test room's user: nobody exists in every Debian image and on the host the
// local backend borrows /etc from; nothing of the grader's belongs to it.
export const ROOM_UID = 65534;
export const ROOM_GID = 65534;
// The room's own folder (its home, its /tmp, the reports its commands write) and the
// folder of those reports.
export const ROOM = "/tmp/reactbench-room";
export const ROOM_REPORTS = path.join(ROOM, "reports");

/**
 * A file of the grader's, copied where the room's commands can read it (the room's
 * folder, root's): the grader's own folder is closed to the room.
 * @param {string} name
 * @returns {string} its path in the room
 */
export function roomTool(name) {
  const copy = path.join(ROOM, name);
  fs.copyFileSync(path.join(VERIFIER_DIR, name), copy);
  fs.chmodSync(copy, 0o644);
  return copy;
}

// Node's compile cache: the V8 code of every module a command loads (React Doctor,
// the test runners, the bundler, Playwright), made at bake time and only read by the
// gradings, which would otherwise compile the same megabytes of JavaScript each time.
// Node keeps one folder per user in it: the scan's (root) and the room's. Node 22
// and later; older ones ignore the variable.
export const COMPILE_CACHE = path.join(STATE, "compile-cache");
/** @returns {{ NODE_COMPILE_CACHE?: string }} */
export const compileCache = () => (fs.existsSync(COMPILE_CACHE) ? { NODE_COMPILE_CACHE: COMPILE_CACHE } : {});

// ------------------------------------------------------------------ admission

// What a submission may contribute: source files under the task's source roots. The
// rules are data the miner reads too (admission.json; patterns case-insensitive).
const ADMISSION = JSON.parse(fs.readFileSync(path.join(VERIFIER_DIR, "admission.json"), "utf8"));
/** @type {Set<string>} */
export const SOURCE_EXTENSIONS = new Set(ADMISSION.source_extensions);
// React Doctor slows down sharply on very large files: a code file past this size
// is refused rather than left to outlast the scan.
/** @type {number} */
export const MAX_SOURCE_BYTES = ADMISSION.max_source_bytes;
// Any other source file (a locale's JSON, a stylesheet, an image) is bounded by what
// the repository itself holds: twice the base's largest file of its extension, within
// a generous floor and a ceiling.
/** @type {{ floor: number, base_factor: number, ceiling: number }} */
export const DATA_BYTES = ADMISSION.data_bytes;
// Type declarations (`.d.ts`, `.d.mts`, `.d.cts`): admitted, and read by the scan as the
// module they would be if imported (React Doctor skips some of its rules on them, its
// security scans and no-barrel-import among them, and does not lint a `.d.cts`).
export const DECLARATION = new RegExp(ADMISSION.declaration);
// React Doctor never looks in these folders.
/** @type {Set<string>} */
export const SCAN_SKIPPED_DIRS = new Set(ADMISSION.scan_skipped_dirs);
/** @type {Set<string>} */
export const CODE_EXTENSIONS = new Set(ADMISSION.code_extensions);
// What React Doctor lints, as it tells (case-sensitive: `App.JS` and `.cjs` are not
// analysed), and the generated bundles it leaves out.
export const LINTABLE = new RegExp(ADMISSION.lintable);
export const GENERATED = new RegExp(ADMISSION.generated);
/** @type {{ min_bytes: number, sniff_bytes: number, longest_line: number, average_line: number }} */
export const MINIFIED = ADMISSION.minified;
// What the bundler tries, in Vite's default order: a new `App.js` beside `App.tsx`
// would be imported instead of it.
export const RESOLVED_EXTENSIONS = [".mjs", ".js", ".mts", ".ts", ".jsx", ".tsx", ".json"];
// Test infrastructure belongs to the verifier: spec files, the hidden specs' folder,
// test setup files (they run before every spec) and module mocks.
export const SPEC_PATH =
  /(^|\/)(__verifier__|__mocks__|__tests__)(\/|$)|\.(test|spec)\.[cm]?[jt]sx?$|(^|\/)(setupTests|setup-tests|test-setup|vitest\.setup|jest\.setup)\.[cm]?[jt]sx?$/;

/**
 * Whether React Doctor skips most of its rules on this file as test-like (a test,
 * story, fixture or tooling), and why: its own rule, on the path as its plugin sees
 * it (`/app/...`, the folders below the last source root; null: production code).
 * @param {string} file  relative to /app
 * @returns {string | null}
 */
export function testLike(file) {
  const filename = `/app/${file}`;
  const basename = path.posix.basename(file);
  if (ADMISSION.test_like_basenames.includes(basename.toLowerCase())) return `its name (${basename})`;
  const suffix = ADMISSION.test_like_suffixes.find((/** @type {string} */ s) => basename.includes(s));
  if (suffix) return `its name (${suffix})`;
  let cut = -1;
  for (const root of ADMISSION.source_root_segments) cut = Math.max(cut, filename.lastIndexOf(`/${root}/`));
  const scoped = cut < 0 ? filename : filename.slice(cut);
  const folder = ADMISSION.test_like_segments.find(
    (/** @type {string} */ seg) => (seg.startsWith(".") ? filename : scoped).includes(`/${seg}/`));
  return folder ? `a folder ${folder}/` : null;
}

/**
 * Whether React Doctor would drop this file as minified (its own test: a large file
 * whose first bytes have a long longest line and a long average line). The grader
 * refuses no file for it: the scan reads such a file with blank lines put before it.
 * @param {Buffer} content
 * @returns {boolean}
 */
export function minifiedLooking(content) {
  if (content.length < MINIFIED.min_bytes) return false;
  const prefix = content.subarray(0, MINIFIED.sniff_bytes).toString("utf8");
  const lines = prefix.split("\n");
  const longest = Math.max(0, ...lines.map((line) => line.length));
  return longest > MINIFIED.longest_line && prefix.length / lines.length > MINIFIED.average_line;
}

/**
 * The size a submission's file of this path may have: a code file's cap, else what the
 * base commit holds of its extension (twice its largest, within the floor and the ceiling).
 * @param {string} file
 * @param {Iterable<[string, { size?: number }]>} tree  the base commit's files, with their sizes
 * @returns {{ limit: number, why: string }}
 */
export function sizeLimit(file, tree) {
  const ext = path.extname(file).toLowerCase();
  if (CODE_EXTENSIONS.has(ext)) return { limit: MAX_SOURCE_BYTES, why: "a code file's cap" };
  let largest = 0;
  for (const [other, { size }] of tree) {
    if (size && path.extname(other).toLowerCase() === ext) largest = Math.max(largest, size);
  }
  const { floor, base_factor: factor, ceiling } = DATA_BYTES;
  const limit = Math.min(ceiling, Math.max(floor, factor * largest));
  const kind = `the base's largest ${ext || "extensionless"} file`;
  return {
    limit,
    why: limit === ceiling ? "the most any data file may have"
      : limit === floor ? `the least a data file may have; ${factor} times ${kind} is less`
        : `${factor} times ${kind}`,
  };
}

// React Doctor's report drops the findings of its "test-noise" rules (a leaking
// effect among them) in files it classifies as tests or stories by a rule of its own,
// beside its plugin's: test and story suffixes, and test folders anywhere in the path
// (below the last source root, once a fixtures/ folder is in it).
const CONTEXT = ADMISSION.test_context;
const CONTEXT_SUFFIX = new RegExp(CONTEXT.suffix);
const CONTEXT_DIRECTORY = new RegExp(CONTEXT.directory);
const FIXTURE_PROJECT = new RegExp(CONTEXT.fixture_project);

/**
 * Whether React Doctor's report takes this file for a test or a story (its findings of
 * test-noise rules dropped), and why (null: production code).
 * @param {string} file  relative to the scan's root
 * @returns {string | null}
 */
export function testContext(file) {
  if (CONTEXT_SUFFIX.test(file)) return "its name";
  let scoped = file;
  const fixture = FIXTURE_PROJECT.exec(file);
  if (fixture) {
    let cut = -1;
    for (const root of ADMISSION.source_root_segments) cut = Math.max(cut, file.lastIndexOf(`/${root}/`));
    scoped = cut >= 0 ? file.slice(cut) : file.slice(fixture.index + fixture[0].length - 1);
  }
  const folder = CONTEXT_DIRECTORY.exec(scoped);
  return folder ? `a folder ${folder[0].replace(/^\//, "")}` : null;
}

// Folder names that read as tests, stories, fixtures or tooling to any of React
// Doctor's rules: a placement renames them.
const NOT_PRODUCTION = new Set([...ADMISSION.test_like_segments, ...CONTEXT.other_segments,
  "__tests__", "__test__", "tests", "test", "__mocks__", "cypress", "e2e", "playwright"]
  .map((/** @type {string} */ s) => s.toLowerCase()));

/**
 * Where the scan reads a changed file it would otherwise skip or read with most rules
 * off (test-like, a type declaration, minified-looking): beside it, its folders that
 * read as tests or tooling renamed (`tools/` as `tools-src/`), below a folder `src/`,
 * by a name of one dot (`Ticker.stories.tsx` as `Ticker-stories.tsx`), a declaration as
 * the module it would be if imported (`vite-env.d.ts` as `vite-env-d.ts`). `taken` says
 * which paths the copy already holds: another `src/` goes in until one is free. The
 * folders of `kept` (the scan's root) stay as they are.
 * @param {string} file  relative to /app
 * @param {(candidate: string) => boolean} taken
 * @param {string} [kept]
 * @returns {string}
 */
export function productionPlacement(file, taken, kept = "") {
  const parts = file.split("/");
  const fixed = kept ? kept.split("/").length : 0;
  const dirs = parts.slice(0, -1).map((part, i) =>
    (i >= fixed && NOT_PRODUCTION.has(part.toLowerCase()) ? `${part}-src` : part));
  const base = /** @type {string} */ (parts.at(-1));
  const declaration = DECLARATION.exec(base);
  let name;
  if (declaration) {
    name = `${base.slice(0, declaration.index).replaceAll(".", "-")}-d${declaration[0] === ".d.mts" ? ".mts" : ".ts"}`;
  } else {
    const ext = path.posix.extname(base);
    name = base.slice(0, base.length - ext.length).replaceAll(".", "-") + ext;
  }
  if (ADMISSION.test_like_basenames.includes(name.toLowerCase())) name = `scanned-${name}`;
  for (let folder = "src";; folder += "/src") {
    const candidate = path.posix.join(...dirs, folder, name);
    if (!taken(candidate)) return candidate;
  }
}

// Files that configure the bundler, TypeScript or the package manager for the
// folder they sit in, and type declarations (they can loosen the type check): never
// a source, wherever they are. Dotfiles (`.babelrc`, `.npmrc`) are refused as such.
export const CONFIG_NAME = new RegExp(ADMISSION.config_name, "i");

/**
 * The run's --reactbench-timeout-multiplier, as the harness passes it (a slow or
 * loaded machine scales every limit of the task, the scan's included).
 * @returns {number}
 */
export function timeoutMultiplier() {
  const value = Number(process.env.REACTBENCH_TIMEOUT_MULTIPLIER ?? "1");
  return Number.isFinite(value) && value > 0 ? value : 1;
}

// -------------------------------------------------------------- config.json

/**
 * A new React Doctor finding the task tolerates (as the public grader names it).
 * @typedef {object} IgnoredFootgun
 * @property {string} rule
 * @property {string} filePath  the file, or a suffix of its path
 * @property {string} title
 */

/**
 * The test gate: the hidden specs' commands and what they must pass.
 * @typedef {object} TestConfig
 * @property {string} cmd  the unit tests' command
 * @property {string} [e2e_cmd]  the end-to-end tests' command (Playwright), if any
 * @property {string} e2e_specs  the folder of /tests/specs the e2e command runs
 * @property {string} [cwd]  where the commands run (default: /app)
 * @property {Record<string, string[]>} expected  spec file -> the tests that must pass
 * @property {boolean} [allow_skipped]  a test skipped on purpose is not a failure
 * @property {number} [timeout_sec]  for all the test commands together
 */

/**
 * The React Doctor gate.
 * @typedef {object} DoctorConfig
 * @property {string} scan_root
 * @property {string} mode  "gate", or "health": the targets must be in the base
 * @property {string[]} targets  `rule` or `rule@file`: findings the change must fix
 * @property {IgnoredFootgun[]} ignored_new_footguns
 * @property {number} timeout_sec
 */

/**
 * tests/config.json, checked and with its defaults.
 * @typedef {object} Config
 * @property {TestConfig} test
 * @property {DoctorConfig} rd
 * @property {string[]} sources  the source roots: where a submission may write
 * @property {string[]} test_like_allowed  test-like paths under them the task admits
 * @property {number} [verifier_timeout_sec]
 */

/** @returns {Config} */
export function readConfig() {
  const file = path.join(TESTS, "config.json");
  let config;
  try {
    config = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    throw new HarnessError(`${file}: ${/** @type {Error} */ (error).message}`);
  }
  if (!config.test?.cmd) throw new HarnessError(`${file}: test.cmd is missing`);
  const expected = config.test.expected ?? {};
  for (const [file_, names] of Object.entries(expected)) {
    if (!Array.isArray(names) || !names.length || names.some((n) => typeof n !== "string")) {
      throw new HarnessError(`${file}: test.expected["${file_}"] must be a non-empty list of test names`);
    }
  }
  if (config.test.allow_skipped !== undefined && typeof config.test.allow_skipped !== "boolean") {
    throw new HarnessError(`${file}: test.allow_skipped must be true or false`);
  }
  for (const [i, ignored] of (config.rd?.ignored_new_footguns ?? []).entries()) {
    if (!["rule", "filePath", "title"].every((k) => typeof ignored?.[k] === "string" && ignored[k])) {
      throw new HarnessError(`${file}: rd.ignored_new_footguns[${i}] must have rule, filePath and title`);
    }
  }
  const rd = { scan_root: APP, mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120, ...config.rd };
  const scanRoot = path.resolve(APP, config.rd?.scan_root ?? APP);
  if (path.relative(APP, scanRoot).startsWith("..")) {
    // The scan reads a copy of /app: a root elsewhere would not be the graded tree.
    throw new HarnessError(`${file}: rd.scan_root must be ${APP} or a folder under it, not ${config.rd.scan_root}`);
  }
  return {
    ...config,
    test: { e2e_specs: "e2e", ...config.test, expected },
    rd: { ...rd, timeout_sec: rd.timeout_sec * timeoutMultiplier() },
    sources: config.sources ?? ["src"],
    test_like_allowed: config.test_like_allowed ?? [],
  };
}
