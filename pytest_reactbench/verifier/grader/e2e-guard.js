// What the hidden e2e specs import in place of "@playwright/test" (the room's copies
// of them are rewritten to import this; /tests keeps them as they are): the same
// module, with a browser that looks like a user's and a judgment of "a user sees it"
// made outside the page.
//
// - Every browser context gets the project's profile natively where the browser can
//   be told (client hints through the DevTools protocol, which every realm sees, workers
//   included; time zone, locale, screen and viewport are the project's options), and
//   user-browser.js as an init script of every document, and in every dedicated worker
//   before its script runs, for what has no native means.
// - `expect(locator).toBeVisible()` and a locator's click, tap, check and the like
//   also ask the browser itself, never the page's JavaScript: what is painted on top
//   at the element's centre (the DevTools protocol's hit test, which an element with
//   `pointer-events: none` does not escape), and whether the element's box on the
//   screen draws anything at all (pixels of a screenshot). A control no user can see
//   or use fails there, whatever the page's own functions say.
//
// Written into the app beside our Playwright config by specs.mjs (writeE2eConfig), with
// USER_BROWSER (user-browser.js) defined first.
import { expect as baseExpect, test as baseTest } from "@playwright/test";
import nodeFs from "node:fs";
import nodePath from "node:path";
import zlib from "node:zlib";

export * from "@playwright/test";

/* global USER_BROWSER */

/**
 * What one e2e project's browser shows a page (the config's project metadata).
 * @typedef {object} Profile
 * @property {string} userAgent
 * @property {string} acceptLanguage
 * @property {object} userAgentMetadata  the DevTools protocol's UserAgentMetadata
 * @property {[number, number]} frame  browser UI around the viewport
 * @property {number} taskbar
 * @property {[string, string]} webgl  vendor and renderer
 */

/** @param {{ project: { metadata?: any } }} info */
const profileOf = (info) => info.project.metadata?.reactbench;

/**
 * The profile's user agent and client hints, as the DevTools protocol's
 * `setUserAgentOverride` takes them (Emulation's for a page, Network's for a worker).
 * @param {Profile} profile
 */
const userAgentOverride = (profile) => ({
  userAgent: profile.userAgent,
  acceptLanguage: profile.acceptLanguage,
  platform: "Linux x86_64",
  userAgentMetadata: profile.userAgentMetadata,
});

/**
 * user-browser.js for the profile, as an expression to run in a realm before its code.
 * @param {Profile} profile
 */
const initScript = (profile) => `(${USER_BROWSER})(${JSON.stringify(profile)})`;

const sessions = new WeakMap();

/**
 * The page's own DevTools session, made once, with the profile's client hints and the
 * workers' init script in place before the page loads anything.
 * @param {any} page
 * @param {Profile | undefined} profile
 */
function session(page, profile) {
  if (!sessions.has(page)) sessions.set(page, open(page, profile));
  return sessions.get(page);
}

/**
 * @param {any} page
 * @param {Profile | undefined} profile
 */
async function open(page, profile) {
  const cdp = await page.context().newCDPSession(page);
  if (!profile) return cdp;
  await cdp.send("Emulation.setUserAgentOverride", userAgentOverride(profile));
  const script = initScript(profile);
  // Dedicated workers: the init script first, where Playwright's own session lets a
  // worker start (its first message to the worker goes after ours)...
  if (hookWorkers(page, script)) return cdp;
  // ... or, where Playwright is not in this process, paused before their first script
  // through this session (Playwright's own session may have let them start already).
  let id = 0;
  const replies = new Map();
  /** @type {Map<string, (method: string, params: object) => Promise<any>>} */
  const workers = new Map();
  /** @param {string} sessionId */
  const sender = (sessionId) => (/** @type {string} */ method, /** @type {object} */ params) =>
    new Promise((resolve) => {
      replies.set(++id, resolve);
      cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id, method, params }) })
        .catch(() => resolve(null));
    });
  cdp.on("Target.receivedMessageFromTarget", async (/** @type {any} */ event) => {
    let message;
    try {
      message = JSON.parse(event.message);
    } catch {
      return;
    }
    if (message.id && replies.has(message.id)) {
      replies.get(message.id)(message);
      replies.delete(message.id);
      return;
    }
    const send = workers.get(event.sessionId);
    if (!send || message.method !== "Debugger.paused") return;
    workers.delete(event.sessionId);
    await send("Runtime.evaluate", { expression: script, silent: true });
    await send("Debugger.removeInstrumentationBreakpoint", { instrumentation: "beforeScriptExecution" });
    await send("Debugger.resume", {});
    await send("Debugger.disable", {});
    cdp.send("Target.detachFromTarget", { sessionId: event.sessionId }).catch(() => {});
  });
  cdp.on("Target.attachedToTarget", async (/** @type {any} */ event) => {
    const { sessionId, targetInfo } = event;
    const send = sender(sessionId);
    if (targetInfo.type === "worker") {
      workers.set(sessionId, send);
      send("Debugger.enable", {});
      send("Debugger.setInstrumentationBreakpoint", { instrumentation: "beforeScriptExecution" });
    }
    await send("Runtime.runIfWaitingForDebugger", {});
    if (targetInfo.type !== "worker") cdp.send("Target.detachFromTarget", { sessionId }).catch(() => {});
  });
  await cdp.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: true, flatten: false });
  return cdp;
}

