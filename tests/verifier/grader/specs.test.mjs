// The hidden specs' helpers: the e2e command given our Playwright config, the e2e
// config itself and its two profiles, the guard the e2e specs import, the walk of a
// spec folder and the e2e port; what the profiles say the browser is; the page script
// user-browser.js, and the guard's judgment of pixels.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import vm from "node:vm";
import zlib from "node:zlib";

import { testKey } from "../../../pytest_reactbench/verifier/grader/reports.mjs";
import {
  E2E_CONFIG, E2E_GUARD, E2E_PROFILES, browserIdentity, e2ePort, guardE2eSpecs, profileGaps, walkSpecs, withE2eConfig,
  writeE2eConfig,
} from "../../../pytest_reactbench/verifier/grader/specs.mjs";

describe("withE2eConfig", () => {
  test("`playwright test` gets our config, in place of the one it names", () => {
    assert.equal(withE2eConfig("pnpm exec playwright test"), `pnpm exec playwright test -c ${E2E_CONFIG}`);
    assert.equal(withE2eConfig("npx playwright  test --config=pw.config.ts --project=chromium"),
      `npx playwright  test -c ${E2E_CONFIG} --project=chromium`);
    assert.equal(withE2eConfig("playwright test -c e2e/pw.ts e2e/a.spec.ts"), `playwright test -c ${E2E_CONFIG} e2e/a.spec.ts`);
  });

  test("any other command is left as it is", () => {
    assert.equal(withE2eConfig("pnpm run e2e"), "pnpm run e2e");
  });
});

describe("writeE2eConfig", () => {
  test("the app's config with our port, output, user agent and browser flags", () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), "grader-e2e-"));
    try {
      writeE2eConfig(app);
      const file = path.join(app, E2E_CONFIG);
      assert.equal(fs.statSync(file).mode & 0o777, 0o644);
      const source = fs.readFileSync(file, "utf8");
      assert.match(source, /^import base from "\.\/playwright\.config\.ts";$/m);
      for (const variable of ["REACTBENCH_E2E_PORT", "REACTBENCH_E2E_OUTPUT", "REACTBENCH_E2E_BROWSER"]) {
        assert.ok(source.includes(`process.env.${variable}`), variable);
      }
      assert.ok(source.includes("wait: { stdout: /Local:\\s+https?:\\/\\// }"));
      assert.ok(source.includes('ignoreDefaultArgs: ["--enable-automation"]'));
      // The build goes where the preview serves from, with the page script put first.
      assert.ok(source.includes("vite build --logLevel warn --sourcemap hidden --outDir dist \` +"));
      assert.ok(source.includes("vite preview --outDir dist --port ${port} --strictPort"));
      assert.ok(source.includes('"--enable-unsafe-swiftshader"'));
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  });
});

