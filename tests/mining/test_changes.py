"""Reading and classifying a commit range: real git, no sandbox."""

import json
from pathlib import Path

import pytest

from pytest_reactbench.controls import ControlRun
from pytest_reactbench.mining.changes import (
    Change,
    Kind,
    MiningError,
    classify,
    is_cypress,
    is_spec,
    parse_binary_paths,
    parse_name_status,
    read_changes,
    resolve,
)
from pytest_reactbench.mining.description import describe
from pytest_reactbench.mining.refusals import Reason, control_refusals, early_refusals, one_line
from pytest_reactbench.mining.request import Request
from pytest_reactbench.mining.runners import REGISTRY_LACKS
from pytest_reactbench.results import Gate, TrialResult, Verdict
from tests.mining.history import commit, run_git


@pytest.mark.parametrize(("path", "kind"), [
    ("src/App.tsx", Kind.SOURCE),
    ("src/assets/logo.png", Kind.SOURCE),
    ("index.html", Kind.SOURCE),
    ("src/App.spec.tsx", Kind.TEST),
    ("src/counter.test.ts", Kind.TEST),
    ("src/__tests__/helpers.ts", Kind.TEST),
    ("src/__fixtures__/user.json", Kind.TEST),
    ("src/__mocks__/api.ts", Kind.TEST),
    ("src/__snapshots__/App.spec.tsx.snap", Kind.TEST),
    ("e2e/home.spec.ts", Kind.TEST),
    ("tests/fixtures/big.bin", Kind.TEST),
    ("src/setupTests.ts", Kind.TEST),
    ("package.json", Kind.DEPENDENCY),
    (".yarn/releases/yarn-4.5.3.cjs", Kind.DEPENDENCY),
    (".yarn/patches/react-npm-19.patch", Kind.DEPENDENCY),
    (".pnp.cjs", Kind.DEPENDENCY),
    ("patches/esbuild@0.25.0.patch", Kind.DEPENDENCY),
    ("src/patches/apply.ts", Kind.SOURCE),
    ("pnpm-lock.yaml", Kind.DEPENDENCY),
    ("yarn.lock", Kind.DEPENDENCY),
    ("package-lock.json", Kind.DEPENDENCY),
    ("bun.lockb", Kind.DEPENDENCY),
    (".npmrc", Kind.DEPENDENCY),
    ("vite.config.ts", Kind.CONFIG),
    ("vitest.config.mts", Kind.CONFIG),
    ("playwright.config.ts", Kind.CONFIG),
    ("tsconfig.app.json", Kind.CONFIG),
    ("README.md", Kind.DOCS),
    ("docs/guide/intro.mdx", Kind.DOCS),
    ("docs/diagram.png", Kind.DOCS),
    (".github/workflows/ci.yml", Kind.DOCS),
    ("LICENSE", Kind.DOCS),
])
def test_classify(path: str, kind: Kind) -> None:
    assert classify(path) is kind


def test_specs_are_the_files_a_runner_runs() -> None:
    assert is_spec("src/App.spec.tsx") and is_spec("e2e/home.spec.ts") and is_spec("src/__tests__/x.ts")
    assert not is_spec("src/__fixtures__/user.json") and not is_spec("src/setupTests.ts")
    assert is_cypress("cypress/e2e/cart.spec.ts") and is_cypress("src/Cart.cy.tsx")
    assert not is_cypress("e2e/cart.spec.ts") and not is_cypress("cypress/support/commands.ts")
    assert classify("src/Cart.cy.tsx") is Kind.TEST


def test_parse_name_status_and_numstat() -> None:
    raw = b"M\0src/a.ts\0R087\0src/old.ts\0src/new.ts\0D\0src/gone.ts\0A\0img.png\0"
    assert parse_name_status(raw) == [("M", "src/a.ts", None), ("R", "src/new.ts", "src/old.ts"),
                                      ("D", "src/gone.ts", None), ("A", "img.png", None)]
    numstat = b"1\t1\tsrc/a.ts\0-\t-\t\0old.png\0new.png\0-\t-\timg.png\0"
    assert parse_binary_paths(numstat) == {"old.png", "new.png", "img.png"}


