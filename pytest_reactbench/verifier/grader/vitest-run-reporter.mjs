// The grader's Vitest reporter. It runs in Vitest's main process, which loads no code
// of the submission's (that runs in the test workers), and reports the run as the
// grader judges it: every test of the task tree at the run's end (its state, its title
// path, its file, its first error), the errors outside any test, and how the run ended.
// Vitest 3 and later call onTestRunEnd; earlier ones onFinished.
//
// The report is signed (HMAC-SHA256) with a key only this process reads: the grader
// hands it over a pipe the reporter drains when it is loaded, before any worker exists
// (readKey). The room's command also starts with an effective group of its own
// (SEAL_GID), which the reporter drops: a change of credentials, after which the kernel
// lets no worker (started with the room's ids alone) read or write this process's
// memory. A report forged or rewritten by any other process of the room does not
// verify, and the grader judges no other.
//
// Before any worker starts (onInit), it sets what every worker sees: the grader's setup
// files (REACTBENCH_VITEST_SETUP, colon-separated absolute paths), run after the
// task's own, the production values of import.meta.env, so that code which behaves
// only under test (`import.meta.env.DEV`) is tested as users run it, and test files
// in processes of their own (never threads of this one).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const file = path.join(process.env.REACTBENCH_REPORTS ?? ".", "vitest-run.json");

/**
 * The key, read once from the pipe the grader hands the room's command
 * (REACTBENCH_RUN_KEY_FD): a descriptor every process of the chain inherits and none
 * but this one reads, whatever shells the command passes through; this process drains
 * and closes it before any worker exists, and a worker finds it empty. Whether this
 * process started with the group that seals it is said in the report: dropping that
 * group changes its credentials, after which the kernel lets no worker read or write
 * its memory; a shell on the way (sh, or bash without -p) drops it first.
 * @returns {{ key: Buffer | null, sealed: boolean }}
 */
function readKey() {
  /** @type {Buffer | null} */
  let key = null;
  const fd = Number(process.env.REACTBENCH_RUN_KEY_FD);
  if (Number.isInteger(fd) && fd > 2) {
    try {
      key = fs.readFileSync(fd);
    } catch {}
    try {
      fs.closeSync(fd);
    } catch {}
  }
  let sealed = false;
  try {
    if (process.getegid && process.setegid && process.getgid && process.getegid() !== process.getgid()) {
      process.setegid(process.getgid());
      sealed = true;
    }
  } catch {}
  return { key: key && key.length >= 32 ? key : null, sealed };
}
const { key: KEY, sealed: SEALED } = readKey();

/** The grader's setup files, in order. */
export const graderSetupFiles = () =>
  (process.env.REACTBENCH_VITEST_SETUP ?? "").split(":").filter((f) => path.isAbsolute(f));

// What a production build's import.meta.env says (Vite's own), where Vitest would say
// DEV, MODE "test".
export const PRODUCTION_ENV = { DEV: false, PROD: true, MODE: "production" };
// Pools that run test files in threads of the main process, and their process twins.
const IN_PROCESS_POOLS = /** @type {Record<string, string>} */ ({ threads: "forks", vmThreads: "vmForks" });

/**
 * A resolved config (Vitest's or one project's), with the grader's setup files last,
 * the production env values, and a pool of processes.
 * @param {{ setupFiles?: string[], env?: Record<string, unknown>, pool?: string } | undefined} config
 * @param {string[]} setup
 */
export function graderConfig(config, setup) {
  if (!config) return;
  const own = config.setupFiles ?? [];
  config.setupFiles = [...own.filter((f) => !setup.includes(f)), ...setup];
  config.env = { ...config.env, ...PRODUCTION_ENV };
  const pool = config.pool && IN_PROCESS_POOLS[config.pool];
  if (pool) config.pool = pool;
}

/**
 * A Vite server (Vitest's or one project's) that may serve the grader's setup files:
 * they lie outside the app, where Vite refuses to load a file from.
 * @param {{ config?: { server?: { fs?: { allow?: string[] } } } } | undefined} vite
 * @param {string[]} setup
 */
export function allowSetupFiles(vite, setup) {
  const allow = vite?.config?.server?.fs?.allow;
  if (allow) allow.push(...setup.filter((f) => !allow.includes(f)));
}

