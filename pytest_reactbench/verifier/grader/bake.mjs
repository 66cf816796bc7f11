// `verifier.mjs bake` and `keep-deps`, at image build (tests/Dockerfile): the base
// commit recorded, the pristine dependencies kept apart, the React Doctor baseline,
// the e2e specs compiled, and the hidden tests run on the base: the leak watch's
// baseline, and Node's compile cache filled for the gradings.
import fs from "node:fs";
import path from "node:path";

import { APP, COMPILE_CACHE, LOGS, ROOM_GID, ROOM_REPORTS, ROOM_UID, STATE, TESTS, readConfig } from "./config.mjs";
import { linkDependencies } from "./clean-room.mjs";
import { SCAN_DIR, checkScan, copyForScan, matchesTarget, startScan } from "./doctor.mjs";
import { HarnessError, SubmissionFailure } from "./errors.mjs";
import { LEAK_BASELINE, baseLeaks, takeE2eLeaks, takeLeaks } from "./leaks.mjs";
import { git, log, run } from "./process.mjs";
import { applySpecs, chromiumVersion, compileE2eSpecs } from "./specs.mjs";
import { lockDown, openRoom, runInRoom, sweepRoom, testGate, testPlan, writableByRoom } from "./test-room.mjs";

/**
 * @import { Config } from "./config.mjs"
 */

/**
 * Pristine dependencies live outside /app: the submission replaces /app, and a link
 * puts them back in no time. Run in the step that installed them, the move is a
 * rename; from a layer below, a copy of every file. So an image may keep them there
 * at install time (`keep-deps`), and the grader layer does it for the base's own
 * dependencies, once per base image instead of once per task. /app/node_modules is
 * left a link to them, so later steps see the dependencies where they were; a step
 * that installs anew (a real folder again) replaces them at the next `keep-deps`.
 */
export function keepDependencies() {
  const pristine = path.join(STATE, "deps", "node_modules");
  fs.mkdirSync(path.dirname(pristine), { recursive: true });
  const modules = path.join(APP, "node_modules");
  if (fs.existsSync(modules) && !fs.lstatSync(modules).isSymbolicLink()) {
    fs.rmSync(pristine, { recursive: true, force: true });
    const moved = run("mv", [modules, pristine], { cwd: "/" });
    if (moved.code !== 0) throw new HarnessError(`cannot keep pristine dependencies: ${moved.stderr}`);
    fs.symlinkSync(pristine, modules);
  }
}

export async function bake() {
  const config = readConfig();
  keepDependencies();
  // Through the link: a base's dependencies kept by the grader layer do not count for
  // an /app that a later step made anew without installing any.
  if (!fs.existsSync(path.join(APP, "node_modules"))) {
    throw new HarnessError(`${APP}/node_modules is missing: the base image installs the dependencies`);
  }
  fs.rmSync(path.join(APP, ".git"), { recursive: true, force: true });
  git("init", "-q");
  git("add", "-A");
  git("-c", "user.email=base@reactbench", "-c", "user.name=base", "-c", "gc.auto=0", "commit", "-qm", "base");
  fs.writeFileSync(path.join(STATE, "base-sha"), git("rev-parse", "HEAD").trim() + "\n");
  fs.rmSync(path.join(STATE, "base-git"), { recursive: true, force: true });
  fs.cpSync(path.join(APP, ".git"), path.join(STATE, "base-git"), { recursive: true });
  linkDependencies();
  if (!fs.existsSync(path.join(TESTS, "specs"))) throw new HarnessError(`${TESTS}/specs is missing: no hidden specs`);
  for (const file of Object.keys(config.test.expected)) {
    if (!fs.existsSync(path.join(TESTS, "specs", file)) && !fs.existsSync(path.join(APP, file))) {
      throw new HarnessError(`${TESTS}/config.json: test.expected names ${file}, which is neither in ${TESTS}/specs nor in the base app`);
    }
  }
  // The test room needs these; a missing one is the image's fault, found here.
  for (const tool of ["setpriv", "timeout", "find"]) {
    if (run("which", [tool]).code !== 0) throw new HarnessError(`${tool} is missing from the verifier image`);
  }
  const caching = Number(process.versions.node.split(".")[0]) >= 22;
  fs.rmSync(COMPILE_CACHE, { recursive: true, force: true });
  if (caching) fs.mkdirSync(COMPILE_CACHE, { mode: 0o755 });
  // Read where the submission's scan reads, so that its lint cache serves that one.
  const baseline = checkScan(config, await startScan(config, { root: copyForScan() }).finished);
  fs.rmSync(SCAN_DIR, { recursive: true, force: true });
  fs.writeFileSync(path.join(STATE, "rd-baseline.json"), JSON.stringify(baseline));
  const chromium = chromiumVersion();
  if (chromium) fs.writeFileSync(path.join(STATE, "chromium-version"), `${chromium}\n`);
  compileE2eSpecs(config);
  await testBase(config, caching);
  const targets = config.rd.targets;
  const absent = targets.filter((t) => !(baseline.diagnostics ?? []).some((d) => matchesTarget(t, d)));
  if (config.rd.mode === "health" && absent.length) {
    throw new HarnessError(`health-mode targets not found in the base commit: ${absent.join(", ")}`);
  }
  log(`baseline: ${(baseline.diagnostics ?? []).length} React Doctor findings`);
}

/**
 * A file the unit run could not compile, from Vitest's JSON report: the base usually
 * fails the hidden tests, but a spec (or base file) with a syntax error fails every
 * submission alike, so the task is refused at its bake, named where the error is.
 * @param {unknown} report  Vitest's JSON report
 * @returns {string | null}
 */
