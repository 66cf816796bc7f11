"""Lays out a mined change as a task directory in the Harbor format.

    task.toml, instruction.md
    environment/Dockerfile, environment/app/   the base revision (tracked files only)
                                               with the head's manifests and configs
    environment/reactbench-install.sh          the install script (mining/install.sh)
    tests/Dockerfile, tests/app/               the same app, baked by our verifier
    tests/reactbench-install.sh                the same install script
    tests/config.json, tests/test.sh
    tests/specs/                               the test half at head, by exact path
    solution/solve.sh, solution/source.patch   the source half, as a binary patch
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_reactbench.mining.changes import (
    ENVIRONMENT_KINDS,
    Change,
    Kind,
    MiningError,
    classify,
    git,
    of_kind,
)
from pytest_reactbench.mining.runners import INSTALL_AT, INSTALL_SCRIPT, Runners, TestPlan, Toolchain
from pytest_reactbench.verifier.contract import DoctorFinding

AGENT_IMAGE = "ghcr.io/millionco/react-bench-base:latest"
VERIFIER_IMAGE = "ghcr.io/millionco/react-bench-verifier-base:latest"
VERIFIER_PLAYWRIGHT_IMAGE = "ghcr.io/millionco/react-bench-verifier-playwright:latest"

#: Defaults for a task nobody has timed yet: generous, as a real repository's
#: install and test run are slower than the shipped tasks'.
AGENT_TIMEOUT_SEC = 1800
VERIFIER_TIMEOUT_SEC = 600
#: The scan after the submission runs beside the test command: a whole repository's,
#: on a loaded machine, outlasted the 120 s a hand-written task's scan gets.
RD_TIMEOUT_SEC = 300
BUILD_TIMEOUT_SEC = 1800
CPUS = 2
MEMORY_MB = 4096
STORAGE_MB = 10240


@dataclass(frozen=True)
class TaskPlan:
    """Everything the writer needs, decided by the miner."""

    task_id: str
    repo: Path
    base: str
    head: str
    title: str
    body: str
    changes: tuple[Change, ...]
    toolchain: Toolchain
    runners: Runners
    specs: tuple[str, ...]
    sources: tuple[str, ...]
    tests: TestPlan
    #: The workspace package the specs are in ("" for the repository's root).
    package: str = ""
    #: Source paths in folders or with names React Doctor treats as tests or tooling:
    #: the grader admits them from a submission once the task declares them.
    declared: tuple[str, ...] = ()


#: The install script's name in a task's build contexts.
INSTALL_FILE = "reactbench-install.sh"


def write_task(plan: TaskPlan, dest: Path) -> None:
    """Write the task directory `dest` (which must not exist yet)."""
    dest.mkdir(parents=True)
    (dest / "task.toml").write_text(task_toml(plan))
    (dest / "instruction.md").write_text(instruction(plan.title, plan.body))
    environment, tests, solution = dest / "environment", dest / "tests", dest / "solution"
    lay_out_app(plan, environment / "app")
    shutil.copytree(environment / "app", tests / "app", symlinks=True)
    (environment / "Dockerfile").write_text(agent_dockerfile(plan))
    (tests / "Dockerfile").write_text(verifier_dockerfile(plan))
    for context in (environment, tests):
        shutil.copyfile(INSTALL_SCRIPT, context / INSTALL_FILE)
    (tests / "config.json").write_text(json.dumps(tests_config(plan), indent=2) + "\n")
    _script(tests / "test.sh", "# Grades /app in the clean room of the verifier image; writes "
            "/logs/verifier/reward.json.\nexec node /opt/reactbench/verifier/verifier.mjs grade\n")
    for change in of_kind(plan.changes, Kind.TEST):
        if not change.deleted:
            write_blob(plan.repo, plan.head, change.path, tests / "specs" / change.path)
    solution.mkdir()
    (solution / "source.patch").write_bytes(source_patch(plan))
    _script(solution / "solve.sh", (
        "# The reference solution: the source half of the mined change, a binary-safe\n"
        "# patch (renames, deletions and binary files included).\n"
        "set -euo pipefail\ncd /app\ngit apply --whitespace=nowarn /solution/source.patch\n"))


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def instruction(title: str, body: str) -> str:
    return f"# {title.strip()}\n" + (f"\n{body.strip()}\n" if body.strip() else "")


def lay_out_app(plan: TaskPlan, app: Path) -> None:
    """The base revision's tracked files, with the environment half at head applied."""
    app.mkdir(parents=True)
    try:
        archive = git(plan.repo, "archive", "--format=tar", plan.base)
    except MiningError:
        # A partial clone (or a mirror without its largest files) lacks some blobs:
        # file by file, leaving out only documentation the task never reads.
        _lay_out_file_by_file(plan, app)
    else:
        proc = subprocess.run(["tar", "-x", "-C", str(app)], input=archive, capture_output=True)
        if proc.returncode != 0:
            raise MiningError(f"cannot unpack the base revision: {proc.stderr.decode(errors='replace')}")
    for change in of_kind(plan.changes, *ENVIRONMENT_KINDS):
        gone = [change.old_path] if change.old_path else []
        for path in gone + ([change.path] if change.deleted else []):
            target = app / path
            if target.is_symlink() or target.is_file():
                target.unlink()
        if not change.deleted:
            write_blob(plan.repo, plan.head, change.path, app / change.path)


