// The test room's plan (which commands run, with which specs and budgets), the
// environment and command its processes get, and the pnpm it runs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";

import { APP, LOGS, ROOM, ROOM_REPORTS } from "../../../pytest_reactbench/verifier/grader/config.mjs";
import { KEY_FD, SEAL_GID, readRunReport } from "../../../pytest_reactbench/verifier/grader/canaries.mjs";
import {
  inRoom, killRoom, oomKills, plantedNote, pnpmExec, processesOf, roomEnv, runInRoom, stepBudget, testPlan,
} from "../../../pytest_reactbench/verifier/grader/test-room.mjs";

const REPORTER_SOURCE = path.resolve(import.meta.dirname, "../../../pytest_reactbench/verifier/grader/vitest-run-reporter.mjs");

/**
 * @import { Config, TestConfig } from "../../../pytest_reactbench/verifier/grader/config.mjs"
 */

/**
 * @param {Partial<TestConfig>} [tests]
 * @param {Partial<Config>} [more]
 * @returns {Config}
 */
const config = (tests = {}, more = {}) => ({
  test: { cmd: "pnpm exec vitest run", e2e_specs: "e2e", expected: {}, ...tests },
  rd: { scan_root: APP, mode: "gate", targets: [], ignored_new_footguns: [], timeout_sec: 120 },
  sources: ["src"],
  test_like_allowed: [],
  ...more,
});

describe("testPlan", () => {
  test("unit specs first, then the e2e specs in a room of their own with our Playwright config", () => {
    const entries = ["src", "e2e", "lib"];
    const plan = testPlan(config({ e2e_cmd: "pnpm exec playwright test --config=playwright.config.ts --project chromium" }), entries);
    assert.deepEqual(plan.steps, [
      { name: "unit", cmd: "pnpm exec vitest run", parts: ["src", "lib"] },
      { name: "e2e", cmd: "pnpm exec playwright test -c reactbench.e2e.config.ts --project chromium", parts: ["e2e"] },
    ]);
    assert.deepEqual(entries, ["src", "e2e", "lib"]);  // the listing is not changed
    assert.equal(plan.cwd, APP);
  });

  test("without an e2e command, one step with every spec, the e2e folder among them", () => {
    const plan = testPlan(config({ e2e_specs: "browser" }), ["src", "browser"]);
    assert.deepEqual(plan.steps, [{ name: "unit", cmd: "pnpm exec vitest run", parts: ["src", "browser"] }]);
    // Named even when /tests/specs has no such folder (copying it is then nothing).
    assert.deepEqual(testPlan(config(), ["src"]).steps[0]?.parts, ["src", "e2e"]);
  });

  test("the budget: test.timeout_sec, else 70% of the verifier's, else 70% of 300 s", () => {
    assert.equal(testPlan(config({ timeout_sec: 45 }, { verifier_timeout_sec: 600 }), []).total, 45);
    assert.equal(testPlan(config({}, { verifier_timeout_sec: 600 }), []).total, 420);
    assert.equal(testPlan(config(), []).total, 210);
  });

  test("where the commands run", () => {
    assert.equal(testPlan(config({ cwd: `${APP}/packages/web` }), []).cwd, `${APP}/packages/web`);
  });

  test("each step gets what is left of the total, never less than a second", () => {
    assert.equal(stepBudget(210, 0), 210);
    assert.equal(stepBudget(210, 200.5), 9.5);
    assert.equal(stepBudget(210, 209.9), 1);
    assert.equal(stepBudget(210, 500), 1);
  });
});