export function uncompiled(report) {
  const results = /** @type {{ testResults?: { name?: string, message?: string }[] }} */ (report)?.testResults;
  for (const result of Array.isArray(results) ? results : []) {
    const message = String(result?.message ?? "");
    if (!/^Transform failed|\[PARSE_ERROR\]|^SyntaxError:/.test(message)) continue;
    const where = /[─-]\[\s*([^\]\s]+:\d+:\d+)\s*\]/.exec(message)?.[1]
      ?? /(\S+\.[cm]?[jt]sx?:\d+:\d+)/.exec(message)?.[1] ?? String(result?.name ?? "a spec");
    const said = message.split("\n").map((l) => l.trim()).filter((l) => l && !/^Transform failed/.test(l))[0] ?? "";
    return `${where}: does not compile: ${said}`;
  }
  return null;
}

/**
 * The hidden tests run once at bake time on the base commit, as a grading runs them
 * (the test gate, in /app, as the room's user), every step though the base fails them,
 * every code file of the base judged as a submission's changed ones are.
 * - What the leak watch sees the base's own code leave is its baseline
 *   (`leak-baseline.json`): a leak a submission's changed file makes is new only where
 *   the base did not leave the same.
 * - A spec that does not compile would fail every submission alike: the task is
 *   refused here, named where its line is.
 * - Where Node has one (>= 22), the run fills the room's folder of the compile cache
 *   with what a grading's commands load; it is root's afterwards: a room reads it and
 *   cannot change it.
 * /app is the base again afterwards, and nothing the run wrote is kept but these.
 * @param {Config} config
 * @param {boolean} fillCache
 */
async function testBase(config, fillCache) {
  // The first folder of LOGS' path that is not there yet, made and removed again.
  const madeLogs = fs.mkdirSync(LOGS, { recursive: true });
  // Where the room can write is asked before the cache is the room's, so that the
  // sweeps between the steps leave the cache alone.
  writableByRoom();
  if (fillCache) run("chown", ["-R", "-h", `${ROOM_UID}:${ROOM_GID}`, COMPILE_CACHE], { cwd: "/" });
  const started = performance.now();
  const before = untracked();
  /** @type {import("./leaks.mjs").BaseLeak[]} */
  let leaks = [];
  try {
    lockDown();
    const code = git("ls-files", "-z").split("\0").filter(Boolean);
    try {
      const verdict = await testGate(config, () => {}, code, { everyStep: true });
      log(`on the base: the hidden tests ${verdict.ok ? "pass" : "fail"} (${verdict.phases.map(
        (p) => `${p.name} exited ${p.exit_code}`).join(", ")}) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      leaks = baseLeaks(takeLeaks(), takeE2eLeaks(), code);
    } catch (error) {
      // The base's own code broke the run (a report it spoiled): it has no baseline.
      if (!(error instanceof SubmissionFailure)) throw error;
      log(`on the base: the hidden tests could not run to their end (${error.message}): no leak baseline`);
    }
    // The planted tests moved the spec's lines: a spec that did not compile is named
    // where its own line is, from a run of the unit command on the specs as written.
    const broken = uncompiled(readJson(path.join(LOGS, "vitest.json"))) && await uncompiledAsWritten(config);
    if (broken) throw new HarnessError(`${TESTS}/specs: ${broken} (the hidden tests cannot run on any submission)`);
  } finally {
    sweepRoom();
    baseAgain(before);
    if (madeLogs) fs.rmSync(madeLogs, { recursive: true, force: true });
    if (fillCache) {
      run("chown", ["-R", "0:0", COMPILE_CACHE], { cwd: "/" });
      // Node writes its entries for its user alone.
      run("chmod", ["-R", "a+rX,go-w", COMPILE_CACHE], { cwd: "/" });
    }
  }
  fs.writeFileSync(path.join(STATE, LEAK_BASELINE), JSON.stringify(leaks));
  log(`the base's own leaks under the hidden tests: ${leaks.length ? leaks.map((l) => l.join(" ")).join("; ") : "none"}`);
}

/** Every file of /app outside the base commit (ignored ones included, which a base may need). */
const untracked = () => new Set(git("ls-files", "-z", "--others").split("\0").filter(Boolean));

/**
 * /app as the base commit has it again after a run of the hidden tests in it: its files
 * the commit's, and what the run added (the specs, the tests planted in them, the run's
 * config) gone with the folders it alone made; what was outside the commit before stays.
 * @param {Set<string>} before  untracked() before the run
 */
function baseAgain(before) {
  git("checkout", "-f", "-q", "HEAD", "--", ".");
  for (const added of untracked()) {
    if (before.has(added)) continue;
    fs.rmSync(path.join(APP, added), { force: true });
    for (let dir = path.dirname(added); dir !== "."; dir = path.dirname(dir)) {
      if (fs.readdirSync(path.join(APP, dir)).length) break;
      fs.rmdirSync(path.join(APP, dir));
    }
  }
}

/**
 * @param {string} file
 * @returns {unknown} its JSON; null where there is none (a runner other than Vitest, or
 *   none written: nothing to tell)
 */
function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch {
    return null;
  }
}

/**
 * The unit command once more, in the room, on the hidden specs as they are written
 * (no test planted): where a spec does not compile, by its own line.
 * @param {Config} config
 * @returns {Promise<string | null>}
 */
async function uncompiledAsWritten(config) {
  const plan = testPlan(config, fs.readdirSync(path.join(TESTS, "specs")));
  const unit = /** @type {import("./test-room.mjs").TestStep} */ (plan.steps[0]);
  openRoom();
  try {
    applySpecs(unit.parts);
    await runInRoom(unit.cmd, { cwd: plan.cwd, budget: 120 });
    return uncompiled(readJson(path.join(ROOM_REPORTS, "vitest.json")));
  } finally {
    sweepRoom();
  }
}
