// Preloaded into every Node process of the base image and those built on it
// (NODE_OPTIONS): if the working directory can load playwright-core, make sure the
// browser directories of its revision point at the system's Chromium, so Playwright
// finds a browser without a download (none is possible offline). Cheap: a resolve and
// a few stats. playwright-probe.cjs calls linkBrowsers for another directory.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const FFMPEG = process.env.FFMPEG_PATH || "/usr/bin/ffmpeg";

// Every layout Playwright has used for the two Chromium builds it launches, and for
// the ffmpeg it records videos with (`playwright install chromium` fetches it too).
const LAYOUTS = {
  chromium: ["chrome-linux/chrome", "chrome-linux64/chrome"],
  "chromium-headless-shell": [
    "chrome-linux/headless_shell",
    "chrome-headless-shell-linux64/chrome-headless-shell",
  ],
  ffmpeg: ["ffmpeg-linux"],
};
const DIRS = { chromium: "chromium", "chromium-headless-shell": "chromium_headless_shell", ffmpeg: "ffmpeg" };
const BINARIES = { chromium: CHROMIUM, "chromium-headless-shell": CHROMIUM, ffmpeg: FFMPEG };

function link(target, binary) {
  if (fs.existsSync(target)) return;
  fs.mkdirSync(path.dirname(target), { recursive: true });
  try {
    fs.symlinkSync(binary, target);
  } catch (error) {
    if (error.code !== "EEXIST") throw error;
  }
}

// playwright-core is often a transitive dependency (pnpm keeps those out of reach):
// follow @playwright/test -> playwright -> playwright-core.
function findCore(start) {
  let from = start;
  for (const name of ["@playwright/test", "playwright", "playwright-core"]) {
    try {
      from = path.dirname(require.resolve(`${name}/package.json`, { paths: [from] }));
      if (name === "playwright-core") return from;
    } catch {
      if (name !== "@playwright/test" && name !== "playwright") return null;
    }
  }
  return null;
}

// Links the browsers of the Playwright that `start` resolves; true if there was one.
function linkBrowsers(start) {
  const root = process.env.PLAYWRIGHT_BROWSERS_PATH;
  const core = root && fs.existsSync(CHROMIUM) ? findCore(start) : null;
  if (!core) return false;
  const manifest = path.join(core, "browsers.json");
  const { browsers } = JSON.parse(fs.readFileSync(manifest, "utf8"));
  for (const browser of browsers) {
    const layouts = LAYOUTS[browser.name];
    if (!layouts || !fs.existsSync(BINARIES[browser.name])) continue;
    const dir = path.join(root, `${DIRS[browser.name]}-${browser.revision}`);
    for (const layout of layouts) link(path.join(dir, layout), BINARIES[browser.name]);
    fs.writeFileSync(path.join(dir, "INSTALLATION_COMPLETE"), "");
  }
  return true;
}

try {
  linkBrowsers(process.cwd());
} catch {
  // No playwright-core here, or a read-only tree: nothing to do.
}

module.exports = { linkBrowsers };
