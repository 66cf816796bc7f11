// The grader's Vitest reporter. It runs in Vitest's main process, which loads no code
// of the submission's (that runs in the test workers), and writes what the JSON report
// leaves out: how many errors happened outside any test, and how the run ended.
// Vitest 3 and later call onTestRunEnd; earlier ones onFinished.
//
// Before any worker starts (onInit), it sets what every worker sees: the grader's setup
// files (REACTBENCH_VITEST_SETUP, colon-separated absolute paths), run after the
// task's own, and the production values of import.meta.env, so that code which behaves
// only under test (`import.meta.env.DEV`) is tested as users run it.
import fs from "node:fs";
import path from "node:path";

const file = path.join(process.env.REACTBENCH_REPORTS ?? ".", "vitest-run.json");

/** The grader's setup files, in order. */
export const graderSetupFiles = () =>
  (process.env.REACTBENCH_VITEST_SETUP ?? "").split(":").filter((f) => path.isAbsolute(f));

// What a production build's import.meta.env says (Vite's own), where Vitest would say
// DEV, MODE "test".
export const PRODUCTION_ENV = { DEV: false, PROD: true, MODE: "production" };

/**
 * A resolved config (Vitest's or one project's), with the grader's setup files last and
 * the production env values.
 * @param {{ setupFiles?: string[], env?: Record<string, unknown> } | undefined} config
 * @param {string[]} setup
 */
export function graderConfig(config, setup) {
  if (!config) return;
  const own = config.setupFiles ?? [];
  config.setupFiles = [...own.filter((f) => !setup.includes(f)), ...setup];
  config.env = { ...config.env, ...PRODUCTION_ENV };
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
 * @param {readonly unknown[] | undefined} errors
 * @param {string} [reason]
 */
function write(errors, reason) {
  fs.writeFileSync(file, JSON.stringify({ unhandled: errors?.length ?? 0, ...(reason ? { reason } : {}) }));
}

/**
 * Vitest's context, as onInit gets it (the parts the reporter sets).
 * @typedef {object} VitestContext
 * @property {{ setupFiles?: string[], env?: Record<string, unknown> }} [config]
 * @property {{ config?: { server?: { fs?: { allow?: string[] } } } }} [vite]
 * @property {{ config?: { setupFiles?: string[], env?: Record<string, unknown> },
 *   vite?: { config?: { server?: { fs?: { allow?: string[] } } } } }[]} [projects]
 */

export default class RunReporter {
  /** @type {boolean} */
  ended = false;

  /** @param {VitestContext} ctx */
  onInit(ctx) {
    const setup = graderSetupFiles();
    graderConfig(ctx.config, setup);
    allowSetupFiles(ctx.vite, setup);
    for (const project of ctx.projects ?? []) {
      graderConfig(project.config, setup);
      allowSetupFiles(project.vite, setup);
    }
  }

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
