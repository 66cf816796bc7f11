"""`reactbench mine` for real: a React repository with a real git history, its
changes mined into tasks whose controls run on the local backend (bubblewrap, pnpm,
Vitest, React Doctor), and the mined task run through the plugin."""

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results import Gate
from pytest_reactbench.tasks import load_task
from tests.helpers import junit_results
from tests.mining.history import History, build_history, commit, run_git
from tests.reliability.faults import process_tree


@pytest.fixture
def history(tmp_path: Path) -> History:
    return build_history(tmp_path / "counter")


def mine(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["mine", *args])
    return code, capsys.readouterr().out


def test_a_merged_pull_request_becomes_a_task_the_plugin_runs(
        history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "tasks"
    code, out = mine(capsys, "--repo", str(history.repo), "--merge", history.feature,
                     "--out", str(tasks / "counter-decrement"))
    assert code == 0, out
    assert "oracle: passed (tests 1, react_doctor 1)" in out
    assert "nop: failed (tests 0, react_doctor 1)" in out
    task = tasks / "counter-decrement"
    assert sorted(p.name for p in tasks.iterdir()) == ["counter-decrement"]  # no scratch left
    record = json.loads((task / "mining.json").read_text())
    assert record["accepted"] and record["refused_because"] == []
    assert record["base"] == subprocess.run(
        ["git", "-C", str(history.repo), "rev-parse", f"{history.feature}^1"],
        capture_output=True, text=True, check=True).stdout.strip()
    kinds = {c["path"]: (c["status"], c["kind"], c["binary"]) for c in record["changes"]}
    assert kinds["src/display.ts"] == ("R", "source", False)
    assert kinds["src/legacy.ts"] == ("D", "source", False)
    assert kinds["src/assets/badge.png"] == ("A", "source", True)
    assert kinds["package.json"] == ("M", "dependency", False)
    assert kinds["README.md"] == ("M", "docs", False)
    instruction = (task / "instruction.md").read_text()
    assert instruction.startswith("# Add a Decrement button that stops at zero\n")
    assert "- Add decrement(), which stops at zero" in instruction  # the commits, as no PR body
    assert load_task(task).id == "counter-decrement"

    # The mined task, run through the plugin like any other.
    xml = tmp_path / "controls.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle,nop",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", f"--rootdir={tmp_path}",
         str(task)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    verdicts = {r.agent: r for r in junit_results(xml)}
    assert verdicts["oracle"].verdict == "passed", proc.stdout[-3000:]
    assert verdicts["nop"].verdict == "failed", proc.stdout[-3000:]
    assert verdicts["nop"].grading.gates.get(Gate.TESTS) is False
    assert proc.returncode == 1  # nop fails, as it must
    # The oracle's graded submission carried the rename, the deletion and the binaries.
    grade = json.loads(Path(verdicts["oracle"].record, "verifier", "grade.json").read_text())
    assert {"src/display.ts", "src/legacy.ts", "src/assets/badge.png", "src/assets/logo.png"} \
        <= set(grade["submission"]["changed"])


def _named(pids: list[int]) -> dict[int, str]:
    """Those of `pids` that are alive (a zombie is dead), with their names."""
    alive = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rindex(")") + 2] != "Z":
                alive[pid] = stat[stat.index("(") + 1:stat.rindex(")")]
    return alive


@pytest.mark.parametrize("many", [False, True], ids=["one", "many"])
def test_sigterm_stops_mining_as_ctrl_c_does_and_no_process_outlives_it(
        history: History, tmp_path: Path, many: bool) -> None:
    """A cancelled CI job or `kill` sends SIGTERM: the control run in its own process
    group is interrupted, its sandboxes go, and no task is written."""
    out_dir = tmp_path / "tasks" / "counter-decrement"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_reactbench.cli", "mine", "--repo", str(history.repo),
         "--merges" if many else "--merge", history.feature, "--out", str(out_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while "bwrap" not in (started := _named(process_tree(proc.pid)[1:])).values():  # a sandbox is up
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=300)[0]
    finally:
        proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert _named(list(started)) == {}, out[-3000:]
    if many:
        summary = json.loads((out_dir / "summary.json").read_text())
        assert (summary["interrupted"], summary["mined"]) == (True, 0), summary
        assert [p.name for p in out_dir.iterdir() if not p.name.startswith(("logs", "summary"))] == []
    else:
        assert "reactbench mine: interrupted" in out
        assert list(out_dir.parent.iterdir()) == []  # no scratch, no half-written task


