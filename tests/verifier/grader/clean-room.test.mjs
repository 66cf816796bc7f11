// The clean room's judgement of a submission's paths and files: pathRefusal and
// shadowed (pure), refusal and judge on a tree made here, and walk.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  isUtf8, judge, pathRefusal, refusal, shadowed, walk,
} from "../../../pytest_reactbench/verifier/grader/clean-room.mjs";
import { sizeLimit } from "../../../pytest_reactbench/verifier/grader/config.mjs";

const config = { sources: ["src"], test_like_allowed: /** @type {string[]} */ ([]) };
const SPEC = "test files, test setup and mocks belong to the verifier";

describe("pathRefusal", () => {
  test("admits source files under a source root, at any depth", () => {
    for (const file of ["src/App.tsx", "src/components/Button.tsx", "src/styles/app.css", "src/data.json"]) {
      assert.equal(pathRefusal(file, config), null, file);
    }
  });

  test("refuses what is outside the source roots, a root's name as a mere prefix included", () => {
    const two = { sources: ["src", "lib"], test_like_allowed: [] };
    assert.equal(pathRefusal("package.json", two), "outside the source roots (src, lib)");
    assert.equal(pathRefusal("srcx/App.tsx", config), "outside the source roots (src)");
    assert.equal(pathRefusal("lib/util.ts", two), null);
  });

  test("spec files, the hidden specs' folder, test setup and mocks belong to the verifier", () => {
    for (const file of ["src/App.test.tsx", "src/a.spec.mts", "src/__verifier__/hidden.ts", "src/x/__mocks__/fs.ts",
      "src/__tests__/a.ts", "src/setupTests.ts", "src/vitest.setup.js", "src/test-setup.tsx"]) {
      assert.equal(pathRefusal(file, config), SPEC, file);
    }
  });

  test("dotfiles and dot-folders, control characters and backslashes", () => {
    assert.equal(pathRefusal("src/.env", config), "dotfiles are not source");
    assert.equal(pathRefusal("src/.cache/a.ts", config), "dotfiles are not source");
    assert.equal(pathRefusal("src/a\u0001.ts", config), "control characters or backslashes in the name");
    assert.equal(pathRefusal("src/a\\b.ts", config), "control characters or backslashes in the name");
    assert.equal(pathRefusal("src/a\u007f.ts", config), "control characters or backslashes in the name");
  });

  test("bundler, TypeScript and package-manager configs, wherever they are", () => {
    const reason = "a bundler, TypeScript or package-manager config is never a source";
    for (const file of ["src/package.json", "src/vite.config.ts", "src/deep/tsconfig.app.json", "src/Global.D.MTS",
      "src/pnpm-lock.yaml"]) {
      assert.equal(pathRefusal(file, config), reason, file);
    }
  });

  test("type declarations are admitted, a CommonJS one too: the scan reads each as a module", () => {
    for (const file of ["src/vite-env.d.ts", "src/types/global.d.mts", "src/legacy.d.cts"]) {
      assert.equal(pathRefusal(file, config), null, file);
    }
  });

  test("test-like folders and names are admitted: the scan reads them under production rules", () => {
    for (const file of ["src/fixtures/user.ts", "src/i18n/it/labels.ts", "src/tools/labels.ts", "src/stories/Card.tsx",
      "src/Button.stories.tsx", "src/api.mock.ts", "src/karma.conf.js", "src/setupJest.ts"]) {
      assert.equal(pathRefusal(file, config), null, file);
    }
    // A spec is the verifier's, in a test-like folder or not.
    assert.equal(pathRefusal("src/fixtures/user.test.ts", config), SPEC);
  });

  test("code React Doctor does not analyse is refused by name, whatever the case of its extension", () => {
    for (const file of ["src/useTicker.JS", "src/App.Tsx", "src/legacy.cjs", "src/types.cts"]) {
      assert.match(/** @type {string} */ (pathRefusal(file, config)), /^code React Doctor does not analyse/, file);
    }
    assert.match(/** @type {string} */ (pathRefusal("src/vendor/chart.min.js", config)), /generated bundle/);
    assert.match(/** @type {string} */ (pathRefusal("src/__generated__/api.ts", config)), /generated bundle/);
  });
});

