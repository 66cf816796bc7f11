#!/usr/bin/env node
// The clean-room verifier shared by the tasks this project ships.
//
//   node verifier.mjs bake    at image build (tests/Dockerfile): records the base
//                             commit, keeps pristine dependencies apart, bakes the
//                             React Doctor baseline and compiles the e2e specs.
//   node verifier.mjs grade   from tests/test.sh: rebuilds the tree from the base
//                             commit plus the admissible part of the submission,
//                             runs the React Doctor gate and the hidden specs (side
//                             by side where the sandbox has two CPUs, else the scan
//                             first), and writes /logs/verifier/grade.json and
//                             reward.json.
//
// Two rooms. This process (the grader) runs as root and keeps the hidden specs, the
// reward and the React Doctor scan. The test commands import the submission's code,
// so they run in the test room: an unprivileged user, in their own process
// namespace where the sandbox allows one, with /tests, the grader and
// /logs/verifier out of reach. Their reports land in the room's own folder; the
// grader reads them without following links and checks that every hidden test it
// expects ran and passed.
//
// Who failed. A broken harness (missing state, a tool of the image that is not
// there) writes no reward and exits 3: an error of the harness. Once the
// submission is in play (clean room, scan, test room), anything that goes wrong
// is the submission's: reward 0, with the reason in grade.json. progress.json says
// how far grading got, for the harness to tell the two apart if this process dies.
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const APP = process.env.REACTBENCH_APP ?? "/app";
const TESTS = process.env.REACTBENCH_TESTS ?? "/tests";
const LOGS = process.env.REACTBENCH_LOGS ?? "/logs/verifier";
const STATE = process.env.REACTBENCH_STATE ?? "/opt/reactbench/state";
const VERIFIER_DIR = path.dirname(new URL(import.meta.url).pathname);

// grade.json's format; the harness refuses a grade.json of another version.
export const GRADE_VERSION = 2;
// The test room's user: nobody exists in every Debian image and on the host the
// local backend borrows /etc from; nothing of the grader's belongs to it.
// The app's port for the e2e phase, chosen per run (a spec cannot count on it), below
// the kernel's range of ports for outgoing connections: in that range the browser's
// own sockets took it once ("Port ... is already in use", the oracle scored 0).
function e2ePort() {
  let low = 32768;
  try {
    low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low;
  } catch {}
  const floor = Math.min(10000, low - 1000);
  return String(floor + crypto.randomInt(Math.max(1, low - floor)));
}

const ROOM_UID = 65534;
const ROOM_GID = 65534;
const RD_VERSION = "0.7.8";
// The same flags for the baseline and the result. Inline disable comments are not
// honoured: an agent must not be able to silence a finding with a comment.
const RD_FLAGS = [
  "--no-score",
  "--no-telemetry",
  "--no-dead-code",
  "--no-supply-chain",
  "--no-respect-inline-disables",
  "--json",
  "--json-compact",
];
// Rules about style, preference or micro-optimisation rather than behaviour: a
// change that trips them is not less healthy in a way users notice, so they do not
// gate (docs/writing-tasks.md lists them and says why). Everything else (bugs,
// accessibility, security, state and effect footguns) gates.
export const STYLE_ONLY_RULES = new Set([
  "button-has-type",
  "no-console",
  "no-usememo-simple-expression",
  "only-export-components",
  "prefer-use-effect-event",
  "prefer-useReducer",
  "react-compiler-no-manual-memoization",
  "rendering-hoist-jsx",
]);
// Families of the same kind: JavaScript micro-optimisations, and preferences of
// other platforms (React Native, Preact) that a web React app does not target.
const STYLE_ONLY_PREFIXES = ["js-", "rn-", "preact-"];
export const isStyleOnly = (rule) =>
  STYLE_ONLY_RULES.has(rule) || STYLE_ONLY_PREFIXES.some((prefix) => rule.startsWith(prefix));
// What a submission may contribute: source files under the task's source roots. The
// rules are data the miner reads too (admission.json; patterns case-insensitive).
const ADMISSION = JSON.parse(fs.readFileSync(path.join(VERIFIER_DIR, "admission.json"), "utf8"));
const SOURCE_EXTENSIONS = new Set(ADMISSION.source_extensions);
// React Doctor slows down sharply on very large files and skips some: a source
// file past this size is refused rather than left unscanned.
const MAX_SOURCE_BYTES = ADMISSION.max_source_bytes;
// React Doctor drops minified-looking files and never looks in these folders.
const MAX_LINE_CHARS = ADMISSION.max_line_chars;
const SCAN_SKIPPED_DIRS = new Set(ADMISSION.scan_skipped_dirs);
const CODE_EXTENSIONS = new Set(ADMISSION.code_extensions);
// What the bundler tries, in Vite's default order: a new `App.js` beside `App.tsx`
// would be imported instead of it.
const RESOLVED_EXTENSIONS = [".mjs", ".js", ".mts", ".ts", ".jsx", ".tsx", ".json"];
// Test infrastructure belongs to the verifier: spec files, the hidden specs' folder,
// test setup files (they run before every spec) and module mocks.
const SPEC_PATH =
  /(^|\/)(__verifier__|__mocks__|__tests__)(\/|$)|\.(test|spec)\.[cm]?[jt]sx?$|(^|\/)(setupTests|setup-tests|test-setup|vitest\.setup|jest\.setup)\.[cm]?[jt]sx?$/;
// Names and folders React Doctor treats as tests, stories, fixtures or tooling: it
// scans them with most rules off yet counts them as analysed. Under a source root
// they are refused unless the task declares them (config.json `test_like_allowed`).
const TEST_LIKE_DIRS = new Set(ADMISSION.test_like_dirs);
const TEST_LIKE_NAME = new RegExp(ADMISSION.test_like_name, "i");
// Files that configure the bundler, TypeScript or the package manager for the
// folder they sit in, and type declarations (they can loosen the type check): never
// a source, wherever they are. Dotfiles (`.babelrc`, `.npmrc`) are refused as such.
const CONFIG_NAME = new RegExp(ADMISSION.config_name, "i");

// An error of the harness, proven independent of the submission: no reward, exit 3.
class HarnessError extends Error {}
// Something the submission caused: reward 0 with the reason.
class SubmissionFailure extends Error {}

const log = (...args) => console.log("[verifier]", ...args);

function run(command, args, { cwd = APP, env = {}, timeoutMs, input } = {}) {
  const result = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    input,
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    maxBuffer: 256 * 1024 * 1024,
  });
  return {
    // Killed by a signal: the shell's convention, 128 + its number.
    code: result.status ?? 128 + (os.constants.signals[result.signal] ?? 0),
    stdout: result.stdout?.toString() ?? "",
    stderr: result.stderr?.toString() ?? "",
    timedOut: result.error?.code === "ETIMEDOUT",
  };
}

