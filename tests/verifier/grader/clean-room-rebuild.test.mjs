// cleanRoom on a base commit and a submission made here: what it admits, refuses and
// puts back, and what it reports. The grader's folders are moved here before it loads.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "grader-rebuild-"));
const APP = path.join(root, "app");
const STATE = path.join(root, "state");
const LOGS = path.join(root, "logs");
Object.assign(process.env, { REACTBENCH_APP: APP, REACTBENCH_STATE: STATE, REACTBENCH_LOGS: LOGS,
  REACTBENCH_TESTS: path.join(root, "tests") });
const { cleanRoom } = await import("../../../pytest_reactbench/verifier/grader/clean-room.mjs");

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
/** @param {string} rel */
const read = (rel) => fs.readFileSync(path.join(APP, rel), "utf8");

/** @type {import("../../../pytest_reactbench/verifier/grader/clean-room.mjs").Submission} */
let graded;

before(() => {
  // The base, as the bake leaves it.
  write("package.json", '{"name": "app"}\n');
  write(".gitignore", "node_modules\nsrc/generated/\n");
  write("src/App.tsx", "export const App = () => 1;\n");
  write("src/util.js", "export const util = 1;\n");
  write("src/Counter.test.tsx", "test('counts', () => {});\n");
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "base");
  fs.mkdirSync(STATE, { recursive: true });
  fs.writeFileSync(path.join(STATE, "base-sha"), `${git("rev-parse", "HEAD").trim()}\n`);
  fs.cpSync(path.join(APP, ".git"), path.join(STATE, "base-git"), { recursive: true });
  fs.mkdirSync(path.join(STATE, "deps", "node_modules", "react"), { recursive: true });
  fs.mkdirSync(LOGS, { recursive: true });
  // The submission.
  write("src/App.tsx", "export const App = () => 2;\n");                 // admitted
  write("src/new/Panel.tsx", "export const Panel = () => 3;\n");          // admitted
  fs.rmSync(path.join(APP, "src", "util.js"));                            // a deleted source stays deleted
  write("package.json", '{"name": "app", "scripts": {"test": "true"}}\n'); // refused, put back
  write("src/Counter.test.tsx", "test('counts', () => { /* gone */ });\n"); // refused, put back
  fs.rmSync(path.join(APP, ".gitignore"));                                // not a source: comes back
  write("src/generated/api.ts", "export const api = 1;\n");               // ignored by the base
  write("src/dist/out.ts", "export {};\n");                               // refused, its folder pruned
  write("node_modules/evil/index.js", "module.exports = 1;\n");           // replaced by the pristine link
  write("src/Ünïcode.tsx", "export const U = 1;\n");                    // admitted, named as it is
  write("src/LICENSE", "MIT\n");                                          // refused: not a source type
  fs.writeFileSync(Buffer.concat([Buffer.from(`${APP}/src/bad`), Buffer.from([0xff]), Buffer.from(".ts")]), "x");
  graded = cleanRoom({
    test: { cmd: "true", e2e_specs: "e2e", expected: {} },
    rd: { scan_root: APP, mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120 },
    sources: ["src"],
    test_like_allowed: [],
  });
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

test("each refused path with its reason", () => {
  const reasons = Object.fromEntries(graded.refused.map((r) => [r.path, r.reason]));
  assert.deepEqual(reasons, {
    "package.json": "outside the source roots (src)",
    "src/Counter.test.tsx": "test files, test setup and mocks belong to the verifier",
    "src/dist/out.ts": "in a folder React Doctor does not scan",
    "src/generated/api.ts": "ignored by the base's .gitignore: the scan would skip it",
    "src/LICENSE": "not a source file type",
    [`src/bad\ufffd.ts`]: "the name is not UTF-8",
  });
});

test("the graded tree is the base plus the admitted changes", () => {
  assert.deepEqual([...graded.changed].sort(), ["src/App.tsx", "src/new/Panel.tsx", "src/util.js", "src/Ünïcode.tsx"].sort());
  assert.equal(read("src/App.tsx"), "export const App = () => 2;\n");
  assert.equal(read("package.json"), '{"name": "app"}\n');
  assert.equal(read("src/Counter.test.tsx"), "test('counts', () => {});\n");
  assert.equal(read(".gitignore"), "node_modules\nsrc/generated/\n");
  assert.equal(fs.existsSync(path.join(APP, "src", "util.js")), false);
  assert.equal(fs.existsSync(path.join(APP, "src", "generated", "api.ts")), false);
  assert.equal(fs.existsSync(path.join(APP, "src", "dist")), false);
  assert.deepEqual(fs.readdirSync(path.join(APP, "src")).filter((n) => n.startsWith("bad")), []);
});

test("node_modules is the link to the pristine dependencies, and the patch is written", () => {
  assert.equal(fs.readlinkSync(path.join(APP, "node_modules")), path.join(STATE, "deps", "node_modules"));
  const patch = fs.readFileSync(path.join(LOGS, "model.patch"), "utf8");
  assert.match(patch, /^\+export const Panel = \(\) => 3;$/m);
  assert.match(patch, /^deleted file mode 100644$/m);
  assert.doesNotMatch(patch, /scripts|gone|evil/);
  // Nothing of the submission's is left staged.
  assert.equal(git("diff", "--cached", "--name-only"), "");
});
