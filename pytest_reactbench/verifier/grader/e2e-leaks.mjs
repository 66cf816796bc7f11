// The e2e half of the leak watch: what the browser says is still live when an e2e test
// ends, named by the source files of the production build. The guard (e2e-guard.js)
// asks the browser through the DevTools protocol, never through page JavaScript; this
// module is the part of it that reads the build's source maps, and it is written into
// the guard's file (specs.mjs: writeE2eConfig) with its `export`s taken off.
//
// The build is made with hidden source maps (`vite build --sourcemap hidden`): the
// files hold no link to their maps, so the page sees the same bundle it would without,
// and the guard reads each map from the build folder by the script's path.

const VLQ = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/**
 * A source map's `mappings`, decoded: for each generated line, its segments as
 * [generated column, source index, original line, original column], in order.
 * @param {string} mappings
 * @returns {number[][][]}
 */
export function decodeMappings(mappings) {
  /** @type {number[][][]} */
  const lines = [];
  let source = 0;
  let line = 0;
  let column = 0;
  for (const text of String(mappings).split(";")) {
    /** @type {number[][]} */
    const segments = [];
    let generated = 0;
    for (const segment of text.split(",")) {
      if (!segment) continue;
      /** @type {number[]} */
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const char of segment) {
        const digit = VLQ.indexOf(char);
        if (digit < 0) break;
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
          continue;
        }
        fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
        value = 0;
        shift = 0;
      }
      const [dColumn, dSource, dLine, dOriginal] = fields;
      if (dColumn === undefined) continue;
      generated += dColumn;
      if (dSource !== undefined && dLine !== undefined && dOriginal !== undefined) {
        source += dSource;
        line += dLine;
        column += dOriginal;
        segments.push([generated, source, line, column]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

/**
 * The original source file of a place in a generated script (0-based line and column,
 * as the DevTools protocol gives them), an absolute path; null where the map says none.
 * @param {{ sources?: string[], sourceRoot?: string, mappings?: string }} map
 * @param {string} mapDir  the folder of the map file, against which its sources resolve
 * @param {number} line
 * @param {number} column
 * @param {(dir: string, ...parts: string[]) => string} resolve  path.resolve
 * @param {number[][][]} [decoded]  the map's mappings decoded once
 * @returns {string | null}
 */
export function originalFile(map, mapDir, line, column, resolve, decoded) {
  const lines = decoded ?? decodeMappings(map.mappings ?? "");
  const segments = lines[line] ?? [];
  let found = null;
  for (const segment of segments) {
    if (Number(segment[0]) > column) break;
    found = segment;
  }
  // A place before the line's first segment belongs to the segment that starts it.
  found ??= segments[0] ?? null;
  if (!found) return null;
  const source = map.sources?.[Number(found[1])];
  return typeof source === "string" ? resolve(mapDir, map.sourceRoot ?? "", source) : null;
}

/**
 * The React fiber root's key on its container element (`__reactContainer$<random>`),
 * among an element's own property names.
 * @param {string[]} names
 * @returns {string | null}
 */
export function reactContainerKey(names) {
  return names.find((name) => /^__reactContainer\$/.test(name)) ?? null;
}
