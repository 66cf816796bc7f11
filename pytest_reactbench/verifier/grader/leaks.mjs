// Leaks: the behavioural half of the code-health gate. React Doctor reads the code and
// misses a timer or a listener started through a name it does not follow (an alias of
// useEffect, a custom hook, a class component, window.setInterval, a bound
// addEventListener, a name built at run time, code built by the Function constructor).
// The leak watch (leak-watch.mjs, a setup file of the unit step's Vitest workers) sees
// them run instead: after each hidden test has unmounted what it rendered, the timers
// and the window's and document's listeners still live, with the files on the stacks
// that made them. A live one that a file of the submission's made fails the React
// Doctor gate as a finding of its rule would; a watch that left no report for a spec
// that ran fails it too, since silence is no proof of no leak.
import fs from "node:fs";
import path from "node:path";

import { VITEST_SETUP_FILES } from "./canaries.mjs";
import { APP, CODE_EXTENSIONS, LOGS, ROOM_REPORTS, SPEC_PATH } from "./config.mjs";
import { readReport } from "./reports.mjs";

/**
 * @import { Finding } from "./doctor.mjs"
 */

export const LEAK_WATCH = "leak-watch.mjs";
export const LEAKED_TIMER_RULE = "reactbench/leaked-timer";
export const LEAKED_LISTENER_RULE = "reactbench/leaked-listener";
export const LEAK_WATCH_RULE = "reactbench/leak-watch";
const REPORT_NAME = /^leak-watch-\d+-[0-9a-f]+\.json$/;
// Reports read at most: a worker writes one per spec file.
const MAX_REPORTS = 500;

/**
 * Something the watch saw live after a test.
 * @typedef {object} Leak
 * @property {"timer" | "listener"} kind
 * @property {string[]} files  absolute paths of the source files on the stack that made it
 * @property {string} what
 */

/**
 * One spec file's leak report (its worker's latest).
 * @typedef {object} LeakReport
 * @property {string} spec  absolute path
 * @property {number} tests  tests it reported after
 * @property {boolean} watching  whether the watch's hook and listener watch were still on
 * @property {Leak[]} leaks
 */

/**
 * What the unit step left for the leak judgement: whether the watch ran at all, its
 * reports, and the spec files that ran tests (relative to /app) with how many.
 * @typedef {object} LeakWatch
 * @property {boolean} installed
 * @property {LeakReport[]} reports
 * @property {Map<string, number>} ran
 */

/**
 * What the e2e guard reported as one e2e test ended (e2e-guard.js: watchLeaks), under
 * one browser profile: what was live, by source file, and the files of the components
 * still mounted.
 * @typedef {object} E2eLeakReport
 * @property {string} test  the test's key (spec file relative to /app, titles) and project
 * @property {boolean} watching
 * @property {string} [problem]
 * @property {{ kind: string, what: string, files: string[], closures?: number, owners?: string[],
 *   repeating?: boolean }[]} leaks  what was live, with the file of its code, the closures it was made
 *   in and, for a timer, whether it runs on (an interval, or a timeout that ran twice in the window)
 * @property {{ file: string, names: string[] }[]} mounted  the code still mounted: each
 *   mounted component's and effect's file (absolute) and the names it owns
 */

/**
 * What the e2e step left for the leak judgement: each test run (one a profile) with
 * the guard's report, or null where it left none.
 * @typedef {object} E2eLeakWatch
 * @property {{ test: string, spec: string, report: E2eLeakReport | null }[]} runs
 */

/** @type {LeakWatch} */
let watched = { installed: false, reports: [], ran: new Map() };
/** @type {E2eLeakWatch} */
let e2eWatched = { runs: [] };

export const E2E_LEAKS_ANNOTATION = "reactbench-leaks";

/**
 * The e2e guard's leak reports in Playwright's JSON report: one per test run that ran
 * (skipped runs have none), null where the guard left none.
 * @param {any} report  Playwright's JSON report
 * @param {string} [app]
 * @returns {E2eLeakWatch}
 */
export function e2eLeakRuns(report, app = APP) {
  /** @type {E2eLeakWatch["runs"]} */
  const runs = [];
  const root = report?.config?.rootDir ?? app;
  /**
   * @param {any} suite
   * @param {string[]} trail
   */
  const visit = (suite, trail) => {
    for (const spec of suite.specs ?? []) {
      const file = path.relative(app, path.resolve(root, String(spec.file ?? suite.file ?? "")));
      for (const test of spec.tests ?? []) {
        for (const result of test.results ?? []) {
          if (result.status === "skipped") continue;
          const notes = [...(result.annotations ?? []), ...(test.annotations ?? [])]
            .filter((a) => a?.type === E2E_LEAKS_ANNOTATION);
          /** @type {E2eLeakReport | null} */
          let parsed = null;
          try {
            const got = notes.length ? JSON.parse(String(notes.at(-1).description)) : null;
            if (got && typeof got.watching === "boolean" && Array.isArray(got.leaks)) {
              parsed = { ...got, mounted: Array.isArray(got.mounted) ? got.mounted : [] };
            }
          } catch {}
          runs.push({ test: [file, ...trail, spec.title, String(test.projectName ?? "")].join(" > "), spec: file,
            report: parsed });
        }
      }
    }
    for (const child of suite.suites ?? []) visit(child, [...trail, child.title]);
  };
  for (const suite of report?.suites ?? []) visit(suite, []);
  return { runs };
}

