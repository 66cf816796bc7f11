"""The source half holds only what a submission can carry: files the grader would put
back as the base has them are given with the environment, and files in folders React
Doctor treats as tooling are declared so that the grader takes them."""

import json
import os
from pathlib import Path

import pytest

from pytest_reactbench.mining import writer
from pytest_reactbench.mining.admissible import (
    content_refusal,
    looks_like_tests,
    path_refusal,
    settle_sources,
)
from pytest_reactbench.mining.changes import Kind, read_changes
from pytest_reactbench.mining.runners import Runners, detect_toolchain, plan_tests, source_roots
from pytest_reactbench.mining.writer import TaskPlan, source_patch, write_task
from tests.mining.history import commit, run_git


@pytest.mark.parametrize(("path", "why"), [
    ("src/a.tsx", None),
    ("src/styles/app.module.css", None),
    ("index.html", "not a source file type (.html)"),
    ("src/env.d.ts", "type declaration"),
    ("src/tailwind.config.js", "config"),
    (".storybook/preview.ts", "a dotfile"),
    ("src/.hidden/x.ts", "a dotfile"),
    ("src/dist/x.js", "in a folder the scan skips"),
    ("src/schema.graphql", "not a source file type (.graphql)"),
])
def test_paths_the_grader_never_takes(path: str, why: str | None) -> None:
    found = path_refusal(path)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_content_the_grader_never_takes() -> None:
    assert content_refusal("src/a.ts", b"export const a = 1;\n") is None
    # Minified as React Doctor tells it: a large file of long lines, not one long line.
    assert "minified" in (content_refusal("src/a.js", (b"x" * 1001 + b"\n") * 25) or "")
    assert content_refusal("src/a.js", b"x" * 1393 + b"\n" + b"a;\n" * 500) is None
    assert content_refusal("src/a.css", (b"x" * 1001 + b"\n") * 25) is None  # only code is read
    assert "larger" in (content_refusal("src/data.json", b"1" * (256 * 1024 + 1)) or "")
    assert "UTF-8" in (content_refusal("src/a.ts", b"\xff\xfe") or "")


def test_test_like_paths() -> None:
    assert looks_like_tests("scripts/gen.ts") and looks_like_tests("src/Button.stories.tsx")
    assert looks_like_tests("src/i18n/it/labels.ts") and not looks_like_tests("src/components/Button.tsx")
    # Only what React Doctor itself treats as tests: a server/ or config/ folder is code.
    assert not looks_like_tests("src/server/api.ts") and not looks_like_tests("src/config/labels.ts")


def test_a_change_is_split_as_the_grader_will_take_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "base", {
        "package.json": '{"devDependencies": {"vitest": "4.1.12"}}\n',
        "index.html": "<div id=root></div>\n",
        "src/a.ts": "export const a = 1;\n",
        "src/env.d.ts": "declare const A: number;\n",
        "scripts/gen.ts": "export {};\n",
        ".storybook/main.ts": "export default {};\n",
        "setupTests.ts": "export {};\n",
    })
    os.symlink("a.ts", repo / "src" / "alias.ts")
    head = commit(repo, "head", {
        "index.html": "<div id=root></div><script src=/src/a.ts></script>\n",
        "src/a.ts": "export const a = 2;\n",
        "src/env.d.ts": "declare const A: string;\n",
        "src/countries.js": "export default [" + ",".join(['"xx"'] * 5000) + "];\n",
        "src/Button.stories.tsx": "export default {};\n",
        "scripts/gen.ts": None,
        ".storybook/main.ts": "export default { stories: [] };\n",
        "src/a.test.ts": "import { a } from './a';\n",
        "setupTests.ts": "import '@testing-library/jest-dom';\n",
    })
    changes, given, declared = settle_sources(repo, head, read_changes(repo, base, head))
    kinds = {c.path: c.kind for c in changes}
    assert set(given) == {"index.html", "src/env.d.ts", "src/countries.js", ".storybook/main.ts",
                          "src/alias.ts", "setupTests.ts"}
    assert "minified" in given["src/countries.js"] and given["src/alias.ts"].startswith("a symlink,")
    assert all(kinds[p] is Kind.CONFIG for p in given)
    assert kinds["src/a.ts"] is Kind.SOURCE and kinds["src/Button.stories.tsx"] is Kind.SOURCE
    assert declared == ["scripts/gen.ts", "src/Button.stories.tsx"]
    # Written out: the given files as at head in the starting state, not in the patch.
    root = set(run_git(repo, "ls-tree", "--name-only", head).split("\n"))
    sources = [p for c in changes if c.kind is Kind.SOURCE for p in c.paths]
    runners = Runners(("vitest",))
    plan = TaskPlan(task_id="t", repo=repo, base=base, head=head, title="A", body="",
                    changes=tuple(changes), toolchain=detect_toolchain(None, set(), lambda _: None),
                    runners=runners, specs=("src/a.test.ts",),
                    sources=tuple(source_roots(sources, root)),
                    tests=plan_tests(["src/a.test.ts"], runners), declared=tuple(declared))
    task = tmp_path / "task"
    write_task(plan, task)
    app = task / "environment" / "app"
    assert (app / "src" / "env.d.ts").read_text() == "declare const A: string;\n"
    assert (app / ".storybook" / "main.ts").read_text() == "export default { stories: [] };\n"
    # A setup file at the root: not among the hidden specs (folders), given as at head.
    assert (app / "setupTests.ts").read_text() == "import '@testing-library/jest-dom';\n"
    assert sorted(p.name for p in (task / "tests" / "specs").iterdir()) == ["src"]
    assert (app / "src" / "alias.ts").is_symlink() and (app / "src" / "a.ts").read_text() == \
        "export const a = 1;\n"
    patch = source_patch(plan).decode()
    assert "src/a.ts" in patch and "scripts/gen.ts" in patch and "src/Button.stories.tsx" in patch
    assert "env.d.ts" not in patch and "index.html" not in patch and "countries.js" not in patch
    config = json.loads((task / "tests" / "config.json").read_text())
    assert config["test_like_allowed"] == ["scripts/gen.ts", "src/Button.stories.tsx"]
    assert config == writer.tests_config(plan)
    assert config["sources"] == ["scripts", "src"]
