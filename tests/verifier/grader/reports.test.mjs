// The one walker of the runners' reports: Vitest's and Playwright's JSON into test
// keys and statuses, judgeTests over them, and readReport's refusals.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import { APP } from "../../../pytest_reactbench/verifier/grader/config.mjs";
import { SubmissionFailure } from "../../../pytest_reactbench/verifier/grader/errors.mjs";
import {
  firstLines, judgeTests, playwrightResults, readReport, specResults, testKey, vitestResults,
} from "../../../pytest_reactbench/verifier/grader/reports.mjs";

/**
 * The walked results as "file > title path" -> status.
 * @param {Map<string, string>} results
 */
const plain = (results) => Object.fromEntries([...results].map(([k, v]) => [k.replace("\u0000", " | "), v]));

const VITEST = {
  testResults: [
    {
      name: `${APP}/src/Counter.test.tsx`,
      status: "failed",
      assertionResults: [
        { ancestorTitles: ["Counter", "reset"], title: "goes back to zero", status: "passed" },
        { ancestorTitles: [], title: "counts", status: "failed" },
        { title: "later", status: "todo" },
        { ancestorTitles: ["Counter"], title: "sorts", status: "skipped" },
      ],
    },
    { name: `${APP}/src/Broken.test.tsx`, status: "failed", message: "SyntaxError: Unexpected token\n  at x.ts:1", assertionResults: [] },
    { name: `${APP}/src/Silent.test.tsx`, status: "failed" },
    { name: `${APP}/src/Empty.test.tsx`, status: "passed", assertionResults: [] },
  ],
};

const PLAYWRIGHT = {
  config: { rootDir: `${APP}/e2e` },
  suites: [
    {
      title: "counter.spec.ts",
      file: "counter.spec.ts",
      specs: [
        { title: "resets", file: "counter.spec.ts", ok: true, tests: [{ results: [{ status: "passed" }] }] },
        { title: "never ran", file: "counter.spec.ts", tests: [{ results: [] }] },
        { title: "no tests at all", file: "counter.spec.ts" },
        { title: "skipped", file: "counter.spec.ts", tests: [{ results: [{ status: "skipped" }] }] },
        { title: "retried", file: "counter.spec.ts", ok: true, tests: [{ results: [{ status: "failed" }, { status: "passed" }] }] },
        { title: "flagged", file: "counter.spec.ts", ok: false, tests: [{ results: [{ status: "passed" }] }] },
        { title: "two projects", file: "counter.spec.ts", tests: [{ results: [{ status: "passed" }] }, { results: [{ status: "timedOut" }] }] },
      ],
      suites: [
        { title: "menu", specs: [{ title: "opens", file: "counter.spec.ts", tests: [{ results: [{ status: "passed" }] }] }],
          suites: [{ title: "deep", specs: [{ title: "closes", tests: [{ results: [{ status: "passed" }] }] }], file: "menu.spec.ts" }] },
      ],
    },
  ],
  errors: [{ message: "Error: playwright.config.ts did not load\n    at stack" }, { message: "Timed out waiting for the webServer" }],
};

describe("vitestResults", () => {
  test("each assertion under its file (relative to /app) and title path; a file that ran none, once", () => {
    const results = new Map();
    vitestResults(VITEST, results);
    assert.deepEqual(plain(results), {
      "src/Counter.test.tsx | Counter > reset > goes back to zero": "passed",
      "src/Counter.test.tsx | counts": "failed",
      "src/Counter.test.tsx | later": "todo",
      "src/Counter.test.tsx | Counter > sorts": "skipped",
      "src/Broken.test.tsx | (file)": "failed: SyntaxError: Unexpected token",
      "src/Silent.test.tsx | (file)": "failed: failed to run",
    });
  });

  test("no report, or one without results, adds nothing", () => {
    const results = new Map([["x", "passed"]]);
    vitestResults(null, results);
    vitestResults({}, results);
    assert.deepEqual([...results], [["x", "passed"]]);
  });
});

