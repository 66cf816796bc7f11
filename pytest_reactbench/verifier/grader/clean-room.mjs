// The clean room: /app rebuilt from the base commit plus the admissible part of the
// submission (source files under the task's source roots; the rules are in
// config.mjs and admission.json). Every other change is refused, with its reason,
// and the base's file comes back. A correct solution is never refused for where the
// scan would not look: a test-like folder or name, a type declaration or long lines
// are scanned under production rules instead (doctor.mjs, copyForScan).
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import {
  APP, LOGS, STATE,
  CODE_EXTENSIONS, CONFIG_NAME, DECLARATION, GENERATED, LINTABLE, RESOLVED_EXTENSIONS, SCAN_SKIPPED_DIRS,
  SOURCE_EXTENSIONS, SPEC_PATH, sizeLimit,
} from "./config.mjs";
import { git, run } from "./process.mjs";

/**
 * @import { Config } from "./config.mjs"
 */

/**
 * The base commit's files: path -> mode, blob id and size (bytes).
 * @typedef {Map<string, { mode: string, id: string, size?: number }>} BaseTree
 */

/**
 * A path of the submission's that the clean room did not take.
 * @typedef {object} Refused
 * @property {string} path
 * @property {string} reason
 */

/**
 * What the clean room made of the submission.
 * @typedef {object} Submission
 * @property {Refused[]} refused
 * @property {string[]} changed  the graded tree's changes from the base commit
 */

/**
 * The admission rules a path is judged by: the task's source roots.
 * @typedef {Pick<Config, "sources">} Admission
 */

/**
 * Whether these bytes are UTF-8 (a name, or a file's content).
 * @param {Buffer} name
 */
export const isUtf8 = (name) => Buffer.from(name.toString("utf8"), "utf8").equals(name);

/**
 * Every file under `dir`, as paths relative to it. Names that are not UTF-8 cannot
 * be graded (nor named in a report): they are listed apart, as raw bytes.
 * @param {string | Buffer} dir
 * @param {Buffer} [prefix]
 * @param {{ files: string[], unnamed: Buffer[] }} [out]
 * @returns {{ files: string[], unnamed: Buffer[] }}
 */
export function walk(dir, prefix = Buffer.alloc(0), out = { files: [], unnamed: [] }) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, encoding: "buffer" })) {
    const rel = prefix.length ? Buffer.concat([prefix, Buffer.from("/"), entry.name]) : entry.name;
    const name = entry.name.toString("utf8");
    if (!prefix.length && (name === ".git" || name === "node_modules")) continue;
    if (!isUtf8(entry.name)) out.unnamed.push(rel);
    else if (entry.isDirectory()) walk(Buffer.concat([Buffer.from(dir), Buffer.from("/"), entry.name]), rel, out);
    else out.files.push(rel.toString("utf8"));
  }
  return out;
}

/**
 * The git blob id of a file (of a link: of its target's name).
 * @param {string} file
 */
function blobId(file) {
  const stat = fs.lstatSync(file);
  const content = stat.isSymbolicLink() ? Buffer.from(fs.readlinkSync(file)) : fs.readFileSync(file);
  return crypto.createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
}

/**
 * @param {string} base  a commit
 * @returns {BaseTree}
 */
function baseTree(base) {
  /** @type {BaseTree} */
  const tree = new Map();
  for (const line of git("ls-tree", "-r", "-l", "-z", base).split("\0")) {
    if (!line) continue;
    // "mode type id size\tpath", every one (the size padded; "-" for a submodule).
    const tab = line.indexOf("\t");
    const [mode, , id, size] = /** @type {[string, string, string, string]} */ (line.slice(0, tab).split(/ +/));
    tree.set(line.slice(tab + 1), { mode, id, size: Number(size) || 0 });
  }
  return tree;
}

/**
 * Why a path may not carry the submission's content (null: it may).
 * @param {string} file  relative to /app
 * @param {Admission} config
 * @returns {string | null}
 */