/**
 * Shared and service workers are the browser's targets, not a page's, and Playwright's
 * own browser session lets each go as it starts (a service worker resumed at once, a
 * shared worker's session detached): no page-level override reaches them, and no
 * session of the guard's can hold them. Where Playwright's server runs in this process
 * (Playwright Test's own browsers), the guard's messages go first on Playwright's own
 * session to such a worker, made as the worker is attached: the profile's client hints
 * and the init script. A shared worker's session is kept (an override lasts as long as
 * its session) and lets the worker go itself. False where the browser's session is not
 * found.
 * @param {any} browser
 * @param {Profile} profile
 */
function hookBrowserWorkers(browser, profile) {
  try {
    const root = browser._connection?.toImpl?.(browser)?._session;
    if (typeof root?.prependListener !== "function" || typeof root.createChildSession !== "function") return false;
    const script = initScript(profile);
    root.prependListener("Target.attachedToTarget", (/** @type {any} */ event) => {
      const type = event.targetInfo?.type;
      if (type !== "shared_worker" && type !== "service_worker") return;
      // Playwright's listener, called next, makes the worker's session first thing.
      const create = root.createChildSession;
      root.createChildSession = function (/** @type {string} */ sessionId, /** @type {any[]} */ ...rest) {
        root.createChildSession = create;
        const session = create.call(this, sessionId, ...rest);
        if (sessionId !== event.sessionId) return session;
        session.send("Network.setUserAgentOverride", userAgentOverride(profile)).catch(() => {});
        session.send("Runtime.evaluate", { expression: script, silent: true }).catch(() => {});
        if (type === "shared_worker") {
          session.detach = () => session.send("Runtime.runIfWaitingForDebugger").catch(() => {});
        }
        return session;
      };
      queueMicrotask(() => {
        root.createChildSession = create;
      });
    });
    return true;
  } catch {
    return false;
  }
}

/** @type {WeakMap<object, string>} */
const workerScripts = new WeakMap();

/**
 * Where Playwright's server runs in this process (Playwright Test's own browsers),
 * the init script goes to each dedicated worker of the page as the first message of
 * the worker's session, before Playwright's own let it run: every worker of its
 * frames, nested ones too. False where the server's frame sessions are not found.
 * @param {any} page
 * @param {string} script
 */