def test_read_changes_sees_binaries_renames_deletions_and_lockfiles(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    long_text = "".join(f"export const line{i} = {i};\n" for i in range(40))
    base = commit(repo, "base", {
        "package.json": '{"devDependencies": {"vitest": "4.1.12"}}\n',
        "package-lock.json": "{}\n",
        "src/old name.ts": long_text,
        "src/gone.ts": "export {};\n",
        "src/logo.png": b"\x89PNG\0\0\x01",
    })
    run_git(repo, "mv", "src/old name.ts", "src/new name.ts")
    head = commit(repo, "head", {
        "src/new name.ts": long_text + "export const extra = 1;\n",
        "src/gone.ts": None,
        "src/logo.png": b"\x89PNG\0\0\x02",
        "package-lock.json": None,
        "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
        "package.json": '{"devDependencies": {"vitest": "4.1.12", "zod": "4.0.0"}}\n',
    })
    changes = {c.path: c for c in read_changes(repo, base, head)}
    assert changes["src/new name.ts"] == Change("R", "src/new name.ts", "src/old name.ts", False)
    assert changes["src/gone.ts"].deleted and changes["src/gone.ts"].kind is Kind.SOURCE
    assert changes["src/logo.png"].binary and changes["src/logo.png"].status == "M"
    assert changes["package-lock.json"].deleted and changes["package-lock.json"].kind is Kind.DEPENDENCY
    assert changes["pnpm-lock.yaml"].status == "A"
    assert changes["package.json"].kind is Kind.DEPENDENCY
    assert changes["src/new name.ts"].paths == ("src/old name.ts", "src/new name.ts")
    with pytest.raises(MiningError, match=r"^revision 'nosuchrev' is not in .*repo \(a typo"):
        resolve(repo, "nosuchrev")
    blob = run_git(repo, "rev-parse", "HEAD:package.json")
    with pytest.raises(MiningError, match=r"is a blob, not a commit"):
        resolve(repo, blob)
    with pytest.raises(MiningError, match=r"looks like an option"):
        resolve(repo, "--all")


def change(path: str, status: str = "M") -> Change:
    return Change(status, path)


@pytest.mark.parametrize(("changes", "specs", "runners", "expected"), [
    ([change("src/a.spec.ts")], ["src/a.spec.ts"], ("vitest",), "only tests"),
    ([change("README.md"), change("docs/x.md")], [], ("vitest",), "only docs"),
    ([change("package.json"), change("src/a.spec.ts")], ["src/a.spec.ts"], ("vitest",),
     "changes no source (only dependency, test)"),
    ([change("src/a.ts")], [], ("vitest",), "no spec file"),
    ([change("src/a.ts"), change("src/a.spec.ts", "D")], [], ("vitest",), "no spec file"),
    ([change("src/a.ts"), change("src/a.spec.ts")], ["src/a.spec.ts"], (), "no test runner"),
    ([], [], ("vitest",), "changes nothing"),
    ([change("src/a.ts"), change("cypress/e2e/a.spec.ts")], [], ("jest",), "only specs are Cypress"),
    ([change("src/a.ts"), change("src/a.cy.tsx")], [], ("vitest",), "only specs are Cypress"),
])
def test_early_refusals(changes: list[Change], specs: list[str], runners: tuple[str, ...],
                        expected: str) -> None:
    reasons = early_refusals(changes, specs, runners)
    assert any(expected in r.text for r in reasons), reasons
    assert not any(r.failed for r in reasons)  # the change's fault, not a breakdown


def test_a_source_change_with_a_spec_is_not_refused_early() -> None:
    changes = [change("src/a.ts"), change("src/a.spec.ts", "A"), change("README.md"),
               change("pnpm-lock.yaml")]
    assert early_refusals(changes, ["src/a.spec.ts"], ("vitest",)) == []


def test_describe_from_a_merge_a_range_and_the_user(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "base", {"a.txt": "a\n"})
    run_git(repo, "checkout", "-q", "-b", "topic")
    commit(repo, "First step\n\nWhy the first step.", {"b.txt": "b\n"})
    head = commit(repo, "Second step", {"c.txt": "c\n"})
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "-c", "user.email=d@e", "-c", "user.name=D", "merge", "-q", "--no-ff",
            "-m", "Merge pull request #3 from dev/topic", "-m", "Do both steps", "topic")
    merge = run_git(repo, "rev-parse", "HEAD")

    title, body, origin = describe(Request(repo=repo, merge=merge), base, merge)
    assert (title, origin) == ("Do both steps", "merge commit")
    assert body == "- First step\n\n  Why the first step.\n\n- Second step"
    title, body, origin = describe(Request(repo=repo), base, head)
    assert (title, origin) == ("Second step", "commit messages") and body.startswith("- First step")
    title, body, origin = describe(Request(repo=repo), base, run_git(repo, "rev-parse", "topic~1"))
    assert (title, body, origin) == ("First step", "Why the first step.", "commit message")
    given = Request(repo=repo, title="Mine", body="The body", pull_request="https://example.invalid/1")
    assert describe(given, base, head) == ("Mine", "The body", "given")