function git(...args) {
  const result = run("git", args);
  if (result.code !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
}

function readConfig() {
  const file = path.join(TESTS, "config.json");
  let config;
  try {
    config = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    throw new HarnessError(`${file}: ${error.message}`);
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
  const scanRoot = path.resolve(APP, config.rd?.scan_root ?? APP);
  if (path.relative(APP, scanRoot).startsWith("..")) {
    // The scan reads a copy of /app: a root elsewhere would not be the graded tree.
    throw new HarnessError(`${file}: rd.scan_root must be ${APP} or a folder under it, not ${config.rd.scan_root}`);
  }
  return {
    ...config,
    test: { e2e_specs: "e2e", ...config.test, expected },
    rd: { scan_root: APP, mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120, ...config.rd },
    sources: config.sources ?? ["src"],
    test_like_allowed: config.test_like_allowed ?? [],
  };
}

// ---------------------------------------------------------------- React Doctor

// The submission's scan reads a copy of the graded tree, so that it can run beside
// the test commands: the hidden specs they add to /app, and whatever the test room
// writes there, are never in it. Its temporary files stay out of the shared /tmp.
const SCAN_DIR = path.join(STATE, "scan");
const SCAN_TMP = path.join(SCAN_DIR, "tmp");

// Node's compile cache: the V8 code of every module a command loads (React Doctor,
// the test runners, the bundler, Playwright), made at bake time and only read by the
// gradings, which would otherwise compile the same megabytes of JavaScript each time.
// Node keeps one folder per user in it: the scan's (root) and the room's. Node 22
// and later; older ones ignore the variable.
const COMPILE_CACHE = path.join(STATE, "compile-cache");
const compileCache = () => (fs.existsSync(COMPILE_CACHE) ? { NODE_COMPILE_CACHE: COMPILE_CACHE } : {});

// A running scan: `finished` resolves with its exit, output and seconds (never
// rejects), `stop` kills it with everything it started.
function startScan(config, { afterSubmission = false, root = APP } = {}) {
  // timeout(1) kills the whole process group: React Doctor and its linters. The
  // baseline at bake time has the bake's own limit.
  const limit = String(afterSubmission ? config.rd.timeout_sec : 1800);
  const budget = String(Math.round(Number(limit) * 1000));
  const scanRoot = path.join(root, path.relative(APP, config.rd.scan_root));
  fs.mkdirSync(SCAN_DIR, { recursive: true, mode: 0o700 });
  fs.rmSync(SCAN_TMP, { recursive: true, force: true });
  fs.mkdirSync(SCAN_TMP, { recursive: true, mode: 0o700 });
  // Files, not pipes: the grader may be busy with the test room while it prints.
  const outFile = path.join(SCAN_DIR, "report.json");
  const errFile = path.join(SCAN_DIR, "stderr.txt");
  const out = fs.openSync(outFile, "w", 0o600);
  const err = fs.openSync(errFile, "w", 0o600);
  const started = performance.now();
  let child;
  try {
    // --verbose: timeout(1) says when it is the one that killed the scan.
    child = spawn("timeout", ["--verbose", "-s", "KILL", limit, "react-doctor", ...RD_FLAGS, scanRoot], {
      cwd: scanRoot,
      // The lint cache is keyed by file content: the one baked with the baseline
      // makes the after-scan of unchanged files free.
      env: {
        ...process.env,
        ...compileCache(),
        DO_NOT_TRACK: "1",
        REACT_DOCTOR_CACHE_DIR: path.join(STATE, "rd-cache"),
        // React Doctor skips a phase that outlasts its own budget (lint: 300 s), and a
        // partial scan grades nothing: on a large repository and a loaded machine the
        // baseline failed so. The limit above is the only one.
        REACT_DOCTOR_LINT_PHASE_TIMEOUT_MS: budget,
        REACT_DOCTOR_DEAD_CODE_PHASE_TIMEOUT_MS: budget,
        REACT_DOCTOR_SCAN_DEADLINE_MS: budget,
        TMPDIR: SCAN_TMP,
      },
      stdio: ["ignore", out, err],
    });
  } finally {
    fs.closeSync(out);
    fs.closeSync(err);
  }
  const finished = new Promise((resolve) => {
    const end = (result) => resolve({
      ...result,
      seconds: (performance.now() - started) / 1000,
      limit,
      stdout: result.error ? "" : fs.readFileSync(outFile, "utf8"),
      stderr: result.error ? "" : fs.readFileSync(errFile, "utf8"),
    });
    child.on("error", (error) => end({ error }));
    child.on("exit", (code, signal) => end({ code: code ?? 128 + (os.constants.signals[signal] ?? 0) }));
  });
  const stop = () => {
    try {
      // timeout(1) leads its own process group, once it has started.
      process.kill(-child.pid, "SIGKILL");
    } catch {
      child.kill("SIGKILL");
    }
  };
  return { finished, stop };
}

// The report of a finished scan, checked. After the submission, whatever breaks the
// scan came from its files: the agent's.
function checkScan(config, { code, error, stdout, stderr, limit }, { afterSubmission = false } = {}) {
  const Failure = afterSubmission ? SubmissionFailure : HarnessError;
  if (error) throw new HarnessError(`cannot run react-doctor: ${error.message}`);
  if (code === 137 || code === 124) {
    const outlasted = /timeout: sending signal/.test(stderr);
    throw new Failure(outlasted
      ? `the React Doctor scan did not finish within rd.timeout_sec = ${limit} s`
      : `the React Doctor scan was killed (exit ${code})`);
  }
  let report;
  try {
    report = JSON.parse(stdout);
  } catch {
    throw new Failure(
      `react-doctor printed no JSON report (exit ${code}): ${stderr.slice(-800)}`,
    );
  }
  if (report.version !== RD_VERSION) {
    throw new HarnessError(`react-doctor is ${report.version}, the gate is pinned to ${RD_VERSION}`);
  }
  const projects = report.projects ?? [];
  const files = projects.reduce((sum, p) => sum + (p.project?.sourceFileCount ?? 0), 0);
  if (!files) {
    // The baseline was sound (the bake checks it): an after-scan with nothing left
    // to analyse means the submission deleted the app's source. That is the agent's.
    if (afterSubmission) throw new Failure("the submission leaves no source file to analyse");
    throw new HarnessError(`react-doctor analysed 0 files under ${config.rd.scan_root}`);
  }
  if (!report.reactDetected) throw new Failure(`react-doctor found no React under ${config.rd.scan_root}`);
  for (const project of projects) {
    const reasons = Object.entries(project.skippedCheckReasons ?? {}).map(([k, v]) => `${k}: ${v}`);
    const skipped = [...(project.skippedChecks ?? []), ...reasons];
    if (skipped.length || project.complete === false) {
      throw new Failure(`react-doctor scan was partial: ${skipped.join("; ") || "incomplete"}`);
    }
  }
  if (report.ok === false || report.error) {
    throw new Failure(`react-doctor failed: ${JSON.stringify(report.error)}`);
  }
  return report;
}

// The graded tree as the scan reads it: /app without the test room in it.
function copyForScan() {
  const root = path.join(SCAN_DIR, "app");
  fs.mkdirSync(SCAN_DIR, { recursive: true, mode: 0o700 });
  fs.rmSync(root, { recursive: true, force: true });
  // -a: links (node_modules, the pristine dependencies) stay links, never followed.
  const copied = run("cp", ["-a", `${APP}/.`, root], { cwd: "/" });
  if (copied.code !== 0) throw new Error(`cannot copy the graded tree for the scan: ${copied.stderr}`);
  return root;
}

const findingKey = (d) => `${d.rule}\u0000${d.filePath}`;

function byKey(report) {
  const groups = new Map();
  for (const d of report.diagnostics ?? []) {
    if (isStyleOnly(d.rule)) continue;
    const key = findingKey(d);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(d);
  }
  return groups;
}

function describeFinding(d, before, after) {
  return {
    rule: d.rule,
    file: d.filePath,
    line: d.line ?? null,
    title: d.title ?? "",
    message: d.message ?? "",
    category: d.category ?? "",
    count: `${before} -> ${after}`,
  };
}

const matchesTarget = (target, d) => {
  const [rule, file] = target.split("@");
  return d.rule === rule && (!file || d.filePath === file);
};

// New findings the task tolerates (`rd.ignored_new_footguns`, as the public grader
// names them: rule, title and file, the file also as a path suffix). Each entry
// tolerates one: a rule's findings in a file may grow past the base by as many entries
// as match them (a mined task lists the findings the team's own change added), no more.
const matchesIgnored = (entry, d) =>
  d.rule === entry.rule && (d.title ?? "") === entry.title &&
  (d.filePath === entry.filePath || d.filePath.endsWith(`/${entry.filePath}`));

export function compareReports(before, after, targets = [], ignored = []) {
  const beforeGroups = byKey(before);
  const fresh = [];
  const tolerated = [];
  for (const [key, found] of byKey(after)) {
    const had = beforeGroups.get(key)?.length ?? 0;
    if (found.length <= had) continue;
    const allowance = ignored.filter((entry) => found.some((d) => matchesIgnored(entry, d))).length;
    const into = found.length <= had + allowance ? tolerated : fresh;
    into.push(...found.map((d) => describeFinding(d, had, found.length)));
  }
  const afterAll = after.diagnostics ?? [];
  const remaining = targets.filter((t) => afterAll.some((d) => matchesTarget(t, d)));
  const fixed = targets.filter((t) => !remaining.includes(t));
  return {
    ok: fresh.length === 0 && remaining.length === 0,
    new: fresh,
    ignored: tolerated,
    fixed_targets: fixed,
    remaining_targets: remaining,
  };
}

// ---------------------------------------------------------------------- bake

function linkDependencies() {
  const pristine = path.join(STATE, "deps", "node_modules");
  const link = path.join(APP, "node_modules");
  fs.rmSync(link, { recursive: true, force: true });
  fs.symlinkSync(pristine, link);
}

// Pristine dependencies live outside /app: the submission replaces /app, and a link
// puts them back in no time. Run in the step that installed them, the move is a
// rename; from a layer below, a copy of every file. So an image may keep them there
// at install time (`keep-deps`), and bake later.
function keepDependencies() {
  fs.mkdirSync(path.join(STATE, "deps"), { recursive: true });
  const modules = path.join(APP, "node_modules");
  if (fs.existsSync(modules) && !fs.lstatSync(modules).isSymbolicLink()) {
    const moved = run("mv", [modules, path.join(STATE, "deps", "node_modules")], { cwd: "/" });
    if (moved.code !== 0) throw new HarnessError(`cannot keep pristine dependencies: ${moved.stderr}`);
  }
}

async function bake() {
  const config = readConfig();
  keepDependencies();
  if (!fs.existsSync(path.join(STATE, "deps", "node_modules"))) {
    throw new HarnessError(`${APP}/node_modules is missing: the base image installs the dependencies`);
  }
  fs.rmSync(path.join(APP, ".git"), { recursive: true, force: true });
  git("init", "-q");
  git("add", "-A");
  git("-c", "user.email=base@reactbench", "-c", "user.name=base", "-c", "gc.auto=0", "commit", "-qm", "base");
  fs.writeFileSync(path.join(STATE, "base-sha"), git("rev-parse", "HEAD").trim() + "\n");
  fs.rmSync(path.join(STATE, "base-git"), { recursive: true, force: true });
  fs.cpSync(path.join(APP, ".git"), path.join(STATE, "base-git"), { recursive: true });
  linkDependencies();
  if (!fs.existsSync(path.join(TESTS, "specs"))) throw new HarnessError(`${TESTS}/specs is missing: no hidden specs`);
  for (const file of Object.keys(config.test.expected)) {
    if (!fs.existsSync(path.join(TESTS, "specs", file)) && !fs.existsSync(path.join(APP, file))) {
      throw new HarnessError(`${TESTS}/config.json: test.expected names ${file}, which is neither in ${TESTS}/specs nor in the base app`);
    }
  }
  // The test room needs these; a missing one is the image's fault, found here.
  for (const tool of ["setpriv", "timeout", "find"]) {
    if (run("which", [tool]).code !== 0) throw new HarnessError(`${tool} is missing from the verifier image`);
  }
  const caching = Number(process.versions.node.split(".")[0]) >= 22;
  fs.rmSync(COMPILE_CACHE, { recursive: true, force: true });
  if (caching) fs.mkdirSync(COMPILE_CACHE, { mode: 0o755 });
  // Read where the submission's scan reads, so that its lint cache serves that one.
  const baseline = checkScan(config, await startScan(config, { root: copyForScan() }).finished);
  fs.rmSync(SCAN_DIR, { recursive: true, force: true });
  fs.writeFileSync(path.join(STATE, "rd-baseline.json"), JSON.stringify(baseline));
  const chromium = chromiumVersion();
  if (chromium) fs.writeFileSync(path.join(STATE, "chromium-version"), `${chromium}\n`);
  compileE2eSpecs(config);
  if (caching) await warmCompileCache(config);
  const targets = config.rd.targets;
  const absent = targets.filter((t) => !(baseline.diagnostics ?? []).some((d) => matchesTarget(t, d)));
  if (config.rd.mode === "health" && absent.length) {
    throw new HarnessError(`health-mode targets not found in the base commit: ${absent.join(", ")}`);
  }
  log(`baseline: ${(baseline.diagnostics ?? []).length} React Doctor findings`);
}

// --------------------------------------------------------------------- grade

const isUtf8 = (name) => Buffer.from(name.toString("utf8"), "utf8").equals(name);

// Every file under `dir`, as paths relative to it. Names that are not UTF-8 cannot
// be graded (nor named in a report): they are listed apart, as raw bytes.
function walk(dir, prefix = Buffer.alloc(0), out = { files: [], unnamed: [] }) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, encoding: "buffer" })) {
    const rel = prefix.length ? Buffer.concat([prefix, Buffer.from("/"), entry.name]) : entry.name;
    const name = entry.name.toString("utf8");
    if (!prefix.length && (name === ".git" || name === "node_modules")) continue;
    if (!isUtf8(entry.name)) out.unnamed.push(rel);
    else if (entry.isDirectory()) walk(Buffer.concat([Buffer.from(dir), Buffer.from("/"), entry.name]), rel, out);
    else out.files.push(rel.toString("utf8"));
  }
  return out;
}

