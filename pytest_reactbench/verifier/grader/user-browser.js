// Runs first in every page of the e2e run (the grader puts it at the top of the built
// index.html, and it removes itself): what a page reads cheaply to tell a headless
// browser from a user's desktop one reads as a user's. Browser UI around the viewport,
// a screen larger than the window with a taskbar, client hints that name the browser
// the user agent names, a GPU that is not a software renderer. Each replaced getter
// prints as native code.
(() => {
  const natives = new WeakMap();
  const realToString = Function.prototype.toString;
  const native = (fn, name) => {
    natives.set(fn, `function ${name}() { [native code] }`);
    return fn;
  };
  const toString = native(function toString() {
    return natives.has(this) ? natives.get(this) : realToString.call(this);
  }, "toString");
  Object.defineProperty(Function.prototype, "toString", { value: toString, writable: true, configurable: true });

  const getter = (target, prop, get) => {
    let owner = target;
    while (owner && !Object.getOwnPropertyDescriptor(owner, prop)) owner = Object.getPrototypeOf(owner);
    const found = owner && Object.getOwnPropertyDescriptor(owner, prop);
    if (!found || !found.configurable) return;
    Object.defineProperty(owner, prop, { ...found, get: native(get, `get ${prop}`) });
  };

  // A desktop window: its frame and toolbars around the page, on a 1920x1080 screen
  // with a taskbar (or the window's size, if larger).
  getter(window, "outerWidth", () => window.innerWidth + 16);
  getter(window, "outerHeight", () => window.innerHeight + 87);
  const screenWidth = () => Math.max(1920, window.innerWidth + 16);
  const screenHeight = () => Math.max(1080, window.innerHeight + 87 + 40);
  getter(window.screen, "width", screenWidth);
  getter(window.screen, "height", screenHeight);
  getter(window.screen, "availWidth", screenWidth);
  getter(window.screen, "availHeight", () => screenHeight() - 40);

  // Client hints that agree with the user agent: Chrome's brands, Chrome's version.
  const major = (/Chrome\/(\d+)/.exec(navigator.userAgent) || [])[1] || "130";
  const brands = [
    { brand: "Google Chrome", version: major },
    { brand: "Chromium", version: major },
    { brand: "Not?A_Brand", version: "99" },
  ];
  const hints = navigator.userAgentData;
  if (hints) {
    const proto = Object.getPrototypeOf(hints);
    getter(proto, "brands", () => brands.map((b) => ({ ...b })));
    const high = proto.getHighEntropyValues;
    if (typeof high === "function") {
      proto.getHighEntropyValues = native(function getHighEntropyValues(wanted) {
        return high.call(this, wanted).then((values) => ({
          ...values,
          brands: brands.map((b) => ({ ...b })),
          ...("fullVersionList" in values
            ? { fullVersionList: brands.map((b) => ({ brand: b.brand, version: `${b.version}.0.0.0` })) }
            : {}),
        }));
      }, "getHighEntropyValues");
    }
  }

  // A GPU's renderer where the software one (SwiftShader, llvmpipe) would show.
  const VENDOR = 0x9245;
  const RENDERER = 0x9246;
  for (const context of [window.WebGLRenderingContext, window.WebGL2RenderingContext]) {
    if (!context) continue;
    const real = context.prototype.getParameter;
    context.prototype.getParameter = native(function getParameter(name) {
      if (name === VENDOR) return "Google Inc. (Intel)";
      if (name === RENDERER) return "ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)";
      return real.call(this, name);
    }, "getParameter");
  }

  if (document.currentScript) document.currentScript.remove();
})();
