// The leak watch: a setup file of the grader's that runs in every Vitest worker of the
// unit step, after the task's own setup files and before any spec (so before any module
// of the submission's) is loaded. After each test, once its afterEach hooks have
// unmounted what it rendered (Testing Library's cleanup), it lists the timers and the
// window's and document's event listeners still live, each with the source files on
// the stack that created it, and writes them to a report of its own in the room's
// reports folder (leaks.mjs judges it: the files the submission changed are its).
//
// It watches from where the tested code does not reach: timers through an async hook
// of Node's (every Timeout the process creates, jsdom's included, whatever name started
// it; a hook cannot be removed without a reference to it, and a probe timer at every
// report shows it still sees), listeners in jsdom's own lists (its implementation
// objects, not the page's functions), and everything it keeps, and the stacks it takes,
// in a realm of its own: the tested code can replace the page's Error, Map or
// Array.prototype, never that realm's.
import { createHook } from "node:async_hooks";
import crypto from "node:crypto";
import fs from "node:fs";
import inspector from "node:inspector";
import path from "node:path";
import timers from "node:timers";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

// @ts-ignore: the room's Vitest, which the grader's own folder does not have
import { beforeEach } from "vitest";

// One report per spec file (a worker that runs several keeps one each).
const REPORTS = process.env.REACTBENCH_REPORTS ?? ".";
const RUN = `leak-watch-${process.pid}-${crypto.randomBytes(6).toString("hex")}`;
const { join } = path;
/** @param {string} spec */
const reportOf = (spec) => join(REPORTS, `${RUN}${watch.specIndex(spec)}.json`);

/**
 * The watch's realm: what it keeps and how it reads a stack.
 * @typedef {object} Watch
 * @property {(asyncId: number, type: string, trigger: number) => void} init
 * @property {(asyncId: number) => void} destroy
 * @property {(target: string, type: string, entries: object[], from: number) => void} added
 *   the entries of a list from `from` on were added now
 * @property {{ fn: unknown }} box  what the inspector is handed a function through
 * @property {(spec: string) => number} specIndex  a spec file's number, for its report's name
 * @property {(objectId: string | null) => void} located  the inspector's handle on the box
 * @property {(scriptId: string, url: string) => void} script  a script the inspector parsed
 * @property {(target: string, impl: object) => void} target  a target whose listeners it watches
 * @property {(impl: unknown) => string | null} nameOf  a watched target's name
 * @property {(spec: string, ok: boolean) => string} report  the report's JSON
 * @property {(start: () => void) => boolean} probe  whether the hook saw a timer `start` made
 * @property {(wait: (then: () => void) => void) => Promise<void>} settle  resolves after two
 *   turns of `wait` (setImmediate): the pending destroys are delivered then
 */

// A session of V8's inspector in this thread (its answers come back at once); its
// methods taken now. Without an inspector (a Node built without one), the watch goes by
// the stacks alone.
/** @type {inspector.Session | null} */
let session = null;
/** @type {((method: string, params: object, done: (error: Error | null, result: any) => void) => void) | null} */
let sessionPost = null;
try {
  session = new inspector.Session();
  session.connect();
  sessionPost = session.post.bind(session);
} catch {}
/**
 * @param {string} method
 * @param {object} params
 * @returns {any}
 */
function post(method, params) {
  if (!sessionPost) throw new Error("no inspector");
  /** @type {any} */
  let answer = null;
  /** @type {Error | null} */
  let failure = null;
  sessionPost(method, params, (error, result) => {
    failure = error;
    answer = result;
  });
  if (failure) throw failure;
  return answer;
}

/**
 * The pending timers of the fake clock a spec installed (vi.useFakeTimers: the faked
 * setTimeout keeps its clock), by id; null: none installed.
 * @returns {Record<string, { func?: unknown, type?: string, delay?: number, interval?: number }> | null}
 */
function fakeTimers() {
  try {
    const clock = /** @type {any} */ (globalThis).setTimeout?.clock;
    return clock && typeof clock.timers === "object" ? clock.timers : null;
  } catch {
    return null;
  }
}

