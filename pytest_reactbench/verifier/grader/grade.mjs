// `verifier.mjs grade`, from tests/test.sh: the clean room, then the React Doctor
// gate and the test gate (side by side where the sandbox has two CPUs, else the scan
// first), and /logs/verifier/grade.json and reward.json. progress.json says how far
// grading got, for the harness to tell a harness error from a submission's if this
// process dies.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { APP, CONTRACT, GRADE_VERSION, LOGS, STATE, readConfig } from "./config.mjs";
import { cleanRoom } from "./clean-room.mjs";
import { copyForScan, doctorGate, logDoctor, startScan } from "./doctor.mjs";
import { HarnessError, SubmissionFailure } from "./errors.mjs";
import { e2eLeakFindings, leakFindings, readLeakBaseline, takeE2eLeaks, takeLeaks } from "./leaks.mjs";
import { log } from "./process.mjs";
import { lockDown, sweepRoom, testGate } from "./test-room.mjs";

/**
 * @import { Submission } from "./clean-room.mjs"
 * @import { DoctorReport, DoctorVerdict, Finding, Scan } from "./doctor.mjs"
 * @import { TestVerdict } from "./test-room.mjs"
 */

/**
 * grade.json (with its `version`), of which reward.json is the summary.
 * @typedef {object} GradeDetails
 * @property {0 | 1} reward
 * @property {TestVerdict | { ok: false, failing: string[] }} tests
 * @property {DoctorVerdict | { ok: false, new: Finding[], fixed_targets: string[], remaining_targets: string[] }} react_doctor
 * @property {Submission} submission
 * @property {Record<string, number>} timings  seconds
 * @property {{ phase: string, reason: string } | null} failure  what broke grading, if anything
 */

/**
 * progress.json: how far grading got.
 * @param {string} phase
 */
export const progressDocument = (phase) => ({ grader: CONTRACT.grader, version: GRADE_VERSION, phase });

/**
 * What grading found, gate by gate (null: grading stopped before that gate).
 * @typedef {object} GradeState
 * @property {Submission | null} submission
 * @property {DoctorVerdict | null} doctor
 * @property {TestVerdict | null} tests
 */

/**
 * grade.json and its summary, reward.json: the documents the harness reads (their
 * models are pytest_reactbench/verifier/contract.py, their schema schema.json beside this
 * file). A grading the submission broke (`failure`) scores 0, whatever its gates
 * said so far; the targets it never checked are all left.
 * @param {GradeState} state
 * @param {Record<string, number>} timings  seconds
 * @param {{ phase: string, reason: string } | null} failure
 * @param {string[]} targets  the task's React Doctor targets
 */
export function gradeDocuments(state, timings, failure, targets) {
  /** @type {GradeDetails} */
  const details = failure || !state.tests || !state.doctor || !state.submission
    ? {
      reward: 0,
      tests: state.tests ?? { ok: false, failing: [] },
      react_doctor: state.doctor ?? { ok: false, new: [], fixed_targets: [], remaining_targets: targets },
      submission: state.submission ?? { refused: [], changed: [] },
      timings,
      failure: failure ?? { phase: "done", reason: "grading ended without both gates" },
    }
    : {
      reward: state.tests.ok && state.doctor.ok ? 1 : 0,
      tests: state.tests,
      react_doctor: state.doctor,
      submission: state.submission,
      timings,
      failure: null,
    };
  return {
    grade: { version: GRADE_VERSION, ...details },
    reward: { reward: details.reward, tests: Number(details.tests.ok), react_doctor: Number(details.react_doctor.ok) },
  };
}

/** @param {string} phase */
function writeProgress(phase) {
  fs.writeFileSync(path.join(LOGS, "progress.json"), JSON.stringify(progressDocument(phase)) + "\n");
}

/** @param {ReturnType<typeof gradeDocuments>} documents */
function writeGrade({ grade, reward }) {
  fs.writeFileSync(path.join(LOGS, "grade.json"), JSON.stringify(grade, null, 2));
  fs.writeFileSync(path.join(LOGS, "reward.json"), JSON.stringify(reward) + "\n");
  log(`reward=${grade.reward}`);
}

/**
 * CPUs the sandbox may keep busy at once: its CPU quota where it has one (a hard
 * limit, as the docker backend sets), else the cores it may run on.
 * @param {string} [cgroup]  the cgroup file system
 * @returns {number}
 */