def controls(tmp_path: Path, nop: dict[str, object], oracle: dict[str, object],
             grade: dict[str, object] | None = None) -> ControlRun:
    """Controls' results (TrialResult's fields), the oracle's grade details included."""
    grade = grade or {}
    failing = grade.get("tests", {}).get("failing", [])  # type: ignore[attr-defined]
    new = grade.get("react_doctor", {}).get("new", [])  # type: ignore[attr-defined]
    details = {"failing_specs": failing, "findings": new}
    results = {("t", agent): TrialResult.model_validate(
        {"task": "t", "agent": agent, **values, **(details if agent == "oracle" else {})})
        for agent, values in (("nop", nop), ("oracle", oracle))}
    return ControlRun(results, "")


PASS = {"verdict": "passed", "gates": {"tests": True, "react_doctor": True}}
FAIL_TESTS = {"verdict": "failed", "gates": {"tests": False, "react_doctor": True}, "failure": "tests"}


def texts(reasons: list[Reason]) -> list[str]:
    return [r.text for r in reasons]


def test_control_refusals_say_which_control_and_gate(tmp_path: Path) -> None:
    assert control_refusals(controls(tmp_path, FAIL_TESTS, PASS), "t") == []
    assert texts(control_refusals(controls(tmp_path, PASS, PASS), "t")) == [
        "its tests already pass at the base revision (nop scored 1)"]
    failing = controls(tmp_path, FAIL_TESTS, FAIL_TESTS,
                       {"tests": {"failing": ["src/a.spec.ts > adds"]}})
    assert texts(control_refusals(failing, "t")) == [
        "its tests do not pass with the reference change (oracle: tests gate 0): src/a.spec.ts > adds"]
    doctor = controls(tmp_path, FAIL_TESTS,
                      {"verdict": "failed", "gates": {"tests": True, "react_doctor": False}},
                      {"react_doctor": {"new": [{"rule": "no-array-index-as-key", "file": "src/L.tsx",
                                                 "line": 7}]}})
    assert texts(control_refusals(doctor, "t")) == [
        "the reference change introduces React Doctor findings (oracle: react_doctor gate 0): "
        "no-array-index-as-key src/L.tsx:7"]
    # Files the scan did not analyse fail the gate with no finding: the refusal names them,
    # read back from the JUnit properties as the controls read them.
    blind = TrialResult(task="t", agent="oracle", verdict=Verdict.FAILED, failure="react_doctor",
                        gates={Gate.TESTS: True, Gate.REACT_DOCTOR: False},
                        unscanned=["src/lib/parse.ts", "src/lib/link.ts"])
    back = TrialResult.from_properties(dict(blind.properties()))
    assert back is not None and back.grading.unscanned == blind.grading.unscanned
    run = ControlRun({("t", "nop"): controls(tmp_path, FAIL_TESTS, PASS).results[("t", "nop")],
                      ("t", "oracle"): back}, "")
    assert texts(control_refusals(run, "t")) == [
        "the reference changes files React Doctor does not analyse (oracle: react_doctor gate 0): "
        "src/lib/parse.ts, src/lib/link.ts"]
    tail = ("environment/Dockerfile:10: step failed with exit code 1:\n  Progress: resolved 1\n"
            "  ERR_PNPM_IGNORED_BUILDS  Ignored build scripts: esbuild\n  Run pnpm approve-builds")
    bake = {"verdict": "error", "failure": "BakeError", "message": tail}
    broken = control_refusals(controls(tmp_path, bake, bake), "t")
    # Both controls bake the same images: one reason, the step and the error line of its tail.
    assert [(r.code, r.failed) for r in broken] == [("bake", True)]
    assert broken[0].text == ("the bake failed: environment/Dockerfile:10: step failed with exit code 1"
                              " | ERR_PNPM_IGNORED_BUILDS  Ignored build scripts: esbuild")
    unpublished = ("environment/Dockerfile:10: step failed with exit code 1:\n  npm error code E404\n"
                   f"  {REGISTRY_LACKS} (unpublished, or kept on another registry); no install can "
                   "succeed:\n  npm error code E404\n"
                   "  npm error 404  '@scope/lib@1.5.1' is not in this registry.")
    lacking = control_refusals(controls(tmp_path, {"verdict": "error", "failure": "BakeError",
                                                   "message": unpublished}, PASS), "t")
    # No bake can get past it: counted apart from the bakes that may.
    assert [(r.code, r.failed) for r in lacking] == [("registry", True)]
    assert lacking[0].text.endswith("npm error 404  '@scope/lib@1.5.1' is not in this registry.")
    npm = ("environment/Dockerfile:10: step failed with exit code 1:\n  npm error code 1\n"
           "  npm error path /app\n  npm error command failed\n  npm error command sh -c node build.ts\n"
           "  npm error TypeError: Unknown file extension \".ts\" for /app/build.ts\n"
           "  npm error A complete log of this run can be found in: /tmp/npm-cache/_logs/x.log")
    assert one_line(npm) == ("environment/Dockerfile:10: step failed with exit code 1 | npm error command "
                             "sh -c node build.ts | npm error TypeError: Unknown file extension \".ts\" "
                             "for /app/build.ts")
    enoent = ("Dockerfile:10: step failed with exit code 254:\n  npm error syscall open\n"
              "  npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, "
              "open '/app/external/x/package.json'\n  npm error enoent This is related to npm not being "
              "able to find a file.\n  npm error enoent\n  npm error code 254\n  npm error command failed\n"
              "  npm error command sh -c npm run build:deps")
    assert "Could not read package.json" in one_line(enoent) and "syscall" not in one_line(enoent)
    peers = ("Dockerfile:10: step failed with exit code 1:\n  npm error\n  npm error Could not resolve "
             "dependency:\n  npm error peer cypress@\">=12\" from @testing-library/cypress@10.1.3\n"
             "  npm error node_modules/@testing-library/cypress\n  npm error   dev "
             "@testing-library/cypress@\"^10.1.0\" from the root project\n  npm error\n  npm error Fix the "
             "upstream dependency conflict, or retry\n  npm error this command with --force or "
             "--legacy-peer-deps\n  npm error to accept an incorrect (and potentially broken) dependency "
             "resolution.\n  npm error\n  npm error For a full report see:\n"
             "  npm error /tmp/npm-cache/_logs/2026-12-02T07_52_48_601Z-eresolve-report.txt")
    assert one_line(peers) == ("Dockerfile:10: step failed with exit code 1 | npm error peer "
                               "cypress@\">=12\" from @testing-library/cypress@10.1.3 | npm error   dev "
                               "@testing-library/cypress@\"^10.1.0\" from the root project")
    crashed = control_refusals(controls(tmp_path, {"verdict": "error", "failure": "SandboxError",
                                                   "message": "the engine went away"}, PASS), "t")
    assert texts(crashed) == ["the nop control ended in error: the engine went away"]
    assert crashed[0].failed and crashed[0].code == "sandboxerror"


