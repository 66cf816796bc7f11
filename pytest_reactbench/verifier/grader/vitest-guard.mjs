// The grader's guard of the hidden specs' framework state, in every Vitest worker: the
// last setup file of the unit step (the reporter adds it), so it runs after the task's
// own setup files and before the spec file, and thus before any module of the
// submission's is loaded.
//
// What it keeps the submission from changing:
// - the matchers and equality testers (the state @vitest/expect keeps under
//   Symbol.for("$$jest-matchers-object"), chai's Assertion prototype that expect()
//   dispatches through): compared with what the setup files left, at the first
//   statement of the spec (the grader plants it at the top of the file: imports are
//   hoisted, so it runs after every imported module), then frozen before the first test
//   (only the spec itself may have extended them in between);
// - the suites' hooks (the file's and every `describe` block's): a hook registered
//   through Vitest's API from a file that is neither the spec nor a setup file of the
//   task's is refused, and before and after every test each hook the runner holds for
//   a suite of the file must be one registered through that API.
// A change is tampering: every test of the file fails from then on with the finding
// (the planted tests that must pass included, which the grader reads as tampering).
// @ts-ignore: vitest is the app's, resolved where the room runs this file
import * as vitest from "vitest";

const { chai, expect, afterEach, beforeAll, beforeEach } = vitest;
// The runner's suite functions: TestRunner's since Vitest 4.1, vitest/suite's before.
/** @type {any} */
// @ts-ignore: as above
const TestRunner = vitest.TestRunner ?? await import("vitest/suite").then((suite) => ({
  getCurrentSuite: suite.getCurrentSuite, getSuiteHooks: suite.getHooks,
})).catch(() => ({}));

const MATCHERS = Symbol.for("$$jest-matchers-object");
const CHECK = Symbol.for("vitest.state.check");
const MARK = "test framework state changed";
const worker = /** @type {any} */ (globalThis).__vitest_worker__;
const specFile = String(worker?.filepath ?? expect.getState().testPath ?? "");
const setupFiles = new Set((worker?.config?.setupFiles ?? []).map(String));
const here = new URL(import.meta.url).pathname;

/** @type {string[]} */
const findings = [];

// The state object's property stays the one @vitest/expect defined.
try {
  Object.defineProperty(globalThis, MATCHERS, { configurable: false });
} catch {}

/**
 * The state, by identity: every matcher and method, every equality tester.
 * @returns {Map<string, unknown>}
 */
function snapshot() {
  /** @type {Map<string, unknown>} */
  const seen = new Map();
  /**
   * @param {string} where
   * @param {object} object
   */
  const own = (where, object) => {
    for (const key of Reflect.ownKeys(object)) {
      const d = /** @type {PropertyDescriptor} */ (Object.getOwnPropertyDescriptor(object, key));
      seen.set(`${where}.${String(key)}`, d.get ?? d.value);
      if (d.set) seen.set(`${where}.${String(key)} (set)`, d.set);
    }
  };
  const state = /** @type {any} */ (globalThis)[MATCHERS];
  own("matchers", state.matchers);
  state.customEqualityTesters.forEach((/** @type {unknown} */ t, /** @type {number} */ i) => seen.set(`equality tester ${i}`, t));
  own("Assertion.prototype", chai.Assertion.prototype);
  own("expect", expect);
  return seen;
}

/**
 * @param {Map<string, unknown>} before
 * @param {Map<string, unknown>} after
 * @returns {string[]}
 */
function changes(before, after) {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].filter((n) => before.get(n) !== after.get(n)).slice(0, 5);
}

/**
 * The file that called into the runner: the first frame outside the test runner's
 * packages and this file; null when every frame is theirs.
 * @returns {string | null}
 */
function caller() {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 60;
  const stack = String(new Error().stack ?? "");
  Error.stackTraceLimit = limit;
  for (const line of stack.split("\n").slice(1)) {
    const match = /(?:\(|at )(?:file:\/\/)?(\/[^():]+):\d+:\d+\)?$/.exec(line.trim());
    if (!match) continue;
    const file = /** @type {string} */ (match[1]);
    if (file === here || file.includes("/node_modules/")) continue;
    return file;
  }
  return null;
}

// Test infrastructure, as the clean room knows it (config.mjs SPEC_PATH): files of the
// hidden tests' (helpers beside the specs), never the submission's.
const TEST_PATH =
  /(^|\/)(__verifier__|__mocks__|__tests__)(\/|$)|\.(test|spec)\.[cm]?[jt]sx?$|(^|\/)(setupTests|setup-tests|test-setup|vitest\.setup|jest\.setup)\.[cm]?[jt]sx?$/;

/** @param {string | null} file */
const legitimate = (file) => file === null || file === here || file === specFile || setupFiles.has(file) ||
  TEST_PATH.test(file);

// Hooks through the API, from the collector of every suite (the file's, and each
// `describe` block's as it is created): attributed as they come.
const HOOKS = ["beforeAll", "afterAll", "beforeEach", "afterEach", "aroundEach", "aroundAll"];
const known = new WeakSet();
/** @type {[string, Function[]][]} every guarded suite's own lists of hooks */
const lists = [];

/**
 * Guards a suite's collector: its hooks through the API only from allowed files, and
 * the collectors of the `describe` blocks it creates guarded in turn.
 * @param {any} collector
 */