function blobId(file) {
  const stat = fs.lstatSync(file);
  const content = stat.isSymbolicLink() ? Buffer.from(fs.readlinkSync(file)) : fs.readFileSync(file);
  return crypto.createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
}

function baseTree(base) {
  const tree = new Map();
  for (const line of git("ls-tree", "-r", "-z", base).split("\0")) {
    if (!line) continue;
    const [meta, file] = line.split("\t");
    const [mode, , id] = meta.split(" ");
    tree.set(file, { mode, id });
  }
  return tree;
}

const declared = (file, config) =>
  config.test_like_allowed.some((root) => file === root || file.startsWith(`${root}/`));

// Why a path may not carry the submission's content (null: it may).
function pathRefusal(file, config) {
  const underRoot = config.sources.some((root) => file === root || file.startsWith(`${root}/`));
  if (!underRoot) return `outside the source roots (${config.sources.join(", ")})`;
  if (SPEC_PATH.test(file)) return "test files, test setup and mocks belong to the verifier";
  const parts = file.split("/");
  if (parts.some((part) => part.startsWith("."))) return "dotfiles are not source";
  if (/[\u0000-\u001f\u007f\\]/.test(file)) return "control characters or backslashes in the name";
  const name = parts.at(-1);
  if (CONFIG_NAME.test(name)) return "a bundler, TypeScript or package-manager config is never a source";
  if (!declared(file, config)) {
    const folder = parts.slice(0, -1).find((part) => TEST_LIKE_DIRS.has(part.toLowerCase()));
    if (folder) return `a folder React Doctor treats as tests or tooling (${folder}/): scanned with most rules off`;
    if (TEST_LIKE_NAME.test(name)) return "a name React Doctor treats as a test, story or config: scanned with most rules off";
  }
  return null;
}

