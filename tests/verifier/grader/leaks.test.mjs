// Leaks: the leak watch's reports, read from the room and judged against the files the
// submission changed.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import { VITEST_SETUP_FILES } from "../../../pytest_reactbench/verifier/grader/canaries.mjs";
import {
  LEAKED_LISTENER_RULE, LEAKED_TIMER_RULE, LEAK_BASELINE, LEAK_WATCH, LEAK_WATCH_RULE, baseLeaks, collectLeaks,
  leakFindings, readLeakBaseline, readLeakReports, signedLeakReports, specsRan, takeLeaks,
} from "../../../pytest_reactbench/verifier/grader/leaks.mjs";
import { testKey } from "../../../pytest_reactbench/verifier/grader/reports.mjs";

const WATCH = new URL("../../../pytest_reactbench/verifier/grader/leak-watch.mjs", import.meta.url);

const APP = "/app";
const SPEC = "src/__verifier__/counter.spec.tsx";
const CHANGED = ["src/Counter.tsx", "src/Ticker.tsx", "src/autosave.md"];

/**
 * A report of the watch's.
 * @param {object[]} leaks
 * @param {object} [over]
 */
const report = (leaks, over = {}) => ({ spec: `${APP}/${SPEC}`, tests: 3, watching: true, leaks, ...over });

/**
 * What the unit step left: its reports and three tests of SPEC that ran.
 * @param {any[]} reports
 */
const watch = (reports) => ({ installed: true, reports, ran: new Map([[SPEC, 3]]) });

describe("leakFindings", () => {
  test("a timer a changed file started, still live after the tests, is a finding of its own rule", () => {
    const found = leakFindings(watch([report([
      { kind: "timer", files: [`${APP}/src/Ticker.tsx`, `${APP}/${SPEC}`], what: "an interval of 1000 ms" },
    ])]), CHANGED, APP);
    assert.equal(found.length, 1);
    assert.equal(found[0]?.rule, LEAKED_TIMER_RULE);
    assert.equal(found[0]?.file, "src/Ticker.tsx");
    assert.match(found[0]?.message ?? "", /an interval of 1000 ms, started by src\/Ticker.tsx, was still pending/);
  });

  test("a listener is a finding of the listener rule, one per rule and file", () => {
    const leak = { kind: "listener", files: [`${APP}/src/Ticker.tsx`], what: 'a "resize" listener on the window' };
    const found = leakFindings(watch([report([leak, leak])]), CHANGED, APP);
    assert.deepEqual(found.map((f) => [f.rule, f.file, f.count]), [[LEAKED_LISTENER_RULE, "src/Ticker.tsx", "0 -> 2"]]);
  });

  test("what the base's own code, the specs, node_modules or a non-code file started is none", () => {
    const found = leakFindings(watch([report([
      { kind: "timer", files: [`${APP}/src/App.tsx`], what: "a timer" },
      { kind: "timer", files: [`${APP}/${SPEC}`], what: "a timer" },
      { kind: "listener", files: [`${APP}/${SPEC}`], what: "a listener" },
      { kind: "timer", files: [`${APP}/src/autosave.md`], what: "a timer" },
      { kind: "timer", files: [`${APP}/node_modules/x/index.js`], what: "a timer" },
    ])]), CHANGED, APP);
    assert.deepEqual(found, []);
  });

  test("code built from a changed file names it (the watch reads the eval origin)", () => {
    // The watch reports the file the Function constructor was called from.
    const found = leakFindings(watch([report([
      { kind: "timer", files: [`${APP}/src/Ticker.tsx`], what: "an interval of 1000 ms" },
    ])]), ["src/Ticker.tsx"], APP);
    assert.equal(found[0]?.file, "src/Ticker.tsx");
  });

  test("a spec that ran with no report, a report behind its tests, or a watch switched off is silenced", () => {
    for (const [reports, why] of /** @type {[any[], RegExp][]} */ ([
      [[], /left no report/],
      [[report([], { tests: 2 })], /reported after 2 of its 3 tests/],
      [[report([], { watching: false })], /was switched off/],
      [[report([], { spec: `${APP}/src/other.spec.tsx` })], /left no report/],
    ])) {
      const found = leakFindings(watch(reports), CHANGED, APP);
      assert.equal(found.length, 1, String(why));
      assert.equal(found[0]?.rule, LEAK_WATCH_RULE);
      assert.equal(found[0]?.file, SPEC);
      assert.match(found[0]?.message ?? "", why);
    }
  });

  test("no watch installed (no JSON reporter on the command): nothing to judge", () => {
    assert.deepEqual(leakFindings({ installed: false, reports: [], ran: new Map([[SPEC, 3]]) }, CHANGED, APP), []);
  });

  test("a clean report after every test: no finding", () => {
    assert.deepEqual(leakFindings(watch([report([])]), CHANGED, APP), []);
  });
});

