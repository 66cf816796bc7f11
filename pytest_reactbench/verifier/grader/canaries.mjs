// Canaries: tests the grader plants in the hidden Vitest specs at every grading, so
// that a report the tested code rewrote is caught. The submission's modules run in the
// same process as the specs that import them; whatever they do to the runner (a hook
// that marks failed tests passed, matchers that never fail, a runner that skips), they
// do to the canaries too. Some canaries must fail and some must pass: each is named
// like the spec's own tests, in the spec's own describe block, with failures of the
// kinds real tests have, and chosen anew at each grading, so the tested code cannot
// tell them from the tests it wants to forge. A canary reported otherwise than planted
// fails the gate as "test results tampered".
//
// The failing canaries make Vitest exit 1. That exit is explained, and the step goes
// on, only when the grader's own reporter (in Vitest's main process, which the tested
// code never runs in) saw no unhandled error and every failure of the report is a
// canary planted to fail.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import { APP, ROOM, ROOM_REPORTS, roomTool } from "./config.mjs";
import { SubmissionFailure } from "./errors.mjs";
import { readReport, testKey } from "./reports.mjs";

/**
 * A test the grader planted.
 * @typedef {object} Canary
 * @property {string} file  the spec, relative to /app
 * @property {string[]} titles  its describe block's title (if any), then its own
 * @property {"fail" | "pass"} must
 */

/**
 * What the grader's reporter saw of a Vitest run (vitest-run.json, signed).
 * @typedef {object} VitestRun
 * @property {number} unhandled  errors outside any test
 * @property {string} [reason]  Vitest's: passed, failed or interrupted
 * @property {import("./reports.mjs").VitestFile[]} [testResults]  the task tree at the run's end
 */

export const RUN_REPORT = "vitest-run.json";
// Where the room's commands load the reporter from: the room's folder, root's.
const REPORTER_FILE = "vitest-run-reporter.mjs";
export const REPORTER = path.join(ROOM, REPORTER_FILE);

const SPEC_FILE = /\.[cm]?[jt]sx?$/;
const JSON_REPORTER = /--reporter(=|\s+)json\b/;

// Words for names like a spec's ("shows the count after a click").
const VERBS = ["shows", "keeps", "renders", "updates", "hides", "announces", "disables", "focuses",
  "lists", "clears", "restores", "labels"];
const OBJECTS = ["the label", "the count", "an empty state", "the list", "the heading", "the button",
  "its value", "the error", "the summary", "each item", "the total", "the title"];
const WHEN = ["after a click", "on first render", "when cleared", "at zero", "when typed into",
  "after a reset", "on load", "when it is empty", "after an update", "twice in a row",
  "when the input changes", "once it settles"];

/** @param {readonly string[]} words */
const pick = (words) => /** @type {string} */ (words[crypto.randomInt(words.length)]);

/**
 * A name like a spec test's that `taken` does not have.
 * @param {Set<string>} taken
 */
function specLikeName(taken) {
  for (;;) {
    const name = `${pick(VERBS)} ${pick(OBJECTS)} ${pick(WHEN)}`;
    if (!taken.has(name)) {
      taken.add(name);
      return name;
    }
  }
}

/**
 * The unit command with the grader's reporter beside Vitest's JSON one; null when the
 * command names no JSON reporter (no canaries are planted: nothing could tell them).
 * @param {string} cmd
 * @returns {string | null}
 */
export function withRunReporter(cmd) {
  if (!/\bvitest\b/.test(cmd) || !JSON_REPORTER.test(cmd)) return null;
  return cmd.replace(JSON_REPORTER, (json) => `${json} --reporter=${REPORTER}`);
}

// The group whose key file only the reporter reads: the unit command starts with it as
// its effective (and saved) group, which the reporter drops before any worker starts.
// No file of the image belongs to it.
export const SEAL_GID = 65533;
const KEY_FILE = "run-key";

// The grader's Vitest setup files (files of the grader's folder), in the order they run:
// after the task's own setup files, in every test worker. The reporter adds them
// (REACTBENCH_VITEST_SETUP).
/** @type {string[]} */
export const VITEST_SETUP_FILES = ["leak-watch.mjs"];

/**
 * The reporter and the grader's setup files, where the room's commands load them from,
 * and a new key for the reporter to sign its report with (a file of SEAL_GID's); the
 * key, and the environment that names those files to the reporter.
 * @param {string} [room]
 * @returns {{ key: Buffer, env: Record<string, string> }}
 */