function shadowed(file, tree, present, config) {
  const ext = path.extname(file);
  if (!RESOLVED_EXTENSIONS.includes(ext)) return null;
  const stem = file.slice(0, -ext.length);
  for (const other of RESOLVED_EXTENSIONS) {
    const sibling = stem + other;
    if (other === ext) continue;
    // A base module the submission deleted stays deleted when it is a source file,
    // and shadows nothing then (a rename, `index.js` to `index.ts`); anything else of
    // the base comes back.
    if (present.has(sibling) || (tree.has(sibling) && pathRefusal(sibling, config) !== null)) return sibling;
  }
  return null;
}

function refusal(file, config, tree, present) {
  const byPath = pathRefusal(file, config);
  if (byPath) return byPath;
  const full = path.join(APP, file);
  const stat = fs.lstatSync(full);
  if (stat.isSymbolicLink()) return "symlinks are not source";
  if (!stat.isFile()) return "not a regular file";
  const ext = path.extname(file).toLowerCase();
  if (!SOURCE_EXTENSIONS.has(ext)) return "not a source file type";
  if (stat.size > MAX_SOURCE_BYTES) return `larger than ${MAX_SOURCE_BYTES} bytes`;
  if (file.split("/").slice(0, -1).some((part) => SCAN_SKIPPED_DIRS.has(part))) {
    return "in a folder React Doctor does not scan";
  }
  if (!tree.has(file)) {
    const twin = shadowed(file, tree, present, config);
    if (twin) return `a new module beside ${twin} that the bundler would resolve instead`;
  }
  if (CODE_EXTENSIONS.has(ext)) {
    const text = fs.readFileSync(full);
    if (!isUtf8(text)) return "code that is not UTF-8 text";
    const longest = Math.max(0, ...text.toString("utf8").split("\n").map((line) => line.length));
    if (longest > MAX_LINE_CHARS) return "minified-looking (a line over 1000 characters): the scan skips it";
  }
  return null;
}

// One path the clean room cannot handle is refused on its own, never the lot.
function judge(file, config, tree, present) {
  try {
    return refusal(file, config, tree, present);
  } catch (error) {
    return `cannot be read (${error.code ?? error.message})`;
  }
}

// Remove a path and any folder it leaves empty up to /app.
function removeRefused(rel) {
  fs.rmSync(Buffer.concat([Buffer.from(`${APP}/`), Buffer.from(rel)]), { force: true, recursive: true });
}

function pruneEmptyDirs(dir = APP, top = true) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (top && (entry.name === ".git" || entry.name === "node_modules")) continue;
    if (entry.isDirectory()) pruneEmptyDirs(path.join(dir, entry.name), false);
  }
  if (!top && !fs.readdirSync(dir).length) fs.rmdirSync(dir);
}

// Rebuild /app as: the base commit, plus the submission's admissible changes.
function cleanRoom(config) {
  const base = fs.readFileSync(path.join(STATE, "base-sha"), "utf8").trim();
  fs.rmSync(path.join(APP, ".git"), { recursive: true, force: true });
  fs.cpSync(path.join(STATE, "base-git"), path.join(APP, ".git"), { recursive: true });
  fs.rmSync(path.join(APP, "node_modules"), { recursive: true, force: true });
  const tree = baseTree(base);
  const { files, unnamed } = walk(APP);
  const refused = [];
  for (const raw of unnamed) {
    refused.push({ path: raw.toString("utf8"), reason: "the name is not UTF-8" });
    removeRefused(raw);
  }
  const present = new Set(files);
  const restore = [];
  const admitted = [];
  for (const file of present) {
    const known = tree.get(file);
    let same = false;
    try {
      same = Boolean(known) && known.id === blobId(path.join(APP, file));
    } catch {}
    if (same) continue;
    const reason = judge(file, config, tree, present);
    if (!reason) {
      admitted.push(file);
      continue;
    }
    refused.push({ path: file, reason });
    removeRefused(Buffer.from(file));
    if (known) restore.push(file);
  }
  for (const file of tree.keys()) {
    // A deleted source file is a legitimate change; anything else comes back.
    if (!present.has(file) && pathRefusal(file, config) !== null) restore.push(file);
  }
  // A refused file's folder must not stay behind where a base file or a spec goes.
  pruneEmptyDirs();
  restoreFromBase(base, restore);
  // With the base's ignore rules back, an admitted file they ignore would be skipped
  // by the scan (React Doctor lists files the way git does): refuse it.
  const ignored = run("git", ["check-ignore", "--no-index", "-z", "--stdin"], { input: admitted.join("\0") });
  const hidden = ignored.stdout.split("\0").filter(Boolean);
  for (const file of hidden) {
    refused.push({ path: file, reason: "ignored by the base's .gitignore: the scan would skip it" });
    fs.rmSync(path.join(APP, file), { force: true });
  }
  restoreFromBase(base, hidden.filter((f) => tree.has(f)));
  linkDependencies();
  git("add", "-A", "-N", ".");
  fs.writeFileSync(path.join(LOGS, "model.patch"), git("diff", "--binary", base));
  // -z: names exactly as they are, never quoted, so that they compare byte for byte
  // with what the scan analysed.
  const changed = git("diff", "--name-only", "--no-renames", "-z", base).split("\0").filter(Boolean);
  git("reset", "-q");
  return { refused, changed };
}

