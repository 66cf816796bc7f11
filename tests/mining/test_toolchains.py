"""Mining honours each repository's own toolchain, for real: small repositories made
here, their lockfiles written by the package manager itself (from the npm registry),
mined with `reactbench mine` and checked with the controls on the local backend
(the installs at bake come from the registry too).

    pnpm        pinned (packageManager pnpm@10), a workspace: the change is in one
                package, whose own Vitest runs its spec; esbuild's build script is
                one pnpm 10 does not run unless allowed
    yarn berry  pinned (yarn@4), Plug'n'Play by default: installed with node_modules
    yarn 1      no packageManager field: told from yarn.lock alone; Vitest 1
    npm         package-lock.json, Jest instead of Vitest; its own `prepare` builds a
                submodule the clone lacks, so the install runs once more without it
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from tests.mining.history import commit, run_git

pytestmark = pytest.mark.slow

COREPACK_ENV = {"COREPACK_ENABLE_DOWNLOAD_PROMPT": "0", "COREPACK_ENABLE_AUTO_PIN": "0",
                "COREPACK_NPM_REGISTRY": "https://registry.npmjs.org", "COREPACK_INTEGRITY_KEYS": "0",
                "COREPACK_ENABLE_STRICT": "0"}
REACT = {"react": "19.1.0", "react-dom": "19.1.0"}

BADGE_BASE = """\
export function badgeLabel(count) {
  return String(count);
}

export function Badge({ count }) {
  return <span className="badge">{badgeLabel(count)}</span>;
}
"""
BADGE_HEAD = """\
export function badgeLabel(count) {
  if (count > 99) return "99+";
  return count === 1 ? "1 item" : `${count} items`;
}

export function Badge({ count }) {
  return <span className="badge">{badgeLabel(count)}</span>;
}
"""
VITEST_SPEC = """\
import { describe, expect, it } from "vitest";
import { badgeLabel } from "./badge-label.js";

