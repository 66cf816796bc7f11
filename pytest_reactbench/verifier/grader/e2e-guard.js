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
  await cdp.send("Emulation.setUserAgentOverride", {
    userAgent: profile.userAgent,
    acceptLanguage: profile.acceptLanguage,
    platform: "Linux x86_64",
    userAgentMetadata: profile.userAgentMetadata,
  });
  const script = `(${USER_BROWSER})(${JSON.stringify(profile)})`;
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
  await context.addInitScript({ content: `(${USER_BROWSER})(${JSON.stringify(profile)});` });
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