describe("playwrightResults", () => {
  test("a spec is passed only when every result passed; none is missing, a skip is skipped", () => {
    const results = new Map();
    playwrightResults(PLAYWRIGHT, results);
    assert.deepEqual(plain(results), {
      "e2e/counter.spec.ts | resets": "passed",
      "e2e/counter.spec.ts | never ran": "missing",
      "e2e/counter.spec.ts | no tests at all": "missing",
      "e2e/counter.spec.ts | skipped": "skipped",
      "e2e/counter.spec.ts | retried": "failed",
      "e2e/counter.spec.ts | flagged": "failed",
      "e2e/counter.spec.ts | two projects": "failed",
      // Nested suites are part of the title; a spec without a file takes its suite's.
      "e2e/counter.spec.ts | menu > opens": "passed",
      "e2e/menu.spec.ts | menu > deep > closes": "passed",
      // Errors outside any spec fail the run, under "playwright".
      "playwright | Error: playwright.config.ts did not load": "failed",
      "playwright | Timed out waiting for the webServer": "failed",
    });
  });

  test("without a rootDir, files are relative to /app", () => {
    const results = new Map();
    playwrightResults({ suites: [{ title: "", specs: [{ title: "t", file: `${APP}/e2e/a.spec.ts`, tests: [{ results: [{ status: "passed" }] }] }] }] }, results);
    assert.deepEqual(plain(results), { "e2e/a.spec.ts | t": "passed" });
    playwrightResults(null, results);
    assert.equal(results.size, 1);
  });
});

describe("specResults", () => {
  test("every test in the order reported, with the first lines of its failure message", () => {
    const results = new Map();
    const messages = new Map();
    vitestResults({ testResults: [
      { name: `${APP}/src/a.test.tsx`, assertionResults: [
        { ancestorTitles: ["A"], title: "fails", status: "failed",
          failureMessages: ["\u001b[31mAssertionError\u001b[39m: expected 1 to be 2", "second"] },
        { ancestorTitles: ["A"], title: "passes", status: "passed", failureMessages: [] }] },
      { name: `${APP}/src/broken.test.tsx`, status: "failed", message: "SyntaxError: nope\n  at x" }] },
    results, messages);
    playwrightResults({ suites: [{ title: "e2e/b.spec.ts", file: "e2e/b.spec.ts", specs: [
      { title: "times out", file: "e2e/b.spec.ts",
        tests: [{ results: [{ status: "passed" }, { status: "timedOut", error: { message: "Timeout 5000ms" } }] }] }] }],
    errors: [{ message: "config broke\nstack" }] }, results, messages);
    assert.deepEqual(specResults(results, messages), [
      { file: "src/a.test.tsx", name: "A > fails", status: "failed", message: "AssertionError: expected 1 to be 2\nsecond" },
      { file: "src/a.test.tsx", name: "A > passes", status: "passed", message: "" },
      { file: "src/broken.test.tsx", name: "(file)", status: "failed: SyntaxError: nope", message: "SyntaxError: nope\n  at x" },
      { file: "e2e/b.spec.ts", name: "times out", status: "failed", message: "Timeout 5000ms" },
      { file: "playwright", name: "config broke", status: "failed", message: "config broke\nstack" },
    ]);
  });

  test("a message keeps its first 12 lines", () => {
    const long = Array.from({ length: 30 }, (_, i) => `line ${i}`).join("\n");
    assert.equal(firstLines(long).split("\n").length, 12);
    assert.equal(firstLines(undefined), "");
  });
});