def test_a_change_whose_tests_already_pass_is_refused_or_kept_with_the_reason(
        history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "tasks" / "covered"
    code, out = mine(capsys, "--repo", str(history.repo), "--base", f"{history.covered}~1",
                     "--head", history.covered, "--out", str(out_dir))
    assert code == 1
    assert "REFUSED  its tests already pass at the base revision (nop scored 1)" in out
    assert not out_dir.exists() and list(out_dir.parent.iterdir()) == []

    code, out = mine(capsys, "--repo", str(history.repo), "--base", f"{history.covered}~1",
                     "--head", history.covered, "--out", str(out_dir), "--keep-anyway")
    assert code == 1 and "kept anyway" in out
    record = json.loads((out_dir / "mining.json").read_text())
    assert not record["accepted"]
    assert record["refused_because"] == ["its tests already pass at the base revision (nop scored 1)"]
    assert record["controls"]["nop"]["verdict"] == "passed"


def test_a_docs_only_change_is_refused_before_any_sandbox(
        history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = mine(capsys, "--repo", str(history.repo), "--base", f"{history.docs}~1",
                     "--head", history.docs, "--out", str(tmp_path / "docs"))
    assert code == 1
    assert "REFUSED  it touches only docs" in out and "controls:" not in out
    assert not (tmp_path / "docs").exists()


def test_bad_input_is_a_usage_error(history: History, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mine", "--repo", str(tmp_path), "--merge", "HEAD"]) == 2
    assert "is not a git repository" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--base", "nosuch", "--head", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert "revision 'nosuch' is not in" in err and "fatal" not in err
    assert main(["mine", "--repo", str(history.repo), "--range", "nosuch..HEAD"]) == 2
    assert "revision 'nosuch' is not in" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--range", "HEAD"]) == 2
    assert "range 'HEAD' is not BASE..HEAD" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--range", "HEAD..HEAD~1"]) == 2
    assert "has no commits" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--range", "HEAD~1..HEAD", "--base", "HEAD"]) == 2
    assert "--range and --merges take no --base" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--head", "HEAD"]) == 2
    assert "--merge" in capsys.readouterr().err
    assert main(["mine", "--repo", str(history.repo), "--merge", history.base]) == 2
    assert "has no parent" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert main(["mine", "--repo", str(history.repo), "--merge", history.feature,
                 "--out", str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err


def test_specs_the_verifier_cannot_run_are_refused_before_any_sandbox(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Cypress specs, and Playwright specs whose config serves the app its own way
    (a documentation site here), are carried but not run: with nothing else to run,
    the change is refused, naming why; so is a spec at the repository's root."""
    repo = tmp_path / "docs-site"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    base = commit(repo, "base", {
        "package.json": json.dumps({"devDependencies": {"@playwright/test": "1.55.0", "jest": "29.7.0"},
                                    "scripts": {"docs:serve": "docusaurus serve --port 6006"}}),
        "playwright.config.ts": "export default { testDir: './e2e', webServer: "
                                "{ command: 'npm run docs:serve', url: 'http://localhost:6006' } };\n",
        "src/menu.js": "export const open = false;\n",
    })
    e2e = commit(repo, "Menu opens", {"src/menu.js": "export const open = true;\n",
                                      "e2e/menu.spec.ts": "// a Playwright spec\n"})
    cypress = commit(repo, "Menu closes", {"src/menu.js": "export const open = false;\n",
                                           "cypress/e2e/menu.spec.ts": "// a Cypress spec\n"})
    root = commit(repo, "Menu toggles", {"src/menu.js": "export const open = null;\n",
                                         "menu.test.js": "// a Jest spec at the root\n"})
    code, out = mine(capsys, "--repo", str(repo), "--range", f"{base}..{root}",
                     "--out", str(tmp_path / "tasks"))
    assert code == 1 and "controls:" not in out
    assert (f"{e2e[:10]} refused Menu opens: its only specs are Playwright's and playwright.config.ts "
            "serves the app with `npm run docs:serve` (docusaurus serve --port 6006), not Vite") in out
    assert (f"{cypress[:10]} refused Menu closes: its only specs are Cypress specs "
            "(cypress/e2e/menu.spec.ts): the verifier runs Vitest, Jest and Playwright") in out
    assert (f"{root[:10]} refused Menu toggles: it has specs at the repository's root (menu.test.js): "
            "the verifier's hidden specs are folders") in out


STEPS = """\
export function Steps({ steps }: { steps: string[] }) {
  return (
    <ol>
      {steps.map((step, index) => (
        <li key={index}>{step}</li>
      ))}
    </ol>
  );
}
"""

STEPS_SPEC = """\
import { render, screen } from "@testing-library/react";
import { expect, test } from "vitest";

import { Steps } from "./Steps";

test("the steps are listed in order", () => {
  render(<Steps steps={["mix", "bake"]} />);
  expect(screen.getAllByRole("listitem").map((li) => li.textContent)).toEqual(["mix", "bake"]);
});
"""


def test_a_reference_that_adds_react_doctor_findings_makes_a_task_that_tolerates_just_those(
        history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The team's change keys a list by index: the task holds every solution to no new
    finding but those (rule, file, title), as the public suite's tasks declare them;
    --strict-react-doctor refuses the change instead."""
    head = commit(history.repo, "List the steps", {"src/Steps.tsx": STEPS, "src/Steps.spec.tsx": STEPS_SPEC})
    strict = tmp_path / "strict" / "steps"
    code, out = mine(capsys, "--repo", str(history.repo), "--base", f"{head}~1", "--head", head,
                     "--out", str(strict), "--strict-react-doctor")
    assert code == 1 and not strict.exists(), out
    assert "REFUSED  the reference change introduces React Doctor findings (oracle: react_doctor gate 0): " \
           "no-array-index-as-key src/Steps.tsx:" in out

    task = tmp_path / "tasks" / "steps"
    code, out = mine(capsys, "--repo", str(history.repo), "--base", f"{head}~1", "--head", head,
                     "--out", str(task))
    assert code == 0, out
    assert "the task tolerates the 1 React Doctor finding(s) the reference adds" in out
    ignored = json.loads((task / "tests" / "config.json").read_text())["rd"]["ignored_new_footguns"]
    assert [(i["rule"], i["filePath"]) for i in ignored] == [("no-array-index-as-key", "src/Steps.tsx")]
    assert all(i["title"] for i in ignored)
    record = json.loads((task / "mining.json").read_text())
    assert record["accepted"] and record["react_doctor_tolerated"][0].startswith(
        "no-array-index-as-key src/Steps.tsx:")

    # Run through the plugin: the reference passes both gates, its finding reported as
    # tolerated (any other new finding still fails: tests/verifier/test_verifier_script.py).
    xml = tmp_path / "controls.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", f"--rootdir={tmp_path}",
         str(task)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    outcome = next(iter(junit_results(xml)))
    assert outcome.verdict == "passed", proc.stdout[-3000:]
    grade = json.loads(Path(outcome.record, "verifier", "grade.json").read_text())
    assert grade["react_doctor"]["new"] == []
    assert [f["rule"] for f in grade["react_doctor"]["ignored"]] == ["no-array-index-as-key"]


def test_a_change_that_ends_after_its_batch_was_interrupted_publishes_nothing(
        history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C stops a batch while a change is under way: its thread runs on while the
    process exits, and what it would publish then must not appear after the summary
    said nothing was mined."""
    import os
    import threading

    from pytest_reactbench.mining import batch
    from pytest_reactbench.mining.request import Outcome, Request

    returned = threading.Event()
    seen: list[BaseException | None] = []

    def late_change(request: Request, echo: object, publish: Any = None) -> Outcome:
        assert request.out is not None
        draft = tmp_path / "draft"
        draft.mkdir()
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this change is under way
        returned.wait(30)  # the batch has returned, interrupted; the change ends only now
        try:
            (publish or Path.rename)(draft, request.out)
            seen.append(None)
        except Exception as exc:  # what the publishing raised is the finding
            seen.append(exc)
        return Outcome(request.out, [])

    monkeypatch.setattr(batch, "mine", late_change)
    out = tmp_path / "tasks"
    # Ctrl-C as Python takes it, whatever a test runner's worker does with SIGINT.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = batch.mine_many(Request(repo=history.repo), [history.feature], out, jobs=1,
                                 progress=lambda _: None)
    finally:
        signal.signal(signal.SIGINT, previous)
    returned.set()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(30)
    assert result.interrupted
    assert len(seen) == 1 and "interrupted" in str(seen[0]), seen
    assert sorted(p.name for p in out.iterdir()) == ["logs"]  # no task, whole or half
