"""The stages before any sandbox: what the repository at head says of the change (its
toolchain, its test runners, the change's specs and their package: stage 1, survey),
then the reasons to refuse it and its test plan (stage 2, triage)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from pytest_reactbench.mining.changes import Change, Kind, MiningError, git, is_cypress, is_spec, of_kind
from pytest_reactbench.mining.refusals import Reason, early_refusals, toolchain_refusals
from pytest_reactbench.mining.runners import (
    Runners,
    TestPlan,
    Toolchain,
    detect_runners,
    detect_toolchain,
    merge_runners,
    package_of,
    plan_tests,
)


def _root_entries(repo: Path, rev: str) -> set[str]:
    return set(git(repo, "ls-tree", "-z", "--name-only", rev).decode().split("\0")) - {""}


def _read_at(repo: Path, rev: str, folder: str = "") -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        where = f"{folder}/{path}" if folder else path
        try:
            return git(repo, "cat-file", "blob", f"{rev}:{where}").decode(errors="replace")
        except MiningError:
            return None
    return read


def _package_files(repo: Path, rev: str, package: str) -> set[str]:
    """The names of the files at the top of a workspace package's folder."""
    names = git(repo, "--literal-pathspecs", "ls-tree", "-z", "--name-only", rev, "--",
                f"{package}/").decode()
    return {PurePosixPath(n).name for n in names.split("\0") if n}


#: The Node major of the images the docker backend runs (images/system).
IMAGES_NODE = 22


def sandbox_node(sandbox: str) -> int | None:
    """The Node major the controls' bakes run on: the host's on the local backend."""
    if sandbox != "local":
        return IMAGES_NODE
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"v(\d+)", version.strip())
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Survey:
    """How the repository at head tests the change: its toolchain, its test runners,
    the change's specs and the package they run in."""

    toolchain: Toolchain
    runners: Runners
    #: The specs the verifier runs (Cypress's and, without a browser to serve them,
    #: Playwright's left out).
    specs: list[str]
    #: The workspace packages the specs are in ("" for the root).
    packages: list[str]
    #: The folder the tests run in: the package's, or the root's when its runner is.
    runs_in: str
    #: Playwright specs carried with the tests but not run.
    e2e_dropped: list[str]
    root: set[str]

    @property
    def package(self) -> str:
        return self.packages[0] if len(self.packages) == 1 else ""


def survey(repo: Path, head: str, changes: list[Change]) -> Survey:
    """Stage 1: what the repository at `head` says (its manifests, its runners)."""
    root = _root_entries(repo, head)
    read = _read_at(repo, head)
    toolchain = detect_toolchain(read("package.json"), root, read)
    manifests = {p for p in git(repo, "ls-tree", "-r", "-z", "--name-only", head).decode().split("\0")
                 if p == "package.json" or p.endswith("/package.json")}
    # Cypress specs stay with the test half, but nothing runs them.
    specs = [c.path for c in of_kind(changes, Kind.TEST)
             if not c.deleted and is_spec(c.path) and not is_cypress(c.path)]
    packages = sorted({package_of(spec, manifests) for spec in specs})
    package = packages[0] if len(packages) == 1 else ""
    runners = detect_runners(read("package.json"), root, read)
    runs_in = package
    if package:
        in_package = _read_at(repo, head, package)
        runners, runs_in = merge_runners(detect_runners(in_package("package.json"),
                                                        _package_files(repo, head, package), in_package),
                                         runners, package)
    if package and toolchain.name == "pnpm":
        toolchain = replace(toolchain, hoisted=True)
    e2e_dropped: list[str] = []
    if runners.e2e_unserved and specs:
        prefix = f"{runs_in}/" if runs_in else ""
        e2e_dropped = [s for s in specs if runners.runner_of(s.removeprefix(prefix)) == "playwright"]
        specs = [s for s in specs if s not in e2e_dropped]
    return Survey(toolchain, runners, specs, packages, runs_in, e2e_dropped, root)


def triage(found: Survey, changes: list[Change], node: int | None) -> tuple[list[Reason], TestPlan | None]:
    """Stage 2, before any sandbox: the reasons to refuse the change, and its test plan
    (None when there is none to make)."""
    specs = found.specs
    reasons = early_refusals(changes, specs, found.runners.names)
    if [s for s in specs if "/" not in s]:
        reasons.append(Reason("test-command", "it has specs at the repository's root ("
                              + ", ".join(s for s in specs if "/" not in s)
                              + "): the verifier's hidden specs are folders"))
    if found.e2e_dropped and not specs:
        reasons = [r for r in reasons if r.code != "no-spec"]
        reasons.append(Reason("test-command",
                              f"its only specs are Playwright's and {found.runners.e2e_unserved}"))
    if not reasons and len(found.packages) > 1:
        reasons.append(Reason("workspace", "its specs are in more than one workspace package ("
                              + ", ".join(p or "the root" for p in found.packages)
                              + "): a task runs one package's tests"))
    if not reasons:
        reasons += toolchain_refusals(found.toolchain, node)
    if reasons:
        return reasons, None
    try:
        return reasons, plan_tests(specs, found.runners, found.runs_in)
    except MiningError as exc:
        return [Reason("test-command", str(exc))], None
