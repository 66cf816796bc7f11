#!/usr/bin/env node
// The clean-room verifier shared by the tasks this project ships.
//
//   node verifier.mjs bake    at image build (tests/Dockerfile): records the base
//                             commit, keeps pristine dependencies apart, bakes the
//                             React Doctor baseline and compiles the e2e specs.
//   node verifier.mjs grade   from tests/test.sh: rebuilds the tree from the base
//                             commit plus the admissible part of the submission,
//                             runs the React Doctor gate and the hidden specs (side
//                             by side where the sandbox has two CPUs, else the scan
//                             first), and writes /logs/verifier/grade.json and
//                             reward.json.
//   node verifier.mjs keep-deps   in the image's install step (and the grader
//                             layer's last): moves the freshly installed
//                             node_modules out of /app, a link left (see bake.mjs).
//
// Two rooms. This process (the grader) runs as root and keeps the hidden specs, the
// reward and the React Doctor scan. The test commands import the submission's code,
// so they run in the test room: an unprivileged user, in their own process
// namespace where the sandbox allows one, with /tests, the grader and
// /logs/verifier out of reach. Their reports land in the room's own folder; the
// grader reads them without following links and checks that every hidden test it
// expects ran and passed.
//
// Who failed. A broken harness (missing state, a tool of the image that is not
// there) writes no reward and exits 3: an error of the harness. Once the
// submission is in play (clean room, scan, test room), anything that goes wrong
// is the submission's: reward 0, with the reason in grade.json. progress.json says
// how far grading got, for the harness to tell the two apart if this process dies.
//
// This file is the entry point only. The grader, every file of it in this folder:
//   config.mjs      its folders, tests/config.json, the admission rules (admission.json)
//   errors.mjs      HarnessError (exit 3) and SubmissionFailure (reward 0)
//   process.mjs     running the image's tools as root, git, the log
//   clean-room.mjs  room one: /app rebuilt from the base plus what is admissible
//   doctor.mjs      the React Doctor scan and its comparison with the baseline
//   test-room.mjs   room two: the unprivileged room, its plan, the test gate
//   specs.mjs       the hidden specs copied in, the e2e run's Playwright config
//   reports.mjs     Vitest's and Playwright's reports read and judged
//   bake.mjs        the `bake` and `keep-deps` commands
//   grade.mjs       the `grade` command: grade.json and reward.json
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { bake, keepDependencies } from "./bake.mjs";
import { CONTRACT, LOGS } from "./config.mjs";
import { HarnessError } from "./errors.mjs";
import { grade } from "./grade.mjs";

export { GRADE_VERSION } from "./config.mjs";
export { STYLE_ONLY_RULES, compareReports, isStyleOnly } from "./doctor.mjs";
export { cpuBudget, gradeDocuments, progressDocument } from "./grade.mjs";
export { judgeTests } from "./reports.mjs";
export { pnpmExec } from "./test-room.mjs";

/** @type {Record<string, () => unknown>} */
const commands = { bake, grade, "keep-deps": keepDependencies };
const command = commands[/** @type {string} */ (process.argv[2])];
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!command) {
    console.error("usage: verifier.mjs bake|grade|keep-deps");
    process.exit(2);
  }
  try {
    await command();
  } catch (error) {
    if (!(error instanceof HarnessError)) throw error;
    console.error(`[verifier] harness error: ${error.message}`);
    try {
      fs.mkdirSync(LOGS, { recursive: true });
      fs.writeFileSync(path.join(LOGS, "harness-error.txt"), `${error.message}\n`);
    } catch {}
    process.exit(CONTRACT.harness_error_exit);
  }
}
