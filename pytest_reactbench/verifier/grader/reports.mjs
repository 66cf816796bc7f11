// What the test runners report, as the grader reads it: the room's JSON reports
// (Vitest's and Playwright's), walked into one map of test -> status (and one of
// test -> its failure message), the judgement of that map against the tests the task
// expects, and the list of every test for grade.json. This is the one walker of
// those reports: the harness, the report and the miner read grade.json's `specs`.
import fs from "node:fs";
import path from "node:path";

import { APP, LOGS, ROOM_REPORTS } from "./config.mjs";
import { SubmissionFailure } from "./errors.mjs";

/**
 * Vitest's JSON report (the parts the grader reads).
 * @typedef {object} VitestReport
 * @property {VitestFile[]} [testResults]
 */

/**
 * @typedef {object} VitestFile
 * @property {unknown} [name]  its absolute path
 * @property {string} [status]
 * @property {unknown} [message]
 * @property {{ ancestorTitles?: string[], title: string, status: string, failureMessages?: unknown[],
 *   leaks?: unknown }[]} [assertionResults]  `leaks`: the leak watch's report, in the grader's reporter's
 */

/**
 * Playwright's JSON report (the parts the grader reads).
 * @typedef {object} PlaywrightReport
 * @property {{ rootDir?: string }} [config]
 * @property {PlaywrightSuite[]} [suites]
 * @property {{ message?: unknown }[]} [errors]
 */

/**
 * @typedef {object} PlaywrightSuite
 * @property {string} title
 * @property {string} [file]
 * @property {PlaywrightSpec[]} [specs]
 * @property {PlaywrightSuite[]} [suites]
 */

/**
 * @typedef {object} PlaywrightSpec
 * @property {string} title
 * @property {string} [file]
 * @property {boolean} [ok]
 * @property {{ results?: { status: string, error?: { message?: unknown } }[] }[]} [tests]
 */

/**
 * Test results of both runners: testKey(file relative to /app, title path) -> status.
 * @typedef {Map<string, string>} TestResults
 */

/**
 * The failure messages of those tests that have one, by the same keys.
 * @typedef {Map<string, string>} TestMessages
 */

/**
 * One test as grade.json lists it (`tests.specs`).
 * @typedef {object} SpecResult
 * @property {string} file  relative to /app ("playwright": an error outside the specs)
 * @property {string} name  its title path, " > " between titles
 * @property {string} status  the runner's
 * @property {string} message  the first lines of its failure message ("" for none)
 */

// How much of a failure message grade.json keeps: its first lines, as a reader needs.
const MESSAGE_LINES = 12;
const MESSAGE_CHARS = 4000;

/**
 * The first lines of a failure message, without terminal colours.
 * @param {unknown} text
 * @returns {string}
 */
export function firstLines(text) {
  const plain = String(text ?? "").replace(/\u001b\[[0-9;]*m/g, "").trim();
  return plain.split("\n").slice(0, MESSAGE_LINES).join("\n").slice(0, MESSAGE_CHARS);
}

/**
 * A report the room wrote, read as root: never through a link, only a regular file
 * of sane size. A copy goes to `keep` (/logs/verifier). Null: the room wrote none.
 * @param {string} name
 * @param {string} [from]  the room's reports
 * @param {string} [keep]
 * @returns {any}
 */
export function readReport(name, from = ROOM_REPORTS, keep = LOGS) {
  const file = path.join(from, name);
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    const { code } = /** @type {NodeJS.ErrnoException} */ (error);
    if (code === "ENOENT") return null;
    throw new SubmissionFailure(`the test room's ${name} cannot be read (${code})`);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > 64 * 1024 * 1024) {
      throw new SubmissionFailure(`the test room's ${name} is not a plain report file`);
    }
    const text = fs.readFileSync(fd, "utf8");
    fs.writeFileSync(path.join(keep, name), text);
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new SubmissionFailure(`the test room's ${name} is not JSON (${/** @type {Error} */ (error).message})`);
    }
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The key of a test in TestResults.
 * @param {string} file  relative to /app
 * @param {string[]} titles  its describe blocks' titles, then its own
 */
export const testKey = (file, titles) => `${file}\u0000${titles.join(" > ")}`;

