// The scan's copy of the graded tree: a changed file React Doctor would skip or read
// with most rules off (test-like, a type declaration, minified-looking) is also put
// where it reads production code, the base's version beside it; the gate reads their
// findings as the file's. The grader's folders are moved here before it loads.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "grader-scan-copy-"));
const APP = path.join(root, "app");
const STATE = path.join(root, "state");
Object.assign(process.env, { REACTBENCH_APP: APP, REACTBENCH_STATE: STATE, REACTBENCH_LOGS: path.join(root, "logs"),
  REACTBENCH_TESTS: path.join(root, "tests") });
const { minifiedLooking, productionPlacement, testContext, testLike } = await import("../../../pytest_reactbench/verifier/grader/config.mjs");
const { copyForScan, placementReason, placementsOf, readPlacements } =
  await import("../../../pytest_reactbench/verifier/grader/doctor.mjs");

/**
 * @import { Config } from "../../../pytest_reactbench/verifier/grader/config.mjs"
 * @import { Placement } from "../../../pytest_reactbench/verifier/grader/doctor.mjs"
 */

/** @type {Config} */
const config = {
  test: { cmd: "true", e2e_specs: "e2e", expected: {} },
  rd: { scan_root: APP, mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120 },
  sources: ["src"],
  test_like_allowed: ["src/scripts"],
};
/** @param {string} rel @param {string | Buffer} content */
const write = (rel, content) => {
  fs.mkdirSync(path.dirname(path.join(APP, rel)), { recursive: true });
  fs.writeFileSync(path.join(APP, rel), content);
};
/** @param {string[]} args */
const git = (...args) => {
  const result = spawnSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", ...args], { cwd: APP, encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
};
const ICON = `export const icon = "data:image/svg+xml;base64,${"A".repeat(30_000)}";\n`;

describe("productionPlacement and placementReason", () => {
  test("beside it, its test-like folders renamed, below a folder src/, by a name of one dot", () => {
    const free = () => false;
    for (const [file, placed] of [
      ["src/tools/labels.ts", "src/tools-src/src/labels.ts"],
      ["src/i18n/it/labels.ts", "src/i18n/it-src/src/labels.ts"],
      ["src/e2e/Ticker.tsx", "src/e2e-src/src/Ticker.tsx"],
      ["src/test/components/Card.tsx", "src/test-src/components/src/Card.tsx"],
      ["src/Ticker.stories.tsx", "src/src/Ticker-stories.tsx"],
      ["src/data.fixtures.ts", "src/src/data-fixtures.ts"],
      ["src/a.e2e.e2e.ts", "src/src/a-e2e-e2e.ts"],
      ["src/setupJest.ts", "src/src/scanned-setupJest.ts"],
      ["src/vite-env.d.ts", "src/src/vite-env-d.ts"],
      ["src/types/global.d.mts", "src/types/src/global-d.mts"],
      ["src/legacy.d.cts", "src/src/legacy-d.ts"],
    ]) {
      const at = productionPlacement(/** @type {string} */ (file), free);
      assert.equal(at, placed, file);
      // Production code to either of React Doctor's rules.
      assert.equal(testLike(at), null, at);
      assert.equal(testContext(at), null, at);
    }
    // Another src/ until the path is free; the scan root's own folders are kept.
    const taken = new Set(["src/tools-src/src/labels.ts"]);
    assert.equal(productionPlacement("src/tools/labels.ts", (p) => taken.has(p)), "src/tools-src/src/src/labels.ts");
    assert.equal(productionPlacement("tools/web/src/a.ts", free, "tools/web"), "tools/web/src/src/a.ts");
  });

  test("React Doctor's report's own test context: suffixes, test folders anywhere, fixtures scoped", () => {
    assert.equal(testContext("src/test/components/Card.tsx"), "a folder test/");
    assert.equal(testContext("src/x.fixtures.ts"), "its name");
    assert.equal(testContext("src/fixtures/src/Card.tsx"), null);
    assert.equal(testContext("src/components/Card.tsx"), null);
  });

  test("what is placed: test-like code unless the task declares it, declarations; never a spec or data", () => {
    assert.equal(placementReason("src/tools/labels.ts", config), "test-like by a folder tools/");
    assert.equal(placementReason("src/test/components/Card.tsx", config), "test-like by a folder test/");
    assert.equal(placementReason("src/vite-env.d.ts", config), "a type declaration");
    for (const file of ["src/scripts/gen.ts", "src/Counter.tsx", "src/tools/data.json", "src/tools/a.test.ts"]) {
      assert.equal(placementReason(file, config), null, file);
    }
  });
});

