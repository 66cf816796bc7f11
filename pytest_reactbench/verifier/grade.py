"""Running the verifier: artifacts in, `/tests/test.sh` offline under its time
limit, `/logs/verifier` out, and the reward read from it."""

from __future__ import annotations

import io
import json
import signal
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_reactbench.sandbox.base import Sandbox
from pytest_reactbench.tasks import Reward
from pytest_reactbench.tasks.load import describe_validation
from pytest_reactbench.verifier.artifacts import Transfer, deliver

VERIFIER_LOGS = "/logs/verifier"
TEST_COMMAND = (f"mkdir -p {VERIFIER_LOGS} && chmod +x /tests/test.sh "
                f"&& (/tests/test.sh) > {VERIFIER_LOGS}/test-stdout.txt 2>&1")
#: Gate details our verifier writes beside reward.json (which stays a flat dict of
#: numbers, as Harbor requires).
DETAILS_FILE = "grade.json"


class VerifierError(Exception):
    """The verifier broke: no score, a harness error that may be retried."""


class VerifierTimeoutError(VerifierError):
    pass


class RewardFileNotFoundError(VerifierError):
    pass


class VerifierKilledError(VerifierError):
    """test.sh died by a signal (killed from outside, out of memory) before a reward."""


class RewardFileError(VerifierError):
    """A reward file that is empty, garbled or inconsistent."""


@dataclass
class Grade:
    reward: Reward
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0

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
    if txt_path.is_file():
        text = txt_path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            return Reward(reward=float(text))
        except (ValueError, ValidationError):
            raise RewardFileError(
                f"{txt_path}: expected a number between 0 and 1, got {text[:40]!r}"
            ) from None
    raise RewardFileNotFoundError(
        f"the verifier wrote neither {VERIFIER_LOGS}/reward.json nor reward.txt"
    )


def _unpack_logs(data: bytes, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(into, filter="data")


def grade(sandbox: Sandbox, transfers: list[Transfer], timeout: float, logs_dir: Path) -> Grade:
    """Deliver the artifacts, run test.sh, keep `/logs/verifier` in `logs_dir`."""
    deliver(sandbox, transfers)
    result = sandbox.exec(TEST_COMMAND, timeout=timeout)
    _unpack_logs(sandbox.get_archive(VERIFIER_LOGS), logs_dir)
    if result.timed_out:
        raise VerifierTimeoutError(
            f"tests/test.sh did not finish within [verifier].timeout_sec = {timeout:g} s"
        )
    try:
        reward = read_reward(logs_dir)
    except RewardFileNotFoundError:
        if result.exit_code > 128:
            number = result.exit_code - 128
            try:
                name = signal.Signals(number).name
            except ValueError:  # a real-time signal, or a script's own exit code
                name = "no named signal"
            raise VerifierKilledError(
                f"tests/test.sh was killed by signal {number} ({name}; exit code {result.exit_code}) "
                "before it wrote a reward"
            ) from None
        raise
    details: dict[str, Any] = {}
    details_path = logs_dir / DETAILS_FILE
    if details_path.is_file():
        try:
            loaded = json.loads(details_path.read_text(encoding="utf-8"))
            details = loaded if isinstance(loaded, dict) else {}
        except json.JSONDecodeError:
            details = {}
    return Grade(reward, details, result.duration)