describe("walkSpecs and e2ePort", () => {
  test("every file of a spec folder, under its name", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-specs-"));
    try {
      for (const rel of ["src/a.test.ts", "src/deep/b.test.ts", "src/__verifier__/c.ts"]) {
        fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
        fs.writeFileSync(path.join(dir, rel), "x");
      }
      assert.deepEqual(walkSpecs(path.join(dir, "src"), "src").sort(),
        ["src/__verifier__/c.ts", "src/a.test.ts", "src/deep/b.test.ts"]);
      // A spec at the top of the specs folder is a part of its own.
      fs.writeFileSync(path.join(dir, "root.test.ts"), "x");
      assert.deepEqual(walkSpecs(path.join(dir, "root.test.ts"), "root.test.ts"), ["root.test.ts"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the port is below the kernel's range for outgoing connections", () => {
    let low = 32768;
    try {
      low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low;
    } catch {}
    for (let i = 0; i < 50; i++) {
      const port = Number(e2ePort());
      assert.ok(Number.isInteger(port) && port >= Math.min(10000, low - 1000) && port < low, String(port));
    }
  });
});

describe("the e2e guard and the profiles", () => {
  test("two profiles of each project, fake media devices, the guard beside the config", () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), "grader-e2e-"));
    try {
      writeE2eConfig(app);
      const source = fs.readFileSync(path.join(app, E2E_CONFIG), "utf8");
      for (const profile of E2E_PROFILES) assert.ok(source.includes(`name: "${profile}"`), profile);
      assert.ok(source.includes('"--use-fake-device-for-media-stream"'));
      assert.ok(source.includes('timezoneId: "America/New_York"') && source.includes('timezoneId: "Europe/Berlin"'));
      assert.ok(!source.includes("user-browser-inject"));
      const guard = fs.readFileSync(path.join(app, E2E_GUARD), "utf8");
      assert.equal(fs.statSync(path.join(app, E2E_GUARD)).mode & 0o777, 0o644);
      assert.ok(guard.startsWith("const USER_BROWSER = \"// Runs first in every realm"));
      assert.ok(guard.includes('export * from "@playwright/test";'));
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  });

  test("the room's copies of the e2e specs import the guard; nothing else changes", () => {
    const app = fs.mkdtempSync(path.join(os.tmpdir(), "grader-e2e-"));
    try {
      const e2e = path.join(app, "e2e");
      fs.mkdirSync(path.join(e2e, "deep"), { recursive: true });
      fs.writeFileSync(path.join(e2e, "a.spec.ts"),
        'import { test, expect } from "@playwright/test";\nimport type { Locator } from \'@playwright/test\';\n' +
        'import helper from "./helper";\nconst t = "@playwright/test";\n');
      fs.writeFileSync(path.join(e2e, "deep", "b.spec.js"),
        'const { test } = require("@playwright/test");\nexport { expect } from "@playwright/test";\n' +
        'const later = import("@playwright/test");\n');
      fs.writeFileSync(path.join(e2e, "notes.md"), 'import { test } from "@playwright/test";\n');
      guardE2eSpecs("e2e", app);
      assert.equal(fs.readFileSync(path.join(e2e, "a.spec.ts"), "utf8"),
        'import { test, expect } from "../reactbench.e2e.guard";\nimport type { Locator } from \'../reactbench.e2e.guard\';\n' +
        'import helper from "./helper";\nconst t = "@playwright/test";\n');
      assert.equal(fs.readFileSync(path.join(e2e, "deep", "b.spec.js"), "utf8"),
        'const { test } = require("../../reactbench.e2e.guard");\nexport { expect } from "../../reactbench.e2e.guard";\n' +
        'const later = import("../../reactbench.e2e.guard");\n');
      assert.equal(fs.readFileSync(path.join(e2e, "notes.md"), "utf8"), 'import { test } from "@playwright/test";\n');
      guardE2eSpecs("nowhere", app);  // no folder: nothing to do
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  });

  test("a test that did not pass under each profile of its project fails", () => {
    /** @param {string} project @param {string} status */
    const run = (project, status) => ({ projectName: project, results: [{ status }] });
    const report = {
      config: { rootDir: "/app/e2e" },
      suites: [{
        title: "a.spec.ts", file: "a.spec.ts",
        specs: [
          { title: "both", tests: [run("desktop", "passed"), run("laptop", "passed")] },
          { title: "one", tests: [run("desktop", "passed")] },
          { title: "fails on one", tests: [run("desktop", "passed"), run("laptop", "failed")] },
        ],
        suites: [{
          title: "group", specs: [
            { title: "per project", file: "a.spec.ts", tests: [run("chromium-desktop", "passed"), run("chromium-laptop", "passed"),
              run("mobile-desktop", "passed"), run("mobile-laptop", "timedOut")] },
          ],
        }],
      }],
    };
    assert.deepEqual([...profileGaps(report)], [
      [testKey("e2e/a.spec.ts", ["one"]), "failed under the laptop profile"],
      [testKey("e2e/a.spec.ts", ["fails on one"]), "failed under the laptop profile"],
      [testKey("e2e/a.spec.ts", ["group", "per project"]), "failed under the laptop profile"],
    ]);
    assert.deepEqual([...profileGaps(null)], []);
  });
});