describe("sizeLimit", () => {
  test("code: its cap; data: twice the base's largest of its extension, within the floor and the ceiling", () => {
    const tree = new Map([["src/a.json", { size: 5 << 20 }], ["src/b.JSON", { size: 7 << 20 }],
      ["assets/video.webp", { size: 100 << 20 }], ["src/big.ts", { size: 1 << 20 }]]);
    assert.deepEqual(sizeLimit("src/x.ts", tree), { limit: 262144, why: "a code file's cap" });
    assert.equal(sizeLimit("src/x.json", tree).limit, 14 << 20);  // any case of the extension
    assert.equal(sizeLimit("src/x.css", tree).limit, 2 << 20);
    assert.deepEqual(sizeLimit("src/x.webp", tree), { limit: 32 << 20, why: "the most any data file may have" });
  });
});

describe("shadowed", () => {
  test("a new module beside one of the submission's that the bundler tries first or after", () => {
    const present = new Set(["src/App.tsx", "src/App.js"]);
    assert.equal(shadowed("src/App.js", new Map(), present, config), "src/App.tsx");
    assert.equal(shadowed("src/App.tsx", new Map(), present, config), "src/App.js");
  });

  test("a module alone is shadowed by nothing, and only the bundler's extensions count", () => {
    assert.equal(shadowed("src/App.tsx", new Map(), new Set(["src/App.tsx"]), config), null);
    assert.equal(shadowed("src/app.css", new Map(), new Set(["src/app.css", "src/app.ts"]), config), null);
    assert.equal(shadowed("src/App.tsx", new Map(), new Set(["src/App.test.tsx", "src/app.ts"]), config), null);
  });

  test("a source file of the base the submission deleted shadows nothing: a rename", () => {
    const tree = new Map([["src/util.js", { mode: "100644", id: "x" }]]);
    assert.equal(shadowed("src/util.ts", tree, new Set(["src/util.ts"]), config), null);
  });

  test("a base file the clean room puts back (it is not a source) shadows even when deleted", () => {
    const tree = new Map([["src/tsconfig.json", { mode: "100644", id: "x" }], ["src/types.d.ts", { mode: "100644", id: "y" }]]);
    assert.equal(shadowed("src/tsconfig.ts", tree, new Set(["src/tsconfig.ts"]), config), "src/tsconfig.json");
    // A declaration is a source: deleted, it stays deleted.
    assert.equal(shadowed("src/types.d.js", tree, new Set(["src/types.d.js"]), config), null);
  });
});