function hookWorkers(page, script) {
  try {
    const crPage = page._connection?.toImpl?.(page)?.delegate;
    const frameSession = crPage?._mainFrameSession;
    const proto = frameSession && Object.getPrototypeOf(frameSession);
    if (!proto || typeof proto._initializeWorker !== "function") return false;
    workerScripts.set(crPage, script);
    if (!proto.__reactbenchWorkers) {
      const initialize = proto._initializeWorker;
      Object.defineProperty(proto, "__reactbenchWorkers", { value: true });
      proto._initializeWorker = function (/** @type {any} */ session, /** @type {any[]} */ ...rest) {
        const expression = workerScripts.get(this._crPage);
        if (expression) session._sendMayFail("Runtime.evaluate", { expression, silent: true });
        return initialize.call(this, session, ...rest);
      };
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * A context with the profile: the init script in every document, the DevTools
 * session on every page before the test has it.
 * @param {any} context
 * @param {Profile | undefined} profile
 */
async function disguise(context, profile) {
  if (!profile || context.__reactbenchProfile) return;
  context.__reactbenchProfile = profile;
  await context.addInitScript({ content: `${initScript(profile)};` });
  context.on("page", (/** @type {any} */ page) => void session(page, profile).catch(() => {}));
  const newPage = context.newPage;
  context.newPage = async function (/** @type {any[]} */ ...args) {
    const page = await newPage.apply(this, args);
    await session(page, profile);
    return page;
  };
}

/**
 * Every context of this browser gets the profile, the test's own ones included.
 * @param {any} browser
 * @param {Profile | undefined} profile
 */
function disguiseBrowser(browser, profile) {
  if (!profile || browser.__reactbenchProfile) return;
  browser.__reactbenchProfile = profile;
  hookBrowserWorkers(browser, profile);
  const newContext = browser.newContext;
  browser.newContext = async function (/** @type {any[]} */ ...args) {
    const context = await newContext.apply(this, args);
    await disguise(context, profile);
    return context;
  };
  const newPage = browser.newPage;
  browser.newPage = async function (/** @type {any[]} */ ...args) {
    const page = await newPage.apply(this, args);
    await disguise(page.context(), profile);
    await session(page, profile);
    return page;
  };
}

// ---- What a user sees, judged by the browser ----

/**
 * The pixels of a PNG (8 bits a channel, RGB or RGBA, as Chromium writes them).
 * @param {Buffer} png
 * @returns {{ width: number, height: number, channels: number, data: Uint8Array } | null}
 */
export function decodePng(png) {
  let at = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  /** @type {Buffer[]} */
  const chunks = [];
  while (at + 8 <= png.length) {
    const length = png.readUInt32BE(at);
    const type = png.toString("latin1", at + 4, at + 8);
    const body = png.subarray(at + 8, at + 8 + length);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const [depth, colour, , , interlace] = [body[8], body[9], body[10], body[11], body[12]];
      channels = colour === 6 ? 4 : colour === 2 ? 3 : 0;
      if (depth !== 8 || !channels || interlace) return null;
    } else if (type === "IDAT") chunks.push(body);
    else if (type === "IEND") break;
    at += 12 + length;
  }
  const raw = zlib.inflateSync(Buffer.concat(chunks));
  const stride = width * channels;
  const data = new Uint8Array(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const value = raw[y * (stride + 1) + 1 + x] ?? 0;
      const left = x >= channels ? data[y * stride + x - channels] ?? 0 : 0;
      const up = y ? data[(y - 1) * stride + x] ?? 0 : 0;
      const corner = y && x >= channels ? data[(y - 1) * stride + x - channels] ?? 0 : 0;
      let predicted = 0;
      if (filter === 1) predicted = left;
      else if (filter === 2) predicted = up;
      else if (filter === 3) predicted = (left + up) >> 1;
      else if (filter === 4) {
        const p = left + up - corner;
        const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - corner)];
        predicted = pa <= pb && pa <= pc ? left : pb <= pc ? up : corner;
      }
      data[y * stride + x] = (value + predicted) & 0xff;
    }
  }
  return { width, height, channels, data };
}

// A pixel draws something when a channel differs this much from the box's most
// common colour; a box draws something when enough of its pixels do.
const CONTRAST = 40;

/**
 * Whether the pixels of a box draw anything: more than one colour, not only the
 * backdrop's.
 * @param {{ width: number, height: number, channels: number, data: Uint8Array }} image
 * @returns {boolean}
 */