/**
 * Kept after the e2e step (with our config and guard: the annotations are the guard's).
 * @param {any} report  Playwright's JSON report
 */
export function collectE2eLeaks(report) {
  e2eWatched = e2eLeakRuns(report);
}

/** What collectE2eLeaks kept (and a fresh start for the next grading). */
export function takeE2eLeaks() {
  const taken = e2eWatched;
  e2eWatched = { runs: [] };
  return taken;
}

/**
 * A leak of the base commit's own code under the hidden tests, as its bake found it:
 * rule, file (relative to the app) and what was left.
 * @typedef {[rule: string, file: string, what: string]} BaseLeak
 */

export const LEAK_BASELINE = "leak-baseline.json";

/**
 * @param {string} rule
 * @param {string} file
 * @param {string} what
 */
const baseKey = (rule, file, what) => [rule, file, what].join("\u0000");

/** @param {BaseLeak[]} base */
const baseKeys = (base) => new Set(base.map(([rule, file, what]) => baseKey(rule, file, what)));

/**
 * The base's leaks: what a run of the hidden tests on the base commit (at its bake,
 * bake.mjs) left, every code file of the base judged as the changed ones are. A leak is
 * the submission's only where the base did not leave the same (rule, file and what), as
 * React Doctor's findings are compared with its baseline.
 * @param {LeakWatch} watch
 * @param {E2eLeakWatch} e2e
 * @param {string[]} code  the base's files, relative to `app`
 * @param {string} [app]
 * @returns {BaseLeak[]}
 */
export function baseLeaks(watch, e2e, code, app = APP) {
  const own = new Set(ownCode(code));
  /** @type {Map<string, BaseLeak>} */
  const found = new Map();
  for (const { rule, file, what } of [...unitLeaks(watch, own, app), ...e2eLeaks(e2e, own, app)]) {
    found.set(baseKey(rule, file, what), [rule, file, what]);
  }
  return [...found.values()].sort();
}

/**
 * What the bake kept of the base's leaks (none where it kept nothing: a grader older
 * than the baseline, or a test run that could not run on the base).
 * @param {string} state  the grader's state folder
 * @returns {BaseLeak[]}
 */
export function readLeakBaseline(state) {
  try {
    const got = JSON.parse(fs.readFileSync(path.join(state, LEAK_BASELINE), "utf8"));
    return Array.isArray(got) ? got.filter((l) => Array.isArray(l) && l.length === 3).map((l) => [
      String(l[0]), String(l[1]), String(l[2])]) : [];
  } catch {
    return [];
  }
}

/**
 * The changed files a leak can be the submission's: its code, not the hidden tests'.
 * @param {string[]} changed  relative to the app
 * @returns {string[]}
 */
export const ownCode = (changed) => changed.filter(
  (file) => CODE_EXTENSIONS.has(path.extname(file).toLowerCase()) && !SPEC_PATH.test(file));

/**
 * Each leak of the e2e runs that is the code's of `own`: a timer or listener live as
 * an e2e test ended whose code is in one of those files and was made inside a function
 * (a closure: an effect's or a component's callback), when no code of that file is
 * still mounted and none of the functions it was made in is a mounted component's or
 * effect's (a component on screen may keep its own timers and listeners).
 * @param {E2eLeakWatch} watch
 * @param {Set<string>} own  code files, relative to `app`
 * @param {string} app
 * @returns {Generator<{ rule: string, file: string, what: string, test: string }>}
 */
function* e2eLeaks(watch, own, app) {
  for (const { test, report } of watch.runs) {
    // No report: the test had no page of the guard's (a spec that opens its own
    // browser); what the guard's pages report is what is judged.
    if (!report?.watching) continue;
    const mountedFiles = new Set(report.mounted.map((m) => path.relative(app, String(m?.file))));
    const mountedNames = new Set(report.mounted.flatMap((m) => Array.isArray(m?.names) ? m.names.map(String) : []));
    for (const leak of report.leaks) {
      // Code made at the top of a module belongs to no component: not judged here.
      if (!(Number(leak?.closures) > 0)) continue;
      // A timeout that ran once in the window ran out (a debounce, a delayed save): only
      // what runs on (an interval, a timeout that arms itself again) is left running.
      if (leak.kind === "timer" && leak.repeating === false) continue;
      if ((Array.isArray(leak.owners) ? leak.owners : []).some((name) => mountedNames.has(String(name)))) continue;
      const files = Array.isArray(leak.files) ? leak.files.map((f) => path.relative(app, String(f))) : [];
      const file = files.find((f) => own.has(f) && !mountedFiles.has(f));
      if (!file) continue;
      const rule = leak.kind === "listener" ? LEAKED_LISTENER_RULE : LEAKED_TIMER_RULE;
      yield { rule, file, what: String(leak.what ?? leak.kind), test };
    }
  }
}

