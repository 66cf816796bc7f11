#!/usr/bin/env node
// The clean-room verifier shared by the tasks this project ships.
//
//   node verifier.mjs bake    at image build (tests/Dockerfile): records the base
//                             commit, keeps pristine dependencies apart, and bakes
//                             the React Doctor baseline.
//   node verifier.mjs grade   from tests/test.sh: rebuilds the tree from the base
//                             commit plus the admissible part of the submission,
//                             runs the React Doctor gate, then the hidden specs, and
//                             writes /logs/verifier/reward.json.
//
// A broken harness (vacuous scan, missing state) writes no reward and exits 3:
// that is an error of the harness, never a pass or a fail of the agent.
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const APP = process.env.REACTBENCH_APP ?? "/app";
const TESTS = process.env.REACTBENCH_TESTS ?? "/tests";
const LOGS = process.env.REACTBENCH_LOGS ?? "/logs/verifier";
const STATE = process.env.REACTBENCH_STATE ?? "/opt/reactbench/state";

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
// What a submission may contribute: source files under the task's source roots.
const SOURCE_EXTENSIONS = new Set([
  ".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs",
  ".css", ".scss", ".sass", ".less", ".json", ".svg", ".md",
  ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".woff", ".woff2",
]);
// React Doctor slows down sharply on very large files and skips some: a source
// file past this size is refused rather than left unscanned.
const MAX_SOURCE_BYTES = 256 * 1024;
// React Doctor drops minified-looking files and never looks in these folders.
const MAX_LINE_CHARS = 1000;
const SCAN_SKIPPED_DIRS = new Set(["build", "dist", "out", "coverage", "node_modules"]);
const CODE_EXTENSIONS = new Set([".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs"]);
// What the bundler tries, in Vite's default order: a new `App.js` beside `App.tsx`
// would be imported instead of it.
const RESOLVED_EXTENSIONS = [".mjs", ".js", ".mts", ".ts", ".jsx", ".tsx", ".json"];
// Test infrastructure belongs to the verifier: spec files, the hidden specs' folder,
// test setup files (they run before every spec) and module mocks.
const SPEC_PATH =
  /(^|\/)(__verifier__|__mocks__|__tests__)(\/|$)|\.(test|spec)\.[cm]?[jt]sx?$|(^|\/)(setupTests|setup-tests|test-setup|vitest\.setup|jest\.setup)\.[cm]?[jt]sx?$/;

class HarnessError extends Error {}

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
    code: result.status ?? -1,
    stdout: result.stdout?.toString() ?? "",
    stderr: result.stderr?.toString() ?? "",
    timedOut: result.error?.code === "ETIMEDOUT",
  };
}

function git(...args) {
  const result = run("git", args);
  if (result.code !== 0) throw new HarnessError(`git ${args.join(" ")}: ${result.stderr.trim()}`);
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
  return {
    ...config,
    rd: { scan_root: APP, mode: "gate", targets: [], ...config.rd },
    sources: config.sources ?? ["src"],
  };
}

// ---------------------------------------------------------------- React Doctor

class EmptySubmission extends Error {}

