// Running the image's tools: exit codes as a shell says them, output, input,
// environment and the time limit.
import assert from "node:assert/strict";
import os from "node:os";
import { describe, test } from "node:test";

import { exitCode, run } from "../../../pytest_reactbench/verifier/grader/process.mjs";

describe("exitCode", () => {
  test("a status as it is; killed by a signal, 128 + its number", () => {
    assert.equal(exitCode(0, null), 0);
    assert.equal(exitCode(3, null), 3);
    assert.equal(exitCode(null, "SIGKILL"), 137);
    assert.equal(exitCode(null, "SIGTERM"), 128 + os.constants.signals.SIGTERM);
    assert.equal(exitCode(null, null), 128);
  });
});

describe("run", () => {
  test("its exit, both streams, its input and the environment added", () => {
    const result = run("sh", ["-c", 'read line; echo "$line $EXTRA"; echo err >&2; exit 4'],
      { cwd: os.tmpdir(), input: "hello\n", env: { EXTRA: "there" } });
    assert.deepEqual(result, { code: 4, stdout: "hello there\n", stderr: "err\n", timedOut: false });
  });

  test("past its time it is killed and says so", () => {
    const started = performance.now();
    const result = run("sleep", ["10"], { cwd: os.tmpdir(), timeoutMs: 200 });
    assert.deepEqual([result.code, result.timedOut], [137, true]);
    assert.ok(performance.now() - started < 5000);
  });

  test("a command that is not there", () => {
    const result = run("reactbench-no-such-command", [], { cwd: os.tmpdir() });
    assert.deepEqual([result.code, result.timedOut, result.stdout], [128, false, ""]);
  });
});