describe("the room's commands", () => {
  test("reports a config names in /logs/verifier land in the room's folder", () => {
    assert.equal(inRoom(`vitest run --outputFile=${LOGS}/vitest.json && cp ${LOGS}/a ${LOGS}/b`),
      `vitest run --outputFile=${ROOM_REPORTS}/vitest.json && cp ${ROOM_REPORTS}/a ${ROOM_REPORTS}/b`);
    assert.equal(inRoom(`ls ${LOGS}`), `ls ${LOGS}`);
  });

  test("the environment: none of the grader's REACTBENCH_ variables, the room's own folders", () => {
    process.env.REACTBENCH_SECRET_FOR_THE_TEST = "grader only";
    try {
      const env = roomEnv({ EXTRA: "1", CI: "yes" });
      assert.equal(env.REACTBENCH_SECRET_FOR_THE_TEST, undefined);
      assert.ok(!Object.keys(env).some((k) => k.startsWith("REACTBENCH_") && k !== "REACTBENCH_REPORTS"));
      assert.equal(env.REACTBENCH_REPORTS, ROOM_REPORTS);
      assert.equal(env.PLAYWRIGHT_JSON_OUTPUT_NAME, path.join(ROOM_REPORTS, "playwright.json"));
      assert.equal(env.PATH?.split(":")[0], path.join(ROOM, "bin"));
      assert.deepEqual([env.HOME, env.TMPDIR], [path.join(ROOM, "home"), path.join(ROOM, "tmp")]);
      assert.deepEqual([env.EXTRA, env.CI, env.NO_COLOR], ["1", "yes", "1"]);  // extra comes last
      assert.equal(env.pnpm_config_verify_deps_before_run, "false");
    } finally {
      delete process.env.REACTBENCH_SECRET_FOR_THE_TEST;
    }
  });
});

