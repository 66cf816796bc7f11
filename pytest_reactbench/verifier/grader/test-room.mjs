// The test room. The test commands import the submission's code, so they run as an
// unprivileged user, in their own process namespace where the sandbox allows one,
// with /tests, the grader and /logs/verifier out of reach. Their reports land in the
// room's own folder; the grader reads them without following links (reports.mjs)
// and checks that every hidden test it expects ran and passed.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

import {
  APP, LOGS, ROOM, ROOM_GID, ROOM_REPORTS, ROOM_UID, STATE, TESTS, VERIFIER_DIR, compileCache,
} from "./config.mjs";
import {
  KEY_FD, SEAL_GID, canariesExplainExit, installReporter, judgeCanaries, plantCanaries, readRunReport,
} from "./canaries.mjs";
import { SubmissionFailure } from "./errors.mjs";
import { collectE2eLeaks, collectLeaks, ownCode } from "./leaks.mjs";
import { exitCode, run } from "./process.mjs";
import { judgeTests, playwrightResults, readReport, specResults, vitestResults } from "./reports.mjs";
import {
  E2E_CONFIG, applySpecs, browserIdentity, browserVersion, e2ePort, e2eTransforms, guardE2eSpecs, profileGaps,
  withE2eConfig, writeE2eConfig,
} from "./specs.mjs";

/**
 * @import { Config } from "./config.mjs"
 */

/**
 * A command of the room's, finished.
 * @typedef {object} RoomResult
 * @property {number} code
 * @property {string} output  what it printed, both streams
 * @property {boolean} timedOut
 * @property {number} seconds
 * @property {boolean} [outOfMemory]  the kernel killed a process of the sandbox for want of memory meanwhile
 */

/**
 * One step of the test gate: a room of its own, with these specs in /app.
 * @typedef {object} TestStep
 * @property {"unit" | "e2e"} name
 * @property {string} cmd  the command, with our Playwright config for the e2e step
 * @property {string[]} parts  the entries of /tests/specs copied into /app for it
 */

/**
 * What the test gate runs: its steps in order, in `cwd`, all within `total` seconds.
 * @typedef {object} TestPlan
 * @property {number} total
 * @property {string} cwd
 * @property {TestStep[]} steps
 */

/**
 * A step as it ran.
 * @typedef {object} TestPhase
 * @property {string} name
 * @property {number} exit_code
 * @property {boolean} timed_out
 * @property {number} seconds
 * @property {number} [planted]  canaries planted in its specs
 * @property {boolean} [exit_explained]  its exit 1 was the canaries planted to fail, alone
 * @property {boolean} [out_of_memory]  the kernel killed a process of the sandbox for want of memory
 *   while it ran (its /tmp, a tmpfs, counts against the same limit)
 */

/**
 * The test gate's verdict (grade.json's tests).
 * @typedef {object} TestVerdict
 * @property {boolean} ok
 * @property {number | null} exit_code  the last step's
 * @property {boolean} timed_out
 * @property {number} expected  how many tests the task names
 * @property {TestPhase[]} phases
 * @property {string[]} failing
 * @property {string[]} tampered  what the canaries caught (canaries.mjs)
 * @property {import("./reports.mjs").SpecResult[]} specs  every test the runners reported
 * @property {{ uid: number, pid_namespace: boolean }} room
 */

/**
 * Root owns the tree the room reads; /app itself stays open for new entries (the
 * sticky bit keeps the room from replacing what it does not own), because the
 * bundler writes its config bundle and dist/ there.
 */
export function lockDown() {
  const chown = run("chown", ["-R", "-h", "0:0", APP, TESTS, LOGS]);
  const chmod = run("chmod", ["-R", "u+rwX,go-w,a-st", APP]);
  if (chown.code !== 0 || chmod.code !== 0) throw new Error(`cannot hand /app to root: ${chown.stderr}${chmod.stderr}`);
  fs.chmodSync(APP, 0o1777);
  fs.chmodSync(TESTS, 0o700);
  fs.chmodSync(LOGS, 0o700);
  fs.chmodSync(VERIFIER_DIR, 0o700);
  fs.chmodSync(STATE, 0o711);
  // The room reads the pristine dependencies and the compile cache; nothing else.
  for (const entry of fs.readdirSync(STATE)) {
    if (entry !== "deps" && entry !== "compile-cache") fs.chmodSync(path.join(STATE, entry), 0o700);
  }
}