describe("refusal and judge on a tree", () => {
  /** @type {string} */
  let app;
  /** @param {string} rel @param {string | Buffer} content */
  const write = (rel, content) => {
    fs.mkdirSync(path.dirname(path.join(app, rel)), { recursive: true });
    fs.writeFileSync(path.join(app, rel), content);
  };
  const tree = new Map([["src/Counter.tsx", { mode: "100644", id: "base", size: 36 }],
    ["src/App.js", { mode: "100644", id: "b", size: 18 }], ["src/icons/sprite.svg", { mode: "100644", id: "c", size: 3 << 20 }]]);
  /** @param {string} file @param {string[]} [others] */
  const judged = (file, others = []) => judge(file, config, tree, new Set([file, ...others]), app);

  before(() => {
    app = fs.mkdtempSync(path.join(os.tmpdir(), "grader-clean-room-"));
    write("src/Counter.tsx", "export const Counter = () => null;\n");
    write("src/notes.txt", "notes\n");
    // Data: a locale of 730 kB is under the floor (2 MiB); an SVG may be twice the base's largest.
    write("src/locales/it.json", `"${"x".repeat(730_000)}"`);
    write("src/big.json", Buffer.alloc((2 << 20) + 1, 0x20));
    write("src/icons/big.svg", Buffer.alloc((6 << 20) - 1, 0x20));
    write("src/icons/huge.svg", Buffer.alloc((6 << 20) + 1, 0x20));
    // Code: 256 KiB at most.
    write("src/table.ts", `export const t = 1;\n${"//".repeat(131072)}`);
    write("src/fits.ts", `${"x;\n".repeat(87381)}`);
    // Declarations and test-like paths are admitted (the scan reads them as modules).
    write("src/vite-env.d.ts", '/// <reference types="vite/client" />\n');
    write("src/tools/labels.ts", 'export const label = "Count";\n');
    // A data URI of 30 kB on one line: long lines, but admitted (the scan reads it padded).
    write("src/resetIcon.ts", `export const icon = "data:image/svg+xml;base64,${"A".repeat(30_000)}";\n`);
    write("src/dist/bundle.ts", "export {};\n");
    write("src/latin1.ts", Buffer.from([0x2f, 0x2f, 0x20, 0xe9, 0x0a]));
    // Minified as React Doctor tells it: a large file with long lines throughout.
    write("src/min.js", `${"a".repeat(1001)}\n`.repeat(25));
    // One long line (an inline SVG path) in an ordinary file is not minified.
    write("src/long.js", `${"a".repeat(1393)}\n${"b;\n".repeat(400)}`);
    write("src/short-min.js", `${"a".repeat(1001)}\n`);
    write("src/App.js", "export default 1;\n");
    write("src/App.tsx", "export default 2;\n");
    write("src/Counter.js", "export default 3;\n");
    fs.mkdirSync(path.join(app, "src", "folder.ts"));
    fs.symlinkSync("Counter.tsx", path.join(app, "src", "link.ts"));
  });
  after(() => fs.rmSync(app, { recursive: true, force: true }));

  test("an admissible source file is admitted", () => {
    for (const file of ["src/Counter.tsx", "src/locales/it.json", "src/icons/big.svg", "src/fits.ts", "src/long.js",
      "src/short-min.js", "src/min.js", "src/resetIcon.ts", "src/vite-env.d.ts", "src/tools/labels.ts"]) {
      assert.equal(judged(file), null, file);
    }
  });

  test("the path is judged first", () => {
    assert.equal(judged("README.md"), "outside the source roots (src)");
  });

  test("what the file is: a link, not a file, not a source type, too large", () => {
    assert.equal(judged("src/link.ts"), "symlinks are not source");
    assert.equal(judged("src/folder.ts"), "not a regular file");
    assert.equal(judged("src/notes.txt"), "not a source file type");
    assert.equal(judged("src/big.json"),
      "larger than 2097152 bytes (the least a data file may have; 2 times the base's largest .json file is less)");
    assert.equal(judged("src/icons/huge.svg"), "larger than 6291456 bytes (2 times the base's largest .svg file)");
    assert.equal(judged("src/table.ts"), "larger than 262144 bytes (a code file's cap)");
    assert.equal(judged("src/dist/bundle.ts"), "in a folder React Doctor does not scan");
  });

  test("code that is not UTF-8 text", () => {
    assert.equal(judged("src/latin1.ts"), "code that is not UTF-8 text");
  });

  test("a new module beside another is refused; a base file is not held to it", () => {
    assert.equal(judged("src/App.tsx", ["src/App.js"]),
      "a new module beside src/App.js that the bundler would resolve instead");
    assert.equal(judged("src/App.js", ["src/App.tsx"]), null);  // in the base tree
    assert.equal(judged("src/Counter.js", ["src/Counter.tsx"]),
      "a new module beside src/Counter.tsx that the bundler would resolve instead");
  });

  test("a file that cannot be read is refused on its own: judge says why, refusal throws", () => {
    assert.equal(judged("src/gone.ts"), "cannot be read (ENOENT)");
    assert.throws(() => refusal("src/gone.ts", config, tree, new Set(), app), { code: "ENOENT" });
  });
});

describe("walk", () => {
  test("every file but the top .git and node_modules; names that are not UTF-8 apart, as bytes", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "grader-walk-"));
    try {
      for (const rel of [".git/HEAD", "node_modules/x/index.js", "src/node_modules/kept.ts", "src/a/b.ts", ".env"]) {
        fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
        fs.writeFileSync(path.join(dir, rel), "x");
      }
      const raw = Buffer.concat([Buffer.from(`${dir}/src/`), Buffer.from([0xff, 0x61, 0x2e, 0x74, 0x73])]);
      fs.writeFileSync(raw, "x");
      fs.mkdirSync(Buffer.concat([Buffer.from(`${dir}/`), Buffer.from([0xfe])]));
      const { files, unnamed } = walk(dir);
      assert.deepEqual(files.sort(), [".env", "src/a/b.ts", "src/node_modules/kept.ts"]);
      assert.deepEqual(unnamed.map((b) => b.toString("hex")).sort(),
        [Buffer.concat([Buffer.from("src/"), Buffer.from([0xff, 0x61, 0x2e, 0x74, 0x73])]).toString("hex"), "fe"]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("isUtf8", () => {
    assert.equal(isUtf8(Buffer.from("héllo ✓")), true);
    assert.equal(isUtf8(Buffer.from([0x68, 0xe9])), false);
    assert.equal(isUtf8(Buffer.from([0xc3])), false);  // a sequence cut short
  });
});