export function cpuBudget(cgroup = "/sys/fs/cgroup") {
  const cores = os.availableParallelism();
  /** @param {string} file */
  const read = (file) => {
    try {
      return fs.readFileSync(path.join(cgroup, file), "utf8").trim();
    } catch {
      return null;
    }
  };
  let quota = null;
  const v2 = read("cpu.max")?.split(/\s+/);
  if (v2 && v2[0] !== "max") quota = Number(v2[0]) / Number(v2[1]);
  const v1 = Number(read("cpu/cpu.cfs_quota_us") ?? read("cpu,cpuacct/cpu.cfs_quota_us") ?? -1);
  const period = Number(read("cpu/cpu.cfs_period_us") ?? read("cpu,cpuacct/cpu.cfs_period_us") ?? 100000);
  if (quota === null && v1 > 0) quota = v1 / period;
  return quota && quota > 0 ? Math.min(cores, quota) : cores;
}

export async function grade() {
  fs.mkdirSync(LOGS, { recursive: true });
  fs.chmodSync(LOGS, 0o700);
  writeProgress("config");
  const config = readConfig();
  /** @type {DoctorReport} */
  const before = JSON.parse(fs.readFileSync(path.join(STATE, "rd-baseline.json"), "utf8"));
  /** @type {Record<string, number>} */
  const timings = {};
  let phase = "clean-room";
  /** @param {string} name */
  const setPhase = (name) => {
    phase = name;
    writeProgress(name);
  };
  /** @type {GradeState} */
  const state = { submission: null, doctor: null, tests: null };
  /** @type {{ root: string, run: Scan } | null} */
  let scanning = null;
  try {
    // From here on the submission is in play.
    setPhase("clean-room");
    const cleanStarted = performance.now();
    const submission = cleanRoom(config);
    state.submission = submission;
    timings.clean_room = (performance.now() - cleanStarted) / 1000;
    log(`clean room: ${submission.changed.length} changed file(s) graded, ${submission.refused.length} refused`);
    for (const r of submission.refused) log(`  refused ${r.path}: ${r.reason}`);
    fs.writeFileSync(path.join(LOGS, "rd-before.json"), JSON.stringify(before));
    setPhase("scan");
    const gradingStarted = performance.now();
    if (submission.changed.length) {
      // Scanned as the tree is now, before the hidden specs are applied, so that
      // they are never findings.
      const root = copyForScan(config, submission.changed);
      scanning = { root, run: startScan(config, { afterSubmission: true, root }) };
    }
    // Settled at once, so that a failure waits for its turn to be read.
    /** @type {Promise<{ gate?: DoctorVerdict, error?: unknown }>} */
    const doctor = doctorGate(config, before, scanning, submission, timings).then(
      (gate) => ({ gate }), (error) => ({ error }));
    const gateOf = async () => {
      const { gate, error } = await doctor;
      if (error) throw error;
      return /** @type {DoctorVerdict} */ (gate);
    };
    // The scan and the test commands do not depend on each other. They run side by
    // side only where each can have a CPU: under a one-CPU limit they would only
    // take turns, and the scan (alone first, as before) keeps its whole time limit.
    const alongside = scanning !== null && cpuBudget() >= 2;
    if (!alongside) {
      state.doctor = { ...(await gateOf()), alongside_tests: false };
      logDoctor(state.doctor);
    }
    setPhase("tests");
    lockDown();
    const testStarted = performance.now();
    state.tests = await testGate(config, setPhase, submission.changed);
    timings.test_command = (performance.now() - testStarted) / 1000;
    if (alongside) {
      setPhase("scan");
      state.doctor = { ...(await gateOf()), alongside_tests: true };
      logDoctor(state.doctor);
    }
    // What the leak watch saw run fails the React Doctor gate as a finding would.
    // A leak the base's own code left under the same tests is not the submission's.
    const base = readLeakBaseline(STATE);
    const leaks = [...leakFindings(takeLeaks(), submission.changed, APP, base),
      ...e2eLeakFindings(takeE2eLeaks(), submission.changed, APP, base)];
    if (leaks.length && state.doctor) {
      state.doctor.new.push(...leaks);
      state.doctor.ok = false;
      for (const f of leaks) log(`  new ${f.rule} ${f.file} ${f.title}`);
    }
    timings.grading = (performance.now() - gradingStarted) / 1000;
    log(`tests: ${state.tests.ok ? "pass" : "FAIL"}`);
    for (const f of state.tests.failing) log(`  failing: ${f}`);
  } catch (error) {
    scanning?.run.stop();
    if (error instanceof HarnessError) throw error;
    // Whatever broke while the submission was in play is the submission's.
    const broke = /** @type {NodeJS.ErrnoException} */ (error);
    const reason = error instanceof SubmissionFailure ? error.message : `${broke.code ?? broke.name}: ${broke.message}`;
    log(`the submission broke grading during ${phase}: ${reason}`);
    try {
      sweepRoom();
    } catch {}
    writeProgress("done");
    writeGrade(gradeDocuments(state, timings, { phase, reason }, config.rd.targets));
    return;
  }
  writeProgress("done");
  writeGrade(gradeDocuments(state, timings, null, config.rd.targets));
}