/** @type {Watch} */
const watch = vm.runInContext(`
  Error.stackTraceLimit = 200;
  const PATH = /(?:file:\\/\\/)?(\\/[^\\s()?#]+?)(?:[?#][^\\s():]*)?(?::\\d+)+\\)?/g;
  const MAX_LEAKS = 1000;
  const own = (file) => file !== SELF && !file.startsWith("node:") && !file.includes("/node_modules/");
  // The source files on the stack: code built by eval or the Function constructor is
  // named by where it was built ("eval at f (/app/src/x.ts:3:9)"). Node's internals,
  // node_modules and the watch itself are none of the app's.
  Error.prepareStackTrace = (_, sites) => {
    const files = new Set();
    for (let i = 0; i < sites.length; i++) {
      const site = sites[i];
      const name = String(site.getFileName() ?? "").replace(/^file:\\/\\//, "").replace(/[?#].*$/, "");
      if (name.startsWith("/") && own(name)) files.add(name);
      if (site.isEval()) {
        for (const m of String(site.getEvalOrigin() ?? "").matchAll(PATH)) if (own(m[1])) files.add(m[1]);
      }
    }
    return [...files];
  };
  function stackFiles() {
    const holder = {};
    Error.captureStackTrace(holder, stackFiles);
    return holder.stack;
  }
  // Where a function's code is, as V8's inspector tells (POST: a session's post,
  // synchronous): the file of its script, through bound functions to their target and
  // arguments, an object listener to its handleEvent. The inspector's debugger is
  // switched on at the first question (it lists every script parsed so far).
  const scripts = new Map();
  const located = new WeakMap();
  const box = { fn: null };
  let boxId = null, debugging = false;
  const clean = (url) => String(url).replace(/^file:\\/\\//, "").replace(/[?#].*$/, "");
  function objectFiles(objectId, depth, files) {
    const props = POST("Runtime.getProperties", { objectId, ownProperties: true });
    const internal = props.internalProperties ?? [];
    for (let i = 0; i < internal.length; i++) {
      const { name, value } = internal[i];
      if (name === "[[FunctionLocation]]") {
        const file = clean(scripts.get(value?.value?.scriptId) ?? "");
        if (file.startsWith("/") && own(file)) files.add(file);
      } else if ((name === "[[TargetFunction]]" || name === "[[BoundArgs]]") && value?.objectId && depth < 4) {
        objectFiles(value.objectId, depth + 1, files);
      }
    }
    const result = props.result ?? [];
    for (let i = 0; i < result.length; i++) {
      const { name, value } = result[i];
      const element = /^\\d+$/.test(name) || name === "handleEvent";
      if (element && value?.objectId && (value.type === "function" || name === "handleEvent") && depth < 4) {
        objectFiles(value.objectId, depth + 1, files);
      }
    }
  }
  function codeFiles(fn) {
    if (fn === null || (typeof fn !== "function" && typeof fn !== "object") || boxId === null) return [];
    if (located.has(fn)) return located.get(fn);
    const files = new Set();
    try {
      if (!debugging) {
        debugging = true;
        POST("Debugger.enable", {});
      }
      box.fn = fn;
      const got = POST("Runtime.callFunctionOn", {
        objectId: boxId, functionDeclaration: "function () { return this.fn; }", objectGroup: "reactbench-leak",
      });
      if (got.result?.objectId) objectFiles(got.result.objectId, 0, files);
    } catch {} finally {
      box.fn = null;
      try { POST("Runtime.releaseObjectGroup", { objectGroup: "reactbench-leak" }); } catch {}
    }
    located.set(fn, [...files]);
    return [...files];
  }
  const timers = new Map();  // async id -> { files, callback, what }, until its destroy
  const listeners = [];  // { target, type, entry, files }
  const targets = new Map();  // name -> jsdom's implementation object
  const names = new Map();  // and back
  let probing = false, probed = false;
  const tests = new Map();  // spec -> tests reported after
  const specs = new Map();  // spec -> its number
  ({
    init(asyncId, type, trigger, resource) {
      if (type !== "Timeout") return;
      if (probing) return void (probed = true);
      const files = new Set(stackFiles());
      // A timer made by the callback of one (jsdom's setInterval makes a new one each time).
      const parent = timers.get(trigger);
      if (parent) for (const f of parent.files) files.add(f);
      const every = resource._repeat ? "an interval" : "a timer";
      timers.set(asyncId, {
        files: [...files], callback: resource._onTimeout, what: every + " of " + resource._idleTimeout + " ms",
      });
    },
    destroy(asyncId) {
      timers.delete(asyncId);
    },
    box,
    specIndex(spec) {
      if (!specs.has(spec)) specs.set(spec, specs.size);
      return specs.get(spec);
    },
    located(id) {
      boxId = id;
    },
    script(id, url) {
      scripts.set(id, url);
    },
    target(name, impl) {
      targets.set(name, impl);
      names.set(impl, name);
    },
    nameOf(impl) {
      return names.get(impl) ?? null;
    },
    added(target, type, entries, from) {
      const files = stackFiles();
      for (let i = from; i < entries.length; i++) listeners.push({ target, type, entry: entries[i], files });
    },
    probe(start) {
      probing = true;
      probed = false;
      try { start(); } finally { probing = false; }
      return probed;
    },
    settle(wait) {
      return new Promise((resolve) => wait(() => wait(resolve)));
    },
    report(spec, ok) {
      tests.set(spec, (tests.get(spec) ?? 0) + 1);
      const leaks = [];
      // Each with the files of the code it runs too: a timer or listener started from
      // no frame of the app's (a bound setInterval handed to React as the effect) runs
      // the app's code all the same.
      const seen = new Set();
      const leak = (kind, files, callback, what) => {
        const all = new Set(files);
        for (const file of codeFiles(callback)) all.add(file);
        // The same leak many times over is one line: a flood cannot push another out.
        const key = JSON.stringify([kind, [...all].sort(), what]);
        if (all.size && !seen.has(key)) leaks.push({ kind, files: [...all], what });
        seen.add(key);
      };
      for (const timer of timers.values()) leak("timer", timer.files, timer.callback, timer.what);
      // A spec's fake timers (vi.useFakeTimers) live in the fake clock, not in Node: by
      // the code they run.
      const fake = FAKE_TIMERS();
      if (fake) {
        const ids = Object.keys(fake);
        for (let i = 0; i < ids.length; i++) {
          const timer = fake[ids[i]];
          const every = timer?.type === "Interval" ? "an interval" : "a timer";
          leak("timer", [], timer?.func, every + " of " + (timer?.interval ?? timer?.delay ?? "?") + " ms (fake timers)");
        }
      }
      for (const { target, type, entry, files } of listeners) {
        const list = (targets.get(target)._eventListeners ?? {})[type] ?? [];
        let live = false;
        for (let i = 0; i < list.length; i++) if (list[i] === entry) live = true;
        const callback = entry.callback?.objectReference ?? entry.callback;
        if (live) leak("listener", files, callback, "a \\"" + type + "\\" listener on the " + target);
      }
      return JSON.stringify({ spec, tests: tests.get(spec), watching: ok && targets.has("window") && targets.has("document"), leaks: leaks.slice(0, MAX_LEAKS) });
    },
  })`, vm.createContext({ SELF: fileURLToPath(import.meta.url), POST: post, FAKE_TIMERS: fakeTimers }),
  { filename: "reactbench-leak-watch" });

