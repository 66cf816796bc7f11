"""Running the verifier: artifacts in, `/tests/test.sh` offline under its time
limit, `/logs/verifier` out, and the reward read from it.

A reward is accepted only from a grader that exited normally. Our own verifier
(it leaves progress.json) must also leave a grade.json of the version we read that
agrees with reward.json; if it did not, and the submission was in play when it
stopped, that is the submission's failure (`GraderBrokenError`), not an error."""

from __future__ import annotations

import io
import json
import signal
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pytest_reactbench.sandbox.base import ExecResult, Sandbox
from pytest_reactbench.sandbox.errors import ArchiveTooLarge, SandboxError
from pytest_reactbench.tasks import Reward
from pytest_reactbench.tasks.load import describe_validation
from pytest_reactbench.verifier.artifacts import Transfer, deliver
from pytest_reactbench.verifier.contract import CONTRACT, GradeDetails, GraderProgress
from pytest_reactbench.verifier.failures import (
    GraderBrokenError,
    RewardFileError,
    RewardFileNotFoundError,
    VerifierError,
    VerifierKilledError,
    VerifierTimeoutError,
)

VERIFIER_LOGS = "/logs/verifier"
#: The most of `/logs/verifier` the harness reads (and holds) out of a verifier.
MAX_VERIFIER_LOGS = 128 * 1024 * 1024
TEST_COMMAND = (f"mkdir -p {VERIFIER_LOGS} && chmod +x /tests/test.sh "
                f"&& (/tests/test.sh) > {VERIFIER_LOGS}/test-stdout.txt 2>&1")
#: Gate details our verifier writes beside reward.json (which stays a flat dict of
#: numbers, as Harbor requires).
DETAILS_FILE = "grade.json"
#: How far our verifier got; its presence says the grader is ours.
PROGRESS_FILE = "progress.json"
#: Our verifier's exit code for an error of the harness (harness-error.txt says which).
HARNESS_ERROR_EXIT = CONTRACT.harness_error_exit
M = TypeVar("M", bound=BaseModel)

#: Phases of our verifier before the submission is touched.
BEFORE_SUBMISSION = CONTRACT.before_submission


@dataclass
class Grade:
    reward: Reward
    duration: float = 0.0
    #: grade.json, checked and typed (our verifier only; None for a task's own grader,
    #: whose reward.json is all the harness reads).
    details: GradeDetails | None = None

    @property
    def passed(self) -> bool:
        return self.reward.reward >= 1

    def gate(self, name: str) -> bool | None:
        value = getattr(self.reward, name, None)
        return None if value is None else value >= 1