export function pathRefusal(file, config) {
  const underRoot = config.sources.some((root) => file === root || file.startsWith(`${root}/`));
  if (!underRoot) return `outside the source roots (${config.sources.join(", ")})`;
  if (SPEC_PATH.test(file)) return "test files, test setup and mocks belong to the verifier";
  const parts = file.split("/");
  if (parts.some((part) => part.startsWith("."))) return "dotfiles are not source";
  if (/[\u0000-\u001f\u007f\\]/.test(file)) return "control characters or backslashes in the name";
  const name = /** @type {string} */ (parts.at(-1));
  // A type declaration carries no code the build runs; the scan reads it as a module.
  const declaration = DECLARATION.test(name);
  if (CONFIG_NAME.test(name) && !declaration) return "a bundler, TypeScript or package-manager config is never a source";
  const ext = path.extname(name);
  if (CODE_EXTENSIONS.has(ext.toLowerCase()) && !LINTABLE.test(name) && !declaration) {
    return `code React Doctor does not analyse (${ext}: it reads .ts .tsx .js .jsx .mts .mjs, lower case)`;
  }
  if (CODE_EXTENSIONS.has(ext.toLowerCase()) && GENERATED.test(file)) {
    return "a generated bundle (.min.js, __generated__/): React Doctor does not analyse it";
  }
  return null;
}

/**
 * The module a new file would shadow or be shadowed by: a sibling of another
 * extension the bundler tries (null: none).
 * @param {string} file  a file of the submission's, relative to /app
 * @param {BaseTree | Map<string, unknown>} tree  the base commit's files
 * @param {Set<string>} present  the submission's files
 * @param {Admission} config
 * @returns {string | null}
 */
export function shadowed(file, tree, present, config) {
  const ext = path.extname(file);
  if (!RESOLVED_EXTENSIONS.includes(ext)) return null;
  const stem = file.slice(0, -ext.length);
  for (const other of RESOLVED_EXTENSIONS) {
    const sibling = stem + other;
    if (other === ext) continue;
    // A base module the submission deleted stays deleted when it is a source file,
    // and shadows nothing then (a rename, `index.js` to `index.ts`); anything else of
    // the base comes back.
    if (present.has(sibling) || (tree.has(sibling) && pathRefusal(sibling, config) !== null)) return sibling;
  }
  return null;
}

/**
 * Why a file of the submission's is refused (null: it is admitted): its path, then
 * what it is on disk.
 * @param {string} file  relative to `app`
 * @param {Admission} config
 * @param {BaseTree} tree  the base commit's files
 * @param {Set<string>} present  the submission's files
 * @param {string} [app]  the tree the submission is in (/app)
 * @returns {string | null}
 */
export function refusal(file, config, tree, present, app = APP) {
  const byPath = pathRefusal(file, config);
  if (byPath) return byPath;
  const full = path.join(app, file);
  const stat = fs.lstatSync(full);
  if (stat.isSymbolicLink()) return "symlinks are not source";
  if (!stat.isFile()) return "not a regular file";
  const ext = path.extname(file).toLowerCase();
  if (!SOURCE_EXTENSIONS.has(ext)) return "not a source file type";
  const { limit, why } = sizeLimit(file, tree);
  if (stat.size > limit) return `larger than ${limit} bytes (${why})`;
  if (file.split("/").slice(0, -1).some((part) => SCAN_SKIPPED_DIRS.has(part))) {
    return "in a folder React Doctor does not scan";
  }
  if (!tree.has(file)) {
    const twin = shadowed(file, tree, present, config);
    if (twin) return `a new module beside ${twin} that the bundler would resolve instead`;
  }
  if (CODE_EXTENSIONS.has(ext) && !isUtf8(fs.readFileSync(full))) return "code that is not UTF-8 text";
  return null;
}

/**
 * One path the clean room cannot handle is refused on its own, never the lot.
 * @param {string} file
 * @param {Admission} config
 * @param {BaseTree} tree
 * @param {Set<string>} present
 * @param {string} [app]
 * @returns {string | null}
 */
export function judge(file, config, tree, present, app = APP) {
  try {
    return refusal(file, config, tree, present, app);
  } catch (error) {
    const unreadable = /** @type {NodeJS.ErrnoException} */ (error);
    return `cannot be read (${unreadable.code ?? unreadable.message})`;
  }
}

/**
 * Remove a path and any folder it leaves empty up to /app.
 * @param {Buffer} rel
 */
function removeRefused(rel) {
  fs.rmSync(Buffer.concat([Buffer.from(`${APP}/`), Buffer.from(rel)]), { force: true, recursive: true });
}