// The box through which the inspector is handed a function: its handle is taken now,
// through a global that is gone before the tested code runs.
const boxKey = `reactbench-leak-${crypto.randomBytes(8).toString("hex")}`;
try {
  /** @type {any} */ (globalThis)[boxKey] = watch.box;
  watch.located(post("Runtime.evaluate", { expression: `this[${JSON.stringify(boxKey)}]` }).result?.objectId ?? null);
} catch {}
delete (/** @type {any} */ (globalThis))[boxKey];
session?.on("Debugger.scriptParsed", (/** @type {{ params: { scriptId: string, url: string } }} */ message) =>
  watch.script(message.params.scriptId, message.params.url));

// Everything it calls later is taken now, before the tested code can replace it.
const { writeFileSync, renameSync } = fs;
const { setTimeout: nodeSetTimeout, clearTimeout: nodeClearTimeout, setImmediate: nodeSetImmediate } = timers;
createHook({ init: watch.init, destroy: watch.destroy }).enable();

/**
 * jsdom's implementation object of a wrapper (the window's, the document's), found by
 * its symbol now, before the tested code runs.
 * @param {object | undefined} wrapper
 * @returns {{ _eventListeners?: Record<string, object[]> } | undefined}
 */
function implOf(wrapper) {
  if (!wrapper) return undefined;
  const symbol = Object.getOwnPropertySymbols(wrapper).find((s) => s.description === "impl");
  return symbol ? /** @type {any} */ (wrapper)[symbol] : undefined;
}

