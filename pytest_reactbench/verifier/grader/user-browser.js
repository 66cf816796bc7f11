// Runs first in every realm of the e2e run's pages, as the browser's own init script
// (every frame's document, same-origin iframes and popups included) and in each
// dedicated worker before its script: what a page reads cheaply to tell a headless
// browser from a user's desktop one reads as a user's. What the browser can be told
// natively (user agent and client hints, time zone, screen, devices) is set outside
// the page (e2e-guard.js); this covers only what has no native means: browser UI around
// the viewport, a taskbar below the screen, a GPU that is not a software renderer, and
// the client hints of a realm the browser's override does not reach (a service worker
// reads the browser's own).
// Each replaced function is native in every cheap test: its source, its name and
// length, no prototype, the descriptor it replaces, the TypeError a foreign receiver
// gets, and a stack trace without a frame of its own.
// `profile` (the e2e project's): { frame: [w, h], taskbar, webgl: [vendor, renderer],
// userAgentMetadata: the client hints as the DevTools protocol takes them }.
(function userBrowser(profile) {
  "use strict";
  const realm = globalThis;
  const { apply, defineProperty, getOwnPropertyDescriptor, getPrototypeOf } = Reflect;
  const weakGet = WeakMap.prototype.get;
  const weakHas = WeakMap.prototype.has;
  const weakSet = WeakMap.prototype.set;
  const capture = Error.captureStackTrace;
  const then = Promise.prototype.then;
  const { create, freeze, keys } = Object;
  const realToString = Function.prototype.toString;
  const sources = new WeakMap();
  /**
   * @template {Function} F
   * @param {F} fn
   * @param {string} name  as the native one prints
   * @returns {F}
   */
  const native = (fn, name) => {
    apply(weakSet, sources, [fn, `function ${name}() { [native code] }`]);
    return fn;
  };
  /**
   * A native's error, rethrown as if ours had never been on the stack.
   * @param {unknown} error
   * @param {Function} ours
   */
  const rethrow = (error, ours) => {
    if (error && typeof error === "object" && typeof capture === "function") {
      try {
        apply(capture, Error, [error, ours]);
      } catch {}
    }
    throw error;
  };

  // Function.prototype.toString: ours print as native; the rest as before.
  const toString = native({
    toString() {
      if (apply(weakHas, sources, [this])) return apply(weakGet, sources, [this]);
      try {
        return apply(realToString, this, []);
      } catch (error) {
        return rethrow(error, toString);
      }
    },
  }.toString, "toString");
  const toStringFound = getOwnPropertyDescriptor(Function.prototype, "toString");
  if (toStringFound) defineProperty(Function.prototype, "toString", { ...toStringFound, value: toString });

  /**
   * The getter of `prop` (on `target` or its prototypes) as `adjust` of the native
   * value: the native getter runs first, so a foreign receiver gets its TypeError.
   * @param {object | undefined} target
   * @param {string} prop
   * @param {(value: any) => any} adjust
   */
  const getter = (target, prop, adjust) => {
    let owner = target;
    while (owner && !getOwnPropertyDescriptor(owner, prop)) owner = getPrototypeOf(owner);
    const found = owner && getOwnPropertyDescriptor(owner, prop);
    if (!owner || !found || !found.configurable || typeof found.get !== "function") return;
    const real = found.get;
    const get = /** @type {() => any} */ (getOwnPropertyDescriptor({
      get [prop]() {
        let value;
        try {
          value = apply(real, this, []);
        } catch (error) {
          return rethrow(error, get);
        }
        return adjust(value);
      },
    }, prop)?.get);
    defineProperty(owner, prop, { ...found, get: native(get, `get ${prop}`) });
  };

  /**
   * The method `prop` of `proto` as `wrap` of the native call's result.
   * @param {object | undefined} proto
   * @param {string} prop
   * @param {(args: any[], value: any) => any} wrap
   */
  const method = (proto, prop, wrap) => {
    const found = proto && getOwnPropertyDescriptor(proto, prop);
    if (!proto || !found || !found.configurable || typeof found.value !== "function") return;
    const real = found.value;
    const replaced = {
      [prop](/** @type {any[]} */ ...args) {
        let value;
        try {
          value = apply(real, this, args);
        } catch (error) {
          return rethrow(error, replaced);
        }
        return wrap(args, value);
      },
    }[prop];
    // A rest parameter has no length: the native one's.
    defineProperty(replaced, "length", { ...getOwnPropertyDescriptor(real, "length") });
    defineProperty(proto, prop, { ...found, value: native(replaced, prop) });
  };

  // A desktop window: its frame and toolbars around the page (the native outer size
  // is the viewport's, in every frame), a taskbar below the screen.
  if (typeof realm.Window === "function" && realm instanceof realm.Window) {
    const [frameWidth, frameHeight] = profile.frame;
    getter(realm, "outerWidth", (value) => value + frameWidth);
    getter(realm, "outerHeight", (value) => value + frameHeight);
    getter(realm.Screen?.prototype, "availHeight", (value) => value - profile.taskbar);
  }

  // The profile's client hints where this realm reads the browser's own (a service
  // worker: the override of its DevTools session does not reach them). Each read makes
  // new objects, as the native one does: a frozen brand list, plain entries.
  const hints = profile.userAgentMetadata;
  const data = realm.navigator?.userAgentData;
  // Copies made as the native ones are, with nothing a realm's own code could have
  // replaced by then: no array method, iterator or property set that reaches a prototype.
  /**
   * @template T
   * @param {T[]} list
   * @param {(item: T) => unknown} each
   */
  const copied = (list, each) => {
    /** @type {unknown[]} */
    const out = [];
    for (let i = 0; i < list.length; i++) {
      const value = each(/** @type {T} */ (list[i]));
      defineProperty(out, i, { value, writable: true, enumerable: true, configurable: true });
    }
    return out;
  };
  const named = (/** @type {{ brand: string, version: string }[]} */ list) =>
    copied(list, ({ brand, version }) => ({ brand, version }));
  const listed = (/** @type {{ brand: string, version: string }[]} */ list) =>
    list.map(({ brand, version }) => `${brand}/${version}`).join();
  if (hints && data && listed(data.brands) !== listed(hints.brands)) {
    /** @type {Record<string, () => unknown>} */
    const hinted = create(null);
    hinted.brands = () => named(hints.brands);
    hinted.fullVersionList = () => named(hints.fullVersionList);
    hinted.uaFullVersion = () => hints.fullVersion;
    hinted.formFactors = () => copied(hints.formFactors, (/** @type {string} */ f) => f);
    for (const key of ["mobile", "platform", "platformVersion", "architecture", "model", "bitness", "wow64"]) {
      hinted[key] = () => hints[key];
    }
    /** @param {Record<string, unknown>} value  a native result, its own keys in their order */
    const hint = (value) => {
      const names = keys(value);
      for (let i = 0; i < names.length; i++) {
        const key = /** @type {string} */ (names[i]);
        const made = hinted[key];
        if (made) value[key] = made();
      }
      return value;
    };
    const proto = realm.NavigatorUAData?.prototype;
    getter(proto, "brands", () => freeze(named(hints.brands)));
    getter(proto, "mobile", () => hints.mobile);
    getter(proto, "platform", () => hints.platform);
    method(proto, "toJSON", (_, value) => hint(value));
    method(proto, "getHighEntropyValues", (_, value) => apply(then, value, [hint]));
  }

  // A GPU's names where the software renderer's (SwiftShader, llvmpipe) would show.
  const [VENDOR, RENDERER] = [0x9245, 0x9246];
  for (const context of [realm.WebGLRenderingContext, realm.WebGL2RenderingContext]) {
    method(context?.prototype, "getParameter", ([name], value) => {
      if (name === VENDOR) return profile.webgl[0];
      if (name === RENDERER) return profile.webgl[1];
      return value;
    });
  }
})