describe("the base's own leaks", () => {
  const left = { kind: "timer", files: [`${APP}/src/Ticker.tsx`], what: "an interval of 1000 ms" };
  const listening = { kind: "listener", files: [`${APP}/src/Ticker.tsx`], what: 'a "resize" listener on the window' };
  const base = baseLeaks(watch([report([left, { ...left, files: [`${APP}/src/App.tsx`] },
    { ...left, files: [`${APP}/${SPEC}`] }])]), { runs: [] }, ["src/App.tsx", "src/Ticker.tsx", SPEC], APP);

  test("are what the base's code files left, the specs' aside, each once", () => {
    assert.deepEqual(base, [[LEAKED_TIMER_RULE, "src/App.tsx", "an interval of 1000 ms"],
      [LEAKED_TIMER_RULE, "src/Ticker.tsx", "an interval of 1000 ms"]]);
  });

  test("a leak the base left too, in a file the change edits, is not the submission's; another one is", () => {
    assert.deepEqual(leakFindings(watch([report([left, left])]), CHANGED, APP, base), []);
    const found = leakFindings(watch([report([left, listening, { ...left, what: "an interval of 50 ms" }])]),
      CHANGED, APP, base);
    assert.deepEqual(found.map((f) => [f.rule, f.file, f.count]),
      [[LEAKED_LISTENER_RULE, "src/Ticker.tsx", "0 -> 1"], [LEAKED_TIMER_RULE, "src/Ticker.tsx", "0 -> 1"]]);
    assert.match(found[1]?.message ?? "", /^an interval of 50 ms, started by src\/Ticker.tsx/);
  });

  test("are read back from the bake's file; a missing or garbled one is none", () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), "baseline-"));
    try {
      assert.deepEqual(readLeakBaseline(state), []);
      fs.writeFileSync(path.join(state, LEAK_BASELINE), JSON.stringify(base));
      assert.deepEqual(readLeakBaseline(state), base);
      fs.writeFileSync(path.join(state, LEAK_BASELINE), JSON.stringify([["only", "two"], 3, ...base]));
      assert.deepEqual(readLeakBaseline(state), base);
      fs.writeFileSync(path.join(state, LEAK_BASELINE), "{not json");
      assert.deepEqual(readLeakBaseline(state), []);
    } finally {
      fs.rmSync(state, { recursive: true, force: true });
    }
  });
});

describe("specsRan", () => {
  test("counts the tests each spec ran; a file that did not load and skipped tests are none", () => {
    const results = new Map([
      [testKey(SPEC, ["Counter", "a"]), "passed"],
      [testKey(SPEC, ["Counter", "b"]), "failed"],
      [testKey(SPEC, ["Counter", "c"]), "skipped"],
      [testKey("src/b.spec.tsx", ["(file)"]), "failed: SyntaxError"],
    ]);
    assert.deepEqual([...specsRan(results)], [[SPEC, 2]]);
  });
});