describe("judgeTests", () => {
  const walked = () => {
    const results = new Map();
    vitestResults(VITEST, results);
    playwrightResults(PLAYWRIGHT, results);
    return results;
  };

  test("without a list, everything that did not pass fails, skipped and missing ones included", () => {
    assert.deepEqual(judgeTests({}, walked()), [
      "src/Counter.test.tsx > counts (failed)",
      "src/Counter.test.tsx > later (todo)",
      "src/Counter.test.tsx > Counter > sorts (skipped)",
      "src/Broken.test.tsx > (file) (failed: SyntaxError: Unexpected token)",
      "src/Silent.test.tsx > (file) (failed: failed to run)",
      "e2e/counter.spec.ts > never ran (missing)",
      "e2e/counter.spec.ts > no tests at all (missing)",
      "e2e/counter.spec.ts > skipped (skipped)",
      "e2e/counter.spec.ts > retried (failed)",
      "e2e/counter.spec.ts > flagged (failed)",
      "e2e/counter.spec.ts > two projects (failed)",
      "playwright > Error: playwright.config.ts did not load (failed)",
      "playwright > Timed out waiting for the webServer (failed)",
    ]);
  });

  test("allow_skipped tolerates what was skipped on purpose, never what is missing", () => {
    const failing = judgeTests({}, walked(), true);
    assert.ok(!failing.some((f) => f.endsWith("(skipped)") || f.endsWith("(todo)")), failing.join("\n"));
    assert.ok(failing.includes("e2e/counter.spec.ts > never ran (missing)"));
  });

  test("a declared list: what it names must have run and passed, nested titles joined by ' > '", () => {
    const results = walked();
    const expected = {
      "src/Counter.test.tsx": ["Counter > reset > goes back to zero", "counts", "Counter > sorts"],
      "e2e/counter.spec.ts": ["resets", "menu > opens", "gone"],
    };
    const failing = judgeTests(expected, results);
    assert.deepEqual(failing.slice(0, 3), [
      "src/Counter.test.tsx > counts (failed)",
      "src/Counter.test.tsx > Counter > sorts (skipped)",
      "e2e/counter.spec.ts > gone (did not run)",
    ]);
    // Each failure once, and an undeclared skip is not held against the submission.
    assert.equal(failing.filter((f) => f.startsWith("src/Counter.test.tsx > counts")).length, 1);
    assert.ok(!failing.includes("src/Counter.test.tsx > later (todo)"));
    assert.ok(failing.includes("e2e/counter.spec.ts > never ran (missing)"));
  });

  test("nothing that passed is no pass; all passed is none failing", () => {
    assert.deepEqual(judgeTests({}, new Map()), ["no test passed"]);
    assert.deepEqual(judgeTests({}, new Map([[testKey("a.test.ts", ["x"]), "skipped"]]), true), ["no test passed"]);
    assert.deepEqual(judgeTests({}, new Map([[testKey("a.test.ts", ["d", "x"]), "passed"]])), []);
    assert.deepEqual(judgeTests({ "a.test.ts": ["d > x"] }, new Map([[testKey("a.test.ts", ["d", "x"]), "passed"]])), []);
  });
});

describe("readReport", () => {
  const setUp = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-reports-"));
    fs.mkdirSync(path.join(dir, "room"));
    fs.mkdirSync(path.join(dir, "logs"));
    return { dir, room: path.join(dir, "room"), logs: path.join(dir, "logs") };
  };

  test("a report is parsed and kept; none is null", () => {
    const { dir, room, logs } = setUp();
    try {
      fs.writeFileSync(path.join(room, "vitest.json"), '{"testResults": []}');
      assert.deepEqual(readReport("vitest.json", room, logs), { testResults: [] });
      assert.equal(fs.readFileSync(path.join(logs, "vitest.json"), "utf8"), '{"testResults": []}');
      assert.equal(readReport("playwright.json", room, logs), null);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("never through a link, never anything but a regular file, never other than JSON", () => {
    const { dir, room, logs } = setUp();
    try {
      fs.writeFileSync(path.join(dir, "secret.json"), "{}");
      fs.symlinkSync(path.join(dir, "secret.json"), path.join(room, "link.json"));
      fs.mkdirSync(path.join(room, "folder.json"));
      assert.equal(spawnSync("mkfifo", [path.join(room, "fifo.json")]).status, 0);
      fs.writeFileSync(path.join(room, "broken.json"), "{");
      /** @param {string} name @param {RegExp} message */
      const refused = (name, message) =>
        assert.throws(() => readReport(name, room, logs), (error) => error instanceof SubmissionFailure && message.test(error.message));
      refused("link.json", /^the test room's link\.json cannot be read \(ELOOP\)$/);
      refused("folder.json", /^the test room's folder\.json is not a plain report file$/);
      refused("fifo.json", /^the test room's fifo\.json is not a plain report file$/);  // and does not block
      refused("broken.json", /^the test room's broken\.json is not JSON \(.+\)$/);
      assert.deepEqual(fs.readdirSync(logs), ["broken.json"]);  // only what was read is kept
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