function guard(collector) {
  if (!collector || typeof collector.on !== "function" || !Array.isArray(collector.tasks)) return;
  const on = collector.on;
  // The lists themselves: the runner pushes a hook onto its list, which is seen once.
  const push = Array.prototype.push;
  for (const name of HOOKS) {
    const marker = () => {};
    /** @type {Function[] | undefined} */
    let list;
    try {
      Array.prototype.push = function (/** @type {unknown[]} */ ...items) {
        if (items[0] === marker) list = /** @type {Function[]} */ (this);
        return push.apply(this, items);
      };
      on(name, marker);
    } catch {} finally {
      Array.prototype.push = push;
    }
    if (list) {
      list.splice(list.indexOf(marker), 1);
      for (const fn of list) known.add(fn);
      lists.push([name, list]);
    }
  }
  Object.defineProperty(collector, "on", {
    configurable: false, writable: false,
    value: (/** @type {string} */ name, /** @type {Function[]} */ ...fns) => {
      const file = caller();
      if (!legitimate(file)) {
        findings.push(`a ${name} hook registered from ${file}`);
        return;
      }
      for (const fn of fns) known.add(fn);
      on(name, ...fns);
    },
  });
  // A `describe` block's collector is pushed onto its parent's tasks when it is made,
  // before its block runs and registers anything.
  const tasks = collector.tasks;
  Object.defineProperty(tasks, "push", {
    configurable: false, writable: false,
    value: (/** @type {unknown[]} */ ...items) => {
      for (const item of items) {
        if (/** @type {any} */ (item)?.type === "collector") guard(item);
      }
      return push.apply(tasks, items);
    },
  });
}
guard(TestRunner.getCurrentSuite?.());

/**
 * Every suite of a task tree, from its file down.
 * @param {any} task
 * @returns {any[]}
 */
const suites = (task) => (task && Array.isArray(task.tasks) ?
  [task, ...task.tasks.flatMap((/** @type {any} */ t) => suites(t))] : []);

/**
 * Hooks on a suite's lists that no allowed file registered through the API: on the
 * lists the guarded collectors had, and, once the file is collected, on whatever lists
 * the runner holds for each suite of the file (replaced lists, a suite never guarded).
 * @param {any} [file]
 */
function strangeHooks(file) {
  /** @type {[string, Function[]][]} */
  const held = [];
  if (file && typeof TestRunner.getSuiteHooks === "function") {
    for (const suite of suites(file)) {
      const hooks = TestRunner.getSuiteHooks(suite) ?? {};
      for (const name of Object.keys(hooks)) held.push([name, hooks[name]]);
    }
  }
  for (const [name, list] of [...lists, ...held]) {
    if (Array.isArray(list) && list.some((fn) => !known.has(fn))) {
      findings.push(`a ${name} hook added to a suite's hooks outside the test API`);
    }
  }
}

const atSetup = snapshot();
let checked = false;

// The spec's first statement: nothing but the spec's imports ran since the setup files.
Object.defineProperty(globalThis, CHECK, {
  configurable: false, writable: false, enumerable: false,
  value: () => {
    if (checked) return;
    checked = true;
    const changed = changes(atSetup, snapshot());
    if (changed.length) findings.push(`changed before the spec ran: ${changed.join(", ")}`);
    strangeHooks();
  },
});

/** @param {object} object */
const freeze = (object) => {
  try {
    Object.freeze(object);
  } catch {}
};

beforeAll(() => {
  if (!checked) findings.push("the spec's first statement did not run first");
  strangeHooks();
  // From here on nothing changes them.
  const state = /** @type {any} */ (globalThis)[MATCHERS];
  freeze(state.matchers);
  freeze(state.customEqualityTesters);
  freeze(chai.Assertion.prototype);
  freeze(expect);
});

const fail = () => {
  if (findings.length) throw new Error(`${MARK}: ${[...new Set(findings)].join("; ")}`);
};

/**
 * A test's list of onTestFinished or onTestFailed handlers that takes none from a file
 * the hooks may not come from.
 * @param {string} name
 * @param {unknown[]} [items]
 */
function handlers(name, items = []) {
  /** @type {unknown[]} */
  const list = [];
  Array.prototype.push.apply(list, items);
  Object.defineProperty(list, "push", {
    value: (/** @type {unknown[]} */ ...fns) => {
      const file = caller();
      if (!legitimate(file)) {
        findings.push(`an ${name} handler registered from ${file}`);
        return list.length;
      }
      return Array.prototype.push.apply(list, fns);
    },
  });
  return list;
}

beforeEach((/** @type {any} */ { task }) => {
  strangeHooks(task?.file);
  fail();
  for (const name of ["onFinished", "onFailed"]) {
    if (!task || typeof task !== "object") break;
    /** @type {unknown[] | undefined} */
    let list = task[name] === undefined ? undefined : handlers(name, task[name]);
    Object.defineProperty(task, name, {
      configurable: true, enumerable: false,
      get: () => list,
      set: (/** @type {unknown} */ value) => {
        list = Array.isArray(value) ? handlers(name, value) : /** @type {undefined} */ (value);
      },
    });
  }
});
afterEach((/** @type {any} */ { task }) => {
  strangeHooks(task?.file);
  fail();
});