describe("browserIdentity", () => {
  /** @param {{ brand: string, version: string }[]} list */
  const said = (list) => list.map(({ brand, version }) => `${brand}/${version}`);

  test("the brand list is the one Chrome makes for the major version", () => {
    // As Chrome 139 sends it, and as Chromium's own tests have it for 84.
    assert.deepEqual(said(browserIdentity("139.0.7258.154").userAgentMetadata.brands),
      ["Not;A=Brand/99", "Google Chrome/139", "Chromium/139"]);
    assert.deepEqual(said(browserIdentity("84.0.4147.89").userAgentMetadata.brands),
      ["Not;A=Brand/8", "Chromium/84", "Google Chrome/84"]);
    // The brands a Chromium build of 156 shows of itself, with Google Chrome's put in.
    assert.deepEqual(said(browserIdentity("156.0.8078.129").userAgentMetadata.brands),
      ["Not:A-Brand/8", "Chromium/156", "Google Chrome/156"]);
  });

  test("the full versions are the browser's own, the agent string Chrome's reduced one", () => {
    const { userAgent, userAgentMetadata } = browserIdentity("156.0.8078.129");
    assert.equal(userAgent,
      "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36");
    assert.equal(userAgentMetadata.fullVersion, "156.0.8078.129");
    assert.deepEqual(said(userAgentMetadata.fullVersionList),
      ["Not:A-Brand/8.0.0.0", "Chromium/156.0.8078.129", "Google Chrome/156.0.8078.129"]);
    // As Chromium on Linux says it.
    assert.deepEqual([userAgentMetadata.platform, userAgentMetadata.platformVersion, userAgentMetadata.architecture,
      userAgentMetadata.bitness, userAgentMetadata.model, userAgentMetadata.wow64, userAgentMetadata.mobile],
    ["Linux", "", "x86", "64", "", false, false]);
    // A bake of an older grader recorded the major alone.
    assert.equal(browserIdentity("156").userAgentMetadata.fullVersion, "156.0.0.0");
  });
});

describe("user-browser.js", () => {
  const source = fs.readFileSync(
    fileURLToPath(new URL("../../../pytest_reactbench/verifier/grader/user-browser.js", import.meta.url)), "utf8");
  const profile = { frame: [16, 87], taskbar: 40, webgl: ["Vendor Inc.", "A GPU"] };

  /** A realm of its own, with a WebGL context whose natives are plain functions. */
  function realm() {
    const context = vm.createContext({});
    vm.runInContext(`
      globalThis.WebGLRenderingContext = class WebGLRenderingContext {};
      Object.defineProperty(WebGLRenderingContext.prototype, "getParameter", {
        value: { getParameter(name) {
          if (!(this instanceof WebGLRenderingContext)) throw new TypeError("Illegal invocation");
          return "native " + name;
        } }.getParameter,
        writable: true, enumerable: true, configurable: true,
      });
    `, context);
    const before = vm.runInContext("Object.getOwnPropertyDescriptor(WebGLRenderingContext.prototype, 'getParameter')", context);
    vm.runInContext(`(${source})(${JSON.stringify(profile)})`, context, { filename: "user-browser.js" });
    return { context, before };
  }

  test("the GPU's names, and every other parameter as the browser has it", () => {
    const { context } = realm();
    assert.deepEqual([...vm.runInContext(
      "const gl = new WebGLRenderingContext(); [gl.getParameter(0x9245), gl.getParameter(0x9246), gl.getParameter(7)]",
      context)], ["Vendor Inc.", "A GPU", "native 7"]);
  });

  test("a replaced function looks native by every cheap test", () => {
    const { context, before } = realm();
    const seen = vm.runInContext(`
      const fn = WebGLRenderingContext.prototype.getParameter;
      const toString = Function.prototype.toString;
      const descriptor = Object.getOwnPropertyDescriptor(WebGLRenderingContext.prototype, "getParameter");
      let error;
      try { fn.call({}, 1); } catch (e) { error = e; }
      let tsError;
      try { toString.call({}); } catch (e) { tsError = e; }
      ({
        source: toString.call(fn), own: toString.call(toString), viaItself: toString.toString(),
        name: fn.name, length: fn.length, hasPrototype: "prototype" in fn || "prototype" in toString,
        keys: Object.getOwnPropertyNames(fn).join(), toStringKeys: Object.getOwnPropertyNames(toString).join(),
        enumerable: descriptor.enumerable, writable: descriptor.writable, configurable: descriptor.configurable,
        error: error instanceof TypeError && error.message, stack: String(error && error.stack),
        tsError: tsError instanceof TypeError, tsStack: String(tsError && tsError.stack),
        plain: toString.call(function mine(a) { return a; }),
      })`, context);
    assert.equal(seen.source, "function getParameter() { [native code] }");
    assert.equal(seen.own, "function toString() { [native code] }");
    assert.equal(seen.viaItself, "function toString() { [native code] }");
    assert.equal(seen.name, "getParameter");
    assert.equal(seen.length, 1);
    assert.equal(seen.hasPrototype, false);
    assert.equal(seen.keys, "length,name");
    assert.equal(seen.toStringKeys, "length,name");
    assert.deepEqual([seen.enumerable, seen.writable, seen.configurable],
      [before.enumerable, before.writable, before.configurable]);
    assert.equal(seen.error, "Illegal invocation");
    assert.equal(seen.tsError, true);
    // The stack of a foreign receiver's error names no frame of the script's.
    assert.ok(!seen.stack.includes("user-browser.js"), seen.stack);
    assert.ok(!seen.tsStack.includes("user-browser.js"), seen.tsStack);
    assert.equal(seen.plain, "function mine(a) { return a; }");
  });
});

