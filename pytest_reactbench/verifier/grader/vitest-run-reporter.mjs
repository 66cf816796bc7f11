// The grader's Vitest reporter. It runs in Vitest's main process, which loads no code
// of the submission's (that runs in the test workers), and writes what the JSON report
// leaves out: how many errors happened outside any test, and how the run ended.
// Vitest 3 and later call onTestRunEnd; earlier ones onFinished.
import fs from "node:fs";
import path from "node:path";

const file = path.join(process.env.REACTBENCH_REPORTS ?? ".", "vitest-run.json");

/**
 * @param {readonly unknown[] | undefined} errors
 * @param {string} [reason]
 */
function write(errors, reason) {
  fs.writeFileSync(file, JSON.stringify({ unhandled: errors?.length ?? 0, ...(reason ? { reason } : {}) }));
}

export default class RunReporter {
  /** @type {boolean} */
  ended = false;

  /**
   * @param {unknown} _modules
   * @param {readonly unknown[]} errors
   * @param {string} reason
   */
  onTestRunEnd(_modules, errors, reason) {
    this.ended = true;
    write(errors, reason);
  }

  /**
   * @param {unknown} _files
   * @param {readonly unknown[]} [errors]
   */
  onFinished(_files, errors) {
    if (!this.ended) write(errors);
  }
}
