"""What a repository tests with and installs with, read from its files.

The package manager comes from the lockfile; the test runners (Vitest, Jest,
Playwright) from package.json's dependencies and scripts and from config files.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from pytest_reactbench.mining.changes import MiningError

LOGS = "/logs/verifier"


@dataclass(frozen=True)
class PackageManager:
    name: str
    lockfile: str | None
    #: Run at bake, in /app, over the scaffold's node_modules.
    install: str
    #: Prefix that runs a binary of the project's dependencies.
    exec: str


# pnpm reuses the scaffold's node_modules (installed with the same store and import
# method, so an unchanged lockfile installs nothing); the others start afresh.
PNPM_INSTALL = ("pnpm install --frozen-lockfile --prefer-offline --store-dir /tmp/pnpm-store "
                "--package-import-method=copy && rm -rf /tmp/pnpm-store")
PACKAGE_MANAGERS = (
    PackageManager("pnpm", "pnpm-lock.yaml", PNPM_INSTALL, "pnpm exec"),
    PackageManager("yarn", "yarn.lock", "rm -rf node_modules && yarn install --frozen-lockfile",
                   "yarn"),
    PackageManager("npm", "package-lock.json",
                   "rm -rf node_modules && npm ci --prefer-offline --no-audit --no-fund", "npx --no-install"),
    PackageManager("npm", "npm-shrinkwrap.json",
                   "rm -rf node_modules && npm ci --prefer-offline --no-audit --no-fund", "npx --no-install"),
    PackageManager("bun", "bun.lock", "rm -rf node_modules && bun install --frozen-lockfile", "bunx"),
    PackageManager("bun", "bun.lockb", "rm -rf node_modules && bun install --frozen-lockfile", "bunx"),
)
NO_LOCKFILE = PackageManager("npm", None, "rm -rf node_modules && npm install --no-audit --no-fund",
                             "npx --no-install")


def package_manager(root_files: Collection[str]) -> PackageManager:
    """The package manager of the first lockfile found at the repository's root."""
    for manager in PACKAGE_MANAGERS:
        if manager.lockfile in root_files:
            return manager
    return NO_LOCKFILE


RUNNER_PACKAGES = {"vitest": "vitest", "jest": "jest", "@playwright/test": "playwright"}
RUNNER_CONFIGS = {
    "vitest": re.compile(r"^vitest\.(config|workspace)\.[cm]?[jt]s$"),
    "jest": re.compile(r"^jest\.config\.([cm]?[jt]s|json)$"),
    "playwright": re.compile(r"^playwright\.config\.[cm]?[jt]s$"),
}
#: Where Playwright specs live when the config does not say (`testDir`).
E2E_MARKERS = re.compile(r"(^|/)e2e/|\.e2e\.[cm]?[jt]sx?$")
TEST_DIR = re.compile(r"""testDir\s*:\s*["'`]\.?/?([^"'`]*?)/?["'`]""")


@dataclass(frozen=True)
class Runners:
    """The test runners found, in the order they run, and Playwright's spec folder."""

    names: tuple[str, ...]
    e2e_dir: str | None = None

    def runner_of(self, spec: str) -> str:
        """The runner that runs a spec file."""
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
    """Runners from package.json (dependencies, scripts) and the config files at the root."""
    found: list[str] = []
    manifest: dict[str, object] = {}
    if manifest_text:
        try:
            loaded = json.loads(manifest_text)
        except json.JSONDecodeError as exc:
            raise MiningError(f"package.json is not valid JSON: {exc}") from None
        manifest = loaded if isinstance(loaded, dict) else {}
    packages: set[str] = set()
    for section in ("dependencies", "devDependencies"):
        table = manifest.get(section)
        if isinstance(table, dict):
            packages.update(table)
    scripts = manifest.get("scripts")
    script_text = " ".join(str(v) for v in scripts.values()) if isinstance(scripts, dict) else ""
    for package, runner in RUNNER_PACKAGES.items():
        configured = any(RUNNER_CONFIGS[runner].match(f) for f in root_files)
        named = re.search(rf"\b{runner}\b", script_text) is not None
        if package in packages or configured or named or (runner == "jest" and "jest" in manifest):
            found.append(runner)
    e2e_dir = None
    if "playwright" in found:
        for name in sorted(root_files):
            if RUNNER_CONFIGS["playwright"].match(name):
                match = TEST_DIR.search(read(name) or "")
                if match and match.group(1) not in ("", "."):
                    e2e_dir = match.group(1)
                break
    # Vitest over Jest when both are named: a Vite project keeps Jest only by history.
    if "vitest" in found and "jest" in found and not re.search(r"\bjest\b", script_text):
        found.remove("jest")
    return Runners(tuple(found), e2e_dir)


def verifier_command(specs: Sequence[str], runners: Runners, manager: PackageManager) -> str:
    """The verifier's command: each runner on exactly its changed spec files, with the
    JSON reports the verifier reads failing spec names from."""
    groups: dict[str, list[str]] = {}
    for spec in specs:
        groups.setdefault(runners.runner_of(spec), []).append(spec)
    steps: list[str] = []
    for runner in ("vitest", "jest", "playwright"):
        files = " ".join(shlex.quote(s) for s in groups.get(runner, []))
        if not files:
            continue
        if runner == "vitest":
            steps.append(f"{manager.exec} vitest run --reporter=default --reporter=json "
                         f"--outputFile.json={LOGS}/vitest.json {files}")
        elif runner == "jest":
            # Jest's JSON report has the shape the verifier reads from Vitest's.
            steps.append(f"{manager.exec} jest --ci --json --outputFile={LOGS}/vitest.json {files}")
        else:
            steps.append(f"{manager.exec} playwright test --reporter=list,json {files}")
    return " && ".join(steps)


def source_roots(paths: Collection[str], root_entries: Collection[str]) -> list[str]:
    """The verifier's source roots: the top-level folder (or root file) of each
    source path, and `src` where the repository has one."""
    roots = {PurePosixPath(p).parts[0] for p in paths}
    if "src" in root_entries:
        roots.add("src")
    return sorted(r for r in roots if not r.startswith(".")) or ["src"]