describe("pnpmExec", () => {
  /** @param {string} file @param {string} text */
  const executable = (file, text) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, { mode: 0o755 });
  };

  test("`pnpm exec` of a binary of ./node_modules/.bin runs it; anything else goes to pnpm, quoted", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-pnpm-"));
    try {
      // The real pnpm's path has what a shell would expand or split on.
      const real = path.join(dir, "it's $HOME; pnpm", "pnpm");
      executable(real, '#!/bin/sh\nprintf "pnpm"; printf " [%s]" "$@"; echo\n');
      const wrapper = path.join(dir, "bin", "pnpm");
      executable(wrapper, pnpmExec(real));
      const app = path.join(dir, "app");
      executable(path.join(app, "node_modules", ".bin", "vitest"),
        '#!/bin/sh\nprintf "vitest"; printf " [%s]" "$@"; echo; echo "${PATH%%:*}"\n');
      fs.writeFileSync(path.join(app, "node_modules", ".bin", "plain"), "");
      fs.mkdirSync(path.join(app, "node_modules", ".bin", "folder"));
      /** @param {string[]} args */
      const pnpm = (...args) => {
        const result = spawnSync(wrapper, args, { cwd: app, encoding: "utf8" });
        assert.equal(result.status, 0, result.stderr);
        return result.stdout.trimEnd().split("\n");
      };
      assert.deepEqual(pnpm("exec", "vitest", "run", "a b.test.ts"), ["vitest [run] [a b.test.ts]", `${app}/node_modules/.bin`]);
      for (const args of [["exec", "missing"], ["exec", "plain"], ["exec", "folder"], ["exec", "-r", "vitest"],
        ["exec", "./node_modules/.bin/vitest"], ["exec", ".bin"], ["exec"], ["install", "--frozen-lockfile"], ["vitest", "run"]]) {
        assert.deepEqual(pnpm(...args), [`pnpm${args.map((a) => ` [${a}]`).join("")}`], args.join(" "));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Ending a room kills every process of the room's user in sight: on a host, every docker
// verifier's room too (the same uid). Such tests run in a PID namespace of their own
// (tests/verifier/test_grader_units.py makes one), never beside those rooms.
const ownPids = process.getuid?.() === 0 && process.env.GRADER_TESTS_OWN_PIDS === "1";

describe("a sealed unit command", () => {
  test("the reporter gets its key through any shell, signs with it, and a worker reads neither the key nor the main process",
    { skip: !ownPids && "needs root in a PID namespace of its own" }, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-seal-"));
      try {
        fs.chmodSync(dir, 0o755);
        const reports = path.join(dir, "reports");
        fs.mkdirSync(reports, { mode: 0o777 });
        fs.mkdirSync(path.join(dir, "kept"));
        fs.chmodSync(reports, 0o777);
        const wrapper = path.join(dir, "bin", "pnpm");
        /** @param {string} file @param {string} text */
        const executable = (file, text) => {
          fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
          fs.writeFileSync(file, text, { mode: 0o755 });
        };
        executable(wrapper, pnpmExec("/bin/false"));
        const app = path.join(dir, "app");
        // Vitest's main process: it loads the grader's reporter, starts a worker (which
        // tries the key's descriptor, its group and the main process), then reports.
        const main = path.join(app, "main.mjs");
        executable(path.join(app, "node_modules", ".bin", "runner"), `#!/bin/sh\nexec node ${main} "$@"\n`);
        fs.writeFileSync(main, `
import cp from "node:child_process";
const { default: Reporter } = await import(${JSON.stringify(REPORTER_SOURCE)});
const worker = cp.spawnSync(process.execPath, ["-e", \`
  const fs = require("fs");
  const read = (f) => { try { return fs.readFileSync(f).length ? "read" : "empty"; } catch (e) { return e.code; } };
  let regained = "no";
  try { process.setegid(${SEAL_GID}); regained = "yes"; } catch {}
  console.log(JSON.stringify([read(${KEY_FD}), regained, read("/proc/\${process.pid}/mem"),
    read("/proc/\${process.pid}/environ")]));
\`], { encoding: "utf8" });
new Reporter().onTestRunEnd([], [], "passed");
console.log(worker.stdout.trim());
`);
        /** @param {string} cmd */
        const chain = async (cmd) => {
          const key = crypto.randomBytes(32);
          const run = await runInRoom(cmd, { cwd: app, budget: 60, sealed: true, key,
            env: { REACTBENCH_RUN_KEY_FD: String(KEY_FD), REACTBENCH_REPORTS: reports } });
          assert.equal(run.code, 0, run.output);
          const signed = readRunReport(key, reports, path.join(dir, "kept"));
          assert.equal(signed.problem, null);
          return { worker: JSON.parse(run.output.trim().split("\n").at(-1) ?? ""), sealed: signed.run?.sealed };
        };
        // Through the room's pnpm: the group reaches Vitest, which is sealed once it
        // drops it. A worker is a new program, whose saved group is the dropped one.
        const through = await chain(`${wrapper} exec runner`);
        assert.notEqual(through.worker[0], "read");  // the descriptor is closed (or another's)
        assert.deepEqual({ ...through, worker: through.worker.slice(1) },
          { worker: ["no", "EACCES", "EACCES"], sealed: true });
        // Through sh, which drops the group: the key still comes, and the report says it
        // was not sealed.
        assert.deepEqual((await chain("sh -c 'PATH=node_modules/.bin:$PATH runner'")).sealed, false);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
});

describe("ending the room", () => {
  // A user no other test runs as: the sweep ends every process of its user.
  const uid = 65533;
  const asRoot = process.getuid?.() === 0;

  test("a chain of forks that never stops is ended, with a daemon beside it", { skip: !asRoot && "needs root" }, async () => {
    const spawnAs = (/** @type {string} */ script) => spawnSync("setpriv", [
      `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "sh", "-c", `(${script}) >/dev/null 2>&1 &`]);
    // Each process starts the next and exits: one pass of kills over /proc misses the
    // one born meanwhile.
    spawnAs("hop() { (hop &); exit 0; }; hop");
    spawnAs("exec sleep 600");
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.ok(processesOf(uid).length > 0, "the chain runs");
      killRoom(uid);
      // What is left is dying (killed, its exit still running): gone within moments. A
      // process that escaped would still be forking.
      for (let waited = 0; processesOf(uid).length && waited < 5000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual(processesOf(uid), []);
    } finally {
      for (let i = 0; i < 20 && processesOf(uid).length; i++) killRoom(uid);
    }
  });
});

describe("the test log", () => {
  test("names the planted tests, so that their planted failures are not read as the submission's", () => {
    const note = plantedNote([
      { file: "src/a.spec.tsx", titles: ["Counter", "resets the count at zero"], must: "fail" },
      { file: "src/a.spec.tsx", titles: ["Counter", "counts the button"], must: "pass" },
    ], true);
    assert.match(note, /2 test\(s\) above were planted by the grader to check the report, 1 of them made to fail on purpose; each was reported as planted/);
    assert.match(note, /Planted to fail:\n {2}src\/a\.spec\.tsx > Counter > resets the count at zero\nPlanted to pass:\n {2}src\/a\.spec\.tsx > Counter > counts the button/);
    assert.match(plantedNote([], false), /not every one was reported as planted/);
  });
});

describe("a sandbox out of memory", () => {
  test("the kernel's count of processes it killed for want of memory, from cgroup v2 or v1", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-oom-"));
    try {
      assert.equal(oomKills(dir), 0);
      fs.mkdirSync(path.join(dir, "memory"));
      fs.writeFileSync(path.join(dir, "memory", "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
      assert.equal(oomKills(dir), 2);
      fs.writeFileSync(path.join(dir, "memory.events"), "low 0\nhigh 0\nmax 4\noom 1\noom_kill 3\n");
      assert.equal(oomKills(dir), 3);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
