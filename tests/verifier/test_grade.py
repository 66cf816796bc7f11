"""Which results of a grader the harness accepts, and who failed when it does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.sandbox.base import ExecResult
from pytest_reactbench.verifier import (
    GraderBrokenError,
    RewardFileError,
    SubmissionFailure,
    SubmissionRefused,
    VerifierError,
    VerifierKilledError,
    VerifierTimeoutError,
)
from pytest_reactbench.verifier.grade import _our_grade, _public_grade, check_grade, read_progress

EXITED = ExecResult(0, b"", b"", 1.0)
KILLED = ExecResult(137, b"", b"", 1.0)
TIMED_OUT = ExecResult(124, b"", b"", 1.0, timed_out=True)


def details(reward: float = 1, tests: bool = True, doctor: bool = True, **extra: Any) -> dict[str, Any]:
    return {"version": 2, "reward": reward, "tests": {"ok": tests, "failing": []},
            "react_doctor": {"ok": doctor, "new": []}, "submission": {"refused": [], "changed": []},
            "timings": {"scan": 1.5}, "failure": None, **extra}


def logs(tmp_path: Path, phase: str = "done", reward: dict[str, Any] | None = None,
         grade: dict[str, Any] | None = None) -> Path:
    (tmp_path / "progress.json").write_text(json.dumps(
        {"grader": "reactbench-verifier", "version": 2, "phase": phase}))
    if reward is not None:
        (tmp_path / "reward.json").write_text(json.dumps(reward))
    if grade is not None:
        (tmp_path / "grade.json").write_text(json.dumps(grade))
    return tmp_path


def grade_ours(tmp_path: Path, result: ExecResult) -> Any:
    progress = read_progress(tmp_path)
    assert progress is not None
    return _our_grade(result, tmp_path, progress, 300)


def test_an_agreeing_grade_of_our_verifier_is_accepted_and_typed(tmp_path: Path) -> None:
    logs(tmp_path, reward={"reward": 1, "tests": 1, "react_doctor": 1}, grade=details())
    graded = grade_ours(tmp_path, EXITED)
    assert graded.passed and graded.details is not None and graded.details.timings["scan"] == 1.5
    assert graded.details.tests.ok and graded.details.version == 2


@pytest.mark.parametrize(("reward", "grade", "message"), [
    ({"reward": 1, "tests": 1, "react_doctor": 1}, details(0, tests=False),
     "reward = 1.0 but grade.json says 0"),
    ({"reward": 0, "tests": 1, "react_doctor": 0}, details(0, doctor=True), "react_doctor = 0.0"),
    ({"reward": 1, "tests": 1, "react_doctor": 1}, {**details(), "version": 1}, "version: is 1"),
    ({"reward": 1, "tests": 1, "react_doctor": 1}, None, "grade.json: missing"),
    ({"reward": 1, "tests": 1, "react_doctor": 1}, details(1, tests=False),
     "reward is 1 while a gate failed"),
])
def test_a_result_that_does_not_hold_together_is_the_submissions_fail(
        tmp_path: Path, reward: dict[str, Any], grade: dict[str, Any] | None, message: str) -> None:
    logs(tmp_path, reward=reward, grade=grade)
    with pytest.raises(GraderBrokenError, match=message.replace("(", r"\(")):
        grade_ours(tmp_path, EXITED)


def test_a_reward_directory_beside_a_planted_reward_txt_is_not_read(tmp_path: Path) -> None:
    logs(tmp_path, grade=details())
    (tmp_path / "reward.json").mkdir()
    (tmp_path / "reward.txt").write_text("1\n")
    with pytest.raises(GraderBrokenError, match=r"reward\.json: is not a file"):
        grade_ours(tmp_path, EXITED)


@pytest.mark.parametrize(("phase", "result", "raised", "message"), [
    ("tests:unit", KILLED, GraderBrokenError, "killed by signal 9 .* during tests:unit"),
    ("scan", TIMED_OUT, GraderBrokenError, "did not finish within .* during scan"),
    ("clean-room", ExecResult(1, b"", b"", 1.0), GraderBrokenError, "exited with code 1 during clean-room"),
    ("tests:e2e", EXITED, GraderBrokenError, "exited before it finished"),
    ("config", KILLED, VerifierKilledError, "killed by signal 9 .* during config"),
    ("config", TIMED_OUT, VerifierTimeoutError, "did not finish"),
])
def test_a_grader_that_stops_early_is_the_submissions_fail_once_it_is_in_play(
        tmp_path: Path, phase: str, result: ExecResult, raised: type[Exception], message: str) -> None:
    # A reward left behind does not count: the grader did not end normally.
    logs(tmp_path, phase, reward={"reward": 1, "tests": 1, "react_doctor": 1}, grade=details())
    with pytest.raises(raised, match=message):
        grade_ours(tmp_path, result)


def test_an_error_the_verifier_proves_is_the_harnesss_stays_an_error(tmp_path: Path) -> None:
    logs(tmp_path, "scan")
    (tmp_path / "harness-error.txt").write_text("react-doctor is 0.7.9, the gate is pinned to 0.7.8\n")
    with pytest.raises(VerifierError, match=r"pinned to 0\.7\.8") as caught:
        grade_ours(tmp_path, ExecResult(3, b"", b"", 1.0))
    assert not isinstance(caught.value, SubmissionFailure)


def test_a_public_grader_is_trusted_only_when_it_ends_normally(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("1\n")
    assert read_progress(tmp_path) is None
    assert _public_grade(EXITED, tmp_path, 300).passed
    with pytest.raises(VerifierError, match="exited with code 2 after writing reward 1: not accepted"):
        _public_grade(ExecResult(2, b"", b"", 1.0), tmp_path, 300)
    (tmp_path / "reward.txt").write_text("0\n")
    assert not _public_grade(ExecResult(1, b"", b"", 1.0), tmp_path, 300).passed


def test_a_forged_progress_file_makes_no_grader_ours(tmp_path: Path) -> None:
    (tmp_path / "progress.json").write_text('{"grader": "someone", "version": 2, "phase": "done"}')
    assert read_progress(tmp_path) is None


def test_check_grade_names_the_disagreement(tmp_path: Path) -> None:
    logs(tmp_path, reward={"reward": 0, "tests": 0, "react_doctor": 1}, grade=details(0, tests=False))
    reward, typed = check_grade(tmp_path)
    assert reward.reward == 0 and not typed.tests.ok
    (tmp_path / "grade.json").write_text("{")
    with pytest.raises(RewardFileError, match=r"grade\.json: unreadable"):
        check_grade(tmp_path)


def test_the_two_families_of_failure_are_apart() -> None:
    for submission in (SubmissionRefused, GraderBrokenError):
        assert issubclass(submission, SubmissionFailure) and not issubclass(submission, VerifierError)
    for harness in (VerifierKilledError, VerifierTimeoutError, RewardFileError):
        assert issubclass(harness, VerifierError) and not issubclass(harness, SubmissionFailure)
    assert SubmissionRefused.failure == "submission"
    assert GraderBrokenError.failure == "grader-broken"