/**
 * A task of the runner's tree (the parts the report reads): a file, a suite or a test.
 * @typedef {object} RunnerTask
 * @property {string} type  "suite" (a file too), "test" or "custom"
 * @property {string} name
 * @property {string} [mode]  run, skip, only, todo
 * @property {string} [filepath]  a file's
 * @property {{ state?: string, errors?: { message?: unknown, name?: unknown }[] }} [result]
 * @property {Record<string, unknown>} [meta]  what the test's worker put on it (the leak watch's report)
 * @property {RunnerTask[]} [tasks]
 */

// How Vitest's JSON reporter names a task's state.
const STATUS = /** @type {Record<string, string>} */ ({
  fail: "failed", only: "pending", pass: "passed", run: "pending", skip: "skipped", todo: "todo", queued: "pending",
});

/**
 * @param {{ message?: unknown, name?: unknown }[] | undefined} errors
 * @returns {string[]}
 */
const messages = (errors) => (errors ?? []).slice(0, 3).map((e) =>
  `${e?.name ? `${String(e.name)}: ` : ""}${String(e?.message ?? e)}`.slice(0, 4000));

/**
 * The files of the runner's task tree as Vitest's JSON report has them (the parts the
 * grader reads: reports.mjs).
 * @param {RunnerTask[]} files
 */
export function treeReport(files) {
  return files.map((file) => {
    /** @type {{ ancestorTitles: string[], title: string, status: string, failureMessages: string[], leaks?: string }[]} */
    const tests = [];
    /**
     * @param {RunnerTask} task
     * @param {string[]} trail
     */
    const visit = (task, trail) => {
      for (const child of task.tasks ?? []) {
        if (child.type === "suite") visit(child, [...trail, child.name]);
        else {
          const leaks = child.meta?.reactbenchLeaks;
          tests.push({
            ancestorTitles: trail, title: child.name,
            status: STATUS[child.result?.state ?? child.mode ?? ""] ?? "skipped",
            failureMessages: messages(child.result?.errors),
            ...(typeof leaks === "string" ? { leaks: leaks.slice(0, 1 << 20) } : {}),
          });
        }
      }
    };
    visit(file, []);
    const failed = file.result?.state === "fail";
    return {
      name: file.filepath ?? file.name,
      status: failed ? "failed" : "passed",
      message: failed ? messages(file.result?.errors).join("\n") : "",
      assertionResults: tests,
    };
  });
}

/**
 * The signed document: the report's text and its HMAC (null: no key to sign with).
 * @param {object} report
 * @param {Buffer | null} key
 */
export function signed(report, key) {
  const body = JSON.stringify(report);
  return { body, mac: key ? crypto.createHmac("sha256", key).update(body).digest("hex") : null };
}

/**
 * @param {RunnerTask[]} files
 * @param {readonly unknown[] | undefined} errors
 * @param {string} [reason]
 */
function write(files, errors, reason) {
  const report = { unhandled: errors?.length ?? 0, ...(reason ? { reason } : {}), sealed: SEALED,
    testResults: treeReport(files) };
  fs.writeFileSync(file, JSON.stringify(signed(report, KEY)));
}

/**
 * Vitest's context, as onInit gets it (the parts the reporter sets).
 * @typedef {object} VitestContext
 * @property {{ setupFiles?: string[], env?: Record<string, unknown>, pool?: string }} [config]
 * @property {ViteServer} [vite]  Vitest 3 and later
 * @property {ViteServer} [server]  before
 * @property {{ config?: { setupFiles?: string[], env?: Record<string, unknown>, pool?: string },
 *   vite?: ViteServer, server?: ViteServer }[]} [projects]
 */

/**
 * @typedef {{ config?: { server?: { fs?: { allow?: string[] } } } }} ViteServer
 */

export default class RunReporter {
  /** @type {boolean} */
  ended = false;

  /** @param {VitestContext} ctx */
  onInit(ctx) {
    const setup = graderSetupFiles();
    graderConfig(ctx.config, setup);
    allowSetupFiles(ctx.vite ?? ctx.server, setup);
    for (const project of ctx.projects ?? []) {
      graderConfig(project.config, setup);
      allowSetupFiles(project.vite ?? project.server, setup);
    }
  }

  /**
   * @param {readonly { task?: RunnerTask }[]} modules
   * @param {readonly unknown[]} errors
   * @param {string} reason
   */
  onTestRunEnd(modules, errors, reason) {
    this.ended = true;
    write(modules.flatMap((m) => (m.task ? [m.task] : [])), errors, reason);
  }

  /**
   * @param {RunnerTask[]} [files]
   * @param {readonly unknown[]} [errors]
   */
  onFinished(files, errors) {
    if (!this.ended) write(files ?? [], errors);
  }
}
