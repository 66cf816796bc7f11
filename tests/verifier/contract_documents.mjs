// The grader's documents for tests/verifier/test_contract.py, each made by the
// functions grading uses: the walkers of the runners' reports, the test gate's
// verdict, the React Doctor comparison, and gradeDocuments / progressDocument.
import { compareReports } from "../../pytest_reactbench/verifier/grader/doctor.mjs";
import { gradeDocuments, progressDocument } from "../../pytest_reactbench/verifier/grader/grade.mjs";
import { playwrightResults, vitestResults } from "../../pytest_reactbench/verifier/grader/reports.mjs";
import { testPlan, testVerdict } from "../../pytest_reactbench/verifier/grader/test-room.mjs";
import { CONTRACT } from "../../pytest_reactbench/verifier/grader/config.mjs";

const config = {
  test: {
    cmd: "vitest run", e2e_cmd: "playwright test", e2e_specs: "e2e", timeout_sec: 60,
    expected: { "src/App.test.tsx": ["counter > resets", "counter > counts"], "e2e/app.spec.ts": ["works"] },
  },
  rd: { targets: ["no-array-index-key@src/List.tsx"] },
};
const plan = testPlan(config, ["src", "e2e"]);
const room = { uid: 65534, pid_namespace: true };
const tests = (resets) => {
  const results = new Map();
  const messages = new Map();
  vitestResults({ testResults: [{ name: "/app/src/App.test.tsx", status: "failed", assertionResults: [
    { ancestorTitles: ["counter"], title: "resets", status: resets,
      failureMessages: resets === "passed" ? [] : ["AssertionError: expected 3 to be 0\n    at App.test.tsx:9"] },
    { ancestorTitles: ["counter"], title: "counts", status: "passed" }] }] }, results, messages);
  playwrightResults({ config: { rootDir: "/app/e2e" }, suites: [{ title: "app.spec.ts", file: "app.spec.ts",
    specs: [{ title: "works", file: "app.spec.ts", tests: [{ results: [{ status: "passed" }] }] }] }] },
    results, messages);
  const phases = [{ name: "unit", exit_code: resets === "passed" ? 0 : 1, timed_out: false, seconds: 1.5 }];
  if (resets === "passed") phases.push({ name: "e2e", exit_code: 0, timed_out: false, seconds: 3 });
  return testVerdict(config, plan, { phases, results, messages, spoiled: [] }, room);
};
const finding = (rule, filePath, line) => ({ rule, filePath, line, title: `${rule} title`, message: "why", category: "Correctness" });
const base = { diagnostics: [finding("no-array-index-key", "src/List.tsx", 4)] };
const submission = { refused: [{ path: "package.json", reason: "a manifest" }], changed: ["src/App.tsx", "src/List.tsx"] };
const doctor = (after, alongside) => ({ ...compareReports(base, after, config.rd.targets, []), unscanned: [], alongside_tests: alongside });
const timings = { clean_room: 0.1, scan: 2, test_command: 4, grading: 4.2 };

const passed = gradeDocuments({ submission, tests: tests("passed"), doctor: doctor({ diagnostics: [] }, true) }, timings, null, config.rd.targets);
const failed = gradeDocuments({ submission, tests: tests("failed"),
  doctor: doctor({ diagnostics: [...base.diagnostics, finding("no-danger", "src/App.tsx", 7)] }, false) },
  timings, null, config.rd.targets);
const broken = gradeDocuments({ submission, tests: null, doctor: null }, { clean_room: 0.1 },
  { phase: "tests:unit", reason: "the test room's vitest.json is not JSON" }, config.rd.targets);
const progress = ["config", ...CONTRACT.before_submission, "clean-room", "scan", "tests", "tests:unit", "tests:e2e", "done"]
  .map(progressDocument);
process.stdout.write(JSON.stringify({ passed, failed, broken, progress }));