function restoreFromBase(base, files) {
  if (!files.length) return;
  const result = run("git", ["checkout", base, "--pathspec-from-file=-", "--pathspec-file-nul"], {
    input: files.join("\0"),
  });
  if (result.code !== 0) throw new Error(`cannot restore base files: ${result.stderr}`);
}

// Changed code files the after-scan did not analyse: a gate that did not look at
// the change cannot pass it.
// `root` is the tree the scan read (/app, or its copy).
function unscanned(report, changed, root = APP) {
  const analysed = new Set();
  for (const project of report.projects ?? []) {
    for (const file of project.analyzedFiles ?? []) {
      analysed.add(path.relative(root, path.resolve(project.directory ?? root, file)));
    }
  }
  return changed.filter(
    (file) =>
      CODE_EXTENSIONS.has(path.extname(file)) && !SPEC_PATH.test(file) &&
      fs.existsSync(path.join(root, file)) && !analysed.has(file),
  );
}

// ------------------------------------------------------------------ test room

const ROOM = "/tmp/reactbench-room";
const ROOM_REPORTS = path.join(ROOM, "reports");

// Root owns the tree the room reads; /app itself stays open for new entries (the
// sticky bit keeps the room from replacing what it does not own), because the
// bundler writes its config bundle and dist/ there.
function lockDown() {
  const chown = run("chown", ["-R", "-h", "0:0", APP, TESTS, LOGS]);
  const chmod = run("chmod", ["-R", "u+rwX,go-w,a-st", APP]);
  if (chown.code !== 0 || chmod.code !== 0) throw new Error(`cannot hand /app to root: ${chown.stderr}${chmod.stderr}`);
  fs.chmodSync(APP, 0o1777);
  fs.chmodSync(TESTS, 0o700);
  fs.chmodSync(LOGS, 0o700);
  fs.chmodSync(VERIFIER_DIR, 0o700);
  fs.chmodSync(STATE, 0o711);
  // The room reads the pristine dependencies and the compile cache; nothing else.
  for (const entry of fs.readdirSync(STATE)) {
    if (entry !== "deps" && entry !== "compile-cache") fs.chmodSync(path.join(STATE, entry), 0o700);
  }
}

// Whatever the room left that a later room or the grader could trip on: its
// processes, its files in /app, /tmp and /dev/shm. Root's files stay.
function sweepRoom() {
  killRoom();
  run("find", [APP, "/tmp", "/dev/shm", "-mindepth", "1", "-xdev", "-user", String(ROOM_UID),
    "-prune", "-exec", "rm", "-rf", "{}", "+"], { cwd: "/" });
  fs.rmSync(ROOM, { recursive: true, force: true });
}

function openRoom() {
  sweepRoom();
  fs.mkdirSync(ROOM, { mode: 0o700 });
  for (const sub of ["home", "tmp", "reports", "e2e-output"]) {
    fs.mkdirSync(path.join(ROOM, sub), { mode: 0o700 });
    fs.chownSync(path.join(ROOM, sub), ROOM_UID, ROOM_GID);
  }
  // Root's, like the room itself: the room runs it and cannot change it.
  fs.mkdirSync(path.join(ROOM, "bin"), { mode: 0o755 });
  const pnpm = realPnpm();
  if (pnpm) fs.writeFileSync(path.join(ROOM, "bin", "pnpm"), pnpmExec(pnpm), { mode: 0o755 });
  fs.chmodSync(ROOM, 0o755);
}

let pnpmPath;
function realPnpm() {
  if (pnpmPath === undefined) {
    const found = run("sh", ["-c", "command -v pnpm"], { cwd: "/" });
    pnpmPath = found.code === 0 ? found.stdout.trim() : null;
  }
  return pnpmPath;
}

// `pnpm exec NAME ...` of a binary in ./node_modules/.bin runs it directly: the very
// command pnpm would start, with that folder first on the PATH as pnpm puts it,
// without the half second of CPU pnpm takes to start. Anything else is pnpm's.
export function pnpmExec(pnpm) {
  return `#!/bin/sh
if [ "$1" = exec ]; then
  case "$2" in
    ""|-*|*/*|.*) ;;
    *)
      if [ -f "node_modules/.bin/$2" ] && [ -x "node_modules/.bin/$2" ]; then
        name=$2
        shift 2
        PATH="$PWD/node_modules/.bin:$PATH"
        export PATH
        exec "$PWD/node_modules/.bin/$name" "$@"
      fi ;;
  esac
fi
exec '${pnpm.replaceAll("'", "'\\''")}' "$@"
`;
}

