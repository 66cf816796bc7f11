// The React Doctor gate's pure parts: which rules gate, the comparison of the scan
// after the submission with the baseline (targets, tolerated findings), the checks of
// a scan's report, and the changed files a scan did not analyse.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";

import {
  HIDDEN_TIMER_RULE, checkScan, compareReports, hiddenTimerFindings, hiddenTimers, isStyleOnly, matchesIgnored,
  matchesTarget, unscanned,
} from "../../../pytest_reactbench/verifier/grader/doctor.mjs";
import { HarnessError, SubmissionFailure } from "../../../pytest_reactbench/verifier/grader/errors.mjs";

/**
 * @param {string} rule
 * @param {string} filePath
 * @param {number} [line]
 * @param {string} [title]
 */
const finding = (rule, filePath, line = 1, title = `${rule} title`) => ({ rule, filePath, line, title, message: "m", category: "c" });

describe("which rules gate", () => {
  test("style-only rules and families do not; everything else does", () => {
    for (const rule of ["no-console", "button-has-type", "js-combine-iterations", "rn-no-inline-styles", "preact-signals"]) {
      assert.equal(isStyleOnly(rule), true, rule);
    }
    for (const rule of ["no-danger", "exhaustive-deps", "jsx-key", "json-thing", "rendering-conditional"]) {
      assert.equal(isStyleOnly(rule), false, rule);
    }
  });

  test("a target is a rule, or a rule in one file", () => {
    const d = finding("no-danger", "src/App.tsx");
    assert.equal(matchesTarget("no-danger", d), true);
    assert.equal(matchesTarget("no-danger@src/App.tsx", d), true);
    assert.equal(matchesTarget("no-danger@App.tsx", d), false);
    assert.equal(matchesTarget("exhaustive-deps", d), false);
  });

  test("a tolerated finding: same rule and title, the file or a suffix of its path at a folder", () => {
    const d = finding("no-danger", "src/ui/List.tsx", 3, "Dangerous HTML");
    assert.equal(matchesIgnored({ rule: "no-danger", filePath: "src/ui/List.tsx", title: "Dangerous HTML" }, d), true);
    assert.equal(matchesIgnored({ rule: "no-danger", filePath: "ui/List.tsx", title: "Dangerous HTML" }, d), true);
    assert.equal(matchesIgnored({ rule: "no-danger", filePath: "ist.tsx", title: "Dangerous HTML" }, d), false);
    assert.equal(matchesIgnored({ rule: "no-danger", filePath: "List.tsx", title: "Other" }, d), false);
    assert.equal(matchesIgnored({ rule: "jsx-key", filePath: "List.tsx", title: "Dangerous HTML" }, d), false);
  });
});

describe("compareReports", () => {
  const base = { diagnostics: [finding("no-danger", "src/A.tsx", 1), finding("exhaustive-deps", "src/B.tsx", 4)] };

  test("the same findings, moved, are nothing new", () => {
    const after = { diagnostics: [finding("no-danger", "src/A.tsx", 9), finding("exhaustive-deps", "src/B.tsx", 5)] };
    assert.deepEqual(compareReports(base, after), { ok: true, new: [], ignored: [], fixed_targets: [], remaining_targets: [] });
  });

  test("a rule's findings in a file past the base are all reported, with the counts", () => {
    const after = { diagnostics: [...base.diagnostics, finding("no-danger", "src/A.tsx", 7), finding("no-danger", "src/C.tsx", 2)] };
    const verdict = compareReports(base, after);
    assert.equal(verdict.ok, false);
    assert.deepEqual(verdict.new.map((f) => [f.file, f.line, f.count]),
      [["src/A.tsx", 1, "1 -> 2"], ["src/A.tsx", 7, "1 -> 2"], ["src/C.tsx", 2, "0 -> 1"]]);
    assert.deepEqual(verdict.new[2], {
      rule: "no-danger", file: "src/C.tsx", line: 2, title: "no-danger title", message: "m", category: "c", count: "0 -> 1",
    });
  });

  test("a finding's missing fields are reported empty", () => {
    const verdict = compareReports({}, { diagnostics: [{ rule: "no-danger", filePath: "src/A.tsx" }] });
    assert.deepEqual(verdict.new, [{ rule: "no-danger", file: "src/A.tsx", line: null, title: "", message: "", category: "", count: "0 -> 1" }]);
  });

  test("style-only findings never gate", () => {
    const after = { diagnostics: [...base.diagnostics, finding("no-console", "src/A.tsx"), finding("js-set-map-lookups", "src/A.tsx")] };
    assert.deepEqual(compareReports(base, after).new, []);
  });

  test("targets: fixed when no finding matches them after, else remaining and failing", () => {
    const after = { diagnostics: [finding("exhaustive-deps", "src/B.tsx", 4)] };
    const verdict = compareReports(base, after, ["no-danger@src/A.tsx", "exhaustive-deps", "no-console"]);
    assert.deepEqual([verdict.ok, verdict.fixed_targets, verdict.remaining_targets],
      [false, ["no-danger@src/A.tsx", "no-console"], ["exhaustive-deps"]]);
    assert.equal(compareReports(base, { diagnostics: [] }, ["no-danger", "exhaustive-deps@src/B.tsx"]).ok, true);
  });

  test("tolerated findings are reported apart; each entry tolerates one", () => {
    const entry = { rule: "no-danger", filePath: "A.tsx", title: "no-danger title" };
    const twoMore = { diagnostics: [...base.diagnostics, finding("no-danger", "src/A.tsx", 5), finding("no-danger", "src/A.tsx", 6)] };
    const one = compareReports(base, twoMore, [], [entry]);
    assert.equal(one.ok, false);
    assert.equal(one.new.length, 3);
    const two = compareReports(base, twoMore, [], [entry, entry]);
    assert.deepEqual([two.ok, two.new, two.ignored.map((f) => f.line)], [true, [], [1, 5, 6]]);
    // An entry of another title tolerates nothing.
    assert.equal(compareReports(base, twoMore, [], [entry, { ...entry, title: "else" }]).ok, false);
  });
});

