// The canaries: planted in the expected Vitest specs with the grader's reporter on
// the command, judged against what the report says, and the exit they explain.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import crypto from "node:crypto";

import {
  REPORTER, RUN_REPORT, STATE_CHECK, canariesExplainExit, firstDescribe, judgeCanaries, plantCanaries,
  readRunReport, titleLikeName, withRunReporter,
} from "../../../pytest_reactbench/verifier/grader/canaries.mjs";
import { graderConfig, signed, treeReport } from "../../../pytest_reactbench/verifier/grader/vitest-run-reporter.mjs";
import { testKey } from "../../../pytest_reactbench/verifier/grader/reports.mjs";

const CMD = "pnpm exec vitest run --reporter=default --reporter=json --outputFile.json=x.json src/a.spec.tsx";
const SPEC = `import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";

describe("Counter", () => {
  it("still counts up", () => {
    expect(1).toBe(1);
  });

  it("has a Reset button that is disabled at zero", () => {
    render(<Counter start={0} />);
    expect(screen.getByRole("button", { name: "Reset" })).toBeDisabled();
  });

  it("lists the counts it was given", () => {
    expect([1, 2]).toEqual([1, 2]);
  });
});
`;
const TITLES = ["still counts up", "has a Reset button that is disabled at zero", "lists the counts it was given"];

/**
 * An app folder with `files`.
 * @param {Record<string, string>} files  relative path -> source
 */
function app(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-canaries-"));
  for (const [rel, source] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), source);
  }
  return dir;
}

describe("withRunReporter", () => {
  test("the grader's reporter joins Vitest's JSON one", () => {
    assert.equal(withRunReporter(CMD),
      CMD.replace("--reporter=json", `--reporter=json --reporter=${REPORTER}`));
    assert.equal(withRunReporter("vitest run --reporter json a.test.ts"),
      `vitest run --reporter json --reporter=${REPORTER} a.test.ts`);
  });

  test("no JSON reporter or no Vitest: nothing to tell canaries by", () => {
    assert.equal(withRunReporter("pnpm exec vitest run"), null);
    assert.equal(withRunReporter("pnpm exec jest --reporter=json"), null);
  });
});

describe("titleLikeName", () => {
  test("the head of a title and the tail of another, never a title in use nor a word twice", () => {
    const taken = new Set(TITLES);
    for (let i = 0; i < 20; i++) {
      const name = /** @type {string} */ (titleLikeName(TITLES, taken));
      assert.ok(name.split(" ").length >= 3 && !TITLES.includes(name), name);
      assert.doesNotMatch(name, /\b(\w+) \1\b/);
    }
    assert.equal(titleLikeName(["alone"], new Set()), null);
  });
});

describe("firstDescribe", () => {
  test("a plain string title, or none", () => {
    assert.equal(firstDescribe(SPEC), "Counter");
    assert.equal(firstDescribe("describe('the list', () => {})"), "the list");
    assert.equal(firstDescribe('describe("it\\"s", () => {})'), null);
    assert.equal(firstDescribe("it('alone', () => {})"), null);
  });
});

