"""Several shards' results read as one run: pure logic over JUnit files and run folders."""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results.load import ResultsError, load_run
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.results.records import RunRecords
from pytest_reactbench.results.trial_result import Provenance, TrialResult, Verdict


def _junit(path: Path, results: list[TrialResult]) -> Path:
    cases = "".join(
        f'<testcase name="{r.agent}"><properties>'
        + "".join(f"<property name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in r.properties())
        + "</properties></testcase>" for r in results)
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{cases}</testsuite></testsuites>')
    return path


def _result(task: str, verdict: Verdict = Verdict.PASSED, attempt: int = 1) -> TrialResult:
    return TrialResult(task=task, agent="oracle", attempt=attempt, verdict=verdict,
                       reward=1.0 if verdict is Verdict.PASSED else 0.0)


def test_shards_of_junit_and_records_are_one_run(tmp_path: Path) -> None:
    first = _junit(tmp_path / "shard-1.xml", [_result("a"), _result("b", Verdict.FAILED)])
    records = RunRecords(tmp_path / "records", "run-2")
    record = records.open_trial(TrialManifest(task="c", agent="oracle", attempt=1))
    record.finish(_result("c"))
    merged = load_run([first, records.run_dir])
    assert sorted((r.task, r.verdict.value) for r in merged) == [("a", "passed"), ("b", "failed"),
                                                                 ("c", "passed")]


def test_attempts_of_one_task_in_two_shards_are_distinct_trials(tmp_path: Path) -> None:
    # Sharding keeps a task's attempts together, but files that split them differently
    # still hold distinct trials.
    one = _junit(tmp_path / "1.xml", [_result("a", attempt=1)])
    two = _junit(tmp_path / "2.xml", [_result("a", attempt=2)])
    assert len(load_run([one, two])) == 2


def test_a_trial_in_two_shards_names_both_files(tmp_path: Path) -> None:
    one = _junit(tmp_path / "1.xml", [_result("a"), _result("b")])
    two = _junit(tmp_path / "2.xml", [_result("b", Verdict.FAILED)])
    with pytest.raises(ResultsError, match=f"b \\[oracle\\] attempt 1 is in both {one} and {two}"):
        load_run([one, two])
    with pytest.raises(ResultsError, match="given twice"):
        load_run([one, one])


def test_a_shard_reported_alone_says_the_others_are_missing(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    def shard(k: int, task: str) -> TrialResult:
        return _result(task).model_copy(update={"provenance": Provenance(run="run-1", shard=f"{k}/3")})
    first = _junit(tmp_path / "shard-1.xml", [shard(1, "a")])
    third = _junit(tmp_path / "shard-3.xml", [shard(3, "c")])
    assert main(["report", str(first), str(third), "--out", str(tmp_path / "site")]) == 0
    warned = "shard(s) 2/3 of this run are not among the results given (these are shard(s) 1/3, 3/3 only)"
    assert warned in capsys.readouterr().err
    assert f"**INCOMPLETE**: {warned}" in (tmp_path / "site" / "report.md").read_text()
    assert main(["compare", "--base", str(first), str(third), "--new", str(first), str(third)]) == 0
    assert f"the baseline's {warned}" in capsys.readouterr().err