describe("badgeLabel", () => {
  it("names the items", () => {
    expect(badgeLabel(1)).toBe("1 item");
    expect(badgeLabel(3)).toBe("3 items");
  });
  it("caps at 99", () => expect(badgeLabel(120)).toBe("99+"));
});
"""
JEST_SPEC = VITEST_SPEC.replace('import { describe, expect, it } from "vitest";\n', "").replace(
    'import { badgeLabel } from "./badge-label.js";', 'const { badgeLabel } = require("./badge-label.js");')
# The label logic in a plain module the specs import; the component beside it, for
# React Doctor to find React in.
LABEL_BASE = BADGE_BASE.split("\n\n")[0] + "\n"
LABEL_HEAD = BADGE_HEAD.split("\n\n")[0] + "\n"


@dataclass(frozen=True)
class Repo:
    name: str
    manager: str  # the corepack name@version that writes the lockfile
    pinned: bool
    runner: str
    workspace: bool = False

    @property
    def label(self) -> str:
        return self.manager if self.name != "npm" else "npm"


REPOS = [
    Repo("pnpm-workspace", "pnpm@10.30.3", pinned=True, runner="vitest", workspace=True),
    Repo("yarn-berry", "yarn@4.18.1", pinned=True, runner="vitest"),
    Repo("yarn-classic", "yarn@1.22.22", pinned=False, runner="vitest"),
    Repo("npm", "npm", pinned=False, runner="jest"),
]


def lock(cwd: Path, *command: str) -> None:
    """Write the lockfile as a developer would, with the package manager itself."""
    env = {**os.environ, **COREPACK_ENV, "CI": "1"}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def commonjs(module: str) -> str:
    """The label module for Jest, which runs CommonJS without a transform."""
    return module.replace("export function", "function") + "\nmodule.exports = { badgeLabel };\n"


def make_repo(root: Path, spec: Repo) -> tuple[Path, str]:
    """The repository with a base commit (lockfile written by its manager) and a change
    (the label logic and its new spec); returns the repository and the change's sha."""
    repo = root / spec.name
    repo.mkdir(parents=True)
    run_git(repo, "init", "-q", "-b", "main")
    # yarn 1 with Vitest 1, which fails a run whose results cache it cannot write into
    # node_modules (read-only in the test room) unless told not to keep one.
    vitest = "1.6.1" if spec.name == "yarn-classic" else "3.2.4"
    runner = {"vitest": vitest} if spec.runner == "vitest" else {"jest": "29.7.0"}
    scripts = {"test": f"{spec.runner} run" if spec.runner == "vitest" else "jest"}
    if spec.name == "npm":
        # As a repository with a submodule the clone lacks: its own hook fails at bake.
        scripts["prepare"] = "cd external/theme && npm run build"
    package = {"name": spec.name, "private": True, "version": "1.0.0", "scripts": scripts}
    if spec.runner == "vitest":
        package["type"] = "module"
    if spec.pinned:
        package["packageManager"] = spec.manager
    app = repo
    if spec.workspace:
        # The root holds nothing but the workspace; the package has React and Vitest.
        (repo / "pnpm-workspace.yaml").write_text("packages:\n  - packages/*\n")
        (repo / "package.json").write_text(json.dumps(package, indent=2) + "\n")
        app = repo / "packages" / "badge"
        app.mkdir(parents=True)
        package = {"name": "@tiny/badge", "private": True, "version": "1.0.0", "type": "module",
                   "scripts": {"test": "vitest run"}}
    package |= {"dependencies": REACT, "devDependencies": runner}
    (app / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    (repo / ".gitignore").write_text("node_modules/\n.yarn/\n.pnp.*\n")
    if spec.name == "yarn-berry":
        lock(repo, "corepack", "yarn", "install", "--mode=update-lockfile")
    elif spec.name == "yarn-classic":
        lock(repo, "corepack", spec.manager, "install", "--ignore-scripts", "--ignore-engines")
    elif spec.name == "npm":
        lock(repo, "npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund")
    else:
        lock(repo, "corepack", "pnpm", "install", "--lockfile-only")
    src = "packages/badge/src" if spec.workspace else "src"
    base, changed = (LABEL_BASE, LABEL_HEAD) if spec.runner == "vitest" else (
        commonjs(LABEL_BASE), commonjs(LABEL_HEAD))
    commit(repo, "A badge", {f"{src}/badge-label.js": base, f"{src}/Badge.jsx": BADGE_BASE,
                             "README.md": "# Badge\n"})
    head = commit(repo, "Badge: name the items, cap at 99", {
        f"{src}/badge-label.js": changed,
        f"{src}/badge-label.test.js": VITEST_SPEC if spec.runner == "vitest" else JEST_SPEC,
    })
    return repo, head


@pytest.mark.parametrize("spec", [r for r in REPOS if not r.workspace], ids=lambda r: r.name)
def test_a_change_is_mined_with_the_repositorys_own_package_manager(
        spec: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, head = make_repo(tmp_path, spec)
    task = tmp_path / "tasks" / spec.name
    code = main(["mine", "--repo", str(repo), "--base", f"{head}~1", "--head", head, "--out", str(task)])
    out = capsys.readouterr().out
    assert code == 0, out[-4000:]
    assert "oracle: passed (tests 1, react_doctor 1)" in out and "nop: failed (tests 0" in out
    record = json.loads((task / "mining.json").read_text())
    assert record["package_manager"] == spec.label
    assert record["toolchain_from"].startswith("packageManager" if spec.pinned else
                                              ("yarn.lock" if "yarn" in spec.name else "package-lock.json"))
    assert record["runners"] == [spec.runner]
    config = json.loads((task / "tests" / "config.json").read_text())
    assert "$REACTBENCH_REPORTS/vitest.json" in config["test"]["cmd"]
    # Every test the reference passed is one the gate expects, named as the verifier
    # names it from the report (Vitest 1 puts the file's own, empty, suite first).
    first = " > " if spec.name == "yarn-classic" else ""
    assert config["test"]["expected"] == {
        "src/badge-label.test.js": [f"{first}badgeLabel > names the items",
                                    f"{first}badgeLabel > caps at 99"]}


def test_a_range_of_a_workspace_is_mined_in_one_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = next(r for r in REPOS if r.workspace)
    repo, head = make_repo(tmp_path, spec)
    docs = commit(repo, "Say what the badge shows", {"README.md": "# Badge\n\nA count.\n"})
    base = run_git(repo, "rev-parse", f"{head}~1")
    out_dir = tmp_path / "tasks"
    code = main(["mine", "--repo", str(repo), "--range", f"{base}..{docs}", "--out", str(out_dir),
                 "--jobs", "2"])
    out = capsys.readouterr().out
    assert code == 0, out[-4000:]
    assert f"{head[:10]} mined   Badge: name the items" in out
    assert f"{docs[:10]} refused Say what the badge shows: it touches only docs" in out
    assert "mined 1, refused 1, failed 0 of 2 changes" in out
    summary = json.loads((out_dir / "summary.json").read_text())
    assert (summary["mined"], summary["refused"], summary["failed"]) == (1, 1, 0)
    assert summary["refused_by_reason"] == {"only-docs": 1}
    task = out_dir / f"{spec.name}-{head[:10]}"
    record = json.loads((task / "mining.json").read_text())
    assert record["package"] == "packages/badge" and record["package_manager"] == spec.manager
    config = json.loads((task / "tests" / "config.json").read_text())
    # The package's own Vitest, in its folder; the spec named relative to /app.
    assert config["test"]["cmd"].startswith("cd /app/packages/badge && ")
    assert config["test"]["expected"] == {"packages/badge/src/badge-label.test.js": [
        "badgeLabel > names the items", "badgeLabel > caps at 99"]}
    log = (out_dir / "logs" / f"{head[:10]}.log").read_text()
    assert "pnpm@10.30.3 (from packageManager pnpm@10.30.3), package packages/badge" in log