export function drawsSomething({ width, height, channels, data }) {
  const total = width * height;
  if (!total) return false;
  /** @type {Map<number, number>} */
  const counts = new Map();
  for (let i = 0; i < data.length; i += channels) {
    const key = ((data[i] ?? 0) << 16) | ((data[i + 1] ?? 0) << 8) | (data[i + 2] ?? 0);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  let common = 0;
  let most = -1;
  for (const [key, count] of counts) {
    if (count > most) [common, most] = [key, count];
  }
  const [r, g, b] = [(common >> 16) & 0xff, (common >> 8) & 0xff, common & 0xff];
  let differing = 0;
  for (let i = 0; i < data.length; i += channels) {
    if (Math.max(Math.abs((data[i] ?? 0) - r), Math.abs((data[i + 1] ?? 0) - g), Math.abs((data[i + 2] ?? 0) - b)) >= CONTRAST) {
      differing++;
    }
  }
  return differing >= Math.max(3, Math.min(20, total * 0.005));
}

// Run on the hit node in a world of the guard's own (the page's JavaScript has no
// reach there): the hit node or the ancestor of it, across shadow roots, that has the
// element's box and inner HTML is the element; else the hit node's tag.
const FIND_ELEMENT = `function (box, inner) {
  const near = (a, b) => Math.abs(a - b) < 1;
  const top = this.nodeType === 1 ? this : this.parentElement;
  for (let n = top; n; n = n.parentElement || (n.parentNode && n.parentNode.host) || null) {
    const r = n.getBoundingClientRect();
    if (near(r.x, box.x) && near(r.y, box.y) && near(r.width, box.width) && near(r.height, box.height)
        && (inner === null || n.innerHTML === inner)) return null;
  }
  return top ? top.localName : "unknown";
}`;

/** @type {WeakMap<object, { loader: string, context: Promise<number> }>} */
const worlds = new WeakMap();

/**
 * The guard's own world in the page's main frame (one per document).
 * @param {any} cdp
 * @returns {Promise<number>}  its execution context
 */
async function isolatedWorld(cdp) {
  const { frameTree: { frame } } = await cdp.send("Page.getFrameTree");
  const known = worlds.get(cdp);
  if (known?.loader === frame.loaderId) return known.context;
  const context = cdp.send("Page.createIsolatedWorld", { frameId: frame.id, worldName: "" })
    .then((/** @type {any} */ created) => created.executionContextId);
  worlds.set(cdp, { loader: frame.loaderId, context });
  return context;
}

/**
 * The node painted on top at (x, y), pointer-events or not, and whether it is the
 * element of `locator` or inside it: asked of the browser, with nothing written to
 * the page (a mark it could watch for would tell it that it is graded). The element is
 * found among the hit node and its ancestors as the one with the locator's box and
 * inner HTML (Playwright's, read by its selector engine out of the page's reach), in
 * a world of the guard's own.
 * @param {any} locator
 * @param {any} cdp
 * @param {{ x: number, y: number, width: number, height: number }} box  Playwright's
 * @param {number} x
 * @param {number} y
 * @returns {Promise<string | null>}  the covering node's tag (null: none covers it)
 */
async function coveredBy(locator, cdp, box, x, y) {
  const inner = await locator.innerHTML({ timeout: 1000 }).catch(() => null);
  const hit = await cdp.send("DOM.getNodeForLocation", {
    x: Math.floor(x), y: Math.floor(y), includeUserAgentShadowDOM: false, ignorePointerEventsNone: true,
  });
  const { object } = await cdp.send("DOM.resolveNode", {
    backendNodeId: hit.backendNodeId, executionContextId: await isolatedWorld(cdp),
  });
  try {
    const { result } = await cdp.send("Runtime.callFunctionOn", {
      objectId: object.objectId, functionDeclaration: FIND_ELEMENT,
      arguments: [{ value: box }, { value: inner }], returnByValue: true,
    });
    return result.value ?? null;
  } finally {
    cdp.send("Runtime.releaseObject", { objectId: object.objectId }).catch(() => {});
  }
}

/**
 * Why no user sees or can use the element of `locator` now (null: one does), asked
 * of the browser, never of the page: the pixels of the element's visible box, then
 * the node painted on top at its centre (or at the centre of one of its quarters).
 * @param {any} locator
 * @param {number} timeout
 * @returns {Promise<string | null>}
 */
export async function whyUnseen(locator, timeout) {
  const page = locator.page();
  const viewport = page.viewportSize();
  let box = await locator.boundingBox({ timeout });
  if (!box) return "it has no box";
  const inView = (/** @type {{ x: number, y: number, width: number, height: number }} */ b) => !viewport ||
    (b.x >= 0 && b.y >= 0 && b.x + b.width <= viewport.width && b.y + b.height <= viewport.height);
  // As a user would, scrolled to it when it is not in view (Playwright's scroll waits
  // for the element to be stable: not done when there is no need).
  if (!inView(box)) {
    await locator.scrollIntoViewIfNeeded({ timeout }).catch(() => {});
    box = await locator.boundingBox({ timeout });
    if (!box) return "it has no box";
  }
  const left = Math.max(box.x, 0);
  const top = Math.max(box.y, 0);
  const right = viewport ? Math.min(box.x + box.width, viewport.width) : box.x + box.width;
  const bottom = viewport ? Math.min(box.y + box.height, viewport.height) : box.y + box.height;
  if (right - left < 1 || bottom - top < 1) return "it is outside the viewport";
  const clip = { x: left, y: top, width: right - left, height: bottom - top };
  // caret "initial": hiding it would add a style element the page could see.
  const shot = await page.screenshot({ clip, scale: "css", caret: "initial", timeout });
  const image = decodePng(shot);
  if (image && !drawsSomething(image)) return "its box draws nothing on the screen (one colour, no text, no border)";
  // Inside a frame, the page's hit test would name the frame: the pixels judge alone.
  if (/contentFrame\(\)|frameLocator\(/.test(String(locator))) return null;
  // Seen at its centre, or else at the centre of a quarter of it (a large element a
  // toast or a dialog partly covers is still seen).
  const cdp = await session(page, undefined);
  const [width, height] = [right - left, bottom - top];
  let cover = null;
  for (const [fx, fy] of [[0.5, 0.5], [0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]]) {
    const found = await coveredBy(locator, cdp, box, left + width * fx, top + height * fy);
    if (found === null) return null;
    cover ??= found;
  }
  return `it is under another element at its centre (<${cover}>)`;
}

/**
 * `whyUnseen`, asked again until it says nothing or `timeout` ms have passed.
 * @param {any} locator
 * @param {number} timeout
 */
async function settle(locator, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    let problem;
    try {
      problem = await whyUnseen(locator, Math.max(1000, deadline - Date.now()));
    } catch (error) {
      problem = String(/** @type {Error} */ (error).message ?? error).split("\n")[0];
    }
    if (!problem || Date.now() >= deadline) return problem;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const isLocator = (/** @type {any} */ value) =>
  value && typeof value.page === "function" && typeof value.boundingBox === "function" && typeof value.and === "function";

// A click (and the like) on a control no user can see or use fails, with why.
const ACTIONS = ["click", "dblclick", "tap", "check", "uncheck", "setChecked"];
/** @param {any} page */
function guardActions(page) {
  const proto = Object.getPrototypeOf(page.locator(":root"));
  if (proto.__reactbenchGuarded) return;
  Object.defineProperty(proto, "__reactbenchGuarded", { value: true });
  for (const name of ACTIONS) {
    const real = proto[name];
    if (typeof real !== "function") continue;
    proto[name] = async function (/** @type {any[]} */ ...args) {
      const options = args.find((a) => a && typeof a === "object") ?? {};
      if (!options.force) {
        const visible = await this.waitFor({ state: "visible", timeout: options.timeout || 10_000 }).then(() => true, () => false);
        if (visible) {
          const problem = await settle(this, Math.min(options.timeout || 5000, 5000));
          if (problem) throw new Error(`${name} on ${this}: no user could ${name} it: ${problem}`);
        }
      }
      return real.apply(this, args);
    };
  }
}


// ---- The leak watch: what the app left live, asked of the browser ----
//
// When a test ends (its page still open), the page's timers and the listeners on its
// window and document are asked of the browser through the DevTools protocol, never of
// page JavaScript: the listeners by DOMDebugger.getEventListeners on the main world's
// window (an unforgeable name) and document (the DOM domain's node), the timers by the
// callbacks Chromium runs in a short window (instrumentation breakpoints on
// `setInterval.callback` and `setTimeout.callback`: each pause names the callback's
// script and place, and is resumed at once). Each is named by its source file through
// the build's hidden source maps (e2e-leaks.mjs), beside the files of the React
// components still mounted (the fiber tree, read as data through the protocol). The
// report is the test's annotation `reactbench-leaks`, judged by the grader
// (leaks.mjs): a live timer or listener whose file is a changed one of the
// submission's, with no component of that file still mounted, is a leak.

/* global decodeMappings, originalFile, reactContainerKey, E2E_BUILD */

// How long the timers' callbacks are watched: an interval up to this period is seen.
const TIMER_WINDOW_MS = 1200;
// Fibers read at most, and leaks reported at most.
const MAX_FIBERS = 3000;
const MAX_LEAKS = 200;
const MAX_EFFECTS = 16;
// The time the watch adds to a test's timeout.
const WATCH_BUDGET_MS = 30_000;
const GROUP = "reactbench-leak-watch";
// The submission's changed code files, from the grader (absolute; null: not told). A
// timer is judged only where its file has nothing mounted: when every one of them still
// has, no timer can be a leak, and the window is not waited for.
const CHANGED_CODE = (() => {
  try {
    const changed = JSON.parse(process.env.REACTBENCH_E2E_CHANGED ?? "null");
    return Array.isArray(changed) ? changed.map(String) : null;
  } catch {
    return null;
  }
})();

/**
 * @param {string} buildDir
 * @returns {(scriptUrl: string, line: number, column: number) => string | null}
 */
function sourceFiles(buildDir) {
  /** @type {Map<string, { map: any, dir: string, decoded: number[][][] } | null>} */
  const maps = new Map();
  return (scriptUrl, line, column) => {
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(scriptUrl).pathname);
    } catch {
      return null;
    }
    const file = nodePath.join(buildDir, nodePath.normalize(pathname).replace(/^(\.\.[/\\])+/, ""));
    if (!maps.has(file)) {
      try {
        const map = JSON.parse(nodeFs.readFileSync(`${file}.map`, "utf8"));
        maps.set(file, { map, dir: nodePath.dirname(file), decoded: decodeMappings(map.mappings ?? "") });
      } catch {
        maps.set(file, null);
      }
    }
    const entry = maps.get(file);
    if (!entry) return null;
    return originalFile(entry.map, entry.dir, line, column, nodePath.resolve, entry.decoded);
  };
}

/**
 * The own properties of a remote object, by name (values as the protocol gives them).
 * @param {any} cdp
 * @param {string} objectId
 * @returns {Promise<{ props: Map<string, any>, internal: Map<string, any> }>}
 */
async function ownProperties(cdp, objectId) {
  const { result, internalProperties } = await cdp.send("Runtime.getProperties",
    { objectId, ownProperties: true, generatePreview: false });
  /** @type {Map<string, any>} */
  const props = new Map();
  for (const p of result ?? []) if ("value" in p) props.set(p.name, p.value);
  /** @type {Map<string, any>} */
  const internal = new Map();
  for (const p of internalProperties ?? []) internal.set(p.name, p.value);
  return { props, internal };
}

/**
 * What a function was made in: the names of the closures its code sees (its
 * [[Scopes]], "Closure (name)"; an anonymous one counts, unnamed), and where it is.
 * @param {any} cdp
 * @param {string} objectId  the function
 * @returns {Promise<{ closures: number, names: string[], location: any }>}
 */
async function madeIn(cdp, objectId) {
  const { internal } = await ownProperties(cdp, objectId);
  /** @type {string[]} */
  const names = [];
  let closures = 0;
  const scopes = internal.get("[[Scopes]]")?.objectId;
  if (scopes) {
    const { result } = await cdp.send("Runtime.getProperties", { objectId: scopes, ownProperties: true });
    for (const scope of result ?? []) {
      const description = String(scope.value?.description ?? "");
      if (!/^Closure\b/.test(description)) continue;
      closures++;
      const name = /^Closure \((.+)\)$/.exec(description)?.[1];
      if (name) names.push(name);
    }
  }
  return { closures, names, location: internal.get("[[FunctionLocation]]")?.value ?? null };
}

/**
 * The code of the React components still mounted in the page: each component's
 * function with its name, and each of its
 * effects' functions (a hook's, perhaps in a file of its own) with the names of the
 * functions it was made in. Read from the fiber tree of each
 * root container among the body's child elements, as data through the protocol (a
 * getter the page defines is never called).
 * @param {any} cdp
 * @param {{ roots: number, fibers: number, components: number }} counts  what was read, for the record
 * @returns {Promise<{ location: { scriptId: string, lineNumber: number, columnNumber: number }, names: string[] }[]>}
 */
async function mountedComponents(cdp, counts) {
  const { root } = await cdp.send("DOM.getDocument", { depth: 3 });
  const html = (root.children ?? []).find((/** @type {any} */ n) => n.nodeName === "HTML");
  const body = (html?.children ?? []).find((/** @type {any} */ n) => n.nodeName === "BODY");
  /** @type {string[]} */
  const fibers = [];
  // React roots are rendered into the body's elements (the scaffold's #root).
  for (const node of (body?.children ?? []).filter((/** @type {any} */ n) => n.nodeType === 1).slice(0, 50)) {
    const { object } = await cdp.send("DOM.resolveNode", { backendNodeId: node.backendNodeId, objectGroup: GROUP });
    if (!object?.objectId) continue;
    const { props } = await ownProperties(cdp, object.objectId);
    const key = reactContainerKey([...props.keys()]);
    const first = key && props.get(key)?.objectId;
    if (!first) continue;
    // The fiber on the container is the root's first; its tree now is the root's
    // `current` (its stateNode's), the one after the last commit.
    const root = (await ownProperties(cdp, first)).props.get("stateNode")?.objectId;
    const current = root && (await ownProperties(cdp, root)).props.get("current")?.objectId;
    if (current) fibers.push(current);
  }
  /** @type {{ location: any, names: string[] }[]} */
  const owners = [];
  counts.roots = fibers.length;
  let read = 0;
  while (fibers.length && read++ < MAX_FIBERS) {
    const id = /** @type {string} */ (fibers.pop());
    const { props } = await ownProperties(cdp, id);
    for (const next of ["child", "sibling"]) {
      const value = props.get(next);
      if (value?.objectId) fibers.push(value.objectId);
    }
    // A function component, a class, or memo/forwardRef around one.
    let type = props.get("type");
    for (let depth = 0; type?.objectId && type.type === "object" && depth < 3; depth++) {
      const inner = (await ownProperties(cdp, type.objectId)).props;
      type = inner.get("type") ?? inner.get("render");
    }
    if (type?.type !== "function" || !type.objectId) continue;
    const own = await ownProperties(cdp, type.objectId);
    const location = own.internal.get("[[FunctionLocation]]")?.value;
    if (!location?.scriptId) continue;
    // Its name (a class's methods are not names of its own: what they start is known
    // by the class's file).
    const names = [String(own.props.get("name")?.value ?? "")];
    counts.components++;
    owners.push({ location, names: [...new Set(names.filter(Boolean))] });
    // The effects of a function component (updateQueue.lastEffect, a ring by `next`):
    // where each was written (a hook's file) and what it was made in.
    let effect = props.get("updateQueue")?.objectId
      ? (await ownProperties(cdp, props.get("updateQueue").objectId)).props.get("lastEffect") : null;
    /** @type {Set<string>} */
    const seen = new Set();
    for (let n = 0; effect?.objectId && n < MAX_EFFECTS; n++) {
      const fields = (await ownProperties(cdp, effect.objectId)).props;
      const create = fields.get("create");
      if (create?.objectId) {
        const made = await madeIn(cdp, create.objectId);
        const at = made.location && `${made.location.scriptId}:${made.location.lineNumber}:${made.location.columnNumber}`;
        // Round the ring once.
        if (!at || seen.has(at)) break;
        seen.add(at);
        owners.push({ location: made.location, names: made.names });
      }
      effect = fields.get("next");
    }
  }
  counts.fibers = read;
  return owners;
}

/**
 * What the app left live as the test ends: each timer whose callback ran in the window
 * and each listener on the window and the document, with the source file of its code
 * and the closures it was made in (how many, and their names); and the code still
 * mounted: each mounted component's and effect's file, with the names it owns.
 * @param {any} page
 * @param {string} buildDir
 * @returns {Promise<{ watching: boolean, closed?: boolean, problem?: string, ms?: number, timers_watched?: boolean,
 *   leaks: { kind: "timer" | "listener", what: string, files: string[], closures: number, owners: string[],
 *     repeating?: boolean }[],
 *   mounted: { file: string, names: string[] }[] }>}
 */
async function watchLeaks(page, buildDir) {
  if (page.isClosed()) return { watching: true, closed: true, leaks: [], mounted: [] };
  const started = Date.now();
  const cdp = await page.context().newCDPSession(page);
  try {
    /** @type {Map<string, string>} */
    const scripts = new Map();
    cdp.on("Debugger.scriptParsed", (/** @type {any} */ e) => scripts.set(e.scriptId, e.url));
    /** @type {{ location: any, kind: string, closures: number, owners: string[] }[]} */
    const fired = [];
    cdp.on("Debugger.paused", (/** @type {any} */ e) => {
      const frame = e.callFrames?.[0];
      const event = String(e.data?.eventName ?? "");
      if (frame?.location && /^instrumentation:set(Interval|Timeout)\.callback$/.test(event)) {
        const closures = (frame.scopeChain ?? []).filter((/** @type {any} */ s) => s.type === "closure");
        // A callback run on an object of its own (a class component's arrow that keeps
        // only `this`) was made in that object's method: Chromium runs a timer's
        // callback on the window otherwise.
        const receiver = frame.this?.type === "object" && frame.this.className !== "Window" ? 1 : 0;
        fired.push({
          location: frame.location, kind: event.includes("Interval") ? "an interval" : "a timeout",
          closures: closures.length + receiver,
          owners: closures.map((/** @type {any} */ s) => s.name).filter(Boolean),
        });
      }
      cdp.send("Debugger.resume").catch(() => {});
    });
    await cdp.send("Debugger.enable");
    await cdp.send("DOM.enable");
    const file = sourceFiles(buildDir);
    const at = (/** @type {any} */ l) => file(scripts.get(l.scriptId) ?? "", l.lineNumber, l.columnNumber);
    /** @type {{ kind: "timer" | "listener", what: string, files: string[], closures: number, owners: string[],
     *   repeating?: boolean }[]} */
    const leaks = [];
    // The listeners: window by its unforgeable name, document as the DOM domain's node
    // (in an object group, so that each listener's handler comes with it).
    const { result: win } = await cdp.send("Runtime.evaluate", { expression: "window", objectGroup: GROUP });
    const { root } = await cdp.send("DOM.getDocument", { depth: 0 });
    const { object: doc } = await cdp.send("DOM.resolveNode", { nodeId: root.nodeId, objectGroup: GROUP });
    for (const [target, object] of [["window", win], ["document", doc]]) {
      if (!object?.objectId) throw new Error(`no ${target} object`);
      const { listeners } = await cdp.send("DOMDebugger.getEventListeners", { objectId: object.objectId, depth: 0 });
      for (const l of (listeners ?? []).slice(0, MAX_LEAKS)) {
        const source = at(l);
        if (!source) continue;
        const made = l.handler?.objectId ? await madeIn(cdp, l.handler.objectId) : { closures: 0, names: [] };
        leaks.push({ kind: "listener", what: `a "${l.type}" listener on the ${target}`, files: [source],
          closures: made.closures, owners: made.names });
      }
    }
    /** @type {{ file: string, names: string[] }[]} */
    const mounted = [];
    const counts = { roots: 0, fibers: 0, components: 0 };
    for (const { location, names } of await mountedComponents(cdp, counts)) {
      const source = at(location);
      if (source) mounted.push({ file: source, names });
    }
    // The timers: those whose callbacks run in the window, where one could be a leak.
    const timers = ["setInterval.callback", "setTimeout.callback"];
    const unmounted = CHANGED_CODE === null || CHANGED_CODE.some((f) => !mounted.some((m) => m.file === f));
    if (unmounted) {
      for (const eventName of timers) await cdp.send("EventBreakpoints.setInstrumentationBreakpoint", { eventName });
      await new Promise((resolve) => setTimeout(resolve, TIMER_WINDOW_MS));
      for (const eventName of timers) await cdp.send("EventBreakpoints.removeInstrumentationBreakpoint", { eventName });
    }
    // Each callback once, with how often it ran: a timeout that ran once (a debounce, a
    // delayed save) ran out, where an interval, or a timeout that armed itself again, runs on.
    /** @type {Map<string, { f: typeof fired[number], times: number }>} */
    const callbacks = new Map();
    for (const f of fired) {
      const key = `${f.kind} ${f.location.scriptId}:${f.location.lineNumber}:${f.location.columnNumber}`;
      const seen = callbacks.get(key) ?? { f, times: 0 };
      seen.times += 1;
      callbacks.set(key, seen);
    }
    for (const { f, times } of callbacks.values()) {
      const source = at(f.location);
      if (source) {
        leaks.push({ kind: "timer", what: `${f.kind} still running`, files: [source], closures: f.closures,
          owners: f.owners, repeating: f.kind === "an interval" || times > 1 });
      }
    }
    await cdp.send("Runtime.releaseObjectGroup", { objectGroup: GROUP }).catch(() => {});
    await cdp.send("Debugger.disable").catch(() => {});
    const once = (/** @type {any[]} */ list) => [...new Map(list.map((x) => [JSON.stringify(x), x])).values()];
    return { watching: true, leaks: once(leaks).slice(0, MAX_LEAKS), mounted: once(mounted), read: counts,
      timers_watched: unmounted, ms: Date.now() - started };
  } catch (error) {
    if (page.isClosed()) return { watching: true, closed: true, leaks: [], mounted: [] };
    return { watching: false, problem: String(/** @type {Error} */ (error)?.message ?? error).split("\n")[0],
      leaks: [], mounted: [] };
  } finally {
    cdp.detach().catch(() => {});
  }
}

export const test = baseTest.extend({
  browser: [async ({ browser }, use, workerInfo) => {
    disguiseBrowser(browser, profileOf(workerInfo));
    await use(browser);
  }, { scope: "worker" }],
  context: async ({ context }, use, testInfo) => {
    await disguise(context, profileOf(testInfo));
    await use(context);
  },
  page: async ({ page }, use, testInfo) => {
    await session(page, profileOf(testInfo));
    guardActions(page);
    await use(page);
    // What the app left live as the test ends, for the grader's leak judgement: its
    // own time, not the test's (a test near its timeout is not failed by the watch).
    if (testInfo.timeout > 0) testInfo.setTimeout(testInfo.timeout + WATCH_BUDGET_MS);
    const buildDir = nodePath.resolve(nodePath.dirname(testInfo.config.configFile ?? "."), E2E_BUILD);
    const report = await watchLeaks(page, buildDir);
    testInfo.annotations.push({ type: "reactbench-leaks", description: JSON.stringify(report) });
  },
});

export const expect = baseExpect.extend({
  /**
   * Playwright's own, then the browser's judgment of what a user sees.
   * @this {any}
   * @param {any} locator
   * @param {{ timeout?: number, visible?: boolean }} [options]
   */
  async toBeVisible(locator, options) {
    const name = "toBeVisible";
    if (this.isNot) {
      try {
        await baseExpect(locator).not.toBeVisible(options);
        return { pass: false, name, message: () => `${locator} is not visible` };
      } catch (error) {
        return { pass: true, name, message: () => String(/** @type {Error} */ (error).message) };
      }
    }
    try {
      await baseExpect(locator).toBeVisible(options);
    } catch (error) {
      return { pass: false, name, message: () => String(/** @type {Error} */ (error).message) };
    }
    if (!isLocator(locator) || options?.visible === false) return { pass: true, name, message: () => "" };
    const problem = await settle(locator, options?.timeout ?? this.timeout ?? 5000);
    return {
      pass: !problem,
      name,
      message: () => `${locator} is visible to Playwright, but no user sees it: ${problem}`,
    };
  },
});

export default test;
