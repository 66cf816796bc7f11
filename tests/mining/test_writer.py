"""The task a change is written into, without a sandbox: the starting state, the
environment half, the hidden specs, and a reference patch that real `git apply`
turns into the head's source (binaries, renames, deletions, modes)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_reactbench.mining.changes import Kind, MiningError, read_changes
from pytest_reactbench.mining.proof import expected_tests
from pytest_reactbench.mining.runners import (
    Runners,
    detect_runners,
    detect_toolchain,
    plan_tests,
    source_roots,
)
from pytest_reactbench.mining.writer import TaskPlan, tolerance, write_task
from pytest_reactbench.tasks import load_task
from pytest_reactbench.tasks.load import parse_json
from pytest_reactbench.tasks.models import TestsConfig
from pytest_reactbench.verifier.contract import CONTRACT, DoctorFinding
from tests.mining.history import commit, run_git

LONG = "".join(f"export const v{i} = {i};\n" for i in range(30))


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def at(repo: Path, rev: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{rev}:{path}"],
                          check=True, capture_output=True).stdout


def make_plan(tmp_path: Path) -> TaskPlan:
    repo = tmp_path / "shop"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    # A submodule: a repository of its own inside, committed as a gitlink.
    (repo / "vendor" / "lib").mkdir(parents=True)
    run_git(repo / "vendor" / "lib", "init", "-q")
    commit(repo / "vendor" / "lib", "vendored", {"lib.js": "export {};\n"})
    base = commit(repo, "base", {
        "package.json": '{"devDependencies": {"vitest": "4.1.12"}}\n',
        "package-lock.json": '{"lockfileVersion": 3}\n',
        "vite.config.ts": "export default {};\n",
        "src/cart.ts": "export const total = 0;\n",
        "src/old.ts": LONG,
        "src/gone.ts": "export const gone = true;\n",
        "src/logo.png": b"\x89PNG\r\n\x1a\n\0\0base",
        "src/cart.test.ts": "// base spec\n",
        "scripts/build.sh": "#!/bin/sh\necho base\n",
        "docs/guide.md": "# Guide\n",
    })
    run_git(repo, "mv", "src/old.ts", "src/renamed.ts")
    run_git(repo, "mv", "vite.config.ts", "vitest.config.ts")
    head = commit(repo, "head", {
        "package.json": '{"devDependencies": {"vitest": "4.1.12", "zod": "4.0.0"}}\n',
        "package-lock.json": None,
        "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
        "vitest.config.ts": "export default { test: {} };\n",
        "src/cart.ts": "export const total = 1;\n",
        "src/renamed.ts": LONG + "export const more = 1;\n",
        "src/gone.ts": None,
        "src/logo.png": b"\x89PNG\r\n\x1a\n\0\0head\xff",
        "src/badge.webp": b"RIFF\0\0\0\0WEBP\xfe",
        "src/cart.test.ts": "// head spec\n",
        "src/checkout.spec.ts": "// new spec\n",
        "src/__fixtures__/order.bin": b"\0\x01\x02",
        "scripts/build.sh": "#!/bin/sh\necho head\n",
        "docs/guide.md": "# Guide\n\nMore.\n",
    })
    (repo / "scripts/build.sh").chmod(0o755)
    run_git(repo, "add", "-A")
    run_git(repo, "-c", "user.email=d@e", "-c", "user.name=D", "commit", "-qm", "make it executable")
    head = run_git(repo, "rev-parse", "HEAD")
    changes = read_changes(repo, base, head)
    root = set(run_git(repo, "ls-tree", "--name-only", head).split("\n"))
    read = lambda name: at(repo, head, name).decode()  # noqa: E731
    toolchain = detect_toolchain(read("package.json"), root, read)
    runners = detect_runners(read("package.json"), root, lambda _: None)
    specs = ("src/cart.test.ts", "src/checkout.spec.ts")
    sources = [p for c in changes if c.kind is Kind.SOURCE for p in c.paths]
    return TaskPlan(task_id="shop-1", repo=repo, base=base, head=head, title="Totals", body="Count them.",
                    changes=tuple(changes), toolchain=toolchain, runners=runners, specs=specs,
                    sources=tuple(source_roots(sources, root)), tests=plan_tests(specs, runners))


def test_the_task_layout(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    task = tmp_path / "tasks" / "shop-1"
    write_task(plan, task)
    loaded = load_task(task)
    assert loaded.config.task is not None and loaded.config.task.description == "Totals"
    assert loaded.config.agent.timeout_sec > 0 and loaded.config.artifacts[0].source == "/app"
    assert (task / "instruction.md").read_text() == "# Totals\n\nCount them.\n"
    config = parse_json(task / "tests" / "config.json", TestsConfig)
    assert config.rd.scan_root == "/app"
    assert config.rd.timeout_sec == 300  # a whole repository's scan, beside its tests
    assert json.loads((task / "tests" / "config.json").read_text())["sources"] == ["scripts", "src"]
    assert config.test.cmd.endswith("src/cart.test.ts src/checkout.spec.ts")
    for script in ("tests/test.sh", "solution/solve.sh"):
        assert (task / script).stat().st_mode & 0o111
    # The head's lockfile decides the install, at bake, in both images.
    for dockerfile in ("environment/Dockerfile", "tests/Dockerfile"):
        assert "pnpm install --frozen-lockfile" in (task / dockerfile).read_text()
    assert "react-bench-base" in (task / "environment/Dockerfile").read_text()
    assert "react-bench-verifier-base" in (task / "tests/Dockerfile").read_text()
    # The verifier keeps node_modules out of /app in the layer that installed them (a
    # rename, not a copy of every file); the tests come after, so a new config.json
    # bakes again without installing again.
    steps = (task / "tests/Dockerfile").read_text().replace("\\\n", " ").splitlines()
    install = next(i for i, line in enumerate(steps) if "pnpm install --frozen-lockfile" in line)
    assert steps[install].startswith("RUN ")
    assert steps[install].endswith("&& node /opt/reactbench/verifier/verifier.mjs keep-deps")
    after = [line for line in steps[install + 1:] if line.strip()]
    assert after == ["COPY config.json test.sh /tests/", "COPY specs/ /tests/specs/",
                     "RUN node /opt/reactbench/verifier/verifier.mjs bake"]


def test_the_starting_state_is_the_base_with_the_environment_half_of_the_head(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    task = tmp_path / "shop-1"
    write_task(plan, task)
    app = files(task / "environment" / "app")
    assert app == files(task / "tests" / "app")
    # Dependencies and configs as at head: the manifest, the new lockfile, the renamed config.
    for name in ("package.json", "pnpm-lock.yaml", "vitest.config.ts"):
        assert app[name] == at(plan.repo, plan.head, name), name
    assert "package-lock.json" not in app and "vite.config.ts" not in app
    # Source, tests and docs as at base.
    for name in ("src/cart.ts", "src/old.ts", "src/gone.ts", "src/logo.png", "src/cart.test.ts",
                 "docs/guide.md"):
        assert app[name] == at(plan.repo, plan.base, name), name
    assert "src/renamed.ts" not in app and "src/checkout.spec.ts" not in app
    # The hidden specs: the test half at head, fixtures included, by exact path.
    specs = files(task / "tests" / "specs")
    assert set(specs) == {"src/cart.test.ts", "src/checkout.spec.ts", "src/__fixtures__/order.bin"}
    assert specs["src/__fixtures__/order.bin"] == b"\0\x01\x02"


def test_the_reference_patch_gives_the_head_source(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    task = tmp_path / "shop-1"
    write_task(plan, task)
    work = tmp_path / "work"
    shutil.copytree(task / "environment" / "app", work)
    run_git(work, "init", "-q")
    run_git(work, "add", "-A")
    run_git(work, "-c", "user.email=d@e", "-c", "user.name=D", "commit", "-qm", "task base")
    patch = task / "solution" / "source.patch"
    assert b"GIT binary patch" in patch.read_bytes()
    run_git(work, "apply", "--whitespace=nowarn", str(patch))
    after = files(work)
    for name in ("src/cart.ts", "src/renamed.ts", "src/logo.png", "src/badge.webp", "scripts/build.sh"):
        assert after[name] == at(plan.repo, plan.head, name), name
    assert "src/old.ts" not in after and "src/gone.ts" not in after
    assert (work / "scripts/build.sh").stat().st_mode & 0o111
    # Tests, docs and the environment half are not the reference's to change.
    for name in ("src/cart.test.ts", "docs/guide.md", "package.json", "pnpm-lock.yaml"):
        assert after[name] == files(task / "environment" / "app")[name], name


def test_playwright_specs_bake_on_the_playwright_verifier(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    runners = Runners(("vitest", "playwright"))
    specs = ("src/cart.test.ts", "e2e/home.spec.ts")
    e2e = TaskPlan(**{**plan.__dict__, "runners": runners, "specs": specs,
                      "tests": plan_tests(specs, runners)})
    task = tmp_path / "e2e-task"
    write_task(e2e, task)
    assert "react-bench-verifier-playwright" in (task / "tests" / "Dockerfile").read_text()
    assert 'tags = ["mined", "playwright", "vitest"]' in (task / "task.toml").read_text()
    # The verifier's two phases: the unit specs, then the e2e specs in a fresh room.
    config = parse_json(task / "tests" / "config.json", TestsConfig)
    assert config.test.cmd.endswith("vitest.json src/cart.test.ts")
    assert config.test.e2e_cmd is not None and "playwright test e2e/home.spec.ts" in config.test.e2e_cmd
    assert config.test.e2e_specs == "e2e"


def test_expected_tests_are_the_passed_specs_of_a_grading(tmp_path: Path) -> None:
    verifier = tmp_path / "record" / "verifier"
    verifier.mkdir(parents=True)

    def spec(file: str, name: str, status: str) -> dict[str, str]:
        return {"file": file, "name": name, "status": status}

    (verifier / "grade.json").write_text(json.dumps({
        "version": CONTRACT.grade_version, "reward": 0,
        "tests": {"ok": False, "specs": [
            spec("src/cart.test.ts", "Cart > adds", "passed"),
            spec("src/cart.test.ts", "Cart > totals > sums", "passed"),
            spec("src/cart.test.ts", "skipped one", "skipped"),
            spec("src/cart.test.ts", "Cart > adds", "passed"),
            spec("e2e/home.spec.ts", "Home > shows the cart", "passed"),
            spec("src/broken.test.ts", "(file)", "failed: SyntaxError"),
            spec("../outside.test.ts", "escapes", "passed")]},
        "react_doctor": {"ok": True}}))
    assert expected_tests(tmp_path / "record") == {
        "src/cart.test.ts": ["Cart > adds", "Cart > totals > sums"],
        "e2e/home.spec.ts": ["Home > shows the cart"],
    }
    # A grading without a grade.json this harness reads: nothing is expected.
    (verifier / "grade.json").write_text('{"version": 1}')
    assert expected_tests(tmp_path / "record") == {}


def test_a_clone_missing_some_blobs_is_laid_out_without_its_docs_only(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)

    def drop(path: str) -> None:
        blob = run_git(plan.repo, "rev-parse", f"{plan.base}:{path}")
        (plan.repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()

    drop("docs/guide.md")  # as a partial clone lacks what it never checked out
    write_task(plan, tmp_path / "partial")
    app = files(tmp_path / "partial" / "environment" / "app")
    assert "docs/guide.md" not in app
    assert (tmp_path / "partial" / "environment" / "app" / "vendor" / "lib").is_dir()  # a submodule
    assert app["src/cart.ts"] == at(plan.repo, plan.base, "src/cart.ts")
    drop("src/old.ts")
    with pytest.raises(MiningError, match=r"src/old\.ts at \w{12} is missing from the repository"):
        write_task(plan, tmp_path / "broken")


def test_the_tolerance_has_one_entry_per_finding_the_reference_added() -> None:
    def found(rule: str, file: str, count: str, title: str = "Missing effect dependencies") -> DoctorFinding:
        return DoctorFinding(rule=rule, file=file, title=title, count=count)

    # The grading names all three findings of a group that grew from one to three.
    grown = [found("exhaustive-deps", "src/Tree.tsx", "1 -> 3") for _ in range(3)]
    deps = {"rule": "exhaustive-deps", "filePath": "src/Tree.tsx", "title": "Missing effect dependencies"}
    assert tolerance([*grown, found("no-array-index-as-key", "src/L.tsx", "0 -> 1", "Index as key")]) == [
        deps, deps, {"rule": "no-array-index-as-key", "filePath": "src/L.tsx", "title": "Index as key"}]