describe("checkScan", () => {
  const config = /** @type {import("../../../pytest_reactbench/verifier/grader/config.mjs").Config} */ ({
    test: { cmd: "true", e2e_specs: "e2e", expected: {} },
    rd: { scan_root: "/app", mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120 },
    sources: ["src"],
    test_like_allowed: [],
  });
  const good = {
    version: "0.7.8", reactDetected: true, ok: true, diagnostics: [],
    projects: [{ project: { sourceFileCount: 3 }, analyzedFiles: ["src/a.tsx"] }],
  };
  /** @param {object} report @param {object} [more] */
  const scan = (report, more = {}) => ({ code: 0, seconds: 1, limit: "120", stdout: JSON.stringify(report), stderr: "", ...more });
  /**
   * @param {ReturnType<typeof scan>} result
   * @param {boolean} afterSubmission
   * @param {typeof HarnessError} kind
   * @param {RegExp} message
   */
  const fails = (result, afterSubmission, kind, message) =>
    assert.throws(() => checkScan(config, result, { afterSubmission }),
      (error) => error instanceof kind && message.test(error.message));

  test("a sound report is returned", () => {
    assert.deepEqual(checkScan(config, scan(good)), good);
    assert.deepEqual(checkScan(config, scan(good), { afterSubmission: true }), good);
  });

  test("after the submission a broken scan is the submission's, before it the harness's", () => {
    const timedOut = scan(good, { code: 137, stdout: "", stderr: "timeout: sending signal KILL to command ‘react-doctor’" });
    fails(timedOut, true, SubmissionFailure, /^the React Doctor scan did not finish within rd\.timeout_sec = 120 s$/);
    fails(timedOut, false, HarnessError, /did not finish/);
    fails(scan(good, { code: 124, stdout: "" }), true, SubmissionFailure, /^the React Doctor scan was killed \(exit 124\)$/);
    fails(scan(good, { code: 1, stdout: "oops", stderr: `${"x".repeat(900)}END` }), true, SubmissionFailure,
      /^react-doctor printed no JSON report \(exit 1\): x{797}END$/);
    fails(scan({ ...good, projects: [{ project: { sourceFileCount: 0 } }] }), true, SubmissionFailure,
      /^the submission leaves no source file to analyse$/);
    fails(scan({ ...good, projects: [] }), false, HarnessError, /^react-doctor analysed 0 files under \/app$/);
    fails(scan({ ...good, reactDetected: false }), true, SubmissionFailure, /^react-doctor found no React under \/app$/);
    fails(scan({ ...good, projects: [{ ...good.projects[0], skippedChecks: ["lint"], skippedCheckReasons: { lint: "timed out" } }] }),
      true, SubmissionFailure, /^react-doctor scan was partial: lint; lint: timed out$/);
    fails(scan({ ...good, projects: [{ ...good.projects[0], complete: false }] }), true, SubmissionFailure,
      /^react-doctor scan was partial: incomplete$/);
    fails(scan({ ...good, ok: false, error: { message: "boom" } }), true, SubmissionFailure, /^react-doctor failed: \{"message":"boom"\}$/);
  });

  test("what no submission can cause is the harness's, even after it", () => {
    fails(scan(good, { error: new Error("spawn timeout ENOENT") }), true, HarnessError, /^cannot run react-doctor: spawn timeout ENOENT$/);
    fails(scan({ ...good, version: "0.8.0" }), true, HarnessError, /^react-doctor is 0\.8\.0, the gate is pinned to 0\.7\.8$/);
  });
});