/**
 * The e2e leak findings: each leak of a changed code file's (e2eLeaks) that the base's
 * own code did not leave too, by rule and file; and a test run the guard could not watch.
 * @param {E2eLeakWatch} watch
 * @param {string[]} changed  relative to `app`
 * @param {string} [app]
 * @param {BaseLeak[]} [base]  what the base's own code left under the same tests: not new
 * @returns {Finding[]}
 */
export function e2eLeakFindings(watch, changed, app = APP, base = []) {
  const known = baseKeys(base);
  /** @type {Map<string, { rule: string, file: string, what: Set<string>, tests: Set<string> }>} */
  const found = new Map();
  for (const { rule, file, what, test } of e2eLeaks(watch, new Set(ownCode(changed)), app)) {
    if (known.has(baseKey(rule, file, what))) continue;
    const key = `${rule}\u0000${file}`;
    const entry = found.get(key) ?? { rule, file, what: new Set(), tests: new Set() };
    entry.what.add(what);
    entry.tests.add(test);
    found.set(key, entry);
  }
  /** @type {Finding[]} */
  const findings = [...found.values()].map(({ rule, file, what, tests }) => ({
    rule, file, line: null,
    title: rule === LEAKED_LISTENER_RULE ? "event listener left on after unmount (e2e)"
      : "timer left running after unmount (e2e)",
    message: `${[...what].join(", ")}, from ${file}, with no code of ${file} still mounted, as the e2e ` +
      `test ${[...tests][0]} ended in the production build: clean it up when the component unmounts`,
    category: "Correctness", count: `0 -> ${what.size}`,
  }));
  /** @type {Map<string, string>} */
  const silent = new Map();
  for (const { test, spec, report } of watch.runs) {
    if (report && !report.watching && !silent.has(spec)) {
      silent.set(spec, `could not watch ${test} (${report.problem ?? "no reason"})`);
    }
  }
  for (const [spec, why] of silent) {
    findings.push({
      rule: LEAK_WATCH_RULE, file: spec, line: null, title: "the e2e leak watch was silenced",
      message: `the grader's e2e leak watch ${why}: no leak can be told from a watch that did not see the page`,
      category: "Correctness", count: "0 -> 1",
    });
  }
  return findings;
}

/**
 * The spec files of a step's results that ran tests, with how many (file-level errors
 * are no tests).
 * @param {Map<string, string>} results  test key -> status
 * @returns {Map<string, number>}
 */
export function specsRan(results) {
  /** @type {Map<string, number>} */
  const ran = new Map();
  for (const [key, status] of results) {
    const [file, ...titles] = key.split("\u0000");
    if (!file || titles.at(-1) === "(file)" || status === "skipped" || status === "pending" || status === "todo") continue;
    ran.set(file, (ran.get(file) ?? 0) + 1);
  }
  return ran;
}

/**
 * The watch's reports in the room's reports folder (before the room is swept), each
 * kept in `keep`. One the room spoiled counts as none.
 * @param {string} [from]
 * @param {string} [keep]
 * @returns {LeakReport[]}
 */
export function readLeakReports(from = ROOM_REPORTS, keep = LOGS) {
  let names;
  try {
    names = fs.readdirSync(from).filter((name) => REPORT_NAME.test(name)).sort().slice(0, MAX_REPORTS);
  } catch {
    return [];
  }
  /** @type {LeakReport[]} */
  const reports = [];
  for (const name of names) {
    try {
      const report = readReport(name, from, keep);
      if (report && typeof report.spec === "string" && Array.isArray(report.leaks)) reports.push(report);
    } catch {}
  }
  return reports;
}

/**
 * Kept after the unit step, while its room is still there: the judgement comes later.
 * @param {boolean} reporter  whether the step ran with the grader's reporter, which adds
 *   the grader's setup files (canaries.mjs: VITEST_SETUP_FILES, the watch among them)
 * @param {Map<string, string>} results  the step's test results, canaries taken out
 * @param {string} [from]
 * @param {string} [keep]
 * @param {readonly string[]} [setupFiles]
 * @param {import("./canaries.mjs").VitestRun | null} [signed]  the grader's reporter's run, when
 *   the step had one
 */