// Where the sandbox lets the grader make one, the room gets its own process
// namespace (the docker backend's default capabilities do not allow it; the uid
// alone keeps the room from signalling the grader there).
let pidNamespace = null;
function roomPrefix() {
  if (pidNamespace === null) {
    pidNamespace = run("unshare", ["--pid", "--fork", "--kill-child", "--mount-proc", "true"], { cwd: "/" }).code === 0;
  }
  const drop = ["setpriv", `--reuid=${ROOM_UID}`, `--regid=${ROOM_GID}`, "--clear-groups",
    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"];
  return pidNamespace ? ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", ...drop] : drop;
}

function roomEnv(extra) {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("REACTBENCH_")) env[key] = value;
  }
  return {
    ...env,
    PATH: `${path.join(ROOM, "bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    HOME: path.join(ROOM, "home"),
    TMPDIR: path.join(ROOM, "tmp"),
    XDG_CACHE_HOME: path.join(ROOM, "home", ".cache"),
    CI: "1",
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    // pnpm would try to reinstall the root-owned dependencies before running.
    npm_config_verify_deps_before_run: "false",
    pnpm_config_verify_deps_before_run: "false",
    REACTBENCH_REPORTS: ROOM_REPORTS,
    PLAYWRIGHT_JSON_OUTPUT_NAME: path.join(ROOM_REPORTS, "playwright.json"),
    ...compileCache(),
    ...extra,
  };
}

// Reports written by configs made before the room existed name /logs/verifier.
const inRoom = (cmd) => cmd.replaceAll(`${LOGS}/`, `${ROOM_REPORTS}/`);

// Output a room command may print before it is killed, as spawnSync's maxBuffer was.
const MAX_ROOM_OUTPUT = 256 * 1024 * 1024;

// Asynchronous, so that a scan running beside it is seen to finish when it does.
function runInRoom(cmd, { cwd, budget, env = {} }) {
  const started = performance.now();
  const [command, ...args] = [...roomPrefix(), "bash", "-c", inRoom(cmd)];
  const child = spawn(command, args, { cwd, env: roomEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  const chunks = [];
  let size = 0;
  let timedOut = false;
  const collect = (chunk) => {
    size += chunk.length;
    if (size > MAX_ROOM_OUTPUT) child.kill("SIGKILL");
    else chunks.push(chunk);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, Math.ceil(budget * 1000));
  return new Promise((resolve) => {
    let exit = null;
    const done = () => {
      clearTimeout(timer);
      resolve({
        code: exit.code,
        output: Buffer.concat(chunks).toString() + (exit.error ? `${exit.error.message}\n` : ""),
        timedOut,
        seconds: exit.seconds,
      });
    };
    child.on("error", (error) => {
      exit = { code: 127, error, seconds: (performance.now() - started) / 1000 };
      done();
    });
    child.on("exit", (code, signal) => {
      exit = { code: code ?? 128 + (os.constants.signals[signal] ?? 0), seconds: (performance.now() - started) / 1000 };
      clearTimeout(timer);
      // What the room left running goes now, a daemon holding its output open
      // included; the output is complete once both pipes close.
      killRoom();
      const late = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        done();
      }, 5000);
      child.on("close", () => {
        clearTimeout(late);
        done();
      });
    });
  });
}

// Every process of the room's user, wherever it hid (a detached daemon included).
function killRoom() {
  for (const pid of fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      if (fs.statSync(`/proc/${pid}`).uid === ROOM_UID) process.kill(Number(pid), "SIGKILL");
    } catch {}
  }
}

// A report the room wrote, read as root: never through a link, only a regular file
// of sane size.
function readReport(name) {
  const file = path.join(ROOM_REPORTS, name);
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    if (error.code === "ENOENT") return null;
    throw new SubmissionFailure(`the test room's ${name} cannot be read (${error.code})`);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > 64 * 1024 * 1024) {
      throw new SubmissionFailure(`the test room's ${name} is not a plain report file`);
    }
    const text = fs.readFileSync(fd, "utf8");
    fs.writeFileSync(path.join(LOGS, name), text);
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new SubmissionFailure(`the test room's ${name} is not JSON (${error.message})`);
    }
  } finally {
    fs.closeSync(fd);
  }
}

const testKey = (file, titles) => `${file}\u0000${titles.join(" > ")}`;

// Test results from both runners: file (relative to /app) and title path -> status.
function vitestResults(report, into) {
  for (const file of report?.testResults ?? []) {
    const rel = path.relative(APP, String(file.name ?? ""));
    for (const test of file.assertionResults ?? []) {
      into.set(testKey(rel, [...(test.ancestorTitles ?? []), test.title]), test.status);
    }
    if (file.status === "failed" && !(file.assertionResults ?? []).length) {
      into.set(testKey(rel, ["(file)"]), `failed: ${String(file.message ?? "failed to run").split("\n")[0]}`);
    }
  }
}

function playwrightResults(report, into) {
  const root = report?.config?.rootDir ?? APP;
  const visit = (suite, trail) => {
    for (const spec of suite.specs ?? []) {
      const rel = path.relative(APP, path.resolve(root, String(spec.file ?? suite.file ?? "")));
      const results = (spec.tests ?? []).flatMap((t) => t.results ?? []);
      const statuses = new Set(results.map((r) => r.status));
      let status = "passed";
      if (!results.length) status = "missing";
      else if (statuses.has("skipped")) status = "skipped";
      else if ([...statuses].some((s) => s !== "passed") || spec.ok === false) status = "failed";
      into.set(testKey(rel, [...trail, spec.title]), status);
    }
    for (const child of suite.suites ?? []) visit(child, [...trail, child.title]);
  };
  for (const suite of report?.suites ?? []) visit(suite, []);
  for (const error of report?.errors ?? []) {
    into.set(testKey("playwright", [String(error.message ?? "").split("\n")[0]]), "failed");
  }
}

// What a runner reports for a test it did not run on purpose (it.skip, it.todo, ...).
const SKIPPED_STATUSES = new Set(["skipped", "pending", "todo", "disabled"]);

// Every expected test must have run and passed. A test the list does not declare may
// be skipped on purpose (the list names what the gate holds the submission to); without
// a list (tasks made before it existed) every test that ran must have passed, skipped
// ones included, unless the config says `allow_skipped` (a mined draft, whose list is
// read from its first run).
export function judgeTests(expected, results, allowSkipped = false) {
  const failing = [];
  const declared = Object.entries(expected);
  const tolerated = (status) => SKIPPED_STATUSES.has(status) && (declared.length > 0 || allowSkipped);
  if (declared.length) {
    for (const [file, names] of declared) {
      for (const name of names) {
        const status = results.get(testKey(file, [name]));
        if (status !== "passed") failing.push(`${file} > ${name} (${status ?? "did not run"})`);
      }
    }
  } else if (![...results.values()].includes("passed")) {
    failing.push("no test passed");
  }
  for (const [key, status] of results) {
    if (status === "passed" || tolerated(status)) continue;
    const label = key.replace("\u0000", " > ") + ` (${status})`;
    if (!failing.some((f) => f.startsWith(key.replace("\u0000", " > ")))) failing.push(label);
  }
  return failing;
}

// Copy the hidden specs of one phase into /app, root-owned, over whatever is there.
function applySpecs(parts) {
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

function walkSpecs(dir, prefix) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...walkSpecs(path.join(dir, entry.name), rel));
    else out.push(rel);
  }
  return out;
}

// The e2e run's own Playwright config: the app's, with a browser that looks like a
// user's (no automation flag, no headless user agent) on a port chosen per run.
const E2E_CONFIG = "reactbench.e2e.config.ts";
// Vite's preview server says this once it listens.
const PREVIEW_READY = String.raw`/Local:\s+https?:\/\//`;

function writeE2eConfig(app = APP) {
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
      args: [...(launch.args ?? []), "--disable-blink-features=AutomationControlled"],
      ignoreDefaultArgs: ["--enable-automation"],
    },
  },
  webServer: base.webServer && {
    ...base.webServer,
    command: \`pnpm exec vite build --logLevel warn && pnpm exec vite preview --port \${port} --strictPort\`,
    url,
    // Ready as soon as the server says so: Playwright's polling of the url alone
    // waits up to a second longer.
    wait: { stdout: ${PREVIEW_READY} },
  },
};
`;
  fs.writeFileSync(path.join(app, E2E_CONFIG), source, { mode: 0o644 });
}

// The room's own copy of the compiled e2e files, where the bake made them.
function e2eTransforms() {
  if (!fs.existsSync(E2E_TRANSFORMS)) return {};
  const copy = path.join(ROOM, "tmp", "playwright-transforms");
  const copied = run("cp", ["-a", E2E_TRANSFORMS, copy], { cwd: "/" });
  const owned = run("chown", ["-R", `${ROOM_UID}:${ROOM_GID}`, copy], { cwd: "/" });
  return copied.code === 0 && owned.code === 0 ? { PLAYWRIGHT_TRANSFORM_CACHE_DIR: copy } : {};
}

