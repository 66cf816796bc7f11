// The sweep between test phases: every place the room's user can write, found by
// asking as that user, is emptied of what the room left there. Run in a sandbox of
// its own (bubblewrap, as root): the host's file systems read-only, and the places a
// verifier image leaves open to everyone (/tmp, /var/tmp, /run/lock, /dev/shm) fresh.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { ipcOf, writableMounts } from "../../../pytest_reactbench/verifier/grader/test-room.mjs";

const GRADER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../pytest_reactbench/verifier/grader");
// Where the sandbox sees the grader: a checkout under /tmp is under the sandbox's fresh /tmp.
const INSIDE = "/tmp/grader-under-test";
const usable = process.getuid?.() === 0 && spawnSync("bwrap", ["--version"]).status === 0;

// In the sandbox: the room leaves a file and a folder tree in each place it can
// write; root leaves a file; the room is swept.
const SCRIPT = `
import fs from "node:fs";
import { spawnSync } from "node:child_process";
fs.mkdirSync("/tmp/app/src", { recursive: true });
fs.chmodSync("/tmp/app", 0o1777);
const { ROOM_UID } = await import("${INSIDE}/config.mjs");
const { sweepRoom, writableByRoom } = await import("${INSIDE}/test-room.mjs");
const asRoom = (script) => spawnSync("setpriv", ["--reuid=" + ROOM_UID, "--regid=" + ROOM_UID, "--clear-groups", "--",
  "sh", "-c", script], { encoding: "utf8" });
const find = (...args) => [...new Set(spawnSync("find", args, { encoding: "utf8" }).stdout.split("\\n").filter(Boolean))].sort();
const places = ["/tmp/app", "/tmp", "/var/tmp", "/run/lock", "/dev/shm"];
for (const dir of places) asRoom(\`echo x > \${dir}/left && mkdir -p \${dir}/tree/deep && echo y > \${dir}/tree/deep/f\`);
fs.writeFileSync("/var/tmp/root-file", "r");
// System V IPC: a segment, a semaphore and a queue of the room's, and one of root's.
asRoom("ipcmk -M 4096 && ipcmk -S 1 && ipcmk -Q");
spawnSync("ipcmk", ["-M", "4096"]);
const ipc = () => ["shm", "sem", "msg"].map((kind) => fs.readFileSync("/proc/sysvipc/" + kind, "utf8").trim().split("\\n").length - 1);
const before = find(...places, "-user", String(ROOM_UID));
const ipcBefore = ipc();
sweepRoom();
console.log(JSON.stringify({ found: writableByRoom(), before, after: find(...places, "-user", String(ROOM_UID)),
  rootFile: fs.existsSync("/var/tmp/root-file"), ipcBefore, ipcAfter: ipc() }));
`;

test("sweepRoom empties every place the room can write, and only of the room's files", { skip: !usable && "needs root and bubblewrap" }, () => {
  const open = ["/tmp", "/var/tmp", "/run/lock", "/dev/shm"].flatMap((dir) => ["--perms", "1777", "--tmpfs", dir]);
  const sandbox = spawnSync("bwrap", ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", ...open,
    "--ro-bind", GRADER, INSIDE, "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--", process.execPath, "--input-type=module", "-e", SCRIPT], {
    encoding: "utf8", env: { ...process.env, REACTBENCH_APP: "/tmp/app", REACTBENCH_STATE: "/tmp/state",
      REACTBENCH_LOGS: "/tmp/logs", REACTBENCH_TESTS: "/tmp/tests" }, timeout: 60_000,
  });
  assert.equal(sandbox.status, 0, sandbox.stderr);
  const { found, before, after, rootFile, ipcBefore, ipcAfter } = JSON.parse(sandbox.stdout.trim().split("\n").at(-1) ?? "{}");
  // Found by the probe, not named by the grader: /var/tmp and /run/lock among them.
  // /tmp/app is in /tmp, on its file system: the sweep of /tmp reaches it.
  assert.deepEqual(found, ["/dev/shm", "/run/lock", "/tmp", "/var/tmp"]);
  // The room could write in each, and nothing of it is left in any.
  assert.equal(before.length, 5 * 4, before);
  assert.deepEqual(after, []);
  assert.equal(rootFile, true);
  // Its System V IPC objects too; root's segment stays.
  assert.deepEqual([ipcBefore, ipcAfter], [[2, 1, 1], [1, 0, 0]]);
});

test("the mounts asked: every one not read-only, by itself or its file system, /proc and /sys aside", () => {
  const info = [
    "22 27 0:21 / /proc rw,relatime - proc proc rw",
    "23 27 0:22 / /sys ro,relatime - sysfs sysfs ro",
    "27 1 0:30 / / rw,relatime - overlay overlay rw,lowerdir=/a",
    "28 27 8:1 / /usr ro,relatime - ext4 /dev/vda ro",
    "29 27 8:1 / /etc rw,relatime - ext4 /dev/vda ro",
    "30 27 0:40 / /var/tmp rw,nosuid - tmpfs tmpfs rw",
    "31 27 0:41 / /my\\040app rw - tmpfs tmpfs rw",
    "32 22 0:42 / /proc/keys rw - tmpfs tmpfs rw",
  ].join("\n");
  assert.deepEqual(writableMounts(info), ["/", "/my app", "/var/tmp"]);
  assert.deepEqual(writableMounts(""), ["/"]);
});

test("the room's System V IPC objects, by owner or creator, from the kernel's tables", () => {
  const tables = {
    shm: "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime\n" +
      "         0          7   600                  4096    10     0      0 65534 65534 65534 65534          0\n" +
      "         0          8   600                  4096    10     0      0     0     0     0     0          0\n",
    sem: "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n" +
      "1234567890          3   666          1     0     0 65534 65534          0 1700000000\n",
    msg: "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid\n",
  };
  assert.deepEqual(ipcOf(tables), ["-m", "7", "-s", "3"]);
});