export function installReporter(room = ROOM) {
  roomTool(REPORTER_FILE);
  const key = crypto.randomBytes(32);
  const keyFile = path.join(room, KEY_FILE);
  fs.rmSync(keyFile, { force: true });
  fs.writeFileSync(keyFile, key, { mode: 0o400 });
  fs.chownSync(keyFile, 0, SEAL_GID);
  fs.chmodSync(keyFile, 0o040);
  return {
    key,
    env: {
      REACTBENCH_VITEST_SETUP: VITEST_SETUP_FILES.map((name) => roomTool(name)).join(":"),
      REACTBENCH_RUN_KEY: keyFile,
    },
  };
}

/**
 * The reporter's report, once every process of the room is gone: the run, if it is the
 * reporter's indeed (signed with `key`); else what is wrong with it. `forged`: a report
 * is there, and not the reporter's.
 * @param {Buffer} key
 * @param {string} [from]
 * @param {string} [keep]
 * @returns {{ run: VitestRun | null, problem: string | null, forged: boolean }}
 */
export function readRunReport(key, from = ROOM_REPORTS, keep = undefined) {
  let document;
  try {
    document = keep === undefined ? readReport(RUN_REPORT, from) : readReport(RUN_REPORT, from, keep);
  } catch (error) {
    if (!(error instanceof SubmissionFailure)) throw error;
    return { run: null, problem: `the unit tests' report is spoiled (${error.message})`, forged: true };
  }
  if (document === null) return { run: null, problem: "the unit tests' report was never written", forged: false };
  const body = document?.body;
  const mac = document?.mac;
  const want = crypto.createHmac("sha256", key).update(String(body)).digest();
  const given = typeof mac === "string" && /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, "hex") : null;
  if (typeof body !== "string" || !given || !crypto.timingSafeEqual(want, given)) {
    return { run: null, problem: "the unit tests' report is not the one the grader's reporter wrote", forged: true };
  }
  try {
    return { run: JSON.parse(body), problem: null, forged: false };
  } catch {
    return { run: null, problem: "the unit tests' report is not JSON", forged: true };
  }
}

/**
 * The first describe title of a spec's source, when it is a plain string literal
 * (no quote or escape in it); null otherwise, and the canaries stand at the top.
 * @param {string} source
 * @returns {string | null}
 */
