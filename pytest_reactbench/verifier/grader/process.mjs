// Running the image's tools from the grader (as root, never in the test room): a
// command to its end, git in /app, and the grader's log lines.
import { spawnSync } from "node:child_process";
import os from "node:os";

import { APP } from "./config.mjs";

/** @param {...unknown} args */
export const log = (...args) => console.log("[verifier]", ...args);

/**
 * A process's exit as a shell says it: killed by a signal, 128 + its number.
 * @param {number | null} code
 * @param {NodeJS.Signals | null} signal
 * @returns {number}
 */
export const exitCode = (code, signal) =>
  code ?? 128 + (os.constants.signals[/** @type {NodeJS.Signals} */ (signal)] ?? 0);

/**
 * @typedef {object} RunOptions
 * @property {string} [cwd]  default: /app
 * @property {Record<string, string>} [env]  added to the grader's own
 * @property {number} [timeoutMs]  then it is killed (SIGKILL)
 * @property {string} [input]  its standard input
 */

/**
 * @typedef {object} RunResult
 * @property {number} code
 * @property {string} stdout
 * @property {string} stderr
 * @property {boolean} timedOut
 */

/**
 * @param {string} command
 * @param {string[]} args
 * @param {RunOptions} [options]
 * @returns {RunResult}
 */
export function run(command, args, { cwd = APP, env = {}, timeoutMs, input } = {}) {
  const result = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    input,
    timeout: timeoutMs,
    killSignal: "SIGKILL",
    maxBuffer: 256 * 1024 * 1024,
  });
  return {
    code: exitCode(result.status, result.signal),
    stdout: result.stdout?.toString() ?? "",
    stderr: result.stderr?.toString() ?? "",
    timedOut: /** @type {NodeJS.ErrnoException | undefined} */ (result.error)?.code === "ETIMEDOUT",
  };
}

/**
 * git in /app; its output, or an error with what it said.
 * @param {...string} args
 * @returns {string}
 */
export function git(...args) {
  const result = run("git", args);
  if (result.code !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
}
