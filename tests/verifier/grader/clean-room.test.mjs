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

const config = { sources: ["src"], test_like_allowed: /** @type {string[]} */ ([]) };
const SPEC = "test files, test setup and mocks belong to the verifier";
/** @param {string} by */
const testLikeBy = (by) => `React Doctor treats it as a test, story or tooling by ${by}: it would be scanned with most rules off`;

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

  test("bundler, TypeScript and package-manager configs and type declarations, wherever they are", () => {
    const reason = "a bundler, TypeScript or package-manager config is never a source";
    for (const file of ["src/package.json", "src/vite.config.ts", "src/deep/tsconfig.app.json", "src/types.d.ts",
      "src/Global.D.MTS", "src/pnpm-lock.yaml"]) {
      assert.equal(pathRefusal(file, config), reason, file);
    }
  });

  test("test-like folders and names, as React Doctor tells them, unless declared", () => {
    assert.equal(pathRefusal("src/fixtures/user.ts", config), testLikeBy("a folder fixtures/"));
    // React Doctor's own rule: folders below the last source root, case as written.
    assert.equal(pathRefusal("src/i18n/it/labels.ts", config), testLikeBy("a folder it/"));
    assert.equal(pathRefusal("src/test/components/Card.tsx", config), null);  // below components/
    assert.equal(pathRefusal("src/Stories/Button.tsx", config), null);  // not stories/
    // Folders it does not treat as tests are production code, scanned with every rule.
    for (const file of ["src/config/labels.ts", "src/server/api.ts", "src/workers/poll.ts", "src/script/x.ts"]) {
      assert.equal(pathRefusal(file, config), null, file);
    }
    /** @type {[string, string][]} */
    const names = [["src/Button.stories.tsx", ".stories."], ["src/api.mock.ts", ".mock."],
      ["src/karma.conf.js", "karma.conf.js"], ["src/setupJest.ts", "setupJest.ts"]];
    for (const [file, by] of names) {
      assert.equal(pathRefusal(file, config), testLikeBy(`its name (${by})`), file);
    }
    const declared = { sources: ["src"], test_like_allowed: ["src/fixtures", "src/Button.stories.tsx"] };
    assert.equal(pathRefusal("src/fixtures/user.ts", declared), null);
    assert.equal(pathRefusal("src/Button.stories.tsx", declared), null);
    // A declaration is a folder or a file, never a prefix of a name.
    assert.equal(pathRefusal("src/fixtures/user.ts", { ...declared, test_like_allowed: ["src/fix"] }),
      testLikeBy("a folder fixtures/"));
    // Declared or not, a spec is the verifier's.
    assert.equal(pathRefusal("src/fixtures/user.test.ts", declared), SPEC);
  });

  test("code React Doctor does not analyse is refused by name, whatever the case of its extension", () => {
    for (const file of ["src/useTicker.JS", "src/App.Tsx", "src/legacy.cjs", "src/types.cts"]) {
      assert.match(/** @type {string} */ (pathRefusal(file, config)), /^code React Doctor does not analyse/, file);
    }
    assert.match(/** @type {string} */ (pathRefusal("src/vendor/chart.min.js", config)), /generated bundle/);
    assert.match(/** @type {string} */ (pathRefusal("src/__generated__/api.ts", config)), /generated bundle/);
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
    const tree = new Map([["src/types.d.ts", { mode: "100644", id: "x" }], ["src/karma.conf.ts", { mode: "100644", id: "y" }]]);
    assert.equal(shadowed("src/types.d.js", tree, new Set(["src/types.d.js"]), config), "src/types.d.ts");
    assert.equal(shadowed("src/karma.conf.json", tree, new Set(["src/karma.conf.json"]), config), "src/karma.conf.ts");
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
  const tree = new Map([["src/Counter.tsx", { mode: "100644", id: "base" }], ["src/App.js", { mode: "100644", id: "b" }]]);
  /** @param {string} file @param {string[]} [others] */
  const judged = (file, others = []) => judge(file, config, tree, new Set([file, ...others]), app);

  before(() => {
    app = fs.mkdtempSync(path.join(os.tmpdir(), "grader-clean-room-"));
    write("src/Counter.tsx", "export const Counter = () => null;\n");
    write("src/notes.txt", "notes\n");
    write("src/big.json", `"${"x".repeat(262144)}"`);
    write("src/fits.json", `"${"x".repeat(262142)}"`);
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
    assert.equal(judged("src/Counter.tsx"), null);
    assert.equal(judged("src/fits.json"), null);
    assert.equal(judged("src/long.js"), null);
    assert.equal(judged("src/short-min.js"), null);  // under React Doctor's 20 kB floor
  });

  test("the path is judged first", () => {
    assert.equal(judged("README.md"), "outside the source roots (src)");
  });

  test("what the file is: a link, not a file, not a source type, too large", () => {
    assert.equal(judged("src/link.ts"), "symlinks are not source");
    assert.equal(judged("src/folder.ts"), "not a regular file");
    assert.equal(judged("src/notes.txt"), "not a source file type");
    assert.equal(judged("src/big.json"), "larger than 262144 bytes");
    assert.equal(judged("src/dist/bundle.ts"), "in a folder React Doctor does not scan");
  });

  test("code the scan would not read: not UTF-8, or minified-looking", () => {
    assert.equal(judged("src/latin1.ts"), "code that is not UTF-8 text");
    assert.equal(judged("src/min.js"), "minified-looking (long lines throughout a large file): React Doctor skips it");
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