def _lay_out_file_by_file(plan: TaskPlan, app: Path) -> None:
    listing = git(plan.repo, "ls-tree", "-r", "-z", plan.base).decode("utf-8", errors="surrogateescape")
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        if meta.split(" ")[1] == "commit":
            # A submodule: an empty folder, as `git archive` leaves it.
            (app / path).mkdir(parents=True, exist_ok=True)
            continue
        try:
            write_blob(plan.repo, plan.base, path, app / path)
        except MiningError:
            if classify(path) is not Kind.DOCS:
                raise MiningError(f"{path} at {plan.base[:12]} is missing from the repository "
                                  "(a partial clone?): fetch it, then mine again") from None


def write_blob(repo: Path, rev: str, path: str, dest: Path) -> None:
    """A file as it is at `rev`, bytes, executable bit and symlinks kept."""
    entry = git(repo, "--literal-pathspecs", "ls-tree", "-z", rev, "--", path).decode().rstrip("\0")
    if not entry:
        raise MiningError(f"{path} is not in {rev[:12]}")
    mode = entry.split(" ", 1)[0]
    content = git(repo, "cat-file", "blob", f"{rev}:{path}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    if mode == "120000":
        os.symlink(os.fsdecode(content), dest)
        return
    dest.write_bytes(content)
    dest.chmod(0o755 if mode == "100755" else 0o644)


def source_patch(plan: TaskPlan) -> bytes:
    paths = [p for change in of_kind(plan.changes, Kind.SOURCE) for p in change.paths]
    return git(plan.repo, "--literal-pathspecs", "diff", "--binary", "--full-index", "-M",
               plan.base, plan.head, "--", *paths)


def _install_step(plan: TaskPlan, then: str = "") -> str:
    """The repository at /app, installed; `then`: what the same RUN does next."""
    return (
        "# The repository replaces the scaffold; its dependencies (as of the mined change's\n"
        "# head) are installed here with its own package manager "
        f"({plan.toolchain.label}, from\n# {plan.toolchain.why}), so a dependency change is "
        "the environment's, not the agent's.\n"
        "WORKDIR /app\n"
        "RUN find /app -mindepth 1 -maxdepth 1 -exec rm -rf {} +\n"
        "COPY app/ /app/\n"
        f"COPY {INSTALL_FILE} {INSTALL_AT}\n"
        f"RUN {plan.toolchain.install}{then}\n"
    )


def agent_dockerfile(plan: TaskPlan) -> str:
    return (
        f"ARG BASE_IMAGE={AGENT_IMAGE}\nFROM ${{BASE_IMAGE}}\n\n" + _install_step(plan)
        + "RUN git init -q \\\n"
        " && echo node_modules >> .git/info/exclude \\\n"
        " && git add -A \\\n"
        ' && git -c user.email=base@reactbench -c user.name=base commit -qm "task base"\n'
    )


def verifier_dockerfile(plan: TaskPlan) -> str:
    image = VERIFIER_PLAYWRIGHT_IMAGE if "playwright" in _runners_used(plan) else VERIFIER_IMAGE
    # The verifier keeps node_modules out of /app: in the layer that installed it a
    # rename, from a layer below a copy of every file (minutes for a large repository,
    # past build_timeout_sec on a loaded machine). So the install step moves them, and
    # the tests come after it: a changed config.json (the miner writes the expected
    # tests once the reference has run) bakes again without installing again (docker
    # caches each step; the local backend bakes an image as one layer).
    return (
        f"ARG BASE_IMAGE={image}\nFROM ${{BASE_IMAGE}}\n\n"
        + _install_step(plan, then=" \\\n && node /opt/reactbench/verifier/verifier.mjs keep-deps")
        + "\nCOPY config.json test.sh /tests/\n"
        "COPY specs/ /tests/specs/\n"
        "RUN node /opt/reactbench/verifier/verifier.mjs bake\n"
    )


def _runners_used(plan: TaskPlan) -> set[str]:
    prefix = f"{plan.package}/" if plan.package else ""
    return {plan.runners.runner_of(spec.removeprefix(prefix)) for spec in plan.specs}


def tests_config(plan: TaskPlan, expected: dict[str, list[str]] | None = None,
                 tolerated: Sequence[DoctorFinding] = ()) -> dict[str, object]:
    """tests/config.json; `expected` (spec file -> test names) once a run has listed them.
    Until then the draft lets the specs' own skipped tests be (the list, once made,
    holds the submission to every test the reference passed). `tolerated`: the React
    Doctor findings the reference adds, which no solution is held against."""
    test: dict[str, object] = {"cmd": plan.tests.cmd}
    if plan.tests.e2e_cmd:
        test["e2e_cmd"] = plan.tests.e2e_cmd
        if plan.tests.e2e_specs != "e2e":
            test["e2e_specs"] = plan.tests.e2e_specs
    if expected:
        test["expected"] = expected
    else:
        test["allow_skipped"] = True
    test["cwd"] = "/app"
    return {
        "rd": {"scan_root": "/app", "mode": "gate", "timeout_sec": RD_TIMEOUT_SEC,
               **({"ignored_new_footguns": tolerance(tolerated)} if tolerated else {})},
        "sources": list(plan.sources),
        **({"test_like_allowed": list(plan.declared)} if plan.declared else {}),
        "verifier_timeout_sec": VERIFIER_TIMEOUT_SEC,
        "test": test,
    }


def tolerance(findings: Sequence[DoctorFinding]) -> list[dict[str, str]]:
    """`rd.ignored_new_footguns` for the new findings of the reference's grading: one
    entry per finding it added. The grading lists every finding of a rule in a file
    whose count grew (`count` "before -> after"), so a group gets after - before
    entries, with the titles its findings have."""
    groups: dict[tuple[str, str], list[DoctorFinding]] = {}
    for finding in findings:
        groups.setdefault((finding.rule, finding.file), []).append(finding)
    entries = []
    for (rule, file), found in groups.items():
        before, _, after = found[0].count.partition(" -> ")
        added = int(after) - int(before) if before.isdigit() and after.isdigit() else len(found)
        entries += [{"rule": rule, "filePath": file, "title": found[i % len(found)].title}
                    for i in range(max(added, 1))]
    return entries


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def task_toml(plan: TaskPlan) -> str:
    # JSON strings are TOML basic strings: the same escapes.
    runners = sorted(_runners_used(plan))
    resources = (f"build_timeout_sec = {float(BUILD_TIMEOUT_SEC)}\ncpus = {CPUS}\n"
                 f"memory_mb = {MEMORY_MB}\nstorage_mb = {STORAGE_MB}\nallow_internet = false\n")
    return (
        'schema_version = "1.3"\n\n'
        "[task]\n"
        f"name = {json.dumps('mined/' + plan.task_id)}\n"
        f"description = {json.dumps(plan.title.strip())}\n"
        f"keywords = {_toml_list(['react', 'mined', *runners])}\n\n"
        "# Only the workspace's source crosses to the verifier; dependencies, git metadata\n"
        "# and build output never do.\n"
        "[[artifacts]]\n"
        'source = "/app"\n'
        'destination = "workspace"\n'
        'exclude = ["**/node_modules/**", "**/.git/**", "**/dist/**", "**/coverage/**", '
        '"**/test-results/**", "**/playwright-report/**"]\n\n'
        "[metadata]\n"
        'category = "mined"\n'
        f"tags = {_toml_list(['mined', *runners])}\n"
        f"repository = {json.dumps(plan.repo.name)}\n"
        f"base_commit = {json.dumps(plan.base)}\n"
        f"head_commit = {json.dumps(plan.head)}\n\n"
        f"[agent]\ntimeout_sec = {float(AGENT_TIMEOUT_SEC)}\n\n"
        f'[verifier]\ntimeout_sec = {float(VERIFIER_TIMEOUT_SEC)}\nenvironment_mode = "separate"\n\n'
        "[verifier.environment]\n" + resources + "\n"
        "[environment]\n" + resources
    )