describe("the watch's reports", () => {
  test("are read from the room (links and other names left), kept, and taken once", () => {
    const room = fs.mkdtempSync(path.join(os.tmpdir(), "grader-leaks-"));
    fs.writeFileSync(path.join(room, "leak-watch-12-abcdef.json"), JSON.stringify(report([])));
    fs.writeFileSync(path.join(room, "leak-watch-13-abcdef.json.tmp"), "{");
    fs.writeFileSync(path.join(room, "leak-watch-14-abcdef.json"), "not json");
    fs.symlinkSync("/etc/passwd", path.join(room, "leak-watch-15-abcdef.json"));
    const logs = fs.mkdtempSync(path.join(os.tmpdir(), "grader-leaks-logs-"));
    assert.equal(readLeakReports(path.join(room, "missing"), logs).length, 0);
    const reports = readLeakReports(room, logs);
    assert.deepEqual(reports.map((r) => r.spec), [`${APP}/${SPEC}`]);
    assert.ok(fs.existsSync(path.join(logs, "leak-watch-12-abcdef.json")));
    collectLeaks(true, new Map([[testKey(SPEC, ["a"]), "passed"]]),
      room, logs);
    const taken = takeLeaks();
    assert.equal(taken.installed, true);
    assert.equal(taken.reports.length, 1);
    assert.deepEqual([...taken.ran], [[SPEC, 1]]);
    assert.equal(takeLeaks().installed, false);
    // Not among the setup files the reporter adds: not installed, nothing to judge.
    collectLeaks(true, new Map([[testKey(SPEC, ["a"]), "passed"]]), room, logs, ["vitest-guard.mjs"]);
    assert.equal(takeLeaks().installed, false);
    fs.rmSync(room, { recursive: true });
    fs.rmSync(logs, { recursive: true });
  });

  test("the watch is one of the grader's Vitest setup files", () => {
    assert.ok(VITEST_SETUP_FILES.includes(LEAK_WATCH));
  });
});

// The watch itself, loaded as Vitest loads it (a stand-in `vitest` gives it beforeEach and
// the test context), beside window and document objects made as jsdom makes them (an
// implementation object under a symbol "impl", whose addEventListener keeps the list),
// then the "submission's" modules, one leak each, as the tested code would write them.
const STAND_IN = {
  "node_modules/vitest/package.json": JSON.stringify({ name: "vitest", type: "module", main: "index.mjs" }),
  "node_modules/vitest/index.mjs": `
    export const beforeEach = (fn) => { globalThis.__hooks = [...(globalThis.__hooks ?? []), fn]; };`,
  "page.mjs": `
    const impl = Symbol("impl");
    class EventTargetImpl {
      constructor() { this._eventListeners = Object.create(null); }
      addEventListener(type, callback) {
        (this._eventListeners[type] ??= []).push({ callback: { objectReference: callback } });
      }
      removeEventListener(type, callback) {
        const list = this._eventListeners[type] ?? [];
        const at = list.findIndex((e) => e.callback.objectReference === callback);
        if (at >= 0) list.splice(at, 1);
      }
    }
    const wrapper = (target) => ({
      [impl]: target,
      addEventListener(type, callback) { target.addEventListener(type, callback); },
      removeEventListener(type, callback) { target.removeEventListener(type, callback); },
    });
    globalThis.window = wrapper(new EventTargetImpl());
    globalThis.document = { ...wrapper(new EventTargetImpl()), body: wrapper(new EventTargetImpl()) };`,
  // What the submission changed.
  "src/Alias.mjs": `export default () => { const every = globalThis["set" + "Interval"]; every(() => {}, 1000); };`,
  "src/Listener.mjs": `export default () => window.addEventListener.bind(window)("resize", () => {});`,
  "src/Body.mjs": `export default () => document.body.addEventListener("click", () => {});`,
  "src/Built.mjs": `export default () => [].map.constructor("setInterval(function () {}, 1000)")();`,
  "src/Bound.mjs": `const tick = () => {};
    export default () => queueMicrotask(setTimeout.bind(null, tick, 60000));`,
  "src/Blind.mjs": `export default () => {
      Error.stackTraceLimit = 0;
      Error.prepareStackTrace = () => [];
      Map.prototype.values = function* () {};
      setInterval(() => {}, 1000);
    };`,
  "src/Clean.mjs": `export default () => {
      const id = setInterval(() => {}, 1000);
      const onResize = () => {};
      window.addEventListener("resize", onResize);
      clearInterval(id);
      window.removeEventListener("resize", onResize);
      const debounce = setTimeout(() => {}, 5000);
      clearTimeout(debounce);
    };`,
  "run.mjs": `
    import "./page.mjs";
    await import("./leak-watch.mjs");
    let finished;
    for (const hook of globalThis.__hooks) {
      hook({ task: { file: { filepath: process.cwd() + "/spec.tsx" } }, onTestFinished: (fn) => { finished = fn; } });
    }
    for (const name of process.argv.slice(2)) (await import("./src/" + name + ".mjs")).default();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await finished();
    process.exit(0);`,
};