/** @type {string[] | null} */
let writable = null;

/**
 * The mount points of this process's view that are not read-only (/proc and /sys
 * aside): where anything can be written at all.
 * @param {string} [info]  /proc/self/mountinfo
 * @returns {string[]}
 */
export function writableMounts(info) {
  try {
    info ??= fs.readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return ["/"];
  }
  /** @type {Set<string>} */
  const points = new Set();
  for (const line of info.split("\n")) {
    // "id parent dev root point options [optional...] - type source super-options"
    const [own = "", fs_ = ""] = line.split(" - ");
    const fields = own.split(" ");
    if (fields.length < 6) continue;
    const point = /** @type {string} */ (fields[4]).replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)));
    const readOnly = [fields[5], fs_.split(" ")[2]].some((options) => (options ?? "").split(",").includes("ro"));
    if (!readOnly && !/^\/(proc|sys)(\/|$)/.test(point)) points.add(point);
  }
  return points.size ? [...points].sort() : ["/"];
}

/**
 * Every folder the room's user can write, by design rather than by a list: asked of
 * the kernel as that user (find's -writable is access(2) for the room's uid: modes,
 * ownership and read-only mounts alike) on every mount that is not read-only, once,
 * before any room command has run, so that no process of the room can steer the
 * answer. Only the topmost of each file system is kept (a sweep of a folder reaches
 * what is below it); /app, /tmp and /dev/shm always.
 * @returns {string[]}
 */
export function writableByRoom() {
  if (writable) return writable;
  const started = performance.now();
  const found = run("setpriv", [`--reuid=${ROOM_UID}`, `--regid=${ROOM_GID}`, "--clear-groups", "--",
    "find", ...writableMounts(), "-xdev", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o",
    "-type", "d", "-writable", "-print0"], { cwd: "/" });
  const dirs = new Set([APP, "/tmp", "/dev/shm", ...found.stdout.split("\0").filter((dir) => dir.startsWith("/"))]);
  /** @param {string} dir */
  const device = (dir) => {
    try {
      return fs.statSync(dir).dev;
    } catch {
      return -1;
    }
  };
  writable = [...dirs].filter((dir) => {
    const parent = path.dirname(dir);
    return parent === dir || !dirs.has(parent) || device(parent) !== device(dir);
  }).sort();
  console.log("[verifier]", `the room can write in ${writable.join(", ")} (asked in ${Math.round(performance.now() - started)} ms)`);
  return writable;
}

/**
 * The System V IPC objects (shared memory, semaphores, message queues) of `uid`, from
 * the kernel's tables (/proc/sysvipc), as ipcrm's arguments: they are no files, and
 * where the room has no IPC namespace of its own (docker) they outlive its processes.
 * @param {Record<"shm" | "sem" | "msg", string>} tables  each table's text
 * @param {number} [uid]
 * @returns {string[]}
 */
export function ipcOf(tables, uid = ROOM_UID) {
  /** @type {string[]} */
  const args = [];
  for (const [kind, flag, id] of /** @type {const} */ ([["shm", "-m", "shmid"], ["sem", "-s", "semid"], ["msg", "-q", "msqid"]])) {
    const [header = "", ...rows] = tables[kind].split("\n");
    const columns = header.trim().split(/\s+/);
    for (const row of rows) {
      const values = row.trim().split(/\s+/);
      const of = (/** @type {string} */ name) => values[columns.indexOf(name)];
      if (values.length < columns.length) continue;
      if (of("uid") === String(uid) || of("cuid") === String(uid)) args.push(flag, /** @type {string} */ (of(id)));
    }
  }
  return args;
}

/**
 * Whatever the room left that a later room or the grader could trip on: its
 * processes, its files wherever it can write (writableByRoom: /app, /tmp, /dev/shm,
 * and any other place the image leaves open, /var/tmp and /run/lock on docker), and
 * its System V IPC objects. Root's stay.
 */
export function sweepRoom() {
  killRoom();
  run("find", [...writableByRoom(), "-mindepth", "1", "-xdev", "-user", String(ROOM_UID),
    "-prune", "-exec", "rm", "-rf", "{}", "+"], { cwd: "/" });
  fs.rmSync(ROOM, { recursive: true, force: true });
  try {
    const read = (/** @type {string} */ kind) => fs.readFileSync(`/proc/sysvipc/${kind}`, "utf8");
    const ipc = ipcOf({ shm: read("shm"), sem: read("sem"), msg: read("msg") });
    if (ipc.length) run("ipcrm", ipc, { cwd: "/" });
  } catch {}  // no System V IPC here
}