export function collectLeaks(reporter, results, from = ROOM_REPORTS, keep = LOGS, setupFiles = VITEST_SETUP_FILES,
  signed = null) {
  // From the signed report where there is one (a file of the room's any of its
  // processes could have written); the files are the record's.
  const files = readLeakReports(from, keep);
  watched = reporter && setupFiles.includes(LEAK_WATCH)
    ? { installed: true, reports: signed ? signedLeakReports(signed) : files, ran: specsRan(results) }
    : { installed: false, reports: [], ran: new Map() };
}

/**
 * The watch's reports as the grader's reporter signed them: the last one of each spec
 * (each test's report holds all that is live after it).
 * @param {import("./canaries.mjs").VitestRun} signed  the run
 * @returns {LeakReport[]}
 */
export function signedLeakReports(signed) {
  /** @type {Map<string, LeakReport>} */
  const last = new Map();
  for (const file of signed.testResults ?? []) {
    for (const test of file.assertionResults ?? []) {
      if (typeof test.leaks !== "string") continue;
      try {
        const report = JSON.parse(test.leaks);
        if (report && typeof report.spec === "string" && Array.isArray(report.leaks)
            && !(Number(last.get(report.spec)?.tests) > Number(report.tests))) last.set(report.spec, report);
      } catch {}
    }
  }
  return [...last.values()];
}

/** What collectLeaks kept (and a fresh start for the next grading). */
export function takeLeaks() {
  const taken = watched;
  watched = { installed: false, reports: [], ran: new Map() };
  return taken;
}

/**
 * Each live timer or listener of the unit watch's reports that a file of `own` made (on
 * its stack).
 * @param {LeakWatch} watch
 * @param {Set<string>} own  code files, relative to `app`
 * @param {string} app
 * @returns {Generator<{ rule: string, file: string, what: string }>}
 */
function* unitLeaks(watch, own, app) {
  for (const report of watch.installed ? watch.reports : []) {
    for (const leak of report.leaks) {
      const files = Array.isArray(leak?.files) ? leak.files.map((f) => path.relative(app, String(f))) : [];
      const file = files.find((f) => own.has(f));
      if (!file) continue;
      const rule = leak.kind === "listener" ? LEAKED_LISTENER_RULE : LEAKED_TIMER_RULE;
      yield { rule, file, what: String(leak.what ?? leak.kind) };
    }
  }
}

/**
 * The leak findings: each live timer or listener that a changed code file of the
 * submission's made (on its stack) and the base's own code did not leave too, by rule
 * and file; and a spec that ran tests with no report of the watch after each of them,
 * or a watch switched off.
 * @param {LeakWatch} watch
 * @param {string[]} changed  the submission's changed files, relative to `app`
 * @param {string} [app]
 * @param {BaseLeak[]} [base]  what the base's own code left under the same tests: not new
 * @returns {Finding[]}
 */
export function leakFindings(watch, changed, app = APP, base = []) {
  if (!watch.installed) return [];
  const known = baseKeys(base);
  /** @type {Map<string, { rule: string, file: string, what: string[] }>} */
  const found = new Map();
  for (const { rule, file, what } of unitLeaks(watch, new Set(ownCode(changed)), app)) {
    if (known.has(baseKey(rule, file, what))) continue;
    const key = `${rule}\u0000${file}`;
    const entry = found.get(key) ?? { rule, file, what: [] };
    entry.what.push(what);
    found.set(key, entry);
  }
  /** @type {Finding[]} */
  const findings = [...found.values()].map(({ rule, file, what }) => {
    const listener = rule === LEAKED_LISTENER_RULE;
    const kinds = [...new Set(what)];
    return {
      rule, file, line: null,
      title: listener ? "event listener left on after unmount" : "timer left running after unmount",
      message: `${kinds.join(", ")}, started by ${file}, ${listener ? "was still listening" : "was still pending"} ` +
        "after the hidden tests unmounted what they rendered: clean it up when the component unmounts",
      category: "Correctness", count: `0 -> ${what.length}`,
    };
  });
  for (const [spec, tests] of watch.ran) {
    const report = watch.reports.find((r) => path.relative(app, r.spec) === spec);
    const why = !report ? "left no report"
      : report.watching !== true ? "was switched off"
        : !(Number(report.tests) >= tests) ? `reported after ${Number(report.tests) || 0} of its ${tests} tests`
          : null;
    if (!why) continue;
    findings.push({
      rule: LEAK_WATCH_RULE, file: spec, line: null, title: "the leak watch was silenced",
      message: `the grader's leak watch ${why} in the run of ${spec}: no leak can be told from a watch ` +
        "the tested code stopped",
      category: "Correctness", count: "0 -> 1",
    });
  }
  return findings;
}