describe("user-browser.js, client hints", () => {
  const source = fs.readFileSync(
    fileURLToPath(new URL("../../../pytest_reactbench/verifier/grader/user-browser.js", import.meta.url)), "utf8");
  const { userAgentMetadata } = browserIdentity("156.0.8078.129");
  const profile = { frame: [0, 0], taskbar: 0, webgl: ["", ""], userAgentMetadata };

  /**
   * A realm whose NavigatorUAData says `brands` (its natives plain functions, each
   * refusing a foreign receiver), with user-browser.js run in it.
   * @param {{ brand: string, version: string }[]} brands
   */
  function realm(brands) {
    const context = vm.createContext({ brands });
    vm.runInContext(`
      globalThis.NavigatorUAData = class NavigatorUAData {};
      const own = (receiver) => {
        if (!(receiver instanceof NavigatorUAData)) throw new TypeError("Illegal invocation");
      };
      const copy = () => brands.map(({ brand, version }) => ({ brand, version }));
      const proto = NavigatorUAData.prototype;
      const natives = {
        get brands() { own(this); return Object.freeze(copy()); },
        get mobile() { own(this); return false; },
        get platform() { own(this); return "Linux"; },
        toJSON() { own(this); return { brands: copy(), mobile: false, platform: "Linux" }; },
        getHighEntropyValues(hints) {
          try { own(this); } catch (error) { return Promise.reject(error); }
          return Promise.resolve({ architecture: "x86", brands: copy(), fullVersionList: copy(), mobile: false,
            platform: "Linux", uaFullVersion: "156.0.8078.129" });
        },
      };
      for (const name of Object.keys(natives)) {
        const found = Object.getOwnPropertyDescriptor(natives, name);
        Object.defineProperty(proto, name, { ...found, enumerable: true, configurable: true });
      }
      globalThis.navigator = { userAgentData: new NavigatorUAData() };
    `, context);
    const before = vm.runInContext("Object.getOwnPropertyDescriptor(NavigatorUAData.prototype, 'brands')", context);
    vm.runInContext(`(${source})(${JSON.stringify(profile)})`, context, { filename: "user-browser.js" });
    return { context, before };
  }

  const native = [{ brand: "Not:A-Brand", version: "8" }, { brand: "Chromium", version: "156" }];

  test("where the realm reads the browser's own brands, it reads the profile's", async () => {
    const { context } = realm(native);
    const seen = await vm.runInContext(`(async () => {
      const d = navigator.userAgentData;
      // The realm's own code, run after the script, replaces what it can, and sees
      // whether anything of ours runs through it.
      const touched = [];
      Array.prototype.map = () => { touched.push("map"); return []; };
      Object.defineProperty(Array.prototype, "0", { set() { touched.push("set"); }, configurable: true });
      Object.defineProperty(Array.prototype, "constructor", { get() { touched.push("species"); return Array; },
        configurable: true });
      const [a, b] = [d.brands, d.brands];
      const json = JSON.stringify(d.toJSON());
      delete Array.prototype[0];
      delete Array.prototype.constructor;
      const high = await d.getHighEntropyValues(["fullVersionList", "uaFullVersion"]);
      let refused;
      await NavigatorUAData.prototype.getHighEntropyValues.call({}, []).catch((e) => { refused = e.message; });
      return { brands: JSON.stringify(a), fresh: a !== b && a[0] !== b[0], frozen: Object.isFrozen(a),
        json, touched: touched.join(), keys: Object.keys(high).join(), full: JSON.stringify(high.fullVersionList),
        version: high.uaFullVersion, refused,
        source: Function.prototype.toString.call(Object.getOwnPropertyDescriptor(NavigatorUAData.prototype, "brands").get) };
    })()`, context);
    assert.equal(seen.brands, JSON.stringify(userAgentMetadata.brands));
    assert.equal(seen.fresh, true);
    assert.equal(seen.frozen, true);
    assert.equal(seen.touched, "");
    assert.equal(seen.json, JSON.stringify({ brands: userAgentMetadata.brands, mobile: false, platform: "Linux" }));
    // The native result's keys, in its order; the values the profile's.
    assert.equal(seen.keys, "architecture,brands,fullVersionList,mobile,platform,uaFullVersion");
    assert.equal(seen.full, JSON.stringify(userAgentMetadata.fullVersionList));
    assert.equal(seen.version, "156.0.8078.129");
    assert.equal(seen.refused, "Illegal invocation");
    assert.equal(seen.source, "function get brands() { [native code] }");
  });

  test("where the browser's override reached the realm, nothing is replaced", () => {
    const { context, before } = realm(userAgentMetadata.brands);
    const after = vm.runInContext("Object.getOwnPropertyDescriptor(NavigatorUAData.prototype, 'brands')", context);
    assert.equal(after.get, before.get);
  });
});

