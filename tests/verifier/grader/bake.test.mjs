import assert from "node:assert/strict";
import { test } from "node:test";

import { uncompiled } from "../../../pytest_reactbench/verifier/grader/bake.mjs";

test("a spec that does not compile is named with its line; a missing import is not a compile error", () => {
  const report = {
    testResults: [
      { name: "/app/src/syn/imp.spec.ts", status: "failed",
        message: 'Failed to resolve import "./missing" from "src/syn/imp.spec.ts". Does the file exist?' },
      { name: "/app/src/syn/bad.spec.ts", status: "failed",
        message: "Transform failed with 1 error:\n\n[PARSE_ERROR] Expected `,` or `)` but found `;`\n" +
          "   ╭─[ src/syn/bad.spec.ts:3:19 ]\n   │\n 3 │   expect(1).toBe(1;\n" },
    ],
  };
  assert.equal(uncompiled(report), "src/syn/bad.spec.ts:3:19: does not compile: [PARSE_ERROR] Expected `,` or `)` but found `;`");
  assert.equal(uncompiled({ testResults: [report.testResults[0]] }), null);
  assert.equal(uncompiled(null), null);
  // esbuild's wording (Vite 5-7).
  assert.equal(uncompiled({ testResults: [{ name: "/app/a.spec.tsx", message:
    "Transform failed with 1 error:\n/app/a.spec.tsx:5:2: ERROR: Unexpected \"}\"" }] }),
  "/app/a.spec.tsx:5:2: does not compile: /app/a.spec.tsx:5:2: ERROR: Unexpected \"}\"");
});