export function firstDescribe(source) {
  return /\bdescribe\(\s*(["'])([^"'\\\n]*)\1\s*,/.exec(source)?.[2] ?? null;
}

// The opening of a spec's first describe block with a plain string title, up to the
// brace of its body: where canaries go among the spec's own tests.
const DESCRIBE_OPENING = /\bdescribe\(\s*(["'])([^"'\\\n]*)\1\s*,\s*(?:\(\s*\)\s*=>|function\s*\(\s*\))\s*\{/;

/**
 * The canaries' source and the canaries it defines: some at the head of the spec's
 * first describe block (`head`, to go at offset `at`, among the spec's own tests),
 * the rest for the end of the file in a describe block of the same title (imports are
 * hoisted, so they may come last). Where they stand differs from grading to grading,
 * so that the tested code cannot tell them by their place either.
 * @param {string} file  relative to /app
 * @param {string} source  the spec's own
 * @param {Set<string>} taken  names in use
 * @returns {{ code: string, head: { at: number, code: string } | null, canaries: Canary[] }}
 */
export function canarySource(file, source, taken) {
  const id = crypto.randomBytes(4).toString("hex");
  const [d, t, e, s] = ["describe", "test", "expect", "screen"].map((n) => `${n}$${id}`);
  const dom = /["']@testing-library\/react["']/.test(source);
  const title = firstDescribe(source);
  const a = crypto.randomInt(2, 1000);
  /** @type {{ must: "fail" | "pass", body: string }[]} */
  const bodies = [
    { must: "fail", body: `${e}(${a}).toBe(${a + crypto.randomInt(1, 9)});` },
    { must: "pass", body: `${e}(${JSON.stringify(specLikeName(new Set()))}).toContain(" ");` },
  ];
  if (dom) {
    const label = `${pick(VERBS)} ${pick(OBJECTS)}`;
    bodies.push({ must: "fail", body: `${s}.getByRole("button", { name: ${JSON.stringify(label)} });` });
  }
  // In an order of its own each time.
  for (let i = bodies.length - 1; i > 0; i--) {
    const j = crypto.randomInt(i + 1);
    [bodies[i], bodies[j]] = [/** @type {typeof bodies[0]} */ (bodies[j]), /** @type {typeof bodies[0]} */ (bodies[i])];
  }
  const named = bodies.map((b) => ({ ...b, name: specLikeName(taken) }));
  /** @param {typeof named} some */
  const tests = (some) => some.map((b) => `  ${t}(${JSON.stringify(b.name)}, () => {\n    ${b.body}\n  });`).join("\n");
  const imports = [`import { describe as ${d}, test as ${t}, expect as ${e} } from "vitest";`];
  if (dom) imports.push(`import { screen as ${s} } from "@testing-library/react";`);
  // One or more at the head of the spec's own block, when its opening can be found.
  const opening = title === null ? null : DESCRIBE_OPENING.exec(source);
  const first = opening && opening[2] === title ? crypto.randomInt(1, named.length) : 0;
  const atHead = named.slice(0, first);
  const atEnd = named.slice(first);
  const block = title === null ? tests(atEnd).replace(/^ {2}/gm, "") : `${d}(${JSON.stringify(title)}, () => {\n${tests(atEnd)}\n});`;
  return {
    code: `\n${imports.join("\n")}\n\n${block}\n`,
    head: opening && atHead.length ? { at: opening.index + opening[0].length, code: `\n${tests(atHead)}\n` } : null,
    canaries: named.map((b) => ({ file, titles: title === null ? [b.name] : [title, b.name], must: b.must })),
  };
}

/**
 * Plant canaries in the unit step's spec files that the task expects and the command
 * runs with a JSON reporter. Returns them, and the command to run.
 * @param {string} cmd  the unit step's
 * @param {Record<string, string[]>} expected  spec file -> its tests' names
 * @param {string} [app]
 * @returns {{ cmd: string, canaries: Canary[] }}
 */
export function plantCanaries(cmd, expected, app = APP) {
  const reported = withRunReporter(cmd);
  /** @type {Canary[]} */
  const canaries = [];
  if (reported === null) return { cmd, canaries };
  for (const [file, names] of Object.entries(expected)) {
    const target = path.join(app, file);
    if (!SPEC_FILE.test(file) || !fs.statSync(target, { throwIfNoEntry: false })?.isFile()) continue;
    const source = fs.readFileSync(target, "utf8");
    const taken = new Set(names.flatMap((n) => [n, ...n.split(" > ")]));
    const planted = canarySource(file, source, taken);
    const { head } = planted;
    const placed = head ? source.slice(0, head.at) + head.code + source.slice(head.at) : source;
    fs.writeFileSync(target, placed + planted.code);
    canaries.push(...planted.canaries);
  }
  return { cmd: canaries.length ? reported : cmd, canaries };
}

/**
 * Judge the canaries in a step's results, and take them out (the task's tests are
 * judged alone). The lines say what was forged; none: the report holds.
 * @param {Canary[]} canaries
 * @param {Map<string, string>} results  the step's, test key -> status
 * @param {Map<string, string>} messages
 * @returns {string[]}
 */
export function judgeCanaries(canaries, results, messages) {
  /** @type {string[]} */
  const tampered = [];
  // A spec whose tests never ran (its file failed to load, the command stopped before
  // Vitest) is failed for that; its canaries say nothing.
  const ran = new Set([...results.keys()].filter((k) => !k.endsWith("\u0000(file)")).map((k) => k.split("\u0000")[0]));
  for (const canary of canaries) {
    const key = testKey(canary.file, canary.titles);
    const status = results.get(key);
    results.delete(key);
    messages.delete(key);
    if (!ran.has(canary.file)) continue;
    const want = canary.must === "fail" ? "failed" : "passed";
    if (status === want) continue;
    const what = canary.must === "fail" ? "a test the grader planted to fail" : "a test the grader planted to pass";
    tampered.push(`test results tampered: ${canary.file}: ${what} was reported ${status ?? "as never run"}`);
  }
  return tampered;
}

/**
 * Whether a step's non-zero exit is the canaries' doing alone: Vitest exited 1, the
 * grader's reporter saw the run end with no unhandled error, and every failure left
 * in the step's results (the canaries taken out) is none.
 * @param {number} code
 * @param {Canary[]} canaries
 * @param {VitestRun | null} run
 * @param {Map<string, string>} results  the step's, canaries taken out
 */
export function canariesExplainExit(code, canaries, run, results) {
  if (code !== 1 || !canaries.some((c) => c.must === "fail") || !run) return false;
  if (run.unhandled !== 0 || run.reason === "interrupted") return false;
  return [...results.values()].every((status) => status !== "failed" && !status.startsWith("failed:"));
}
