"""What a repository installs with and tests with, read from its files.

The toolchain is the repository's own: the package manager and version its
`packageManager` field pins (run through corepack), else the one its lockfile was
written by; `engines.node` is checked against the Node the images have. The test
runners (Vitest, Jest, Playwright) come from the package.json of the package the
specs are in, and the workspace root's.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pytest_reactbench.mining.changes import MiningError

#: The folder corepack puts the pinned package manager's shims in, at bake.
SHIMS = "/opt/reactbench/package-manager"
#: The newest release of each major a lockfile can be told from, for repositories
#: that do not pin one (corepack takes exact versions only).
PNPM_BY_LOCKFILE = {"5": "7.33.7", "6": "8.15.9", "9": "9.15.9"}
YARN_CLASSIC = "1.22.22"
YARN_BERRY_BY_LOCKFILE = {"4": "2.4.3", "5": "3.8.7", "6": "3.8.7", "7": "4.18.1", "8": "4.18.1"}
YARN_BERRY_LATEST = "4.18.1"
#: The install script a mined task's bake runs, shipped beside this module, and where
#: the bake puts it (the writer copies it into both build contexts).
INSTALL_SCRIPT = Path(__file__).with_name("install.sh")
INSTALL_AT = "/tmp/reactbench-install.sh"
#: The line a bake's log ends with when the registry lacks a package: what a refusal
#: reads (install.sh prints it).
REGISTRY_LACKS = "reactbench: the registry has no such package or version"
LOCKFILES = {"pnpm-lock.yaml": "pnpm", "yarn.lock": "yarn", "package-lock.json": "npm",
             "npm-shrinkwrap.json": "npm", "bun.lock": "bun", "bun.lockb": "bun"}
PACKAGE_MANAGER_FIELD = re.compile(r"^(pnpm|yarn|npm|bun)@(\d+)\.(\d+)\.(\d+)([-.\w]*)(\+.*)?$")


@dataclass(frozen=True)
class Toolchain:
    """How the repository installs: `name` pnpm, yarn, npm or bun; `version` the
    exact release corepack runs (None: the image's own npm); `why` where it came from."""

    name: str
    version: str | None
    why: str
    lockfile: str | None = None
    #: `engines.node` of the root package.json, as written.
    node: str | None = None
    #: Every dependency in the root's node_modules (pnpm's `node-linker=hoisted`): the
    #: verifier brings back only /app/node_modules, not a workspace package's own.
    hoisted: bool = False

    @property
    def major(self) -> int | None:
        return int(self.version.split(".")[0]) if self.version else None

    @property
    def berry(self) -> bool:
        return self.name == "yarn" and (self.major or 1) >= 2

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name

    @property
    def install(self) -> str:
        """The bake's shell command, run in /app: the pinned package manager through
        corepack's shims (so lifecycle scripts that call it get the same one), then
        the install the repository's own CI would run."""
        # Test tools' binaries that dependencies download as they install (Cypress's
        # app, Puppeteer's and Playwright's browsers) come from hosts beyond the npm
        # registry, and the verifier runs none of them: skipped, as a CI without them.
        steps = ["export COREPACK_ENABLE_AUTO_PIN=0 COREPACK_ENABLE_STRICT=0 CI=1 "
                 "CYPRESS_INSTALL_BINARY=0 PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "
                 f"PATH={SHIMS}:$PATH"]
        if self.name in ("pnpm", "yarn") and self.version:
            steps += [f"mkdir -p {SHIMS}",
                      f"corepack enable --install-directory {SHIMS} {self.name}",
                      # Without a `packageManager` field the shim runs corepack's default
                      # release: make it the one the lockfile was written by.
                      f"corepack install -g {self.name}@{self.version}",
                      f"{self.name} --version"]
        steps.append(self.install_command())
        return " \\\n && ".join(steps)

    def _installs(self) -> tuple[str, str, str]:
        """The package manager's frozen install, its unfrozen one ("": none to try) and
        its download cache ("": none)."""
        if self.name == "pnpm":
            common = "--store-dir /tmp/pnpm-store --package-import-method=copy"
            if self.hoisted:
                common += " --config.node-linker=hoisted"
            if (self.major or 0) >= 10:
                # pnpm 10+ runs only the dependency build scripts the repository allows
                # (onlyBuiltDependencies); newer majors also fail on the others unless told
                # that skipping them is what the repository expects.
                common += " --config.strict-dep-builds=false"
            install = f"pnpm install {{}} {common}"
            frozen, thawed = install.format("--frozen-lockfile"), install.format("--no-frozen-lockfile")
            cache = "/tmp/pnpm-store"
        elif self.name == "yarn" and self.berry:
            # Plug'n'Play keeps no node_modules: the verifier's test room runs the
            # runners' binaries from node_modules/.bin, without yarn.
            install = "YARN_NODE_LINKER=node-modules YARN_ENABLE_IMMUTABLE_INSTALLS={} yarn install"
            frozen, thawed = install.format("true"), install.format("false")
            cache = ""
        elif self.name == "yarn":
            # Engines of dependencies are advisory where the images' Node is newer.
            install = ("yarn install{} --ignore-engines --network-timeout 600000 "
                       "--cache-folder /tmp/yarn-cache")
            frozen, thawed = install.format(" --frozen-lockfile"), install.format("")
            cache = "/tmp/yarn-cache"
        elif self.name == "bun":
            return "bun install --frozen-lockfile", "", ""
        else:
            # The download caches go with the step: they would only make the image bigger.
            frozen = "npm ci --no-audit --no-fund --cache /tmp/npm-cache"
            thawed = frozen.replace("npm ci", "npm install")
            cache = "/tmp/npm-cache"
        return frozen, thawed, cache

    def install_command(self, script: str = INSTALL_AT) -> str:
        """The install itself: the frozen install CI runs, tried again as the shipped
        install script does (install.sh says how) with this package manager's commands."""
        frozen, thawed, cache = self._installs()
        if not thawed:
            return frozen
        first = frozen if self.lockfile else thawed
        peers = f"{first} --legacy-peer-deps" if self.name == "npm" else ""
        return shlex.join(["sh", script, first, thawed if self.lockfile else "", peers, cache])


def _manifest(text: str | None, where: str = "package.json") -> dict[str, object]:
    if not text:
        return {}
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MiningError(f"{where} is not valid JSON: {exc}") from None
    return loaded if isinstance(loaded, dict) else {}


def detect_toolchain(manifest_text: str | None, root_files: Collection[str],
                     read: Callable[[str], str | None]) -> Toolchain:
    """The package manager the repository pins, else the one its lockfile names."""
    manifest = _manifest(manifest_text)
    engines = manifest.get("engines")
    node = engines.get("node") if isinstance(engines, dict) else None
    node = str(node) if node is not None else None
    lockfiles = [name for name in LOCKFILES if name in root_files]
    field = manifest.get("packageManager")
    if isinstance(field, str) and field.strip():
        match = PACKAGE_MANAGER_FIELD.match(field.strip())
        if not match:
            raise MiningError(f"package.json: packageManager {field!r} is not <name>@<x.y.z> "
                              "(pnpm, yarn, npm or bun)")
        name = match.group(1)
        version = "{}.{}.{}{}".format(*match.group(2, 3, 4, 5))
        lockfile = next((f for f in lockfiles if LOCKFILES[f] == name), None)
        if name == "npm":
            # npm is the image's own: `npm ci` reads any recent lockfile.
            return Toolchain("npm", None, f"packageManager {field.split('+')[0]}", lockfile, node)
        return Toolchain(name, version, f"packageManager {field.split('+')[0]}", lockfile, node)
    if not lockfiles:
        return Toolchain("npm", None, "no lockfile", None, node)
    lockfile = lockfiles[0]
    name = LOCKFILES[lockfile]
    if name == "pnpm":
        found = re.search(r"""^lockfileVersion:\s*['"]?(\d+)""", read(lockfile) or "", re.M)
        major = found.group(1) if found else "9"
        version = PNPM_BY_LOCKFILE.get(major, PNPM_BY_LOCKFILE["9"])
        return Toolchain("pnpm", version, f"{lockfile} (lockfile v{major})", lockfile, node)
    if name == "yarn":
        text = read(lockfile) or ""
        berry = re.search(r"^__metadata:\s*\n\s+version:\s*(\d+)", text, re.M)
        if berry:
            version = YARN_BERRY_BY_LOCKFILE.get(berry.group(1), YARN_BERRY_LATEST)
            return Toolchain("yarn", version, f"{lockfile} (berry, metadata v{berry.group(1)})",
                             lockfile, node)
        return Toolchain("yarn", YARN_CLASSIC, f"{lockfile} (classic)", lockfile, node)
    return Toolchain(name, None, lockfile, lockfile, node)


def node_floor(engines: str | None) -> int | None:
    """The lowest Node major an `engines.node` range accepts, where it says one
    plainly (`>=22`, `^20.11`, `22.x`, `~22.1`, `22`); None when it sets no floor."""
    if not engines:
        return None
    floors: list[int] = []
    for alternative in engines.split("||"):
        match = re.match(r"\s*(>=|\^|~|=|v)?\s*v?(\d+)", alternative)
        if not match:
            return None
        floors.append(int(match.group(2)))
    return min(floors) if floors else None


def node_ceiling(engines: str | None) -> int | None:
    """The highest Node major allowed, when the range caps it (`<23`, `<=22`, `^22`,
    `22.x`, an exact version); None when it is open-ended."""
    if not engines:
        return None
    ceilings: list[int] = []
    for alternative in engines.split("||"):
        text = alternative.strip()
        below = re.search(r"<\s*(\d+)(\.0)?(\.0)?\b(?!\.[1-9])", text)
        at_most = re.search(r"<=\s*(\d+)", text)
        if below:
            ceilings.append(int(below.group(1)) - 1)
        elif at_most:
            ceilings.append(int(at_most.group(1)))
        elif re.match(r"^[\^~]?v?(\d+)(\.(\d+|x|\*))*$", text):
            ceilings.append(int(re.match(r"^[\^~]?v?(\d+)", text).group(1)))  # type: ignore[union-attr]
        else:
            return None
    return max(ceilings) if ceilings else None


RUNNER_PACKAGES = {"vitest": "vitest", "jest": "jest", "@playwright/test": "playwright"}
RUNNER_CONFIGS = {
    "vitest": re.compile(r"^vitest\.(config|workspace)\.[cm]?[jt]s$|^vite\.config\.[cm]?[jt]s$"),
    "jest": re.compile(r"^jest\.config\.([cm]?[jt]s|json)$"),
    "playwright": re.compile(r"^playwright\.config\.[cm]?[jt]s$"),
}
#: Where Playwright specs live when the config does not say (`testDir`).
E2E_MARKERS = re.compile(r"(^|/)e2e/|\.e2e\.[cm]?[jt]sx?$")
TEST_DIR = re.compile(r"""testDir\s*:\s*["'`]\.?/?([^"'`]*?)/?["'`]""")


@dataclass(frozen=True)
class Runners:
    """The test runners found, in the order they run, and Playwright's spec folder
    (relative to the package)."""

    names: tuple[str, ...]
    e2e_dir: str | None = None
    #: Why the verifier cannot serve the app the way the Playwright config expects
    #: (None: it can, with `vite build` and `vite preview`).
    e2e_unserved: str | None = None

    def runner_of(self, spec: str) -> str:
        """The runner that runs a spec file (its path relative to the package)."""
        if "playwright" in self.names:
            in_dir = bool(self.e2e_dir) and spec.startswith(f"{self.e2e_dir}/")
            if in_dir or (not self.e2e_dir and E2E_MARKERS.search(spec)):
                return "playwright"
        for unit in ("vitest", "jest"):
            if unit in self.names:
                return unit
        if "playwright" in self.names:
            return "playwright"
        raise MiningError(f"no test runner runs {spec}")


def detect_runners(manifest_text: str | None, root_files: Collection[str],
                   read: Callable[[str], str | None]) -> Runners:
    """Runners from a package.json (dependencies, scripts) and the config files beside
    it; `read` reads a file of that folder."""
    found: list[str] = []
    manifest = _manifest(manifest_text)
    packages: set[str] = set()
    for section in ("dependencies", "devDependencies"):
        table = manifest.get(section)
        if isinstance(table, dict):
            packages.update(table)
    scripts = manifest.get("scripts")
    script_text = " ".join(str(v) for v in scripts.values()) if isinstance(scripts, dict) else ""
    for package, runner in RUNNER_PACKAGES.items():
        configs = [f for f in root_files if RUNNER_CONFIGS[runner].match(f)]
        configured = any(not f.startswith("vite.") or re.search(r"\btest\s*:", read(f) or "")
                         for f in configs)
        named = re.search(rf"\b{runner}\b", script_text) is not None
        if package in packages or configured or named or (runner == "jest" and "jest" in manifest):
            found.append(runner)
    e2e_dir = unserved = None
    if "playwright" in found:
        for name in sorted(root_files):
            if RUNNER_CONFIGS["playwright"].match(name):
                text = read(name) or ""
                match = TEST_DIR.search(text)
                if match and match.group(1) not in ("", "."):
                    e2e_dir = match.group(1)
                unserved = e2e_unserved(name, text, scripts if isinstance(scripts, dict) else {})
                break
    # Vitest over Jest when both are named: a Vite project keeps Jest only by history.
    if "vitest" in found and "jest" in found and not re.search(r"\bjest\b", script_text):
        found.remove("jest")
    return Runners(tuple(found), e2e_dir, unserved)


WEB_SERVER = re.compile(
    r"""webServer\s*:\s*\[?\s*\{(?:[^{}]|\{[^{}]*\})*?\bcommand\s*:\s*(["'`])(.+?)\1""", re.S)
RUN_SCRIPT = re.compile(r"^(?:npm|pnpm|yarn)(?:\s+run)?\s+([\w:.-]+)")


def e2e_unserved(config: str, text: str, scripts: dict[str, object]) -> str | None:
    """Why the verifier cannot serve the app for these Playwright specs: it serves a
    Vite build with `vite preview` in place of the config's `webServer`, so the
    config must start one, and with Vite (directly or through a package script)."""
    if "webServer" not in text:
        return f"{config} starts no webServer (the specs expect a server the verifier does not run)"
    match = WEB_SERVER.search(text)
    if not match:
        return None  # a computed command: the verifier's Vite server stands in for it
    command = match.group(2).strip()
    script = RUN_SCRIPT.match(command)
    body = str(scripts.get(script.group(1), "")) if script else command
    if re.search(r"\bvite\b", command) or re.search(r"\bvite\b", body):
        return None
    return (f"{config} serves the app with `{command}`" + (f" ({body})" if script and body else "")
            + ", not Vite: the verifier serves `vite build` + `vite preview`")


def merge_runners(package: Runners, root: Runners, folder: str) -> tuple[Runners, str]:
    """A workspace package's runners and its folder, or, when the package names none,
    the root's and the root folder: a runner installed once at the root, with one
    config there for every package, runs from the root as its config expects."""
    return (package, folder) if package.names else (root, "")


def package_of(path: str, manifests: Collection[str]) -> str:
    """The folder of the nearest package.json above `path` ("" for the root)."""
    parent = PurePosixPath(path).parent
    while str(parent) not in (".", ""):
        if f"{parent}/package.json" in manifests:
            return str(parent)
        parent = parent.parent
    return ""


def _bin_path(package: str) -> str:
    # The package's own binaries first (pnpm links them there), then the workspace
    # root's (npm and yarn hoist them). CACHE_DIR: tools that keep a cache in
    # node_modules/.cache (Storybook's Vitest plugin, Babel loaders; find-cache-dir
    # and its kin read it) keep it in the room's own temporary folder, as the test
    # room has node_modules read-only.
    dirs = [f"/app/{package}/node_modules/.bin"] if package else []
    return ("CACHE_DIR=${TMPDIR:-/tmp}/cache PATH="
            + ":".join([*dirs, "/app/node_modules/.bin", "$PATH"]))


@dataclass(frozen=True)
class TestPlan:
    """The verifier's commands: `cmd` the unit specs, `e2e_cmd` the Playwright ones
    (None without), `e2e_specs` the folder of tests/specs the e2e specs are in."""

    __test__ = False  # not a pytest test class
    cmd: str
    e2e_cmd: str | None
    e2e_specs: str


#: Each test's own limit in a mined task's unit runs (a repository's config setting a
#: longer one is overridden; the whole command stays under the verifier's timeout).
TEST_TIMEOUT_MS = 60_000


def plan_tests(specs: Sequence[str], runners: Runners, package: str = "") -> TestPlan:
    """Each runner on exactly its changed spec files, in the package the specs are in,
    with the binaries the install put there and the JSON reports the verifier reads
    (`$REACTBENCH_REPORTS`)."""
    prefix = f"{package}/" if package else ""
    groups: dict[str, list[str]] = {}
    for spec in specs:
        groups.setdefault(runners.runner_of(spec.removeprefix(prefix)), []).append(spec)
    cd = f"cd /app/{shlex.quote(package)} && " if package else ""
    env = _bin_path(package)
    # One unit runner at most: runner_of picks Vitest over Jest.
    unit: list[str] = []
    for runner in ("vitest", "jest"):
        files = " ".join(shlex.quote(s.removeprefix(prefix)) for s in groups.get(runner, []))
        if not files:
            continue
        # --testTimeout: the runners' 5 s per test is the team's machine's; a verifier
        # sharing its cores failed correct references on it (a tooltip spec took 6 s).
        if runner == "vitest":
            # --no-cache: Vitest 1 fails the run when it cannot write its results cache
            # into node_modules, which the test room has read-only.
            unit.append(f"{cd}{env} vitest run --no-cache --testTimeout={TEST_TIMEOUT_MS} "
                        "--reporter=default --reporter=json "
                        f"--outputFile.json=$REACTBENCH_REPORTS/vitest.json {files}")
        else:
            # Jest's JSON report has the shape the verifier reads from Vitest's.
            unit.append(f"{cd}{env} jest --ci --testTimeout={TEST_TIMEOUT_MS} --json "
                        f"--outputFile=$REACTBENCH_REPORTS/vitest.json --runTestsByPath {files}")
    e2e = groups.get("playwright", [])
    e2e_specs = "e2e"
    if e2e:
        tops = {s.split("/", 1)[0] for s in e2e}
        if len(tops) != 1 or "/" not in e2e[0]:
            raise MiningError("its Playwright specs are not in one folder: "
                              + ", ".join(sorted(e2e)))
        e2e_specs = tops.pop()
    e2e_cmd = None
    if e2e:
        files = " ".join(shlex.quote(s.removeprefix(prefix)) for s in e2e)
        e2e_cmd = f"{cd}{env} playwright test {files} --reporter=list,json"
    # With only e2e specs the unit phase has nothing to run.
    return TestPlan(unit[0] if unit else "true", e2e_cmd, e2e_specs)


def source_roots(paths: Collection[str], root_entries: Collection[str]) -> list[str]:
    """The verifier's source roots: the top-level folder (or root file) of each
    source path, and `src` where the repository has one."""
    roots = {PurePosixPath(p).parts[0] for p in paths}
    if "src" in root_entries:
        roots.add("src")
    return sorted(r for r in roots if not r.startswith(".")) or ["src"]