describe("copyForScan and readPlacements", () => {
  /** @type {string} */
  let copy;
  /** @type {Placement[]} */
  let placed;

  before(() => {
    write("src/Counter.tsx", "export const Counter = () => null;\n");
    write("src/fixtures/data.ts", "export const data = [1];\n");
    git("init", "-q");
    git("add", "-A");
    git("commit", "-qm", "base");
    fs.mkdirSync(STATE, { recursive: true });
    fs.writeFileSync(path.join(STATE, "base-sha"), `${git("rev-parse", "HEAD").trim()}\n`);
    write("src/Counter.tsx", "export const Counter = () => 1;\n");
    write("src/fixtures/data.ts", "export const data = [2];\n");
    write("src/tools/labels.ts", 'export const label = "Count";\n');
    write("src/vite-env.d.ts", "declare const A: number;\n");
    write("src/resetIcon.ts", ICON);
    write("src/cli.ts", `#!/usr/bin/env node\n${ICON}`);
    write("src/scripts/gen.ts", "export {};\n");
    const changed = ["src/Counter.tsx", "src/fixtures/data.ts", "src/tools/labels.ts", "src/vite-env.d.ts",
      "src/resetIcon.ts", "src/cli.ts", "src/scripts/gen.ts", "src/deleted.ts"];
    copy = copyForScan(config, changed);
    placed = placementsOf(copy);
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test("the copy holds every file where it is, and the placed ones again, the base's beside", () => {
    assert.deepEqual(placed.map((p) => [p.file, p.scanned, p.version, p.padding]), [
      ["src/fixtures/data.ts", "src/fixtures-src/src/data.ts", "after", 0],
      ["src/fixtures/data.ts", "src/fixtures-src/src/src/data.ts", "base", 0],
      ["src/tools/labels.ts", "src/tools-src/src/labels.ts", "after", 0],
      ["src/vite-env.d.ts", "src/src/vite-env-d.ts", "after", 0],
      ["src/resetIcon.ts", "src/src/resetIcon.ts", "after", 140],
      ["src/cli.ts", "src/src/cli.ts", "after", 140],
    ]);
    const read = (/** @type {string} */ rel) => fs.readFileSync(path.join(copy, rel), "utf8");
    assert.equal(read("src/tools/labels.ts"), read("src/tools-src/src/labels.ts"));
    assert.equal(read("src/fixtures-src/src/src/data.ts"), "export const data = [1];\n");
    assert.equal(read("src/Counter.tsx"), "export const Counter = () => 1;\n");
    // Long lines: the same code after blank lines, which take it below React Doctor's test.
    assert.equal(minifiedLooking(fs.readFileSync(path.join(copy, "src/resetIcon.ts"))), true);
    assert.equal(read("src/src/resetIcon.ts"), "\n".repeat(140) + ICON);
    assert.equal(minifiedLooking(fs.readFileSync(path.join(copy, "src/src/resetIcon.ts"))), false);
    assert.equal(read("src/src/cli.ts"), `#!/usr/bin/env node\n${"\n".repeat(140)}${ICON}`);
  });

  test("the placed files' findings and analysis are the files', their lines as in them", () => {
    /** @param {string} rule @param {string} filePath @param {number} line */
    const d = (rule, filePath, line) => ({ rule, filePath, line });
    const baseline = { diagnostics: [d("x", "src/fixtures/data.ts", 1), d("y", "src/Counter.tsx", 1)] };
    const report = {
      diagnostics: [
        d("x", "src/fixtures/data.ts", 1), d("z", "src/fixtures-src/src/data.ts", 1), d("w", "src/fixtures-src/src/data.ts", 1),
        d("w", "src/fixtures-src/src/src/data.ts", 1), d("effect-needs-cleanup", "src/tools-src/src/labels.ts", 3),
        d("a", "src/src/resetIcon.ts", 141), d("b", "src/src/cli.ts", 142), d("c", "src/src/cli.ts", 1),
        d("y", "src/Counter.tsx", 1),
      ],
      projects: [{ directory: copy, analyzedFiles: ["src/Counter.tsx", "src/fixtures/data.ts", "src/fixtures-src/src/data.ts",
        "src/fixtures-src/src/src/data.ts", "src/tools/labels.ts", "src/tools-src/src/labels.ts", "src/vite-env.d.ts",
        "src/cli.ts", "src/src/cli.ts"] }],
    };
    const read = readPlacements(placed, baseline, report, copy, copy);
    assert.deepEqual(read.before.diagnostics, [d("y", "src/Counter.tsx", 1), d("w", "src/fixtures/data.ts", 1)]);
    assert.deepEqual(read.after.diagnostics, [
      d("z", "src/fixtures/data.ts", 1), d("w", "src/fixtures/data.ts", 1), d("effect-needs-cleanup", "src/tools/labels.ts", 3),
      d("a", "src/resetIcon.ts", 1), d("b", "src/cli.ts", 2), d("c", "src/cli.ts", 1), d("y", "src/Counter.tsx", 1),
    ]);
    // Analysed where its placement was: the declaration and the icon were not.
    assert.deepEqual(read.after.projects?.[0]?.analyzedFiles,
      ["src/Counter.tsx", "src/fixtures/data.ts", "src/tools/labels.ts", "src/cli.ts"]);
    // Nothing placed: the reports as they are.
    const none = readPlacements([], baseline, report, copy, copy);
    assert.equal(none.after, report);
  });
});