/**
 * @param {string} [dir]
 * @param {boolean} [top]
 */
function pruneEmptyDirs(dir = APP, top = true) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (top && (entry.name === ".git" || entry.name === "node_modules")) continue;
    if (entry.isDirectory()) pruneEmptyDirs(path.join(dir, entry.name), false);
  }
  if (!top && !fs.readdirSync(dir).length) fs.rmdirSync(dir);
}

/**
 * Put /app/node_modules back: a link to the pristine dependencies.
 */
export function linkDependencies() {
  const pristine = path.join(STATE, "deps", "node_modules");
  const link = path.join(APP, "node_modules");
  fs.rmSync(link, { recursive: true, force: true });
  fs.symlinkSync(pristine, link);
}

/**
 * Rebuild /app as: the base commit, plus the submission's admissible changes.
 * @param {Config} config
 * @returns {Submission}
 */
export function cleanRoom(config) {
  const base = fs.readFileSync(path.join(STATE, "base-sha"), "utf8").trim();
  fs.rmSync(path.join(APP, ".git"), { recursive: true, force: true });
  fs.cpSync(path.join(STATE, "base-git"), path.join(APP, ".git"), { recursive: true });
  // An index of the base with no file's stat in it: what changed is found by content.
  // The bake's index would let git take a file rewritten with its size and times as
  // they were for the base's own.
  fs.rmSync(path.join(APP, ".git", "index"), { force: true });
  git("read-tree", base);
  fs.rmSync(path.join(APP, "node_modules"), { recursive: true, force: true });
  const tree = baseTree(base);
  const { files, unnamed } = walk(APP);
  /** @type {Refused[]} */
  const refused = [];
  for (const raw of unnamed) {
    refused.push({ path: raw.toString("utf8"), reason: "the name is not UTF-8" });
    removeRefused(raw);
  }
  const present = new Set(files);
  /** @type {string[]} */
  const restore = [];
  /** @type {string[]} */
  const admitted = [];
  for (const file of present) {
    const known = tree.get(file);
    let same = false;
    try {
      same = Boolean(known) && known?.id === blobId(path.join(APP, file));
    } catch {}
    if (same) continue;
    const reason = judge(file, config, tree, present);
    if (!reason) {
      admitted.push(file);
      continue;
    }
    refused.push({ path: file, reason });
    removeRefused(Buffer.from(file));
    if (known) restore.push(file);
  }
  for (const file of tree.keys()) {
    // A deleted source file is a legitimate change; anything else comes back.
    if (!present.has(file) && pathRefusal(file, config) !== null) restore.push(file);
  }
  // A refused file's folder must not stay behind where a base file or a spec goes.
  pruneEmptyDirs();
  restoreFromBase(base, restore);
  // With the base's ignore rules back, an admitted file they ignore would be skipped
  // by the scan (React Doctor lists files the way git does): refuse it.
  const ignored = run("git", ["check-ignore", "--no-index", "-z", "--stdin"], { input: admitted.join("\0") });
  const hidden = ignored.stdout.split("\0").filter(Boolean);
  for (const file of hidden) {
    refused.push({ path: file, reason: "ignored by the base's .gitignore: the scan would skip it" });
    fs.rmSync(path.join(APP, file), { force: true });
  }
  restoreFromBase(base, hidden.filter((f) => tree.has(f)));
  linkDependencies();
  git("add", "-A", "-N", ".");
  fs.writeFileSync(path.join(LOGS, "model.patch"), git("diff", "--binary", base));
  // -z: names exactly as they are, never quoted, so that they compare byte for byte
  // with what the scan analysed.
  const changed = git("diff", "--name-only", "--no-renames", "-z", base).split("\0").filter(Boolean);
  git("reset", "-q");
  return { refused, changed };
}

/**
 * Check these files out of the base commit, over whatever is there.
 * @param {string} base
 * @param {string[]} files
 */
function restoreFromBase(base, files) {
  if (!files.length) return;
  const result = run("git", ["checkout", base, "--pathspec-from-file=-", "--pathspec-file-nul"], {
    input: files.join("\0"),
  });
  if (result.code !== 0) throw new Error(`cannot restore base files: ${result.stderr}`);
}