describe("plantCanaries", () => {
  test("each expected spec gets must-fail and must-pass canaries in its own describe", () => {
    const dir = app({ "src/a.spec.tsx": SPEC, "src/b.spec.ts": 'import { it } from "vitest";\nit("keeps x as it was", () => {});\n' });
    try {
      const expected = { "src/a.spec.tsx": TITLES.map((t) => `Counter > ${t}`), "src/b.spec.ts": ["keeps x as it was"],
        "src/gone.spec.ts": ["y"] };
      const { cmd, canaries } = plantCanaries(CMD, expected, dir);
      assert.equal(cmd, withRunReporter(CMD));
      const a = canaries.filter((c) => c.file === "src/a.spec.tsx");
      const b = canaries.filter((c) => c.file === "src/b.spec.ts");
      for (const some of [a, b]) assert.deepEqual(new Set(some.map((c) => c.must)), new Set(["fail", "pass"]));
      assert.ok(a.every((c) => c.titles.length === 2 && c.titles[0] === "Counter"));
      assert.ok(b.every((c) => c.titles.length === 1));
      const names = canaries.map((c) => /** @type {string} */ (c.titles.at(-1)));
      assert.equal(new Set(names).size, names.length);
      assert.ok(!names.some((n) => TITLES.includes(n) || n === "keeps x as it was"));
      // Named with the spec's own words.
      const words = new Set(TITLES.join(" ").split(" "));
      for (const name of a.map((c) => /** @type {string} */ (c.titles[1]))) {
        assert.ok(name.split(" ").every((w) => words.has(w)), name);
      }
      const source = fs.readFileSync(path.join(dir, "src/a.spec.tsx"), "utf8");
      for (const name of a.map((c) => c.titles[1])) assert.ok(source.includes(`  it(${JSON.stringify(name)}, () => {`), name);
      // The framework state is checked first (imports are hoisted: after every one of them).
      assert.ok(source.startsWith(STATE_CHECK), source);
      // Some stand among the spec's own tests, at the head of its block; the rest after it.
      const opening = source.indexOf('describe("Counter", () => {');
      const own = source.indexOf('  it("still counts up"');
      const at = (/** @type {string | undefined} */ name) => source.indexOf(JSON.stringify(name));
      const places = a.map((c) => at(c.titles[1]));
      assert.ok(places.some((p) => p > opening && p < own), source);
      assert.ok(places.some((p) => p > source.indexOf("\n});\n", own)), source);
      // Without them, the spec is as it was.
      const head = source.slice(opening + 'describe("Counter", () => {'.length, own - 1);
      assert.ok(source.slice(STATE_CHECK.length).replace(head, "").startsWith(SPEC), source);
      // Nothing in the planted code names it for what it is, nor declares names of its own.
      assert.doesNotMatch(source, /canar|grader|reactbench|\$[0-9a-f]{8}/i);
      assert.equal(source.match(/^import /gm)?.length, 2);
      // The spec's matchers, each both ways: toEqual and jest-dom's toBeDisabled included.
      const count = (/** @type {RegExp} */ re) => source.match(re)?.length ?? 0;
      assert.ok(count(/\.toEqual\(/g) >= 3 && count(/\.toBeDisabled\(\)/g) >= 3, source);
      // One that must fail renders what the spec renders, as it writes it.
      assert.ok(count(/^ {4}render\(<Counter start=\{0\} \/>\);\n {4}expect\(screen\.getByRole\("button", \{ name: "[^"]+" \}\)\)\.toBeInTheDocument\(\);$/gm) === 1, source);
      // A spec that imports no expect gets it, by its own name.
      const other = fs.readFileSync(path.join(dir, "src/b.spec.ts"), "utf8");
      assert.match(other, /^import \{ expect \} from "vitest";$/m);
      assert.match(other, /^it\("/m);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a grading plants other names than the last", () => {
    const dir = app({ "src/a.spec.tsx": SPEC });
    try {
      const one = plantCanaries(CMD, { "src/a.spec.tsx": [] }, dir).canaries.map((c) => c.titles.join());
      fs.writeFileSync(path.join(dir, "src/a.spec.tsx"), SPEC);
      const two = plantCanaries(CMD, { "src/a.spec.tsx": [] }, dir).canaries.map((c) => c.titles.join());
      assert.notDeepEqual(one.sort(), two.sort());
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a command without a JSON reporter is run as it is, with none", () => {
    const dir = app({ "src/a.spec.tsx": SPEC });
    try {
      assert.deepEqual(plantCanaries("vitest run", { "src/a.spec.tsx": [] }, dir), { cmd: "vitest run", canaries: [] });
      assert.equal(fs.readFileSync(path.join(dir, "src/a.spec.tsx"), "utf8"), SPEC);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** @type {import("../../../pytest_reactbench/verifier/grader/canaries.mjs").Canary} */
const MUST_FAIL = { file: "src/a.spec.tsx", titles: ["Counter", "shows the label at zero"], must: "fail" };
/** @type {import("../../../pytest_reactbench/verifier/grader/canaries.mjs").Canary} */
const MUST_PASS = { file: "src/a.spec.tsx", titles: ["Counter", "keeps the list on load"], must: "pass" };
const CANARIES = [MUST_FAIL, MUST_PASS];
const REAL = testKey("src/a.spec.tsx", ["Counter", "still counts up"]);

/**
 * Results with the canaries reported as `fail` and `pass` say (null: not at all).
 * @param {string | null} fail
 * @param {string | null} pass
 */
function reported(fail, pass) {
  const results = new Map([[REAL, "passed"]]);
  if (fail) results.set(testKey("src/a.spec.tsx", MUST_FAIL.titles), fail);
  if (pass) results.set(testKey("src/a.spec.tsx", MUST_PASS.titles), pass);
  return results;
}

describe("judgeCanaries", () => {
  test("reported as planted: nothing is said, and the canaries leave the results", () => {
    const results = reported("failed", "passed");
    const messages = new Map([[testKey("src/a.spec.tsx", MUST_FAIL.titles), "expected 3 to be 4"]]);
    assert.deepEqual(judgeCanaries(CANARIES, results, messages), []);
    assert.deepEqual([...results.keys()], [REAL]);
    assert.equal(messages.size, 0);
  });

  test("a failure reported passed, or a canary skipped or gone, is tampering", () => {
    assert.deepEqual(judgeCanaries(CANARIES, reported("passed", "passed"), new Map()), [
      "test results tampered: src/a.spec.tsx: a test the grader planted to fail was reported passed"]);
    assert.deepEqual(judgeCanaries(CANARIES, reported("failed", "skipped"), new Map()), [
      "test results tampered: src/a.spec.tsx: a test the grader planted to pass was reported skipped"]);
    assert.equal(judgeCanaries(CANARIES, reported(null, null), new Map()).length, 2);
  });

  test("a planted test the framework state's guard failed says what it found", () => {
    const messages = new Map([[testKey("src/a.spec.tsx", MUST_PASS.titles),
      "Error: test framework state changed: a afterEach hook registered from /app/src/forge.ts\n  at x"]]);
    const second = { ...MUST_PASS, titles: ["Counter", "keeps the count it was given"] };
    const results = reported("failed", "failed");
    results.set(testKey("src/a.spec.tsx", second.titles), "failed");
    messages.set(testKey("src/a.spec.tsx", second.titles), /** @type {string} */ (messages.get(testKey("src/a.spec.tsx", MUST_PASS.titles))));
    assert.deepEqual(judgeCanaries([...CANARIES, second], results, messages), [
      "test results tampered: src/a.spec.tsx: a test the grader planted to pass was reported failed " +
      "(test framework state changed: a afterEach hook registered from /app/src/forge.ts)"]);
  });

  test("a spec that never ran says nothing of its canaries", () => {
    const results = new Map([[testKey("src/a.spec.tsx", ["(file)"]), "failed: SyntaxError"]]);
    assert.deepEqual(judgeCanaries(CANARIES, results, new Map()), []);
    assert.deepEqual(judgeCanaries(CANARIES, new Map(), new Map()), []);
  });
});

describe("canariesExplainExit", () => {
  const clean = new Map([[REAL, "passed"]]);
  test("exit 1 from the planted failures alone", () => {
    assert.equal(canariesExplainExit(1, CANARIES, { unhandled: 0, reason: "failed" }, clean), true);
    assert.equal(canariesExplainExit(1, CANARIES, { unhandled: 0 }, clean), true);
  });

  test("an unhandled error, another failure, no run report or another code is not explained", () => {
    assert.equal(canariesExplainExit(1, CANARIES, { unhandled: 1, reason: "failed" }, clean), false);
    assert.equal(canariesExplainExit(1, CANARIES, { unhandled: 0, reason: "interrupted" }, clean), false);
    assert.equal(canariesExplainExit(1, CANARIES, null, clean), false);
    assert.equal(canariesExplainExit(2, CANARIES, { unhandled: 0 }, clean), false);
    assert.equal(canariesExplainExit(1, CANARIES, { unhandled: 0 }, new Map([[REAL, "failed"]])), false);
    assert.equal(canariesExplainExit(1, [MUST_PASS], { unhandled: 0 }, clean), false);
  });
});

describe("the reporter's onInit", () => {
  test("the grader's setup files run last in every project, beside production env values", async () => {
    const { default: RunReporter } = await import("../../../pytest_reactbench/verifier/grader/vitest-run-reporter.mjs");
    const before = process.env.REACTBENCH_VITEST_SETUP;
    process.env.REACTBENCH_VITEST_SETUP = "/room/a.mjs:relative.mjs:/room/b.mjs";
    try {
      const project = { config: { setupFiles: ["/app/src/setupTests.ts"], env: { VITE_X: "1" } },
        vite: { config: { server: { fs: { allow: ["/app"] } } } } };
      /** @type {{ setupFiles: string[], env?: Record<string, unknown> }} */
      const root = { setupFiles: ["/app/src/setupTests.ts"] };
      const ctx = { config: root, projects: [project],
        vite: { config: { server: { fs: { allow: ["/app"] } } } } };
      new RunReporter().onInit(ctx);
      for (const config of [ctx.config, project.config]) {
        assert.deepEqual(config.setupFiles, ["/app/src/setupTests.ts", "/room/a.mjs", "/room/b.mjs"]);
        assert.deepEqual({ ...config.env, VITE_X: undefined },
          { VITE_X: undefined, DEV: false, PROD: true, MODE: "production" });
      }
      assert.equal(project.config.env.VITE_X, "1");
      // Test files in processes of their own, never threads of the reporter's.
      /** @type {[string, string][]} */
      const pools = [["threads", "forks"], ["vmThreads", "vmForks"], ["forks", "forks"], ["vmForks", "vmForks"]];
      for (const [pool, want] of pools) {
        /** @type {{ pool?: string }} */
        const config = { pool };
        graderConfig(config, []);
        assert.equal(config.pool, want);
      }
      assert.deepEqual(project.vite.config.server.fs.allow, ["/app", "/room/a.mjs", "/room/b.mjs"]);
      assert.deepEqual(ctx.vite.config.server.fs.allow, ["/app", "/room/a.mjs", "/room/b.mjs"]);
    } finally {
      if (before === undefined) delete process.env.REACTBENCH_VITEST_SETUP;
      else process.env.REACTBENCH_VITEST_SETUP = before;
    }
  });
});

describe("the signed report", () => {
  /** @type {import("../../../pytest_reactbench/verifier/grader/vitest-run-reporter.mjs").RunnerTask} */
  const FILE = { type: "suite", name: "src/a.spec.tsx", filepath: "/app/src/a.spec.tsx", result: { state: "fail" }, tasks: [
    { type: "suite", name: "Counter", tasks: [
      { type: "test", name: "counts", mode: "run", result: { state: "pass" }, meta: { reactbenchLeaks: "{\"leaks\":[]}" } },
      { type: "test", name: "resets", mode: "run", result: { state: "fail", errors: [{ name: "AssertionError", message: "expected 1 to be 0" }] } },
      { type: "test", name: "later", mode: "todo" },
    ] },
  ] };

  test("the task tree as Vitest's JSON report has it", () => {
    assert.deepEqual(treeReport([FILE]), [{
      name: "/app/src/a.spec.tsx", status: "failed", message: "", assertionResults: [
        { ancestorTitles: ["Counter"], title: "counts", status: "passed", failureMessages: [], leaks: "{\"leaks\":[]}" },
        { ancestorTitles: ["Counter"], title: "resets", status: "failed", failureMessages: ["AssertionError: expected 1 to be 0"] },
        { ancestorTitles: ["Counter"], title: "later", status: "todo", failureMessages: [] },
      ] }]);
  });

  test("read only when signed with the grading's key; anything else is said, a forgery as such", () => {
    const room = fs.mkdtempSync(path.join(os.tmpdir(), "grader-run-"));
    const keep = fs.mkdtempSync(path.join(os.tmpdir(), "grader-logs-"));
    try {
      const key = crypto.randomBytes(32);
      const run = { unhandled: 0, reason: "failed", testResults: treeReport([FILE]) };
      assert.deepEqual(readRunReport(key, room, keep), { run: null, problem: "the unit tests' report was never written", forged: false });
      fs.writeFileSync(path.join(room, RUN_REPORT), JSON.stringify(signed(run, key)));
      assert.deepEqual(readRunReport(key, room, keep), { run, problem: null, forged: false });
      // Rewritten by another process: its results, the old signature; or signed with another key; or none.
      const rewritten = signed(run, key);
      rewritten.body = rewritten.body.replace('"failed"', '"passed"');
      for (const document of [rewritten, signed(run, crypto.randomBytes(32)), signed(run, null), { unhandled: 0 }]) {
        fs.writeFileSync(path.join(room, RUN_REPORT), JSON.stringify(document));
        assert.deepEqual(readRunReport(key, room, keep),
          { run: null, problem: "the unit tests' report is not the one the grader's reporter wrote", forged: true });
      }
      fs.writeFileSync(path.join(room, RUN_REPORT), "{");
      assert.equal(readRunReport(key, room, keep).forged, true);
    } finally {
      fs.rmSync(room, { recursive: true, force: true });
      fs.rmSync(keep, { recursive: true, force: true });
    }
  });
});

describe("the framework state's guard", () => {
  test("takes for test infrastructure what the clean room does", async () => {
    const { SPEC_PATH, VERIFIER_DIR } = await import("../../../pytest_reactbench/verifier/grader/config.mjs");
    const guard = fs.readFileSync(path.join(VERIFIER_DIR, "vitest-guard.mjs"), "utf8");
    assert.ok(guard.includes(`const TEST_PATH =\n  ${SPEC_PATH.toString()};`), "TEST_PATH is config.mjs's SPEC_PATH");
    assert.ok(guard.includes(`Symbol.for("vitest.state.check")`) && STATE_CHECK.includes(`Symbol.for("vitest.state.check")`));
  });
});