/**
 * The watch's report after "the submission's" modules `names` ran.
 * @param {string[]} names
 * @returns {{ spec: string, tests: number, watching: boolean, leaks: { kind: string, files: string[], what: string }[] }}
 */
function watchRun(names) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-leak-watch-"));
  for (const [rel, source] of Object.entries(STAND_IN)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), source);
  }
  fs.copyFileSync(WATCH, path.join(dir, "leak-watch.mjs"));
  fs.mkdirSync(path.join(dir, "reports"));
  const ran = spawnSync(process.execPath, ["run.mjs", ...names], {
    cwd: dir, encoding: "utf8", env: { ...process.env, REACTBENCH_REPORTS: path.join(dir, "reports") },
  });
  assert.equal(ran.status, 0, ran.stderr);
  const [report] = fs.readdirSync(path.join(dir, "reports")).filter((n) => /^leak-watch-\d+-[0-9a-f]+\.json$/.test(n));
  assert.ok(report, "no report");
  const read = JSON.parse(fs.readFileSync(path.join(dir, "reports", report), "utf8"));
  fs.rmSync(dir, { recursive: true });
  // Paths relative to the folder, the spec's and the stand-ins' frames left out.
  read.leaks = read.leaks
    .map((/** @type {{ files: string[] }} */ l) => ({ ...l, files: l.files.map((f) => path.relative(dir, f)) }))
    .filter((/** @type {{ files: string[] }} */ l) => l.files.some((f) => f.startsWith("src/")));
  return read;
}

describe("the leak watch", () => {
  test("sees each leak however it was started, by the file that made it or the code it runs", () => {
    const report = watchRun(["Alias", "Listener", "Body", "Built", "Bound", "Clean"]);
    assert.equal(report.watching, true);
    assert.equal(report.tests, 1);
    const seen = report.leaks.map((l) => `${l.kind} ${l.files.filter((f) => f.startsWith("src/")).join(",")}`).sort();
    assert.deepEqual(seen, [
      "listener src/Body.mjs",
      "listener src/Listener.mjs",
      "timer src/Alias.mjs",
      "timer src/Bound.mjs",
      "timer src/Built.mjs",
    ]);
    assert.match(report.leaks.find((l) => l.files.includes("src/Alias.mjs"))?.what ?? "", /an interval of 1000 ms/);
    assert.match(report.leaks.find((l) => l.files.includes("src/Body.mjs"))?.what ?? "", /"click" listener on the document's <body>/);
  });

  test("code that reconfigures the page's Error and Map does not blind it", () => {
    const report = watchRun(["Blind"]);
    assert.deepEqual(report.leaks.map((l) => l.files.filter((f) => f.startsWith("src/"))), [["src/Blind.mjs"]]);
  });

  test("what is cleaned up before the check is no leak", () => {
    assert.deepEqual(watchRun(["Clean"]).leaks, []);
  });
});

describe("the signed channel", () => {
  test("the watch's reports are read from the grader's signed report, the last of each spec", () => {
    const report = (/** @type {number} */ tests, /** @type {unknown[]} */ leaks) =>
      JSON.stringify({ spec: "/app/src/a.spec.tsx", tests, watching: true, leaks });
    const leak = { kind: "timer", files: ["/app/src/Ticker.tsx"], what: "setInterval" };
    const run = { unhandled: 0, testResults: [{ name: "/app/src/a.spec.tsx", assertionResults: [
      { title: "one", status: "passed", leaks: report(1, []) },
      { title: "two", status: "passed", leaks: report(2, [leak]) },
      { title: "three", status: "passed" },
      { title: "four", status: "passed", leaks: "{not json" },
    ] }] };
    assert.deepEqual(signedLeakReports(run), [JSON.parse(report(2, [leak]))]);
    // Reports the room's files hold are the record's: a clean one planted there is not read.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "leaks-signed-"));
    try {
      fs.writeFileSync(path.join(dir, "leak-watch-1-aaaa0.json"), report(2, []));
      collectLeaks(true, new Map([[testKey("src/a.spec.tsx", ["one"]), "passed"]]), dir, dir, VITEST_SETUP_FILES, run);
      assert.deepEqual(takeLeaks().reports, [JSON.parse(report(2, [leak]))]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
