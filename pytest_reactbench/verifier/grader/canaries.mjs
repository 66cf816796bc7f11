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
 * @property {boolean} [sealed]  Vitest's main process started with SEAL_GID and dropped it
 * @property {import("./reports.mjs").VitestFile[]} [testResults]  the task tree at the run's end
 */

export const RUN_REPORT = "vitest-run.json";
// Where the room's commands load the reporter from: the room's folder, root's.
const REPORTER_FILE = "vitest-run-reporter.mjs";
export const REPORTER = path.join(ROOM, REPORTER_FILE);

const SPEC_FILE = /\.[cm]?[jt]sx?$/;
const JSON_REPORTER = /--reporter(=|\s+)json\b/;

/** @param {readonly T[]} items @returns {T} @template T */
const pick = (items) => /** @type {T} */ (items[crypto.randomInt(items.length)]);

/**
 * Names drawn like the spec's own: a title of the spec's with a stretch of its words
 * left out, or the head of one title joined to the tail of another. None is in `taken`
 * (it is added there); null when the titles give none.
 * @param {string[]} titles  the spec's own
 * @param {Set<string>} taken
 * @returns {string | null}
 */
export function titleLikeName(titles, taken) {
  const words = titles.map((t) => t.split(/\s+/).filter(Boolean)).filter((w) => w.length >= 2);
  /** @type {string[]} */
  const names = [];
  for (const a of words) {
    for (const b of words) {
      for (let i = 1; i < a.length; i++) {
        for (let j = 1; j < b.length; j++) {
          const parts = [...a.slice(0, i), ...b.slice(j)];
          const pairs = parts.slice(1).map((w, k) => `${parts[k]} ${w}`);
          const name = parts.join(" ");
          // Not a word or a stretch of words twice in a row ("counts counts").
          const twice = pairs.some((pair) => pair.split(" ")[0] === pair.split(" ")[1]) || new Set(pairs).size < pairs.length;
          if (parts.length >= 3 && !twice && !taken.has(name)) names.push(name);
        }
      }
    }
  }
  if (!names.length) return null;
  const name = pick([...new Set(names)]);
  taken.add(name);
  return name;
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

// The grader's Vitest setup files (files of the grader's folder), in the order they run:
// after the task's own setup files, in every test worker. The reporter adds them
// (REACTBENCH_VITEST_SETUP).
/** @type {string[]} */
export const VITEST_SETUP_FILES = ["leak-watch.mjs", "vitest-guard.mjs"];

/** The descriptor on which the room's command gets the reporter's key (runInRoom). */
export const KEY_FD = 9;

/**
 * The reporter and the grader's setup files, where the room's commands load them from;
 * a new key for the reporter to sign its report with (the room's command gets it on
 * KEY_FD), and the environment that names those to the reporter.
 * @returns {{ key: Buffer, env: Record<string, string> }}
 */
export function installReporter() {
  roomTool(REPORTER_FILE);
  return {
    key: crypto.randomBytes(32),
    env: {
      REACTBENCH_VITEST_SETUP: VITEST_SETUP_FILES.map((name) => roomTool(name)).join(":"),
      REACTBENCH_RUN_KEY_FD: String(KEY_FD),
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
 * The spec's own names for Vitest's and Testing Library's functions: what it imports
 * (under whatever name), else the globals it calls.
 * @param {string} source
 */
export function specNames(source) {
  /** @type {Record<string, string>} */
  const local = {};
  for (const m of source.matchAll(/import\s*\{([^}]*)\}\s*from\s*["'](vitest|@testing-library\/react)["']/g)) {
    for (const part of (m[1] ?? "").split(",")) {
      const [name, alias] = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/);
      if (name) local[name] = alias ?? name;
    }
  }
  const calls = (/** @type {string} */ name) => new RegExp(`(^|[^.\\w$])${name}(\\.\\w+)*\\(`, "m").test(source);
  const testFn = local.it && calls(local.it) ? local.it : local.test ?? local.it ?? (calls("test") && !calls("it") ? "test" : "it");
  return {
    test: testFn,
    expect: local.expect ?? "expect",
    describe: local.describe ?? "describe",
    render: local.render ?? null,
    screen: local.screen ?? null,
    // An import of expect the planted tests need, when the spec neither imports it nor calls it.
    missingExpect: !local.expect && !calls("expect"),
  };
}

/**
 * The titles of the spec's tests (plain string literals), and the quote it writes them with.
 * @param {string} source
 * @param {string} testFn
 */
export function specTitles(source, testFn) {
  const titles = [];
  let single = 0;
  const at = new RegExp(`(?:^|[^.\\w$])${testFn.replace(/\$/g, "\\$")}(?:\\.only|\\.skip|\\.concurrent)?\\(\\s*(["'])((?:(?!\\1)[^\\\\\\n])*)\\1`, "gm");
  for (const m of source.matchAll(at)) {
    titles.push(/** @type {string} */ (m[2]));
    if (m[1] === "'") single++;
  }
  return { titles, quote: single * 2 > titles.length ? "'" : '"' };
}

/**
 * The matchers a spec uses, by name.
 * @param {string} source
 * @returns {Set<string>}
 */
export const specMatchers = (source) => new Set([...source.matchAll(/\.(to[A-Z]\w*)\(/g)].map((m) => /** @type {string} */ (m[1])));

/**
 * Planted tests of a matcher's: a body that must fail and one that must pass, over
 * values of the spec's own (`text`: its string literals) and elements made in the
 * test itself, never the submission's code. `e`: expect's name; `el`: the statements
 * that make a button whose text is `label`, enabled or not, and the expression of it.
 * @typedef {{ e: string, text: () => string, n: () => number, el: (label: string, disabled: boolean) => [string, string] }} Make
 * @type {Record<string, (m: Make) => { fail: string, pass: string }>}
 */
const RECIPES = {
  toBe: ({ e, text, n }) => {
    const a = n();
    const t = text();
    return { fail: `${e}(${a}).toBe(${a + 1 + crypto.randomInt(8)});`, pass: `${e}(${t}.length).toBe(${t}.length);` };
  },
  toEqual: ({ e, text, n }) => {
    const [a, b] = [text(), n()];
    return { fail: `${e}({ label: ${a}, count: ${b} }).toEqual({ label: ${a}, count: ${b + 1} });`,
      pass: `${e}([${a}, ${b}]).toEqual([${a}, ${b}]);` };
  },
  toStrictEqual: ({ e, text, n }) => {
    const [a, b] = [text(), n()];
    return { fail: `${e}([${a}, ${b}]).toStrictEqual([${a}, ${b}, ${b}]);`, pass: `${e}({ label: ${a} }).toStrictEqual({ label: ${a} });` };
  },
  toMatchObject: ({ e, text, n }) => {
    const [a, b] = [text(), n()];
    return { fail: `${e}({ label: ${a}, count: ${b} }).toMatchObject({ count: ${b + 2} });`,
      pass: `${e}({ label: ${a}, count: ${b} }).toMatchObject({ label: ${a} });` };
  },
  toContain: ({ e, text }) => {
    const a = text();
    return { fail: `${e}([${a}]).toContain(${JSON.stringify(`${JSON.parse(a)}!`)});`, pass: `${e}([${a}]).toContain(${a});` };
  },
  toHaveLength: ({ e, text }) => {
    const a = text();
    return { fail: `${e}(${a}).toHaveLength(${a}.length + 1);`, pass: `${e}([${a}]).toHaveLength(1);` };
  },
  toBeTruthy: ({ e, n }) => ({ fail: `${e}(${n()} - ${n()} * 0 === -1).toBeTruthy();`, pass: `${e}([]).toBeTruthy();` }),
  toBeInTheDocument: ({ e, el, text }) => {
    const [made, it] = el(text(), false);
    return { fail: `${e}(document.createElement("button")).toBeInTheDocument();`, pass: `${made}${e}(${it}).toBeInTheDocument();` };
  },
  toBeDisabled: ({ e, el, text }) => {
    const a = text();
    const [on, enabled] = el(a, false);
    const [off, disabled] = el(a, true);
    return { fail: `${on}${e}(${enabled}).toBeDisabled();`, pass: `${off}${e}(${disabled}).toBeDisabled();` };
  },
  toBeEnabled: ({ e, el, text }) => {
    const a = text();
    const [on, enabled] = el(a, false);
    const [off, disabled] = el(a, true);
    return { fail: `${off}${e}(${disabled}).toBeEnabled();`, pass: `${on}${e}(${enabled}).toBeEnabled();` };
  },
  toHaveTextContent: ({ e, el, text }) => {
    const a = text();
    const [made, it] = el(a, false);
    return { fail: `${made}${e}(${it}).toHaveTextContent(${JSON.stringify(`${JSON.parse(a)}?`)});`,
      pass: `${made}${e}(${it}).toHaveTextContent(${a});` };
  },
};
// DOM matchers (jest-dom's): their planted tests need a document.
const DOM_MATCHERS = new Set(["toBeInTheDocument", "toBeDisabled", "toBeEnabled", "toHaveTextContent"]);

/** The statement the guard (vitest-guard.mjs) checks the framework state at, first in the spec. */
// (Reflect.get: valid in JavaScript and TypeScript alike, and typed any. Code that
// replaced it, or Symbol.for, keeps the check from running, which the guard finds.)
export const STATE_CHECK = 'Reflect.get(globalThis, Symbol.for("vitest.state.check"))?.();\n';

/**
 * The canaries' source and the canaries it defines: some at the head of the spec's
 * first describe block (`head`, to go at offset `at`, among the spec's own tests),
 * the rest for the end of the file in a describe block of the same title (imports are
 * hoisted, so they may come last). Written as the spec writes its tests: its own names
 * for test and expect, titles drawn from its own, matchers it uses itself over values
 * of its own. Where they stand differs from grading to grading, so that the tested
 * code cannot tell them by their place either.
 * @param {string} file  relative to /app
 * @param {string} source  the spec's own
 * @param {Set<string>} taken  names in use
 * @returns {{ code: string, head: { at: number, code: string } | null, canaries: Canary[] }}
 */
export function canarySource(file, source, taken) {
  const names = specNames(source);
  const { titles: own, quote } = specTitles(source, names.test);
  // Its tests' titles, and its describe blocks' for more words where it has few tests.
  const titles = [...own, ...[...source.matchAll(/\bdescribe\(\s*(["'])([^"'\\\n]+)\1/g)].map((m) => /** @type {string} */ (m[2]))];
  /** @param {string} text */
  const literal = (text) => (quote === "'" ? `'${JSON.stringify(text).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'")}'` : JSON.stringify(text));
  const title = firstDescribe(source);
  const strings = [...new Set([...source.matchAll(/(["'])([A-Za-z][\w :,.!?-]{0,40})\1/g)].map((m) => /** @type {string} */ (m[2]))
    .filter((t) => !/^(vitest|react|@|\.)/.test(t) && !t.includes("/")))];
  const text = () => JSON.stringify(strings.length ? pick(strings) : pick(titles.length ? titles : ["item"]));
  const n = () => crypto.randomInt(2, 100);
  const jsx = /\.[jt]sx$/.test(file) && names.render !== null && names.screen !== null;
  /** @type {Make["el"]} */
  const el = (label, disabled) => {
    if (jsx) {
      return [`${names.render}(<button type="button"${disabled ? " disabled" : ""}>{${label}}</button>);\n    `,
        `${names.screen}.getByRole("button", { name: ${label} })`];
    }
    const v = pick(["button", "control", "element"]);
    return [`const ${v} = document.body.appendChild(document.createElement("button"));\n    ${v}.textContent = ${label};\n    ` +
      `${v}.disabled = ${disabled};\n    `, v];
  };
  const make = { e: names.expect, text, n, el };
  const dom = /@testing-library\//.test(source) || typeof names.render === "string";
  const used = [...specMatchers(source)].filter((m) => RECIPES[m] && (dom || !DOM_MATCHERS.has(m)));
  // toBe always; every other matcher of the spec's with a recipe, a few at most.
  const chosen = ["toBe", ...used.filter((m) => m !== "toBe").sort(() => crypto.randomInt(3) - 1).slice(0, 4)];
  /** @type {{ must: "fail" | "pass", body: string }[]} */
  const bodies = [];
  for (const matcher of chosen) {
    const made = /** @type {NonNullable<typeof RECIPES[string]>} */ (RECIPES[matcher])(make);
    bodies.push({ must: "fail", body: made.fail });
    if (matcher !== "toBe" || chosen.length === 1) bodies.push({ must: "pass", body: made.pass });
  }
  // One that renders what the spec's own tests render (its first `render(<Component ... />)`,
  // as it writes it) and fails whatever that shows: a query for a control no component
  // has. Code that forges only the tests its own components ran in forges this one too.
  // (None that must pass renders the submission's code: a wrong one would read as
  // tampering.)
  const rendered = jsx ? /^[ \t]*((?:const|let)\s+\{[^}]*\}\s*=\s*)?(\w+\(<[A-Z][\w.]*\b[^;\n]*\);)[ \t]*$/m.exec(source) : null;
  const renders = rendered?.[2]?.startsWith(`${names.render}(`) ? rendered[2] : null;
  if (renders) {
    const missing = titleLikeName(titles, new Set(taken)) ?? `${pick(titles.length ? titles : ["none"])} twice`;
    bodies.push({ must: "fail", body: `${renders}\n    ${names.expect}(${names.screen}.getByRole("button", { name: ${literal(missing)} })).toBeInTheDocument();` });
  }
  // In an order of its own each time.
  for (let i = bodies.length - 1; i > 0; i--) {
    const j = crypto.randomInt(i + 1);
    [bodies[i], bodies[j]] = [/** @type {typeof bodies[0]} */ (bodies[j]), /** @type {typeof bodies[0]} */ (bodies[i])];
  }
  const named = bodies.map((b) => ({ ...b, name: titleLikeName(titles, taken) ?? `${pick(titles.length ? titles : ["works"])} ${taken.size}` }));
  for (const b of named) taken.add(b.name);
  /** @param {typeof named} some */
  const tests = (some) => some.map((b) => `  ${names.test}(${literal(b.name)}, () => {\n    ${b.body}\n  });`).join("\n\n");
  const imports = names.missingExpect ? ['import { expect } from "vitest";'] : [];
  // One or more at the head of the spec's own block, when its opening can be found.
  const opening = title === null ? null : DESCRIBE_OPENING.exec(source);
  const first = opening && opening[2] === title ? crypto.randomInt(1, named.length) : 0;
  const atHead = named.slice(0, first);
  const atEnd = named.slice(first);
  const block = title === null ? tests(atEnd).replace(/^ {2}/gm, "") : `${names.describe}(${literal(title)}, () => {\n${tests(atEnd)}\n});`;
  return {
    code: `\n${imports.length ? `${imports.join("\n")}\n\n` : ""}${block}\n`,
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
    fs.writeFileSync(target, STATE_CHECK + placed + planted.code);
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
    const message = messages.get(key) ?? "";
    results.delete(key);
    messages.delete(key);
    if (!ran.has(canary.file)) continue;
    const want = canary.must === "fail" ? "failed" : "passed";
    if (status === want) continue;
    const what = canary.must === "fail" ? "a test the grader planted to fail" : "a test the grader planted to pass";
    // What the guard of the framework state found, when that failed it (vitest-guard.mjs).
    const found = /test framework state changed: [^\n]*/.exec(message)?.[0];
    tampered.push(`test results tampered: ${canary.file}: ${what} was reported ${status ?? "as never run"}` +
      (found ? ` (${found})` : ""));
  }
  // Once each: every planted test the same finding failed says the same.
  return [...new Set(tampered)];
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
