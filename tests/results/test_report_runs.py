"""A report made later keeps what the run's own report had (not-attempted trials, an
agent that missed a task stays unranked), and runs that are not one are not ranked
together without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results.load import ResultsError, check_one_run
from pytest_reactbench.results.trial_result import TrialResult, Verdict
from tests.agents.test_patch import DIFF
from tests.helpers import write_task


def _board_row(report: str, agent: str) -> str:
    return next(line for line in report.splitlines() if f"| {agent} |" in line)


def test_a_report_made_from_the_records_keeps_the_trials_not_attempted(
        suite: pytest.Pytester, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    preds = suite.path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"task_id": t, "model_patch": DIFF, "agent_name": "modelA"}) + "\n"
                             for t in ("alpha", "beta")))
    suite.runpytest("--reactbench-agent=patch", f"--reactbench-patch={preds}").assert_outcomes(passed=2)
    (run,) = (suite.path / "records").iterdir()
    own = (run / "report.md").read_text()
    assert _board_row(own, "modelA").startswith("| unranked | modelA |")
    assert main(["report", str(run), "--out", str(tmp_path / "site")]) == 0
    made = (tmp_path / "site" / "report.md").read_text()
    assert _board_row(made, "modelA") == _board_row(own, "modelA")
    assert "not-attempted" in made
    assert (tmp_path / "site" / "trials" / "gamma__modelA__1.html").is_file()

    # A second run (an oracle run of the same tasks) is another run: refused together,
    # ranked together only when asked.
    suite.runpytest("--reactbench-agent=oracle").assert_outcomes(passed=3)
    other = next(p for p in (suite.path / "records").iterdir() if p != run)
    capsys.readouterr()
    assert main(["report", str(run), str(other), "--out", str(tmp_path / "both")]) == 2
    said = capsys.readouterr().err
    # (Listed by id: two runs started in one second are not ordered by it.)
    assert "these are 2 different runs, not the shards of one: " in said
    assert f"{run.name} (local; modelA; 3 task(s))" in said
    assert f"{other.name} (local; oracle; 3 task(s))" in said
    assert "give --merge-runs" in said
    assert main(["report", str(run), str(other), "--out", str(tmp_path / "both"), "--merge-runs"]) == 0


def _result(run: str, shard: str = "", backend: str = "local", task: str = "a") -> TrialResult:
    return TrialResult(task=task, agent="oracle", verdict=Verdict.PASSED, run=run, shard=shard,
                       backend=backend)


def test_shards_of_one_run_are_one_run_and_backends_never_mix() -> None:
    check_one_run([_result("r1", "1/2"), _result("r2", "2/2", task="b")])
    with pytest.raises(ResultsError, match="2 different runs"):
        check_one_run([_result("r1", "1/2"), _result("r2", "1/2", task="b")])  # the same shard twice
    with pytest.raises(ResultsError, match="2 different runs"):
        check_one_run([_result("r1", "1/2"), _result("r2", "2/3", task="b")])  # shards of two splits
    with pytest.raises(ResultsError, match=r"different backends \(docker, local\)"):
        check_one_run([_result("r1"), _result("r1", backend="docker", task="b")], merge_runs=True)
    check_one_run([_result("r1"), _result("r2", task="b")], merge_runs=True)