def read_reward(logs: Path) -> Reward:
    """reward.json wins over reward.txt; a missing or garbled one is an error."""
    json_path, txt_path = logs / "reward.json", logs / "reward.txt"
    if json_path.is_file():
        text = json_path.read_text(encoding="utf-8", errors="replace").strip()
        if not text:
            raise RewardFileError(f"{json_path}: file is empty")
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RewardFileError(f"{json_path}: is not valid JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise RewardFileError(f"{json_path}: expected an object like {{\"reward\": 1}}")
        try:
            return Reward.model_validate(raw)
        except ValidationError as exc:
            field_name, message = describe_validation(exc)
            raise RewardFileError(f"{json_path}: {field_name}: {message}") from None
    if json_path.exists() or (txt_path.exists() and not txt_path.is_file()):
        raise RewardFileError(f"{json_path if json_path.exists() else txt_path}: is not a file")
    if txt_path.is_file():
        text = txt_path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            return Reward(reward=float(text))
        except (ValueError, ValidationError):
            raise RewardFileError(
                f"{txt_path}: expected a number between 0 and 1, got {text[:40]!r}"
            ) from None
    raise RewardFileNotFoundError(
        f"the verifier wrote neither {VERIFIER_LOGS}/reward.json nor reward.txt: the task's "
        f"tests/test.sh must grade the submission and write one of them (reward.txt: a number "
        f"from 0 to 1; reward.json: {{\"reward\": 1}}), e.g. by running "
        f"`node /opt/reactbench/verifier/verifier.mjs grade`, which writes it"
    )


def _read_model(path: Path, model: type[M]) -> M:
    """One of our verifier's files, typed; a missing or malformed one is a RewardFileError."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RewardFileError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RewardFileError(f"{path}: unreadable ({exc})") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        field_name, message = describe_validation(exc)
        raise RewardFileError(f"{path}: {field_name}: {message}") from None


def read_progress(logs: Path) -> GraderProgress | None:
    """progress.json of our verifier, or None when the grader is not ours."""
    path = logs / PROGRESS_FILE
    if not path.exists():
        return None
    try:
        return _read_model(path, GraderProgress)
    except RewardFileError:
        return None


def _ending(result: ExecResult) -> str:
    """How test.sh ended, in words."""
    if result.exit_code > 128:
        number = result.exit_code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:  # a real-time signal, or a script's own exit code
            name = "no named signal"
        return f"was killed by signal {number} ({name}; exit code {result.exit_code})"
    return f"exited with code {result.exit_code}"


def check_grade(logs: Path) -> tuple[Reward, GradeDetails]:
    """reward.json and grade.json of our verifier, each checked and in agreement."""
    reward = read_reward(logs)
    details = _read_model(logs / DETAILS_FILE, GradeDetails)
    gates = {"reward": (reward.reward, details.reward),
             "tests": (reward.tests, float(details.tests.ok)),
             "react_doctor": (reward.react_doctor, float(details.react_doctor.ok))}
    for name, (in_reward, in_grade) in gates.items():
        if in_reward != in_grade:
            raise RewardFileError(
                f"reward.json says {name} = {in_reward} but grade.json says {in_grade}"
            )
    return reward, details


def _our_grade(result: ExecResult, logs: Path, progress: GraderProgress, timeout: float) -> Grade:
    harness_error = logs / "harness-error.txt"
    if result.exit_code == HARNESS_ERROR_EXIT and harness_error.is_file():
        reason = harness_error.read_text(encoding="utf-8", errors="replace").strip()
        raise VerifierError(f"the verifier reported an error of the harness: {reason}")
    in_play = progress.phase not in BEFORE_SUBMISSION
    problem: str | None = None
    if result.timed_out:
        problem = f"did not finish within [verifier].timeout_sec = {timeout:g} s"
    elif result.exit_code != 0:
        problem = _ending(result)
    elif progress.phase != "done":
        problem = f"exited before it finished (last phase: {progress.phase})"
    if problem is not None:
        message = f"tests/test.sh {problem} during {progress.phase}"
        if in_play:
            raise GraderBrokenError(message + ", with the submission's code in play")
        if result.timed_out:
            raise VerifierTimeoutError(message)
        raise VerifierKilledError(message) if result.exit_code > 128 else VerifierError(message)
    try:
        reward, details = check_grade(logs)
    except VerifierError as exc:
        raise GraderBrokenError(f"the verifier's result does not hold together: {exc}") from None
    return Grade(reward, result.duration, details)


def _public_grade(result: ExecResult, logs: Path, timeout: float) -> Grade:
    if result.timed_out:
        raise VerifierTimeoutError(
            f"tests/test.sh did not finish within [verifier].timeout_sec = {timeout:g} s"
        )
    try:
        reward = read_reward(logs)
    except RewardFileNotFoundError:
        if result.exit_code > 128:
            raise VerifierKilledError(f"tests/test.sh {_ending(result)} before it wrote a reward") from None
        raise
    if reward.reward > 0 and result.exit_code != 0:
        # A reward is taken only from a grader that ended normally; a zero stands.
        raise VerifierError(
            f"tests/test.sh {_ending(result)} after writing reward {reward.reward:g}: not accepted"
        )
    return Grade(reward, result.duration)


def _unpack_logs(data: bytes, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            tar.extractall(into, filter="data")
    except tarfile.TarError as exc:
        raise SandboxError(f"could not read {VERIFIER_LOGS} out of the verifier: {exc}") from None


def _logs_of(sandbox: Sandbox) -> bytes:
    """`/logs/verifier`, taken at rest: test.sh has ended, the verifier runs nothing
    more, and what the code under test left running there (a fork bomb) or wrote (a
    log of gigabytes) neither stops the harness from reading it nor fills its memory."""
    try:
        return sandbox.collect(VERIFIER_LOGS, [], MAX_VERIFIER_LOGS)
    except ArchiveTooLarge:
        # Our grader's own files are small: only what the code under test printed or
        # wrote grows them so (and a task's own test.sh ran that code too).
        raise GraderBrokenError(
            f"{VERIFIER_LOGS} holds more than {MAX_VERIFIER_LOGS // (1024 * 1024)} MiB after tests/test.sh, "
            "with the submission's code in play: not read") from None


def grade(sandbox: Sandbox, transfers: list[Transfer], timeout: float, logs_dir: Path,
          timeout_multiplier: float = 1.0) -> Grade:
    """Deliver the artifacts, run test.sh, keep `/logs/verifier` in `logs_dir`. Our
    grader scales its own limits (the scan's) by `timeout_multiplier`."""
    deliver(sandbox, transfers)
    result = sandbox.exec(TEST_COMMAND, timeout=timeout,
                          env={"REACTBENCH_TIMEOUT_MULTIPLIER": f"{timeout_multiplier:g}"})
    _unpack_logs(_logs_of(sandbox), logs_dir)
    progress = read_progress(logs_dir)
    if progress is None:
        return _public_grade(result, logs_dir, timeout)
    return _our_grade(result, logs_dir, progress, timeout)