describe("unscanned", () => {
  test("changed code files that exist and the scan did not analyse, specs aside", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "grader-unscanned-"));
    try {
      for (const file of ["src/a.tsx", "src/b.tsx", "src/ui/c.ts", "src/style.css", "src/a.test.tsx", "src/d.JS"]) {
        fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
        fs.writeFileSync(path.join(root, file), "x");
      }
      const report = { projects: [{ directory: root, analyzedFiles: ["src/a.tsx"] }, { directory: path.join(root, "src"), analyzedFiles: ["ui/c.ts"] }] };
      const changed = ["src/a.tsx", "src/b.tsx", "src/ui/c.ts", "src/style.css", "src/a.test.tsx", "src/deleted.tsx"];
      assert.deepEqual(unscanned(report, changed, root), ["src/b.tsx"]);
      assert.deepEqual(unscanned({}, ["src/a.tsx"], root), ["src/a.tsx"]);
      // Code by its extension whatever its case: an upper-case one is code the scan skips.
      assert.deepEqual(unscanned(report, ["src/d.JS"], root), ["src/d.JS"]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("the scan's limit", () => {
  test("scales with the run's timeout multiplier, as the harness passes it", async () => {
    const { timeoutMultiplier } = await import("../../../pytest_reactbench/verifier/grader/config.mjs");
    const saved = process.env.REACTBENCH_TIMEOUT_MULTIPLIER;
    try {
      process.env.REACTBENCH_TIMEOUT_MULTIPLIER = "2.5";
      assert.equal(timeoutMultiplier(), 2.5);
      for (const bad of ["0", "-1", "x"]) {
        process.env.REACTBENCH_TIMEOUT_MULTIPLIER = bad;
        assert.equal(timeoutMultiplier(), 1, bad);
      }
      delete process.env.REACTBENCH_TIMEOUT_MULTIPLIER;
      assert.equal(timeoutMultiplier(), 1);
    } finally {
      if (saved === undefined) delete process.env.REACTBENCH_TIMEOUT_MULTIPLIER;
      else process.env.REACTBENCH_TIMEOUT_MULTIPLIER = saved;
    }
  });
});

describe("timers React Doctor cannot follow", () => {
  test("a timer function referred to other than by a call is found, with its line", () => {
    for (const [source, found] of /** @type {[string, [string, number][]][]} */ ([
      ["const every = globalThis.setInterval;\nevery(tick, 1000);", [["setInterval", 1]]],
      ["\nconst every = setInterval;", [["setInterval", 2]]],
      ['const later = window["setTimeout"];', [["setTimeout", 1]]],
      ["setInterval.call(window, tick, 5);", [["setInterval", 1]]],
      ["const timers = { setInterval };", [["setInterval", 1]]],
    ])) {
      assert.deepEqual(hiddenTimers(source), found, source);
    }
  });

  test("calls, types, comments, strings and object keys are not", () => {
    for (const source of [
      "useEffect(() => { const id = setInterval(tick, 1000); return () => clearInterval(id); }, []);",
      "const id = window.setInterval(() => {}, 10);",
      "let id: ReturnType<typeof setInterval> | null = null;",
      "let t: ReturnType<typeof window.setTimeout>;",
      "// setInterval\n/* setTimeout */",
      'console.log("setInterval is how it ticks");',
      "const o = { setTimeout: 5 };",
      "setTimeout<number>(() => {}, 1);",
    ]) {
      assert.deepEqual(hiddenTimers(source), [], source);
    }
  });

  test("new are those past the base's, in changed code files other than specs", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "hidden-timers-"));
    after(() => fs.rmSync(root, { recursive: true, force: true }));
    fs.mkdirSync(path.join(root, "src"));
    fs.writeFileSync(path.join(root, "src/useTicker.ts"), "const every = setInterval;\nexport const go = () => every(f, 1);\n");
    fs.writeFileSync(path.join(root, "src/legacy.ts"), "export const later = setTimeout;\n");
    fs.writeFileSync(path.join(root, "src/notes.md"), "const every = setInterval;\n");
    fs.writeFileSync(path.join(root, "src/a.spec.ts"), "const every = setInterval;\n");
    const base = (/** @type {string} */ file) => (file === "src/legacy.ts" ? "export const later = setTimeout;\n" : "");
    const changed = ["src/useTicker.ts", "src/legacy.ts", "src/notes.md", "src/a.spec.ts", "src/gone.ts"];
    const findings = hiddenTimerFindings(changed, base, root);
    assert.deepEqual(findings.map((f) => [f.rule, f.file, f.line, f.count]),
      [[HIDDEN_TIMER_RULE, "src/useTicker.ts", 1, "0 -> 1"]]);
    assert.match(findings[0]?.title ?? "", /^setInterval used other than by a call$/);
  });
});