const page = /** @type {any} */ (globalThis);
const windowImpl = implOf(page.jsdom?.window ?? page.window);
const documentImpl = implOf(page.document);
// What outlives every test of the file: the window, the document and its two elements.
for (const [name, impl] of /** @type {[string, object | undefined][]} */ ([
  ["window", windowImpl], ["document", documentImpl],
  ["document's <html>", implOf(page.document?.documentElement)], ["document's <body>", implOf(page.document?.body)],
])) {
  if (!impl) continue;
  watch.target(name, impl);
}

// The one addEventListener of jsdom's implementation (EventTargetImpl's), which every
// page-world way of adding a listener ends in: an entry it adds to the list of a watched
// target is noted with the stack that added it.
/** @type {{ addEventListener: Function } | null} */
let implProto = null;
/** @type {Function | null} */
let wrapped = null;
for (let proto = windowImpl && Object.getPrototypeOf(windowImpl); proto; proto = Object.getPrototypeOf(proto)) {
  if (!Object.hasOwn(proto, "addEventListener")) continue;
  const add = proto.addEventListener;
  const call = Function.prototype.call.bind(add);
  /** @this {{ _eventListeners?: Record<string, object[]> }} */
  wrapped = function addEventListener(/** @type {string} */ type, /** @type {unknown[]} */ ...rest) {
    const target = watch.nameOf(this);
    if (!target) return call(this, type, ...rest);
    // jsdom only appends to a list as it adds.
    const from = this._eventListeners?.[type]?.length ?? 0;
    const result = call(this, type, ...rest);
    watch.added(target, type, this._eventListeners?.[type] ?? [], from);
    return result;
  };
  proto.addEventListener = wrapped;
  implProto = proto;
  break;
}

/**
 * The parts of Vitest's test context the watch uses.
 * @typedef {object} TestContext
 * @property {{ file?: { filepath?: string }, meta?: Record<string, unknown> }} task
 * @property {(fn: () => Promise<void>) => void} onTestFinished
 */

beforeEach((/** @type {TestContext} */ context) => {
  const spec = context.task.file?.filepath ?? "";
  // After every afterEach hook of the test's (Testing Library's cleanup among them),
  // and once the destroys of the timers they cleared are delivered (Node sends them
  // from its immediate queue).
  context.onTestFinished(async () => {
    await watch.settle(nodeSetImmediate);
    // The hook still sees a timer made now, and jsdom's addEventListener is still watched.
    const hooked = watch.probe(() => nodeClearTimeout(nodeSetTimeout(() => {}, 1 << 30)));
    const listening = implProto !== null && implProto.addEventListener === wrapped;
    const text = watch.report(spec, hooked && listening);
    // On the test's meta, which Vitest hands to its main process with the result: the
    // grader's reporter signs it there. The file is the record's.
    if (context.task.meta) context.task.meta.reactbenchLeaks = text;
    const report = reportOf(spec);
    writeFileSync(`${report}.tmp`, text);
    renameSync(`${report}.tmp`, report);
  });
});
