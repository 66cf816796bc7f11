// Puts user-browser.js (beside this file) at the top of a built page, before any
// script of the app's: `node user-browser-inject.mjs dist/index.html`. A page
// without a <head> gets it first. Run by the e2e step's server command.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const page = process.argv[2];
if (!page || !fs.existsSync(page)) {
  console.error(`user-browser: no page at ${page} (the e2e run goes on without it)`);
  process.exit(0);
}
const script = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "user-browser.js"), "utf8");
const tag = `<script>${script.replaceAll("</script", "<\\/script")}</script>`;
const html = fs.readFileSync(page, "utf8");
const head = /<head(\s[^>]*)?>/i.exec(html);
const at = head ? head.index + head[0].length : 0;
fs.writeFileSync(page, html.slice(0, at) + tag + html.slice(at));