/** A new room: swept, with its own home, /tmp, reports and the pnpm of pnpmExec. */
export function openRoom() {
  sweepRoom();
  fs.mkdirSync(ROOM, { mode: 0o700 });
  for (const sub of ["home", "tmp", "reports", "e2e-output"]) {
    fs.mkdirSync(path.join(ROOM, sub), { mode: 0o700 });
    fs.chownSync(path.join(ROOM, sub), ROOM_UID, ROOM_GID);
  }
  // Root's, like the room itself: the room runs it and cannot change it.
  fs.mkdirSync(path.join(ROOM, "bin"), { mode: 0o755 });
  const pnpm = realPnpm();
  if (pnpm) fs.writeFileSync(path.join(ROOM, "bin", "pnpm"), pnpmExec(pnpm), { mode: 0o755 });
  fs.chmodSync(ROOM, 0o755);
}

/** @type {string | null | undefined} */
let pnpmPath;
/** @returns {string | null} the image's pnpm (null: none) */
function realPnpm() {
  if (pnpmPath === undefined) {
    const found = run("sh", ["-c", "command -v pnpm"], { cwd: "/" });
    pnpmPath = found.code === 0 ? found.stdout.trim() : null;
  }
  return pnpmPath;
}

/**
 * `pnpm exec NAME ...` of a binary in ./node_modules/.bin runs it directly: the very
 * command pnpm would start, with that folder first on the PATH as pnpm puts it,
 * without the half second of CPU pnpm takes to start. Anything else is pnpm's. The
 * shells keep the groups they were started with (-p: a sealed unit command's, see
 * roomPrefix), a binary that is a shell script included.
 * @param {string} pnpm  the real pnpm
 * @returns {string} the room's pnpm, a shell script
 */
export function pnpmExec(pnpm) {
  return `#!/bin/sh -p
if [ "$1" = exec ]; then
  case "$2" in
    ""|-*|*/*|.*) ;;
    *)
      if [ -f "node_modules/.bin/$2" ] && [ -x "node_modules/.bin/$2" ]; then
        name=$2
        shift 2
        PATH="$PWD/node_modules/.bin:$PATH"
        export PATH
        if [ "$(head -n 1 "node_modules/.bin/$name")" = "#!/bin/sh" ]; then
          exec /bin/sh -p "$PWD/node_modules/.bin/$name" "$@"
        fi
        exec "$PWD/node_modules/.bin/$name" "$@"
      fi ;;
  esac
fi
exec '${pnpm.replaceAll("'", "'\\''")}' "$@"
`;
}

// Where the sandbox lets the grader make one, the room gets its own process
// namespace (the docker backend's default capabilities do not allow it; the uid
// alone keeps the room from signalling the grader there).
/** @type {boolean | null} */
let pidNamespace = null;
/**
 * What a room's command runs under. `sealed`: with SEAL_GID as its effective and saved
 * group (the reporter's key file's, canaries.mjs), the room's as its real one.
 * @param {boolean} [sealed]
 * @returns {string[]}
 */
