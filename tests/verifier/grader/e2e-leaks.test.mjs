// The e2e leak watch: the build's source maps read back to the files, the guard's
// reports found in Playwright's report, and the judgement by changed and mounted file.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import { decodeMappings, originalFile, reactContainerKey } from "../../../pytest_reactbench/verifier/grader/e2e-leaks.mjs";
import {
  E2E_LEAKS_ANNOTATION, LEAKED_LISTENER_RULE, LEAKED_TIMER_RULE, LEAK_WATCH_RULE, baseLeaks, e2eLeakFindings, e2eLeakRuns,
} from "../../../pytest_reactbench/verifier/grader/leaks.mjs";
import { E2E_GUARD, writeE2eConfig } from "../../../pytest_reactbench/verifier/grader/specs.mjs";

const VLQ = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/**
 * Source-map VLQ of one value, as the format defines it (to build maps to read back).
 * @param {number} value
 */
function vlq(value) {
  let rest = value < 0 ? (-value << 1) | 1 : value << 1;
  let out = "";
  do {
    let digit = rest & 31;
    rest >>>= 5;
    if (rest) digit |= 32;
    out += VLQ[digit];
  } while (rest);
  return out;
}

/**
 * Mappings of absolute segments [generated column, source, line, column] per line.
 * @param {number[][][]} lines
 */
function encode(lines) {
  let source = 0;
  let line = 0;
  let column = 0;
  return lines.map((segments) => {
    let generated = 0;
    return segments.map(([g, s, l, c]) => {
      const text = vlq(Number(g) - generated) + vlq(Number(s) - source) + vlq(Number(l) - line) + vlq(Number(c) - column);
      generated = Number(g);
      source = Number(s);
      line = Number(l);
      column = Number(c);
      return text;
    }).join(",");
  }).join(";");
}

describe("the build's source maps", () => {
  test("mappings decode to absolute segments, large and negative steps included", () => {
    assert.deepEqual(decodeMappings("AAAA;gBAAgB"), [[[0, 0, 0, 0]], [[16, 0, 0, 16]]]);
    const lines = [[[0, 0, 0, 0], [40, 1, 12, 4], [1200, 0, 3, 2]], [], [[7, 1, 700, 0], [9, 0, 1, 1]]];
    assert.deepEqual(decodeMappings(encode(lines)), lines);
    // A segment of one field (a generated column only) maps nowhere, and moves the column.
    assert.deepEqual(decodeMappings("C,CAAE"), [[[2, 0, 0, 2]]]);
  });

  test("a place in the bundle is the file of the segment it is in, resolved from the map's folder", () => {
    const map = {
      sources: ["../../src/Ticker.tsx", "../../node_modules/react-dom/index.js"],
      mappings: encode([[[0, 1, 0, 0], [500, 0, 6, 4], [900, 1, 40, 0]]]),
    };
    const at = (/** @type {number} */ column) => originalFile(map, "/app/dist/assets", 0, column, path.resolve);
    assert.equal(at(10), "/app/node_modules/react-dom/index.js");
    assert.equal(at(500), "/app/src/Ticker.tsx");
    assert.equal(at(899), "/app/src/Ticker.tsx");
    assert.equal(at(2000), "/app/node_modules/react-dom/index.js");
    assert.equal(originalFile(map, "/app/dist/assets", 3, 0, path.resolve), null);
    assert.equal(originalFile({ ...map, sourceRoot: "/srv/a/b" }, "/app/dist", 0, 600, path.resolve), "/srv/src/Ticker.tsx");
  });

  test("React's root is found by its key among an element's own properties", () => {
    assert.equal(reactContainerKey(["id", "__reactContainer$x1y2", "__reactEvents$q"]), "__reactContainer$x1y2");
    assert.equal(reactContainerKey(["id", "__reactFiber$x1y2"]), null);
  });

  test("the guard is written with the map reader, and the build with hidden source maps", () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), "e2e-leaks-"));
    try {
      writeE2eConfig(app);
      const guard = fs.readFileSync(path.join(app, E2E_GUARD), "utf8");
      assert.match(guard, /^function decodeMappings\(/m);
      assert.doesNotMatch(guard, /^export function decodeMappings/m);
      assert.match(guard, /^const E2E_BUILD = "dist";$/m);
      assert.match(guard, /type: "reactbench-leaks"/);
      const config = fs.readFileSync(path.join(app, "reactbench.e2e.config.ts"), "utf8");
      assert.match(config, /vite build --logLevel warn --sourcemap hidden --outDir dist/);
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  });
});

const APP = "/app";
const CHANGED = ["src/Counter.tsx", "src/Ticker.tsx", "src/useEvery.ts"];
const interval = (/** @type {object} */ over = {}) =>
  ({ kind: "timer", what: "an interval still running", files: [`${APP}/src/Ticker.tsx`], closures: 1, owners: ["r"], ...over });
const listener = (/** @type {object} */ over = {}) =>
  ({ kind: "listener", what: 'a "resize" listener on the window', files: [`${APP}/src/Ticker.tsx`], closures: 1,
    owners: ["r"], ...over });
const COUNTER = { file: `${APP}/src/Counter.tsx`, names: ["c", "componentDidMount"] };
/**
 * One test run with the guard's report.
 * @param {object[]} leaks
 * @param {object[]} [mounted]
 * @param {object} [over]
 * @returns {any}
 */
const runs = (leaks, mounted = [COUNTER], over = {}) => ({
  runs: [{ test: "e2e/counter.spec.ts > resets > desktop", spec: "e2e/counter.spec.ts",
    report: { watching: true, leaks, mounted, ...over } }],
});
const rules = (/** @type {{ rule: string, file: string }[]} */ found) => found.map((f) => [f.rule, f.file]);