def test_a_pull_request_describes_itself_when_the_github_cli_can(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "base", {"a.txt": "a\n"})
    head = commit(repo, "Terse subject", {"a.txt": "b\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text('#!/bin/sh\n[ "$3" = https://github.com/o/r/pull/5 ] || exit 1\n'
                  'echo \'{"title": "Cart totals", "body": "Why and how."}\'\n')
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    request = Request(repo=repo, pull_request="https://github.com/o/r/pull/5")
    assert describe(request, base, head) == ("Cart totals", "Why and how.", "pull request")
    # gh fails (offline, not logged in): the commits tell the story.
    unknown = Request(repo=repo, pull_request="https://github.com/o/r/pull/6")
    assert describe(unknown, base, head) == ("Terse subject", "", "commit message")


def test_ctrl_c_during_a_batch_starts_no_further_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_reactbench.mining import batch
    from pytest_reactbench.mining.request import Request

    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    commits = [commit(repo, f"change {i}", {"a.txt": f"{i}\n"}) for i in range(4)]
    started: list[str | None] = []

    def interrupted(request: Request, echo: object, **_: object) -> object:
        started.append(request.head)
        raise KeyboardInterrupt  # as Ctrl-C reaches the session the change runs in

    monkeypatch.setattr(batch, "mine", interrupted)
    out = tmp_path / "out"
    result = batch.mine_many(Request(repo=repo), commits[1:], out, jobs=1, progress=lambda _: None)
    assert started == [commits[1]]
    # What was judged before Ctrl-C is kept: the summary is written, the rest not done.
    assert result.interrupted and [m.state for m in result.changes] == ["pending"] * 3
    lines: list[str] = []
    summary = json.loads(batch.write_summary(result, repo, "range", out, echo=lines.append).read_text())
    assert (summary["interrupted"], summary["not_done"], summary["mined"]) == (True, 3, 0)
    assert lines[0] == ("mined 0, refused 0, failed 0 of 3 changes; interrupted, 3 not done "
                        f"({out}/summary.json)")