describe("the e2e guard's pixels", async () => {
  const guardSource = fs.readFileSync(
    fileURLToPath(new URL("../../../pytest_reactbench/verifier/grader/e2e-guard.js", import.meta.url)), "utf8")
    .replace(/^import \{[^}]*\} from "@playwright\/test";$/m, "const baseTest = { extend: () => ({}) }, baseExpect = { extend: () => ({}) };")
    .replace('export * from "@playwright/test";', "");
  const { decodePng, drawsSomething } = await import(`data:text/javascript,${encodeURIComponent(guardSource)}`);

  /**
   * A PNG of `width` x `height` RGB pixels from `pixel(x, y)`, filtered as `filter`.
   * @param {number} width @param {number} height @param {(x: number, y: number) => number[]} pixel @param {number} filter
   */
  function png(width, height, pixel, filter = 0) {
    const rows = [];
    for (let y = 0; y < height; y++) {
      const row = [filter];
      for (let x = 0; x < width; x++) {
        const [r = 0, g = 0, b = 0] = pixel(x, y);
        const [pr = 0, pg = 0, pb = 0] = filter === 1 && x ? pixel(x - 1, y) : filter === 2 && y ? pixel(x, y - 1) : [];
        row.push((r - pr) & 0xff, (g - pg) & 0xff, (b - pb) & 0xff);
      }
      rows.push(...row);
    }
    /** @param {string} type @param {Buffer} body */
    const chunk = (type, body) => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(body.length, 0);
      head.write(type, 4, "latin1");
      return Buffer.concat([head, body, Buffer.alloc(4)]);
    };
    const header = Buffer.alloc(13);
    header.writeUInt32BE(width, 0);
    header.writeUInt32BE(height, 4);
    header.set([8, 2, 0, 0, 0], 8);
    return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", header),
      chunk("IDAT", zlib.deflateSync(Buffer.from(rows))), chunk("IEND", Buffer.alloc(0))]);
  }

  test("a box of one colour draws nothing; text, a border or an icon does", () => {
    const white = () => [255, 255, 255];
    const text = (/** @type {number} */ x, /** @type {number} */ y) => (x % 7 < 2 && y > 4 && y < 14 ? [20, 20, 20] : [255, 255, 255]);
    const border = (/** @type {number} */ x, /** @type {number} */ y) => (x === 0 || y === 0 || x === 59 || y === 19 ? [118, 118, 118] : [239, 239, 239]);
    const faint = (/** @type {number} */ x) => (x % 2 ? [250, 250, 250] : [255, 255, 255]);
    for (const filter of [0, 1, 2]) {
      assert.equal(drawsSomething(decodePng(png(60, 20, white, filter))), false, `white ${filter}`);
      assert.equal(drawsSomething(decodePng(png(60, 20, text, filter))), true, `text ${filter}`);
      assert.equal(drawsSomething(decodePng(png(60, 20, border, filter))), true, `border ${filter}`);
      assert.equal(drawsSomething(decodePng(png(60, 20, faint, filter))), false, `faint ${filter}`);
    }
    const decoded = decodePng(png(3, 2, (x, y) => [x * 10, y * 10, 7], 1));
    assert.deepEqual([...decoded.data], [0, 0, 7, 10, 0, 7, 20, 0, 7, 0, 10, 7, 10, 10, 7, 20, 10, 7]);
  });
});