export function roomPrefix(sealed = false) {
  if (pidNamespace === null) {
    pidNamespace = run("unshare", ["--pid", "--fork", "--kill-child", "--mount-proc", "true"], { cwd: "/" }).code === 0;
  }
  const groups = sealed ? [`--rgid=${ROOM_GID}`, `--egid=${SEAL_GID}`] : [`--regid=${ROOM_GID}`];
  const drop = ["setpriv", `--reuid=${ROOM_UID}`, ...groups, "--clear-groups",
    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"];
  return pidNamespace ? ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", ...drop] : drop;
}

/**
 * The environment of a room's command: the grader's without its REACTBENCH_
 * variables, the room's own folders, and `extra`.
 * @param {Record<string, string>} extra
 * @returns {NodeJS.ProcessEnv}
 */
export function roomEnv(extra) {
  /** @type {NodeJS.ProcessEnv} */
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("REACTBENCH_")) env[key] = value;
  }
  return {
    ...env,
    PATH: `${path.join(ROOM, "bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    HOME: path.join(ROOM, "home"),
    TMPDIR: path.join(ROOM, "tmp"),
    XDG_CACHE_HOME: path.join(ROOM, "home", ".cache"),
    CI: "1",
    NO_COLOR: "1",
    FORCE_COLOR: "0",
    // pnpm would try to reinstall the root-owned dependencies before running.
    npm_config_verify_deps_before_run: "false",
    pnpm_config_verify_deps_before_run: "false",
    REACTBENCH_REPORTS: ROOM_REPORTS,
    PLAYWRIGHT_JSON_OUTPUT_NAME: path.join(ROOM_REPORTS, "playwright.json"),
    ...compileCache(),
    ...extra,
  };
}

/**
 * Reports written by configs made before the room existed name /logs/verifier.
 * @param {string} cmd
 */
export const inRoom = (cmd) => cmd.replaceAll(`${LOGS}/`, `${ROOM_REPORTS}/`);

// Output a room command may print before it is killed, as spawnSync's maxBuffer was.
const MAX_ROOM_OUTPUT = 256 * 1024 * 1024;

/**
 * A command in the room, killed past its budget. Asynchronous, so that a scan
 * running beside it is seen to finish when it does.
 * @param {string} cmd
 * @param {{ cwd: string, budget: number, env?: Record<string, string>, sealed?: boolean,
 *   key?: Buffer | null }} options  budget: seconds; sealed: see roomPrefix; key: the
 *   reporter's, handed over on KEY_FD
 * @returns {Promise<RoomResult>}
 */
export function runInRoom(cmd, { cwd, budget, env = {}, sealed = false, key = null }) {
  const started = performance.now();
  const killedBefore = oomKills();
  const [command, ...args] = [...roomPrefix(sealed), "bash", ...(sealed ? ["-p"] : []), "-c", inRoom(cmd)];
  // The reporter's key on a pipe of its own (KEY_FD): written whole, then closed.
  /** @type {("ignore" | "pipe")[]} */
  const stdio = ["ignore", "pipe", "pipe"];
  if (key) stdio.push(...Array(KEY_FD - 3).fill("ignore"), "pipe");
  const spawned = spawn(command, args, { cwd, env: roomEnv(env), stdio });
  const child = /** @type {import("node:child_process").ChildProcessWithoutNullStreams} */ (
    /** @type {unknown} */ (spawned));
  if (key) {
    const pipe = /** @type {import("node:stream").Writable} */ (/** @type {unknown[]} */ (spawned.stdio)[KEY_FD]);
    pipe.on("error", () => {});  // a command that never reads it
    pipe.end(key);
  }
  /** @type {Buffer[]} */
  const chunks = [];
  let size = 0;
  let timedOut = false;
  /** @param {Buffer} chunk */
  const collect = (chunk) => {
    size += chunk.length;
    if (size > MAX_ROOM_OUTPUT) child.kill("SIGKILL");
    else chunks.push(chunk);
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, Math.ceil(budget * 1000));
  return new Promise((resolve) => {
    /** @type {{ code: number, error?: Error, seconds: number } | null} */
    let exit = null;
    const done = () => {
      clearTimeout(timer);
      const { code, error, seconds } = /** @type {{ code: number, error?: Error, seconds: number }} */ (exit);
      const outOfMemory = oomKills() > killedBefore;
      resolve({
        code,
        output: Buffer.concat(chunks).toString() + (error ? `${error.message}\n` : "")
          + (outOfMemory ? "[grader] the kernel killed a process of the sandbox for want of memory\n" : ""),
        timedOut,
        seconds,
        ...(outOfMemory ? { outOfMemory } : {}),
      });
    };
    child.on("error", (error) => {
      exit = { code: 127, error, seconds: (performance.now() - started) / 1000 };
      done();
    });
    child.on("exit", (code, signal) => {
      exit = { code: exitCode(code, signal), seconds: (performance.now() - started) / 1000 };
      clearTimeout(timer);
      // What the room left running goes now, a daemon holding its output open
      // included; the output is complete once both pipes close.
      killRoom();
      const late = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        done();
      }, 5000);
      child.on("close", () => {
        clearTimeout(late);
        done();
      });
    });
  });
}

/**
 * How many processes the kernel has killed for want of memory in this sandbox's memory
 * group (cgroup v2's memory.events, v1's memory.oom_control); 0 where neither is read.
 * @param {string} [cgroup]
 * @returns {number}
 */
export function oomKills(cgroup = "/sys/fs/cgroup") {
  for (const file of ["memory.events", "memory/memory.oom_control"]) {
    try {
      const found = /^oom_kill (\d+)$/m.exec(fs.readFileSync(path.join(cgroup, file), "utf8"));
      if (found) return Number(found[1]);
    } catch {}
  }
  return 0;
}

/**
 * The live processes whose real or effective user is `uid` (read from their status: a
 * process's /proc folder belongs to root once it is not dumpable).
 * @param {number} uid
 * @returns {number[]}
 */
export function processesOf(uid) {
  /** @type {number[]} */
  const found = [];
  for (const pid of fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
      const ids = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status);
      // A zombie is dead already: only its parent's wait is left.
      if (/^State:\s+[ZX]/m.test(status)) continue;
      if (ids && (Number(ids[1]) === uid || Number(ids[2]) === uid)) found.push(Number(pid));
    } catch {}  // gone meanwhile
  }
  return found;
}

/**
 * Whether `pid` is stopped (or gone).
 * @param {number} pid
 * @returns {boolean}
 */
function isStopped(pid) {
  try {
    return /^State:\s+[TtZX]/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return true;  // gone
  }
}

/**
 * Every process of the room's user, wherever it hid (a detached daemon, a chain of
 * forks). Where the room has no PID namespace of its own (docker), one pass of kills
 * could be outrun by a process that forks and exits over and over: the processes are
 * stopped first, pass after pass, until every one is stopped indeed (a stopped process
 * cannot fork, and SIGSTOP cannot be caught), then killed. The kernel itself may start
 * a stopped process again (a process group left orphaned by an exit gets SIGCONT), so
 * all of it is done again until no process of the user is left: it returns only then
 * (a zombie is dead already), or after `waitMs`. Ending an empty room costs 40 ms.
 * @param {number} [uid]
 * @param {number} [waitMs]
 */
export function killRoom(uid = ROOM_UID, waitMs = 20_000) {
  const deadline = Date.now() + waitMs;
  // Done when two listings some time apart find none: a process the kernel is still
  // creating or ending as /proc is read can be missed by one.
  for (let quiet = 0; quiet < 2 && Date.now() < deadline;) {
    if (!processesOf(uid).length) {
      quiet++;
      pause(20);
      continue;
    }
    quiet = 0;
    stopAll(uid, deadline);
    for (const pid of processesOf(uid)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    pause(5);  // a killed process is gone once the kernel has run its exit
  }
}

/**
 * SIGSTOP to every process of `uid`, until every one is stopped indeed, not only sent
 * it: one that was forking when the signal came stops only once its child is in /proc
 * (under load, that takes a while), and the listing after that finds the child.
 * @param {number} uid
 * @param {number} deadline
 */
function stopAll(uid, deadline) {
  const stopped = new Set();
  while (Date.now() < deadline) {
    const found = processesOf(uid);
    const running = found.filter((pid) => !stopped.has(pid));
    if (!running.length && found.every(isStopped)
        && processesOf(uid).every((pid) => stopped.has(pid))) return;
    for (const pid of running) {
      try {
        process.kill(pid, "SIGSTOP");
      } catch {}
      stopped.add(pid);
    }
  }
}

/** @param {number} ms */
function pause(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * What the test gate runs. Unit specs first; the e2e specs are copied in only after
 * every process of that room is gone, from /tests, which the room never had. Without
 * an e2e command, the e2e folder is one more part of the unit step's.
 * @param {Config} config
 * @param {string[]} specEntries  the entries of /tests/specs
 * @returns {TestPlan}
 */
export function testPlan(config, specEntries) {
  const total = config.test.timeout_sec ?? (config.verifier_timeout_sec ?? 300) * 0.7;
  const e2eDir = config.test.e2e_specs;
  const specParts = specEntries.filter((p) => p !== e2eDir);
  const e2eCmd = config.test.e2e_cmd;
  /** @type {TestStep[]} */
  const steps = [{ name: "unit", cmd: config.test.cmd, parts: specParts }];
  if (e2eCmd) steps.push({ name: "e2e", cmd: withE2eConfig(e2eCmd), parts: [e2eDir] });
  else specParts.push(e2eDir);
  return { total, cwd: config.test.cwd ?? APP, steps };
}

/**
 * The budget of a step that starts `elapsed` seconds into the test gate: what is left
 * of the total, and never less than a second.
 * @param {number} total
 * @param {number} elapsed
 */
export const stepBudget = (total, elapsed) => Math.max(1, total - elapsed);

/**
 * The test gate: each step of the plan in a room of its own, its reports judged.
 * @param {Config} config
 * @param {(phase: string) => void} setPhase
 * @param {string[]} [changed]  the submission's changed files, relative to the app
 * @param {{ everyStep?: boolean }} [options]  everyStep: the next step runs after one that
 *   failed (the bake's run on the base, which fails the tests, watches every step)
 * @returns {Promise<TestVerdict>}
 */
export async function testGate(config, setPhase, changed = [], { everyStep = false } = {}) {
  const started = performance.now();
  const plan = testPlan(config, fs.readdirSync(path.join(TESTS, "specs")));
  const { total, steps } = plan;
  const remaining = () => stepBudget(total, (performance.now() - started) / 1000);
  /** @type {import("./reports.mjs").TestResults} */
  const results = new Map();
  /** @type {import("./reports.mjs").TestMessages} */
  const messages = new Map();
  /** @type {TestPhase[]} */
  const phases = [];
  // A report the room spoiled (a daemon killed mid-write leaves it empty) loses that
  // runner's results, not the grading: its tests did not run, and the reason is said.
  /** @type {string[]} */
  const spoiled = [];
  /** @type {string[]} */
  const tampered = [];
  /**
   * @param {string} name
   * @param {string} phase
   */
  const report = (name, phase) => {
    try {
      return readReport(name);
    } catch (error) {
      if (!(error instanceof SubmissionFailure)) throw error;
      spoiled.push(`${error.message}, after the ${phase} tests`);
      return null;
    }
  };
  let output = "";
  try {
    for (const step of steps) {
      setPhase(`tests:${step.name}`);
      openRoom();
      fs.rmSync(path.join(APP, E2E_CONFIG), { force: true });
      applySpecs(step.parts);
      const { cmd, canaries } = step.name === "unit"
        ? plantCanaries(step.cmd, config.test.expected)
        : { cmd: step.cmd, canaries: [] };
      // With canaries, the unit results are the grader's reporter's (signed), alone.
      const reporter = canaries.length ? installReporter() : null;
      /** @type {Record<string, string>} */
      let env = reporter ? reporter.env : {};
      if (step.name === "e2e") {
        writeE2eConfig();
        for (const part of step.parts) guardE2eSpecs(part);
        env = {
          ...e2eTransforms(),
          REACTBENCH_E2E_PORT: e2ePort(),
          REACTBENCH_E2E_OUTPUT: path.join(ROOM, "e2e-output", "results"),
          REACTBENCH_E2E_BROWSER: JSON.stringify(browserIdentity(browserVersion())),
          // The leak watch's timer window is needed only where one of them has nothing mounted.
          REACTBENCH_E2E_CHANGED: JSON.stringify(ownCode(changed).map((file) => path.join(APP, file))),
        };
      }
      const result = await runInRoom(cmd, { cwd: plan.cwd, budget: remaining(), env, sealed: reporter !== null,
        key: reporter?.key ?? null });
      output += result.output;
      console.log(result.output.split("\n").slice(-40).join("\n"));
      /** @type {import("./reports.mjs").TestResults} */
      const ran = new Map();
      /** @type {import("./reports.mjs").TestMessages} */
      const said = new Map();
      /** @type {import("./canaries.mjs").VitestRun | null} */
      let signedRun = null;
      if (reporter) {
        // Vitest's own JSON report is kept for the record only: any process of the
        // room could have written it.
        report("vitest.json", step.name);
        const { run: got, problem, forged } = readRunReport(reporter.key);
        signedRun = got;
        if (got?.sealed === false) {
          console.log("the unit command reached Vitest through a shell that drops the group that seals its "
            + "main process (sh, or bash without -p): its report is signed all the same");
        }
        if (problem && forged) tampered.push(`test results tampered: ${problem}`);
        else if (problem) spoiled.push(`${problem}: the ${step.name} tests did not run`);
        vitestResults(signedRun, ran, said);
      } else {
        vitestResults(report("vitest.json", step.name), ran, said);
      }
      const e2eReport = report("playwright.json", step.name);
      playwrightResults(e2eReport, ran, said);
      // Each e2e test passes under both browser profiles, or fails.
      if (step.name === "e2e") for (const [key, status] of profileGaps(e2eReport)) ran.set(key, status);
      const forged = judgeCanaries(canaries, ran, said);
      tampered.push(...forged);
      // Read after the room is gone, where the room never reads: the planted tests named.
      if (canaries.length) {
        const note = plantedNote(canaries, forged.length === 0);
        output += note;
        // Its first line here (the failure screen shows this log's tail); the names in test.log.
        console.log(`${note.trim().split("\n")[0]} Their names are in test.log.`);
      }
      if (step.name === "e2e") collectE2eLeaks(e2eReport);
      if (step.name === "unit") collectLeaks(canaries.length > 0, ran, undefined, undefined, undefined, signedRun);
      const explained = canaries.length > 0 &&
        canariesExplainExit(result.code, canaries, signedRun, ran);
      for (const [key, status] of ran) results.set(key, status);
      for (const [key, message] of said) messages.set(key, message);
      phases.push({
        name: step.name, exit_code: result.code, timed_out: result.timedOut, seconds: result.seconds,
        ...(result.outOfMemory ? { out_of_memory: true } : {}),
        ...(canaries.length ? { planted: canaries.length, exit_explained: explained } : {}),
      });
      sweepRoom();
      if (((result.code !== 0 && !explained) || result.timedOut) && !everyStep) break;
    }
  } finally {
    // Whatever ended the tests, what they printed is kept.
    fs.writeFileSync(path.join(LOGS, "test.log"), output);
  }
  return testVerdict(config, plan, { phases, results, messages, spoiled, tampered },
    { uid: ROOM_UID, pid_namespace: Boolean(pidNamespace) });
}

/**
 * What the test log says of the planted tests after a step's output: which they were,
 * so that the failures planted on purpose are not read as the submission's.
 * @param {import("./canaries.mjs").Canary[]} canaries
 * @param {boolean} asPlanted  every one was reported as planted
 * @returns {string}
 */
export function plantedNote(canaries, asPlanted) {
  const failing = canaries.filter((c) => c.must === "fail");
  const names = (/** @type {import("./canaries.mjs").Canary[]} */ list) =>
    list.map((c) => `  ${c.file} > ${c.titles.join(" > ")}`).join("\n");
  return `\n[grader] ${canaries.length} test(s) above were planted by the grader to check the report, ` +
    `${failing.length} of them made to fail on purpose` +
    (asPlanted ? "; each was reported as planted" : "; not every one was reported as planted (see the failing list)") +
    `. Planted to fail:\n${names(failing)}\nPlanted to pass:\n${names(canaries.filter((c) => c.must === "pass"))}\n`;
}

/**
 * The test gate's verdict from what its steps left: every expected test ran and
 * passed, every step ran, none timed out or exited non-zero, no report was spoiled.
 * @param {Config} config
 * @param {TestPlan} plan
 * @param {{ phases: TestPhase[], results: import("./reports.mjs").TestResults,
 *   messages: import("./reports.mjs").TestMessages, spoiled: string[], tampered?: string[] }} ran
 * @param {{ uid: number, pid_namespace: boolean }} room
 * @returns {TestVerdict}
 */
export function testVerdict(config, plan, { phases, results, messages, spoiled, tampered = [] }, room) {
  // Forged results head the list: nothing else the report says can be trusted.
  const failing = [...tampered, ...judgeTests(config.test.expected, results, config.test.allow_skipped === true),
    ...spoiled];
  for (const phase of phases) {
    if (phase.timed_out) failing.push(`the ${phase.name} tests did not finish within ${Math.round(plan.total)} s`);
    else if (phase.exit_code !== 0 && !phase.exit_explained) {
      failing.push(`the ${phase.name} test command exited ${phase.exit_code}` + (phase.out_of_memory
        ? " (the kernel killed a process of the verifier for want of memory: the task's verifier memory_mb, "
          + "which its /tmp counts against too)" : ""));
    }
  }
  const next = plan.steps[phases.length];
  if (next) failing.push(`the ${next.name} tests never ran`);
  const expected = Object.values(config.test.expected).reduce((n, names) => n + names.length, 0);
  return {
    ok: failing.length === 0,
    exit_code: phases.at(-1)?.exit_code ?? null,
    timed_out: phases.some((p) => p.timed_out),
    expected,
    phases,
    failing,
    tampered,
    specs: specResults(results, messages),
    room,
  };
}
