// The React Doctor gate: the scan (the baseline at bake time, the submission's at
// grading), the check of its report, and the comparison of the two: a finding the
// change adds fails the gate, a target it was to fix must be gone.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import {
  APP, CODE_EXTENSIONS, CONTRACT, DECLARATION, LOGS, SPEC_PATH, STATE, compileCache, minifiedLooking,
  productionPlacement, testContext, testLike,
} from "./config.mjs";
import { HarnessError, SubmissionFailure } from "./errors.mjs";
import { exitCode, log, run } from "./process.mjs";

/**
 * @import { Config, IgnoredFootgun } from "./config.mjs"
 */

/**
 * A finding of React Doctor's, as its JSON report gives it.
 * @typedef {object} Diagnostic
 * @property {string} rule
 * @property {string} filePath
 * @property {number} [line]
 * @property {string} [title]
 * @property {string} [message]
 * @property {string} [category]
 */

/**
 * One project of a React Doctor report.
 * @typedef {object} DoctorProject
 * @property {string} [directory]
 * @property {string[]} [analyzedFiles]
 * @property {{ sourceFileCount?: number }} [project]
 * @property {string[]} [skippedChecks]
 * @property {Record<string, string>} [skippedCheckReasons]
 * @property {boolean} [complete]
 */

/**
 * React Doctor's JSON report (the parts the gate reads).
 * @typedef {object} DoctorReport
 * @property {string} [version]
 * @property {DoctorProject[]} [projects]
 * @property {Diagnostic[]} [diagnostics]
 * @property {boolean} [reactDetected]
 * @property {boolean} [ok]
 * @property {unknown} [error]
 */

/**
 * A finding as grade.json reports it.
 * @typedef {object} Finding
 * @property {string} rule
 * @property {string} file
 * @property {number | null} line
 * @property {string} title
 * @property {string} message
 * @property {string} category
 * @property {string} count  the findings of its rule in its file: "before -> after"
 */

/**
 * The gate's verdict (grade.json's react_doctor).
 * @typedef {object} DoctorVerdict
 * @property {boolean} ok
 * @property {Finding[]} new  new findings that fail the gate
 * @property {Finding[]} ignored  new findings the task tolerates
 * @property {string[]} fixed_targets
 * @property {string[]} remaining_targets
 * @property {string[]} [unscanned]  changed code files the scan did not analyse
 * @property {boolean} [alongside_tests]  whether the scan ran beside the test commands
 */

/**
 * A finished scan: its exit and output, or why it could not start.
 * @typedef {object} ScanResult
 * @property {number} [code]
 * @property {Error} [error]
 * @property {number} seconds
 * @property {string} limit  its time limit (seconds)
 * @property {string} stdout
 * @property {string} stderr
 */

/**
 * A running scan.
 * @typedef {object} Scan
 * @property {Promise<ScanResult>} finished  resolves when it ends; never rejects
 * @property {() => void} stop  kills it with everything it started
 */

// The pinned React Doctor (contract.json; the verifier layer installs it).
const RD_VERSION = CONTRACT.react_doctor;
// Installed beside the grader from its lockfile (package-lock.json) by the grader layer.
const RD_BIN = fileURLToPath(new URL("./node_modules/.bin/react-doctor", import.meta.url));
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
/** @param {string} rule */
export const isStyleOnly = (rule) =>
  STYLE_ONLY_RULES.has(rule) || STYLE_ONLY_PREFIXES.some((prefix) => rule.startsWith(prefix));

// The submission's scan reads a copy of the graded tree, so that it can run beside
// the test commands: the hidden specs they add to /app, and whatever the test room
// writes there, are never in it. Its temporary files stay out of the shared /tmp.
export const SCAN_DIR = path.join(STATE, "scan");
const SCAN_TMP = path.join(SCAN_DIR, "tmp");

/**
 * A running scan: `finished` resolves with its exit, output and seconds (never
 * rejects), `stop` kills it with everything it started.
 * @param {Config} config
 * @param {{ afterSubmission?: boolean, root?: string }} [options]
 * @returns {Scan}
 */