// Chromium's major version, for a user agent like a user's: read once at bake time.
function userAgent() {
  let version;
  try {
    version = fs.readFileSync(path.join(STATE, "chromium-version"), "utf8").trim();
  } catch {
    version = chromiumVersion();
  }
  return `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${version || "130"}.0.0.0 Safari/537.36`;
}

const chromiumVersion = () => /(\d+)\./.exec(run("chromium", ["--version"], { cwd: "/" }).stdout)?.[1] ?? "";

// Playwright compiles its config and the specs (Babel) at every run unless its cache
// holds them, keyed by path and content: compiled here once, at the paths and with the
// contents of the e2e run. Each e2e room gets its own copy.
const E2E_TRANSFORMS = path.join(STATE, "e2e-transforms");

function compileE2eSpecs(config) {
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

// The room's commands run once at bake time, as the room's user, on a copy of the
// base app with every hidden spec in it: what they load fills the room's folder of
// the compile cache. Their results do not matter (the base usually fails them). The
// cache is root's afterwards: a room reads it and cannot change it.
async function warmCompileCache(config) {
  openRoom();
  const app = path.join(ROOM, "app");
  try {
    const skipped = new Set([path.join(APP, ".git"), path.join(APP, "node_modules")]);
    fs.cpSync(APP, app, { recursive: true, filter: (src) => !skipped.has(src) });
    fs.symlinkSync(path.join(STATE, "deps", "node_modules"), path.join(app, "node_modules"));
    fs.cpSync(path.join(TESTS, "specs"), app, { recursive: true });
    writeE2eConfig(app);
    for (const owned of [app, COMPILE_CACHE]) run("chown", ["-R", "-h", `${ROOM_UID}:${ROOM_GID}`, owned], { cwd: "/" });
    const cwd = path.join(app, path.relative(APP, config.test.cwd ?? APP));
    const started = performance.now();
    const commands = [config.test.cmd, config.test.e2e_cmd && withE2eConfig(config.test.e2e_cmd)].filter(Boolean);
    for (const cmd of commands) {
      const result = await runInRoom(cmd, {
        cwd,
        budget: 120,
        env: { REACTBENCH_E2E_PORT: e2ePort(), REACTBENCH_E2E_OUTPUT: path.join(ROOM, "e2e-output", "results") },
      });
      log(`compile cache: \`${cmd.slice(0, 60)}\` exited ${result.code} on the base in ${result.seconds.toFixed(1)} s`);
    }
    log(`compile cache filled by the test commands in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    sweepRoom();
    run("chown", ["-R", "0:0", COMPILE_CACHE], { cwd: "/" });
    // Node writes its entries for its user alone.
    run("chmod", ["-R", "a+rX,go-w", COMPILE_CACHE], { cwd: "/" });
  }
}

// The e2e command of config.json may name the app's Playwright config or none: it
// gets ours.
const withE2eConfig = (cmd) =>
  /playwright\s+test/.test(cmd)
    ? cmd.replace(/(playwright\s+test)((\s+(-c|--config)[=\s]\S+)?)/, `$1 -c ${E2E_CONFIG}`)
    : cmd;

async function testGate(config, setPhase) {
  const total = config.test.timeout_sec ?? (config.verifier_timeout_sec ?? 300) * 0.7;
  const started = performance.now();
  const remaining = () => Math.max(1, total - (performance.now() - started) / 1000);
  const e2eDir = config.test.e2e_specs;
  const specParts = fs.readdirSync(path.join(TESTS, "specs")).filter((p) => p !== e2eDir);
  const results = new Map();
  const phases = [];
  // A report the room spoiled (a daemon killed mid-write leaves it empty) loses that
  // runner's results, not the grading: its tests did not run, and the reason is said.
  const spoiled = [];
  const report = (name, phase) => {
    try {
      return readReport(name);
    } catch (error) {
      if (!(error instanceof SubmissionFailure)) throw error;
      spoiled.push(`${error.message}, after the ${phase} tests`);
      return null;
    }
  };
  let output = "";
  // Unit specs first; the e2e specs are copied in only after every process of that
  // room is gone, from /tests, which the room never had.
  const e2eCmd = config.test.e2e_cmd;
  const steps = [{ name: "unit", cmd: config.test.cmd, parts: specParts }];
  if (e2eCmd) steps.push({ name: "e2e", cmd: withE2eConfig(e2eCmd), parts: [e2eDir] });
  else specParts.push(e2eDir);
  try {
    for (const step of steps) {
      setPhase(`tests:${step.name}`);
      openRoom();
      fs.rmSync(path.join(APP, E2E_CONFIG), { force: true });
      applySpecs(step.parts);
      let env = {};
      if (step.name === "e2e") {
        writeE2eConfig();
        env = {
          ...e2eTransforms(),
          REACTBENCH_E2E_PORT: e2ePort(),
          REACTBENCH_E2E_OUTPUT: path.join(ROOM, "e2e-output", "results"),
          REACTBENCH_E2E_USER_AGENT: userAgent(),
        };
      }
      const result = await runInRoom(step.cmd, { cwd: config.test.cwd ?? APP, budget: remaining(), env });
      output += result.output;
      console.log(result.output.split("\n").slice(-40).join("\n"));
      vitestResults(report("vitest.json", step.name), results);
      playwrightResults(report("playwright.json", step.name), results);
      phases.push({ name: step.name, exit_code: result.code, timed_out: result.timedOut, seconds: result.seconds });
      sweepRoom();
      if (result.code !== 0 || result.timedOut) break;
    }
  } finally {
    // Whatever ended the tests, what they printed is kept.
    fs.writeFileSync(path.join(LOGS, "test.log"), output);
  }
  const failing = [...judgeTests(config.test.expected, results, config.test.allow_skipped === true), ...spoiled];
  for (const phase of phases) {
    if (phase.timed_out) failing.push(`the ${phase.name} tests did not finish within ${Math.round(total)} s`);
    else if (phase.exit_code !== 0) failing.push(`the ${phase.name} test command exited ${phase.exit_code}`);
  }
  if (phases.length < steps.length) failing.push(`the ${steps[phases.length].name} tests never ran`);
  const expected = Object.values(config.test.expected).reduce((n, names) => n + names.length, 0);
  return {
    ok: failing.length === 0,
    exit_code: phases.at(-1)?.exit_code ?? null,
    timed_out: phases.some((p) => p.timed_out),
    expected,
    phases,
    failing,
    room: { uid: ROOM_UID, pid_namespace: Boolean(pidNamespace) },
  };
}

// ----------------------------------------------------------------- the grade

function writeProgress(phase) {
  fs.writeFileSync(path.join(LOGS, "progress.json"), JSON.stringify({ grader: "reactbench-verifier", version: GRADE_VERSION, phase }) + "\n");
}

function writeGrade(details) {
  fs.writeFileSync(path.join(LOGS, "grade.json"), JSON.stringify({ version: GRADE_VERSION, ...details }, null, 2));
  const reward = { reward: details.reward, tests: Number(details.tests?.ok ?? false), react_doctor: Number(details.react_doctor?.ok ?? false) };
  fs.writeFileSync(path.join(LOGS, "reward.json"), JSON.stringify(reward) + "\n");
  log(`reward=${details.reward}`);
}

// CPUs the sandbox may keep busy at once: its CPU quota where it has one (a hard
// limit, as the docker backend sets), else the cores it may run on.
export function cpuBudget(cgroup = "/sys/fs/cgroup") {
  const cores = os.availableParallelism();
  const read = (file) => {
    try {
      return fs.readFileSync(path.join(cgroup, file), "utf8").trim();
    } catch {
      return null;
    }
  };
  let quota = null;
  const v2 = read("cpu.max")?.split(/\s+/);
  if (v2 && v2[0] !== "max") quota = Number(v2[0]) / Number(v2[1]);
  const v1 = Number(read("cpu/cpu.cfs_quota_us") ?? read("cpu,cpuacct/cpu.cfs_quota_us") ?? -1);
  const period = Number(read("cpu/cpu.cfs_period_us") ?? read("cpu,cpuacct/cpu.cfs_period_us") ?? 100000);
  if (quota === null && v1 > 0) quota = v1 / period;
  return quota && quota > 0 ? Math.min(cores, quota) : cores;
}

// The React Doctor gate from a scan started earlier (none: the tree is the base
// commit, whose scan is the baked baseline).
async function doctorGate(config, before, scanning, submission, timings) {
  let after = before;
  if (scanning) {
    const finished = await scanning.run.finished;
    timings.scan = finished.seconds;
    after = checkScan(config, finished, { afterSubmission: true });
  } else {
    timings.scan = 0;
  }
  fs.writeFileSync(path.join(LOGS, "rd-after.json"), JSON.stringify(after));
  const doctor = compareReports(before, after, config.rd.targets, config.rd.ignored_new_footguns);
  doctor.unscanned = unscanned(after, submission.changed, scanning?.root);
  if (doctor.unscanned.length) doctor.ok = false;
  return doctor;
}

function logDoctor(doctor) {
  log(`react doctor: ${doctor.ok ? "pass" : "FAIL"} (${doctor.new.length} new, ${doctor.remaining_targets.length} targets left)`);
  for (const f of doctor.new) log(`  new ${f.rule} ${f.file}:${f.line ?? ""} ${f.title}`);
  for (const f of doctor.ignored ?? []) log(`  new but tolerated by the task: ${f.rule} ${f.file}:${f.line ?? ""} ${f.title}`);
  for (const f of doctor.unscanned ?? []) log(`  changed but not scanned: ${f}`);
}

async function grade() {
  fs.mkdirSync(LOGS, { recursive: true });
  fs.chmodSync(LOGS, 0o700);
  writeProgress("config");
  const config = readConfig();
  const before = JSON.parse(fs.readFileSync(path.join(STATE, "rd-baseline.json"), "utf8"));
  const timings = {};
  let phase = "clean-room";
  const setPhase = (name) => {
    phase = name;
    writeProgress(name);
  };
  const state = { submission: null, doctor: null, tests: null };
  let scanning = null;
  try {
    // From here on the submission is in play.
    setPhase("clean-room");
    const cleanStarted = performance.now();
    state.submission = cleanRoom(config);
    timings.clean_room = (performance.now() - cleanStarted) / 1000;
    log(`clean room: ${state.submission.changed.length} changed file(s) graded, ${state.submission.refused.length} refused`);
    for (const r of state.submission.refused) log(`  refused ${r.path}: ${r.reason}`);
    fs.writeFileSync(path.join(LOGS, "rd-before.json"), JSON.stringify(before));
    setPhase("scan");
    const gradingStarted = performance.now();
    if (state.submission.changed.length) {
      // Scanned as the tree is now, before the hidden specs are applied, so that
      // they are never findings.
      const root = copyForScan();
      scanning = { root, run: startScan(config, { afterSubmission: true, root }) };
    }
    // Settled at once, so that a failure waits for its turn to be read.
    const doctor = doctorGate(config, before, scanning, state.submission, timings).then(
      (gate) => ({ gate }), (error) => ({ error }));
    const gateOf = async () => {
      const { gate, error } = await doctor;
      if (error) throw error;
      return gate;
    };
    // The scan and the test commands do not depend on each other. They run side by
    // side only where each can have a CPU: under a one-CPU limit they would only
    // take turns, and the scan (alone first, as before) keeps its whole time limit.
    const alongside = scanning !== null && cpuBudget() >= 2;
    if (!alongside) {
      state.doctor = { ...(await gateOf()), alongside_tests: false };
      logDoctor(state.doctor);
    }
    setPhase("tests");
    lockDown();
    const testStarted = performance.now();
    state.tests = await testGate(config, setPhase);
    timings.test_command = (performance.now() - testStarted) / 1000;
    if (alongside) {
      setPhase("scan");
      state.doctor = { ...(await gateOf()), alongside_tests: true };
      logDoctor(state.doctor);
    }
    timings.grading = (performance.now() - gradingStarted) / 1000;
    log(`tests: ${state.tests.ok ? "pass" : "FAIL"}`);
    for (const f of state.tests.failing) log(`  failing: ${f}`);
  } catch (error) {
    scanning?.run.stop();
    if (error instanceof HarnessError) throw error;
    // Whatever broke while the submission was in play is the submission's.
    const reason = error instanceof SubmissionFailure ? error.message : `${error.code ?? error.name}: ${error.message}`;
    log(`the submission broke grading during ${phase}: ${reason}`);
    try {
      sweepRoom();
    } catch {}
    writeProgress("done");
    writeGrade({
      reward: 0,
      tests: state.tests ?? { ok: false, failing: [] },
      react_doctor: state.doctor ?? { ok: false, new: [], fixed_targets: [], remaining_targets: config.rd.targets },
      submission: state.submission ?? { refused: [], changed: [] },
      timings,
      failure: { phase, reason },
    });
    return;
  }
  const reward = state.tests.ok && state.doctor.ok ? 1 : 0;
  writeProgress("done");
  writeGrade({ reward, tests: state.tests, react_doctor: state.doctor, submission: state.submission, timings, failure: null });
}

const commands = { bake, grade, "keep-deps": keepDependencies };
const command = commands[process.argv[2]];
if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  if (!command) {
    console.error("usage: verifier.mjs bake|grade|keep-deps");
    process.exit(2);
  }
  try {
    await command();
  } catch (error) {
    if (!(error instanceof HarnessError)) throw error;
    console.error(`[verifier] harness error: ${error.message}`);
    try {
      fs.mkdirSync(LOGS, { recursive: true });
      fs.writeFileSync(path.join(LOGS, "harness-error.txt"), `${error.message}\n`);
    } catch {}
    process.exit(3);
  }
}
