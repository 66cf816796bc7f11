// Launches Chromium through the Playwright a directory resolves (argument 1, default
// the working directory) and closes it: a bake step that proves an image can run its
// Playwright specs, so a missing browser fails the bake instead of a grade.
"use strict";
const path = require("node:path");

const from = path.resolve(process.argv[2] || process.cwd());
require("./playwright-chromium.cjs").linkBrowsers(from);
let playwright;
for (const name of ["@playwright/test", "playwright", "playwright-core"]) {
  try {
    playwright = require(require.resolve(name, { paths: [from] }));
    break;
  } catch {
    // try the next package name
  }
}
if (!playwright) {
  console.error(`playwright-probe: no Playwright can be loaded from ${from}`);
  process.exit(1);
}
playwright.chromium
  .launch()
  .then(async (browser) => {
    const page = await browser.newPage();
    await page.setContent("<p>ok</p>");
    const text = await page.textContent("p");
    await browser.close();
    if (text !== "ok") throw new Error(`the page read back ${JSON.stringify(text)}`);
    console.log(`playwright-probe: Chromium ${browser.version()} runs under ${from}`);
  })
  .catch((error) => {
    console.error(`playwright-probe: Chromium does not launch: ${error.message}`);
    process.exit(1);
  });