/**
 * Vitest's results into `into` (and their failure messages into `messages`). A file
 * that failed without running a test (an import error) is a failed test of its own,
 * "(file)".
 * @param {VitestReport | null | undefined} report
 * @param {TestResults} into
 * @param {TestMessages} [messages]
 */
export function vitestResults(report, into, messages = new Map()) {
  for (const file of report?.testResults ?? []) {
    const rel = path.relative(APP, String(file.name ?? ""));
    for (const test of file.assertionResults ?? []) {
      const key = testKey(rel, [...(test.ancestorTitles ?? []), test.title]);
      into.set(key, test.status);
      const message = firstLines((test.failureMessages ?? []).map(String).join("\n"));
      if (message) messages.set(key, message);
    }
    if (file.status === "failed" && !(file.assertionResults ?? []).length) {
      const key = testKey(rel, ["(file)"]);
      into.set(key, `failed: ${String(file.message ?? "failed to run").split("\n")[0]}`);
      const message = firstLines(file.message);
      if (message) messages.set(key, message);
    }
  }
}

/**
 * Playwright's results into `into`: a spec is passed when every result of every
 * test of it passed, "missing" when it has none, "skipped" when one was skipped.
 * Errors outside the specs (a config that does not load) are failed tests of
 * "playwright".
 * @param {PlaywrightReport | null | undefined} report
 * @param {TestResults} into
 * @param {TestMessages} [messages]
 */
export function playwrightResults(report, into, messages = new Map()) {
  const root = report?.config?.rootDir ?? APP;
  /**
   * @param {PlaywrightSuite} suite
   * @param {string[]} trail
   */
  const visit = (suite, trail) => {
    for (const spec of suite.specs ?? []) {
      const rel = path.relative(APP, path.resolve(root, String(spec.file ?? suite.file ?? "")));
      const results = (spec.tests ?? []).flatMap((t) => t.results ?? []);
      const statuses = new Set(results.map((r) => r.status));
      let status = "passed";
      if (!results.length) status = "missing";
      else if (statuses.has("skipped")) status = "skipped";
      else if ([...statuses].some((s) => s !== "passed") || spec.ok === false) status = "failed";
      const key = testKey(rel, [...trail, spec.title]);
      into.set(key, status);
      const message = firstLines(results.find((r) => r.status !== "passed" && r.error?.message)?.error?.message);
      if (message) messages.set(key, message);
    }
    for (const child of suite.suites ?? []) visit(child, [...trail, child.title]);
  };
  for (const suite of report?.suites ?? []) visit(suite, []);
  for (const error of report?.errors ?? []) {
    const key = testKey("playwright", [/** @type {string} */ (String(error.message ?? "").split("\n")[0])]);
    into.set(key, "failed");
    const message = firstLines(error.message);
    if (message) messages.set(key, message);
  }
}

/**
 * Every test of `results`, in the order the runners reported them, as grade.json
 * lists them.
 * @param {TestResults} results
 * @param {TestMessages} messages
 * @returns {SpecResult[]}
 */
export function specResults(results, messages) {
  return [...results].map(([key, status]) => {
    const cut = key.indexOf("\u0000");
    return { file: key.slice(0, cut), name: key.slice(cut + 1), status, message: messages.get(key) ?? "" };
  });
}

// What a runner reports for a test it did not run on purpose (it.skip, it.todo, ...).
const SKIPPED_STATUSES = new Set(["skipped", "pending", "todo", "disabled"]);

/**
 * Every expected test must have run and passed. A test the list does not declare may
 * be skipped on purpose (the list names what the gate holds the submission to); without
 * a list (tasks made before it existed) every test that ran must have passed, skipped
 * ones included, unless the config says `allow_skipped` (a mined draft, whose list is
 * read from its first run).
 * @param {Record<string, string[]>} expected  spec file -> names of its tests
 * @param {TestResults} results
 * @param {boolean} [allowSkipped]
 * @returns {string[]} what fails, one line each (none: the tests pass)
 */
export function judgeTests(expected, results, allowSkipped = false) {
  /** @type {string[]} */
  const failing = [];
  const declared = Object.entries(expected);
  /** @param {string} status */
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