describe("e2eLeakFindings", () => {
  test("an interval and a listener of an unmounted component of a changed file are findings, marked e2e", () => {
    const found = e2eLeakFindings(runs([interval(), listener(), interval({ what: "a timeout still running" })]),
      CHANGED, APP);
    assert.deepEqual(rules(found), [[LEAKED_TIMER_RULE, "src/Ticker.tsx"], [LEAKED_LISTENER_RULE, "src/Ticker.tsx"]]);
    assert.ok(found.every((f) => f.title.endsWith("(e2e)")), JSON.stringify(found));
    assert.equal(found[0]?.count, "0 -> 2");
    assert.match(String(found[0]?.message), /no code of src\/Ticker.tsx still mounted.*e2e\/counter.spec.ts/);
  });

  test("a timeout that ran once ran out; one that armed itself again runs on", () => {
    const once = interval({ what: "a timeout still running", repeating: false });
    assert.deepEqual(e2eLeakFindings(runs([once]), CHANGED, APP), []);
    const again = interval({ what: "a timeout still running", repeating: true });
    assert.deepEqual(rules(e2eLeakFindings(runs([again]), CHANGED, APP)), [[LEAKED_TIMER_RULE, "src/Ticker.tsx"]]);
  });

  test("what a mounted component keeps is no leak: by its file, or by the function it was made in", () => {
    const ticker = { file: `${APP}/src/Ticker.tsx`, names: ["r"] };
    assert.deepEqual(e2eLeakFindings(runs([interval(), listener()], [COUNTER, ticker]), CHANGED, APP), []);
    // A hook in a file of its own, whose effect a mounted component runs.
    const hook = interval({ files: [`${APP}/src/useEvery.ts`], owners: ["u"] });
    assert.deepEqual(e2eLeakFindings(runs([hook], [COUNTER, { file: `${APP}/src/Clock.tsx`, names: ["u"] }]),
      CHANGED, APP), []);
    assert.deepEqual(rules(e2eLeakFindings(runs([hook]), CHANGED, APP)), [[LEAKED_TIMER_RULE, "src/useEvery.ts"]]);
  });

  test("the base's code, libraries, and code made at a module's top are not judged", () => {
    const found = e2eLeakFindings(runs([
      interval({ files: [`${APP}/src/main.tsx`] }),
      listener({ files: [`${APP}/node_modules/react-dom/cjs/react-dom.production.js`] }),
      interval({ closures: 0, owners: [] }),
      listener({ closures: undefined }),
    ]), CHANGED, APP);
    assert.deepEqual(found, []);
  });

  test("what the base's own code left under the same tests is not the submission's", () => {
    const base = baseLeaks({ installed: true, reports: [], ran: new Map() }, runs([interval()]),
      ["src/Ticker.tsx", "src/App.tsx"], APP);
    assert.deepEqual(base, [[LEAKED_TIMER_RULE, "src/Ticker.tsx", "an interval still running"]]);
    assert.deepEqual(rules(e2eLeakFindings(runs([interval(), listener()]), CHANGED, APP, base)),
      [[LEAKED_LISTENER_RULE, "src/Ticker.tsx"]]);
  });

  test("a page the guard could not watch is a finding of the watch; a test without the guard's page is not", () => {
    const silenced = e2eLeakFindings(runs([], [], { watching: false, problem: "Target closed" }), CHANGED, APP);
    assert.deepEqual(rules(silenced), [[LEAK_WATCH_RULE, "e2e/counter.spec.ts"]]);
    assert.match(String(silenced[0]?.message), /could not watch .*Target closed/);
    /** @type {any} */
    const none = { runs: [{ test: "e2e/counter.spec.ts > resets > desktop", spec: "e2e/counter.spec.ts", report: null }] };
    assert.deepEqual(e2eLeakFindings(none, CHANGED, APP), []);
  });
});

describe("e2eLeakRuns", () => {
  test("the guard's report of each run, from the result's annotations or the test's; none where there is none", () => {
    const note = (/** @type {object} */ report) => ({ type: E2E_LEAKS_ANNOTATION, description: JSON.stringify(report) });
    const clean = { watching: true, leaks: [], mounted: [COUNTER] };
    const report = {
      config: { rootDir: APP },
      suites: [{ file: "e2e/counter.spec.ts", specs: [{ title: "resets", file: "e2e/counter.spec.ts", tests: [
        { projectName: "desktop", results: [{ status: "passed", annotations: [note(clean)] }] },
        { projectName: "laptop", annotations: [note({ watching: true, leaks: [interval()] })],
          results: [{ status: "passed" }] },
        { projectName: "desktop", results: [{ status: "skipped" }] },
        { projectName: "laptop", results: [{ status: "failed", annotations: [{ type: "other" }] }] },
        { projectName: "desktop", results: [{ status: "passed", annotations: [{ type: E2E_LEAKS_ANNOTATION,
          description: "{not json" }] }] },
      ] }] }],
    };
    const { runs: got } = e2eLeakRuns(report, APP);
    assert.equal(got.length, 4);
    assert.deepEqual(got[0], { test: "e2e/counter.spec.ts > resets > desktop", spec: "e2e/counter.spec.ts", report: clean });
    assert.deepEqual(got[1]?.report?.mounted, []);
    assert.equal(got[1]?.report?.leaks.length, 1);
    assert.equal(got[2]?.report, null);
    assert.equal(got[3]?.report, null);
    assert.deepEqual(rules(e2eLeakFindings({ runs: got }, CHANGED, APP)), [[LEAKED_TIMER_RULE, "src/Ticker.tsx"]]);
  });
});