function scan(config, { afterSubmission = false } = {}) {
  const result = run("react-doctor", [...RD_FLAGS, config.rd.scan_root], {
    cwd: config.rd.scan_root,
    // The lint cache is keyed by file content: the one baked with the baseline
    // makes the after-scan of unchanged files free.
    env: { DO_NOT_TRACK: "1", REACT_DOCTOR_CACHE_DIR: path.join(STATE, "rd-cache") },
  });
  let report;
  try {
    report = JSON.parse(result.stdout);
  } catch {
    throw new HarnessError(
      `react-doctor printed no JSON report (exit ${result.code}): ${result.stderr.slice(-800)}`,
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
    if (afterSubmission) throw new EmptySubmission("the submission leaves no source file to analyse");
    throw new HarnessError(`react-doctor analysed 0 files under ${config.rd.scan_root}`);
  }
  if (!report.reactDetected) throw new HarnessError(`react-doctor found no React under ${config.rd.scan_root}`);
  for (const project of projects) {
    const reasons = Object.entries(project.skippedCheckReasons ?? {}).map(([k, v]) => `${k}: ${v}`);
    const skipped = [...(project.skippedChecks ?? []), ...reasons];
    if (skipped.length || project.complete === false) {
      throw new HarnessError(`react-doctor scan was partial: ${skipped.join("; ") || "incomplete"}`);
    }
  }
  if (report.ok === false || report.error) {
    throw new HarnessError(`react-doctor failed: ${JSON.stringify(report.error)}`);
  }
  return report;
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

export function compareReports(before, after, targets = []) {
  const beforeGroups = byKey(before);
  const fresh = [];
  for (const [key, found] of byKey(after)) {
    const had = beforeGroups.get(key)?.length ?? 0;
    if (found.length > had) fresh.push(...found.map((d) => describeFinding(d, had, found.length)));
  }
  const afterAll = after.diagnostics ?? [];
  const remaining = targets.filter((t) => afterAll.some((d) => matchesTarget(t, d)));
  const fixed = targets.filter((t) => !remaining.includes(t));
  return { ok: fresh.length === 0 && remaining.length === 0, new: fresh, fixed_targets: fixed, remaining_targets: remaining };
}

// ---------------------------------------------------------------------- bake

function linkDependencies() {
  const pristine = path.join(STATE, "deps", "node_modules");
  const link = path.join(APP, "node_modules");
  fs.rmSync(link, { recursive: true, force: true });
  fs.symlinkSync(pristine, link);
}

function bake() {
  const config = readConfig();
  fs.mkdirSync(path.join(STATE, "deps"), { recursive: true });
  const modules = path.join(APP, "node_modules");
  if (fs.existsSync(modules) && !fs.lstatSync(modules).isSymbolicLink()) {
    // Pristine dependencies live outside /app: the submission replaces /app, and a
    // link puts them back in no time.
    const moved = run("mv", [modules, path.join(STATE, "deps", "node_modules")], { cwd: "/" });
    if (moved.code !== 0) throw new HarnessError(`cannot keep pristine dependencies: ${moved.stderr}`);
  }
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
  const baseline = scan(config);
  fs.writeFileSync(path.join(STATE, "rd-baseline.json"), JSON.stringify(baseline));
  const targets = config.rd.targets;
  const absent = targets.filter((t) => !(baseline.diagnostics ?? []).some((d) => matchesTarget(t, d)));
  if (config.rd.mode === "health" && absent.length) {
    throw new HarnessError(`health-mode targets not found in the base commit: ${absent.join(", ")}`);
  }
  log(`baseline: ${(baseline.diagnostics ?? []).length} React Doctor findings`);
}

// --------------------------------------------------------------------- grade

function walk(dir, prefix = "", out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (!prefix && (entry.name === ".git" || entry.name === "node_modules")) continue;
    if (entry.isDirectory()) walk(path.join(dir, entry.name), rel, out);
    else out.push(rel);
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

// Why a path may not carry the submission's content (null: it may).
function pathRefusal(file, config) {
  const underRoot = config.sources.some((root) => file === root || file.startsWith(`${root}/`));
  if (!underRoot) return `outside the source roots (${config.sources.join(", ")})`;
  if (SPEC_PATH.test(file)) return "test files, test setup and mocks belong to the verifier";
  if (file.split("/").some((part) => part.startsWith("."))) return "dotfiles are not source";
  return null;
}

function shadowed(file, tree, present) {
  const ext = path.extname(file);
  if (!RESOLVED_EXTENSIONS.includes(ext)) return null;
  const stem = file.slice(0, -ext.length);
  for (const other of RESOLVED_EXTENSIONS) {
    const sibling = stem + other;
    if (other !== ext && (tree.has(sibling) || present.has(sibling))) return sibling;
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
    const twin = shadowed(file, tree, present);
    if (twin) return `a new module beside ${twin} that the bundler would resolve instead`;
  }
  if (CODE_EXTENSIONS.has(ext)) {
    const longest = Math.max(0, ...fs.readFileSync(full, "utf8").split("\n").map((line) => line.length));
    if (longest > MAX_LINE_CHARS) return "minified-looking (a line over 1000 characters): the scan skips it";
  }
  return null;
}

// Rebuild /app as: the base commit, plus the submission's admissible changes.
function cleanRoom(config) {
  const base = fs.readFileSync(path.join(STATE, "base-sha"), "utf8").trim();
  fs.rmSync(path.join(APP, ".git"), { recursive: true, force: true });
  fs.cpSync(path.join(STATE, "base-git"), path.join(APP, ".git"), { recursive: true });
  fs.rmSync(path.join(APP, "node_modules"), { recursive: true, force: true });
  const tree = baseTree(base);
  const present = new Set(walk(APP));
  const refused = [];
  const restore = [];
  const admitted = [];
  for (const file of present) {
    const known = tree.get(file);
    if (known && known.id === blobId(path.join(APP, file))) continue;
    const reason = refusal(file, config, tree, present);
    if (!reason) {
      admitted.push(file);
      continue;
    }
    refused.push({ path: file, reason });
    fs.rmSync(path.join(APP, file), { force: true, recursive: true });
    if (known) restore.push(file);
  }
  for (const file of tree.keys()) {
    // A deleted source file is a legitimate change; anything else comes back.
    if (!present.has(file) && pathRefusal(file, config) !== null) restore.push(file);
  }
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
  const changed = git("diff", "--name-only", base).split("\n").filter(Boolean);
  git("reset", "-q");
  return { refused, changed };
}

function restoreFromBase(base, files) {
  if (!files.length) return;
  const result = run("git", ["checkout", base, "--pathspec-from-file=-", "--pathspec-file-nul"], {
    input: files.join("\0"),
  });
  if (result.code !== 0) throw new HarnessError(`cannot restore base files: ${result.stderr}`);
}

// Changed code files the after-scan did not analyse: a gate that did not look at
// the change cannot pass it.
function unscanned(report, changed) {
  const analysed = new Set();
  for (const project of report.projects ?? []) {
    for (const file of project.analyzedFiles ?? []) {
      analysed.add(path.relative(APP, path.resolve(project.directory ?? APP, file)));
    }
  }
  return changed.filter(
    (file) =>
      CODE_EXTENSIONS.has(path.extname(file)) && !SPEC_PATH.test(file) &&
      fs.existsSync(path.join(APP, file)) && !analysed.has(file),
  );
}

function applySpecs() {
  fs.cpSync(path.join(TESTS, "specs"), APP, { recursive: true });
}

function failingSpecs() {
  const failing = [];
  const vitest = path.join(LOGS, "vitest.json");
  if (fs.existsSync(vitest)) {
    const report = JSON.parse(fs.readFileSync(vitest, "utf8"));
    for (const file of report.testResults ?? []) {
      for (const test of file.assertionResults ?? []) {
        if (test.status === "failed") failing.push(`${path.relative(APP, file.name)} > ${test.fullName}`);
      }
      if (file.status === "failed" && !(file.assertionResults ?? []).length) {
        failing.push(`${path.relative(APP, file.name)} (${(file.message ?? "failed to run").split("\n")[0]})`);
      }
    }
  }
  const playwright = path.join(LOGS, "playwright.json");
  if (fs.existsSync(playwright)) {
    const visit = (suite, trail) => {
      for (const spec of suite.specs ?? []) {
        const bad = (spec.tests ?? []).some((t) => (t.results ?? []).some((r) => r.status !== "passed" && r.status !== "skipped"));
        if (bad || spec.ok === false) failing.push(`${spec.file ?? suite.file} > ${[...trail, spec.title].join(" > ")}`);
      }
      for (const child of suite.suites ?? []) visit(child, suite.title && !suite.file ? [...trail, suite.title] : trail);
    };
    const report = JSON.parse(fs.readFileSync(playwright, "utf8"));
    for (const suite of report.suites ?? []) visit(suite, []);
    for (const error of report.errors ?? []) failing.push(`playwright: ${(error.message ?? "").split("\n")[0]}`);
  }
  return failing;
}

function testGate(config) {
  const budget = config.test.timeout_sec ?? (config.verifier_timeout_sec ?? 300) * 0.7;
  const result = run("bash", ["-c", config.test.cmd], {
    cwd: config.test.cwd ?? APP,
    timeoutMs: budget * 1000,
    env: { CI: "1", PLAYWRIGHT_JSON_OUTPUT_NAME: path.join(LOGS, "playwright.json"), NO_COLOR: "1", FORCE_COLOR: "0" },
  });
  const output = result.stdout + result.stderr;
  fs.writeFileSync(path.join(LOGS, "test.log"), output);
  console.log(output.split("\n").slice(-60).join("\n"));
  let failing = [];
  try {
    failing = failingSpecs();
  } catch (error) {
    failing = [`(could not read the test reports: ${error.message})`];
  }
  if (result.timedOut) failing.push(`the test command did not finish within ${budget} s`);
  return { ok: result.code === 0 && !result.timedOut, exit_code: result.code, timed_out: result.timedOut, failing };
}

function grade() {
  fs.mkdirSync(LOGS, { recursive: true });
  const config = readConfig();
  const submission = cleanRoom(config);
  log(`clean room: ${submission.changed.length} changed file(s) graded, ${submission.refused.length} refused`);
  for (const r of submission.refused) log(`  refused ${r.path}: ${r.reason}`);
  const before = JSON.parse(fs.readFileSync(path.join(STATE, "rd-baseline.json"), "utf8"));
  fs.writeFileSync(path.join(LOGS, "rd-before.json"), JSON.stringify(before));
  // Scanned before the hidden specs are applied, so that they are never findings.
  let doctor;
  const timings = {};
  const scanStarted = performance.now();
  try {
    // An unchanged tree is the base commit: its scan is the baked baseline.
    const after = submission.changed.length ? scan(config, { afterSubmission: true }) : before;
    fs.writeFileSync(path.join(LOGS, "rd-after.json"), JSON.stringify(after));
    doctor = compareReports(before, after, config.rd.targets);
    doctor.unscanned = unscanned(after, submission.changed);
    if (doctor.unscanned.length) doctor.ok = false;
  } catch (error) {
    if (!(error instanceof EmptySubmission)) throw error;
    doctor = { ok: false, new: [], fixed_targets: [], remaining_targets: config.rd.targets, reason: error.message };
  }
  log(`react doctor: ${doctor.ok ? "pass" : "FAIL"} (${doctor.new.length} new, ${doctor.remaining_targets.length} targets left)`);
  for (const f of doctor.new) log(`  new ${f.rule} ${f.file}:${f.line ?? ""} ${f.title}`);
  for (const f of doctor.unscanned ?? []) log(`  changed but not scanned: ${f}`);
  timings.scan = (performance.now() - scanStarted) / 1000;
  applySpecs();
  const testStarted = performance.now();
  const tests = testGate(config);
  timings.test_command = (performance.now() - testStarted) / 1000;
  log(`tests: ${tests.ok ? "pass" : "FAIL"}`);
  const reward = tests.ok && doctor.ok ? 1 : 0;
  fs.writeFileSync(
    path.join(LOGS, "grade.json"),
    JSON.stringify({ reward, tests, react_doctor: doctor, submission, timings }, null, 2),
  );
  fs.writeFileSync(
    path.join(LOGS, "reward.json"),
    JSON.stringify({ reward, tests: Number(tests.ok), react_doctor: Number(doctor.ok) }) + "\n",
  );
  log(`reward=${reward}`);
}

const commands = { bake, grade };
const command = commands[process.argv[2]];
if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  if (!command) {
    console.error("usage: verifier.mjs bake|grade");
    process.exit(2);
  }
  try {
    command();
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
