// The hidden specs' helpers: the e2e command given our Playwright config, the e2e
// config itself, the walk of a spec folder and the e2e port.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { E2E_CONFIG, e2ePort, walkSpecs, withE2eConfig, writeE2eConfig } from "../../../pytest_reactbench/verifier/grader/specs.mjs";

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
      for (const variable of ["REACTBENCH_E2E_PORT", "REACTBENCH_E2E_OUTPUT", "REACTBENCH_E2E_USER_AGENT"]) {
        assert.ok(source.includes(`process.env.${variable}`), variable);
      }
      assert.ok(source.includes("wait: { stdout: /Local:\\s+https?:\\/\\// }"));
      assert.ok(source.includes('ignoreDefaultArgs: ["--enable-automation"]'));
      // The build goes where the preview serves from, with the page script put first.
      assert.ok(source.includes("vite build --logLevel warn --outDir dist && node /tmp/reactbench-room/user-browser-inject.mjs dist/index.html"));
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

describe("user-browser-inject", () => {
  const inject = fileURLToPath(new URL("../../../pytest_reactbench/verifier/grader/user-browser-inject.mjs", import.meta.url));
  test("the page script goes first in <head>, before the app's scripts, and removes itself", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-inject-"));
    try {
      const page = path.join(dir, "index.html");
      fs.writeFileSync(page, '<!doctype html><html><head lang="en"><script type="module" src="/a.js"></script></head></html>');
      const ran = spawnSync("node", [inject, page], { encoding: "utf8" });
      assert.equal(ran.status, 0, ran.stderr);
      const html = fs.readFileSync(page, "utf8");
      assert.ok(html.startsWith('<!doctype html><html><head lang="en"><script>'));
      assert.ok(html.indexOf("outerHeight") < html.indexOf('src="/a.js"'));
      assert.ok(html.includes("document.currentScript.remove()"));
      assert.equal(html.match(/<\/script>/g)?.length, 2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("no page: said, and the run goes on", () => {
    const ran = spawnSync("node", [inject, "/nowhere/index.html"], { encoding: "utf8" });
    assert.equal(ran.status, 0);
    assert.match(ran.stderr, /no page at \/nowhere\/index.html/);
  });
});