export function startScan(config, { afterSubmission = false, root = APP } = {}) {
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
  /** @type {import("node:child_process").ChildProcess} */
  let child;
  try {
    // --verbose: timeout(1) says when it is the one that killed the scan.
    child = spawn("timeout", ["--verbose", "-s", "KILL", limit, RD_BIN, ...RD_FLAGS, scanRoot], {
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
  /** @type {Promise<ScanResult>} */
  const finished = new Promise((resolve) => {
    /** @param {{ code?: number, error?: Error }} result */
    const end = (result) => resolve({
      ...result,
      seconds: (performance.now() - started) / 1000,
      limit,
      stdout: result.error ? "" : fs.readFileSync(outFile, "utf8"),
      stderr: result.error ? "" : fs.readFileSync(errFile, "utf8"),
    });
    child.on("error", (error) => end({ error }));
    child.on("exit", (code, signal) => end({ code: exitCode(code, signal) }));
  });
  const stop = () => {
    try {
      // timeout(1) leads its own process group, once it has started.
      process.kill(-(/** @type {number} */ (child.pid)), "SIGKILL");
    } catch {
      child.kill("SIGKILL");
    }
  };
  return { finished, stop };
}

/**
 * Whether timeout(1) ended the scan at its limit.
 * @param {{ code?: number, stderr: string }} scan
 */
const outlasted = ({ code, stderr }) => (code === 137 || code === 124) && /timeout: sending signal/.test(stderr);

/**
 * The report of a finished scan, checked. After the submission, whatever breaks the
 * scan came from its files: the agent's.
 * @param {Config} config
 * @param {ScanResult} scan
 * @param {{ afterSubmission?: boolean }} [options]
 * @returns {DoctorReport}
 */
export function checkScan(config, { code, error, stdout, stderr, limit }, { afterSubmission = false } = {}) {
  const Failure = afterSubmission ? SubmissionFailure : HarnessError;
  if (error) throw new HarnessError(`cannot run react-doctor: ${error.message}`);
  if (code === 137 || code === 124) {
    throw new Failure(outlasted({ code, stderr })
      ? `the React Doctor scan did not finish within rd.timeout_sec = ${limit} s`
      : `the React Doctor scan was killed (exit ${code})`);
  }
  /** @type {DoctorReport} */
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

/**
 * A changed file the scan reads elsewhere in its copy of the graded tree, and how.
 * @typedef {object} Placement
 * @property {string} file  the graded path (relative to /app)
 * @property {string} scanned  where the scan reads it (relative to the copy's root)
 * @property {"after" | "base"} version  the submission's, or the base commit's
 * @property {number} padding  blank lines put in before its second line, or its first
 * @property {boolean} hashbang  whether they follow its first line (a `#!` line)
 */

// Blank lines that take any file below React Doctor's minified test (an average line
// of 500 characters over its first 64 KiB: 132 lines).
const PADDING = 140;

/**
 * Why React Doctor would skip a changed file or read it with most rules off (null:
 * it reads it as production code): the scan reads such a file at a production
 * placement instead, with blank lines before it where its lines are long.
 * @param {string} file  relative to /app
 * @param {Config} config
 * @returns {string | null}
 */
export function placementReason(file, config) {
  if (!CODE_EXTENSIONS.has(path.extname(file).toLowerCase()) || SPEC_PATH.test(file)) return null;
  if (DECLARATION.test(path.posix.basename(file))) return "a type declaration";
  if (config.test_like_allowed.some((root) => file === root || file.startsWith(`${root}/`))) return null;
  const by = testLike(file) ?? testContext(path.posix.relative(path.relative(APP, config.rd.scan_root), file));
  return by ? `test-like by ${by}` : null;
}

/**
 * A file's content in the base commit, or null where it had none.
 * @param {string} file  relative to /app
 * @returns {Buffer | null}
 */
function baseBlob(file) {
  let base;
  try {
    base = fs.readFileSync(path.join(STATE, "base-sha"), "utf8").trim();
  } catch {
    return null;
  }
  const shown = spawnSync("git", ["-C", APP, "cat-file", "blob", `${base}:${file}`], { maxBuffer: 64 << 20 });
  return shown.status === 0 ? shown.stdout : null;
}

/** @type {Map<string, Placement[]>} */
const placements = new Map();

/**
 * The placements of the scan that read this copy ([] for none).
 * @param {string} root
 * @returns {Placement[]}
 */
export const placementsOf = (root) => placements.get(root) ?? [];

/**
 * The graded tree as the scan reads it: /app without the test room in it. A changed
 * file the scan would skip or read with most rules off (placementReason, or
 * minified-looking) is also put where React Doctor reads it as production code, the
 * base commit's version beside it where the base had one; the gate reads their
 * findings as the file's (readPlacements).
 * @param {Config} [config]
 * @param {string[]} [changed]  the graded tree's changes from the base commit (none: the base)
 * @returns {string} the copy
 */
export function copyForScan(config, changed = []) {
  const root = path.join(SCAN_DIR, "app");
  fs.mkdirSync(SCAN_DIR, { recursive: true, mode: 0o700 });
  fs.rmSync(root, { recursive: true, force: true });
  // -a: links (node_modules, the pristine dependencies) stay links, never followed.
  const copied = run("cp", ["-a", `${APP}/.`, root], { cwd: "/" });
  if (copied.code !== 0) throw new Error(`cannot copy the graded tree for the scan: ${copied.stderr}`);
  /** @type {Placement[]} */
  const placed = [];
  const taken = (/** @type {string} */ candidate) =>
    fs.existsSync(path.join(root, candidate)) || placed.some((p) => p.scanned === candidate);
  for (const file of config ? changed : []) {
    let content;
    try {
      const stat = fs.lstatSync(path.join(root, file));
      if (!stat.isFile()) continue;
      content = fs.readFileSync(path.join(root, file));
    } catch {
      continue;  // deleted
    }
    if (!placementReason(file, /** @type {Config} */ (config)) && !(CODE_EXTENSIONS.has(path.extname(file).toLowerCase()) &&
        !SPEC_PATH.test(file) && minifiedLooking(content))) continue;
    for (const [version, text] of /** @type {[("after" | "base"), Buffer | null][]} */ (
      [["after", content], ["base", baseBlob(file)]])) {
      if (text === null) continue;
      const scanned = productionPlacement(file, taken, path.relative(APP, config?.rd.scan_root ?? APP));
      const padding = minifiedLooking(text) ? PADDING : 0;
      const hashbang = text.subarray(0, 2).toString() === "#!";
      const cut = hashbang ? text.indexOf(10) + 1 || text.length : 0;
      fs.mkdirSync(path.dirname(path.join(root, scanned)), { recursive: true });
      fs.writeFileSync(path.join(root, scanned), Buffer.concat(
        [text.subarray(0, cut), Buffer.from("\n".repeat(padding)), text.subarray(cut)]));
      placed.push({ file, scanned, version, padding, hashbang });
    }
  }
  placements.set(root, placed);
  return root;
}

/**
 * The two reports as if React Doctor had read each placed file at its own path under
 * production rules: in the scan's report, a placed file's own findings and analysis
 * give way to its placement's (its lines as in the file); in the baseline, to those
 * of its base version's placement.
 * @param {Placement[]} placed
 * @param {DoctorReport} before  the baseline
 * @param {DoctorReport} after  the scan's report, of the copy at `root`
 * @param {string} root  the copy
 * @param {string} scanRoot  the scan's root in the copy
 * @returns {{ before: DoctorReport, after: DoctorReport }}
 */
export function readPlacements(placed, before, after, root, scanRoot) {
  if (!placed.length) return { before, after };
  const files = new Set(placed.map((p) => p.file));
  /** @type {Map<string, Placement>} */
  const byScanned = new Map(placed.map((p) => [p.scanned, p]));
  const rel = (/** @type {string} */ dir, /** @type {string} */ file) => path.relative(root, path.resolve(dir, file));
  /** @type {Diagnostic[]} */
  const baseFindings = [];
  /** @type {Diagnostic[]} */
  const diagnostics = [];
  for (const d of after.diagnostics ?? []) {
    const at = rel(scanRoot, d.filePath);
    const placement = byScanned.get(at);
    if (!placement) {
      if (!files.has(at)) diagnostics.push(d);
      continue;
    }
    /** @type {Diagnostic} */
    const moved = { ...d, filePath: path.relative(scanRoot, path.join(root, placement.file)) };
    // The padding's lines come after a `#!` line, else first.
    if (d.line !== undefined && (!placement.hashbang || d.line > 1)) moved.line = Math.max(1, d.line - placement.padding);
    (placement.version === "after" ? diagnostics : baseFindings).push(moved);
  }
  const projects = (after.projects ?? []).map((project) => {
    const dir = project.directory ?? root;
    /** @type {string[]} */
    const analysed = [];
    for (const file of project.analyzedFiles ?? []) {
      const at = rel(dir, file);
      const placement = byScanned.get(at);
      if (placement?.version === "after") analysed.push(path.relative(dir, path.join(root, placement.file)));
      else if (!placement && !files.has(at)) analysed.push(file);
    }
    return { ...project, analyzedFiles: analysed };
  });
  const rebased = new Set(placed.filter((p) => p.version === "base").map((p) => p.file));
  const baseline = (before.diagnostics ?? []).filter((d) => !rebased.has(rel(scanRoot, d.filePath)));
  return {
    before: { ...before, diagnostics: [...baseline, ...baseFindings] },
    after: { ...after, diagnostics, projects },
  };
}

/** @param {Diagnostic} d */
const findingKey = (d) => `${d.rule}\u0000${d.filePath}`;

/**
 * The findings that gate, by rule and file.
 * @param {DoctorReport} report
 * @returns {Map<string, Diagnostic[]>}
 */
function byKey(report) {
  /** @type {Map<string, Diagnostic[]>} */
  const groups = new Map();
  for (const d of report.diagnostics ?? []) {
    if (isStyleOnly(d.rule)) continue;
    const key = findingKey(d);
    if (!groups.has(key)) groups.set(key, []);
    /** @type {Diagnostic[]} */ (groups.get(key)).push(d);
  }
  return groups;
}

/**
 * @param {Diagnostic} d
 * @param {number} before
 * @param {number} after
 * @returns {Finding}
 */
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

/**
 * Whether a finding is the target `rule` or `rule@file`.
 * @param {string} target
 * @param {Diagnostic} d
 */
export const matchesTarget = (target, d) => {
  const [rule, file] = target.split("@");
  return d.rule === rule && (!file || d.filePath === file);
};

/**
 * New findings the task tolerates (`rd.ignored_new_footguns`, as the public grader
 * names them: rule, title and file, the file also as a path suffix). Each entry
 * tolerates one: a rule's findings in a file may grow past the base by as many entries
 * as match them (a mined task lists the findings the team's own change added), no more.
 * @param {IgnoredFootgun} entry
 * @param {Diagnostic} d
 */
export const matchesIgnored = (entry, d) =>
  d.rule === entry.rule && (d.title ?? "") === entry.title &&
  (d.filePath === entry.filePath || d.filePath.endsWith(`/${entry.filePath}`));

/**
 * The gate's verdict on the scan after the submission against the baseline.
 * @param {DoctorReport} before
 * @param {DoctorReport} after
 * @param {string[]} [targets]
 * @param {IgnoredFootgun[]} [ignored]
 * @returns {DoctorVerdict}
 */
export function compareReports(before, after, targets = [], ignored = []) {
  const beforeGroups = byKey(before);
  /** @type {Finding[]} */
  const fresh = [];
  /** @type {Finding[]} */
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

// ------------------------------------------------------------ hidden timers

// React Doctor follows a timer where it is called by name: its cleanup rules see
// `setInterval(tick, 1000)` in an effect, not a timer function kept under another
// name (`const every = globalThis.setInterval`), passed on (`setInterval.call(...)`,
// `{ setInterval }`) or read by a string (`window["setInterval"]`). The gate counts such
// references in the changed code files as findings of a rule of its own, new when a
// file has more of them than the base commit's.
export const HIDDEN_TIMER_RULE = "reactbench/hidden-timer";
const TIMER_NAMES = "setInterval|setTimeout";
const TIMER_WORD = new RegExp(`(?<![\\w$])(${TIMER_NAMES})(?![\\w$])`, "g");
const TIMER_STRING = new RegExp(`\\[\\s*(["'\`])(${TIMER_NAMES})\\1\\s*\\]`, "g");

/**
 * The source with comments, and (`strings`) the insides of string literals, blanked;
 * line breaks kept, so that offsets still give lines.
 * @param {string} source
 * @param {boolean} strings
 */
function blanked(source, strings) {
  const pattern = strings
    ? /\/\*[\s\S]*?\*\/|\/\/[^\n]*|(["'`])(?:\\[\s\S]|(?!\1)[^\\])*\1/g
    : /\/\*[\s\S]*?\*\/|\/\/[^\n]*/g;
  return source.replace(pattern, (text) => {
    const quote = strings && /^["'`]/.test(text) ? text[0] : "";
    const inside = quote ? text.slice(1, -1) : text;
    return quote + inside.replace(/[^\n]/g, " ") + quote;
  });
}

/**
 * Where a source refers to a timer function other than by calling it: [name, line].
 * @param {string} source
 * @returns {[string, number][]}
 */
export function hiddenTimers(source) {
  const lineOf = (/** @type {number} */ at) => source.slice(0, at).split("\n").length;
  /** @type {[string, number][]} */
  const found = [];
  const code = blanked(source, false);
  for (const m of code.matchAll(TIMER_STRING)) found.push([/** @type {string} */ (m[2]), lineOf(m.index)]);
  const bare = blanked(source, true);
  for (const m of bare.matchAll(TIMER_WORD)) {
    const before = bare.slice(Math.max(0, m.index - 200), m.index);
    const after = bare.slice(m.index + m[0].length, m.index + m[0].length + 200);
    if (/^\s*(<[^>()]*>\s*)?\(/.test(after)) continue;  // a call
    if (/\btypeof\s+([\w$]+\s*\.\s*)*$/.test(before)) continue;  // a type: typeof setTimeout
    if (/[{,]\s*$/.test(before) && /^\s*:(?!:)/.test(after)) continue;  // an object key
    found.push([/** @type {string} */ (m[1]), lineOf(m.index)]);
  }
  return found.sort((a, b) => a[1] - b[1]);
}

/**
 * The hidden-timer findings of the changed code files, new where a file has more than
 * the base commit's (`baseSource`: a file's text in the base, "" where it had none).
 * @param {string[]} changed  paths relative to `root`
 * @param {(file: string) => string} baseSource
 * @param {string} [root]
 * @returns {Finding[]}
 */
export function hiddenTimerFindings(changed, baseSource, root = APP) {
  /** @type {Finding[]} */
  const findings = [];
  for (const file of changed) {
    if (!CODE_EXTENSIONS.has(path.extname(file).toLowerCase()) || SPEC_PATH.test(file)) continue;
    let source;
    try {
      source = fs.readFileSync(path.join(root, file), "utf8");
    } catch {
      continue;  // deleted
    }
    const now = hiddenTimers(source);
    const had = hiddenTimers(baseSource(file)).length;
    if (now.length <= had) continue;
    for (const [name, line] of now) {
      findings.push({
        rule: HIDDEN_TIMER_RULE, file, line,
        title: `${name} used other than by a call`,
        message: `${name} kept under another name, passed on or read by a string starts timers React ` +
          "Doctor's cleanup rules never see: call it by name where it starts a timer",
        category: "Correctness", count: `${had} -> ${now.length}`,
      });
    }
  }
  return findings;
}

/**
 * A file's text in the base commit of /app's history, or "" where it had none.
 * @param {string} file
 */
export function baseSourceOf(file) {
  let base = "";
  try {
    base = fs.readFileSync(path.join(STATE, "base-sha"), "utf8").trim();
  } catch {
    return "";
  }
  const shown = spawnSync("git", ["-C", APP, "show", `${base}:${file}`], { encoding: "utf8", maxBuffer: 64 << 20 });
  return shown.status === 0 ? shown.stdout : "";
}

/**
 * Changed code files the after-scan did not analyse: a gate that did not look at
 * the change cannot pass it.
 * @param {DoctorReport} report
 * @param {string[]} changed  paths relative to /app
 * @param {string} [root]  the tree the scan read (/app, or its copy)
 * @returns {string[]}
 */
export function unscanned(report, changed, root = APP) {
  const analysed = new Set();
  for (const project of report.projects ?? []) {
    for (const file of project.analyzedFiles ?? []) {
      analysed.add(path.relative(root, path.resolve(project.directory ?? root, file)));
    }
  }
  return changed.filter(
    (file) =>
      CODE_EXTENSIONS.has(path.extname(file).toLowerCase()) && !SPEC_PATH.test(file) &&
      fs.existsSync(path.join(root, file)) && !analysed.has(file),
  );
}

/**
 * The React Doctor gate from a scan started earlier (none: the tree is the base
 * commit, whose scan is the baked baseline).
 * @param {Config} config
 * @param {DoctorReport} before  the baseline
 * @param {{ root: string, run: Scan } | null} scanning
 * @param {{ changed: string[] }} submission
 * @param {Record<string, number>} timings  gets the scan's seconds
 * @returns {Promise<DoctorVerdict>}
 */
export async function doctorGate(config, before, scanning, submission, timings) {
  let after = before;
  let baseline = before;
  if (scanning) {
    let finished = await scanning.run.finished;
    timings.scan = finished.seconds;
    if (outlasted(finished)) {
      // A loaded machine, or the submission: one more scan tells them apart before
      // the time is charged to the agent.
      log(`the React Doctor scan outlasted rd.timeout_sec = ${finished.limit} s: scanning once more`);
      finished = await startScan(config, { afterSubmission: true, root: scanning.root }).finished;
      timings.scan += finished.seconds;
    }
    after = checkScan(config, finished, { afterSubmission: true });
    fs.writeFileSync(path.join(LOGS, "rd-after.json"), JSON.stringify(after));
    const scanRoot = path.join(scanning.root, path.relative(APP, config.rd.scan_root));
    ({ before: baseline, after } = readPlacements(placementsOf(scanning.root), before, after, scanning.root, scanRoot));
  } else {
    timings.scan = 0;
    fs.writeFileSync(path.join(LOGS, "rd-after.json"), JSON.stringify(after));
  }
  const doctor = compareReports(baseline, after, config.rd.targets, config.rd.ignored_new_footguns);
  doctor.unscanned = unscanned(after, submission.changed, scanning?.root);
  if (doctor.unscanned.length) doctor.ok = false;
  const hidden = hiddenTimerFindings(submission.changed, baseSourceOf, scanning?.root);
  if (hidden.length) {
    doctor.new.push(...hidden);
    doctor.ok = false;
  }
  return doctor;
}

/** @param {DoctorVerdict} doctor */
export function logDoctor(doctor) {
  log(`react doctor: ${doctor.ok ? "pass" : "FAIL"} (${doctor.new.length} new, ${doctor.remaining_targets.length} targets left)`);
  for (const f of doctor.new) log(`  new ${f.rule} ${f.file}:${f.line ?? ""} ${f.title}`);
  for (const f of doctor.ignored ?? []) log(`  new but tolerated by the task: ${f.rule} ${f.file}:${f.line ?? ""} ${f.title}`);
  for (const f of doctor.unscanned ?? []) log(`  changed but not scanned: ${f}`);
}
