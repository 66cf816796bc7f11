"""Verdicts and failure classes. A failure's class says who failed: the agent
(fail) or the harness, sandbox or verifier (error, no score, may be retried)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


@dataclass
class TrialResult:
    task_id: str
    agent: str
    verdict: Verdict
    reward: float | None
    #: Gate name -> passed (None when the verifier did not say).
    gates: dict[str, bool | None]
    #: For errors, the failure class (e.g. "VerifierTimeoutError"); for fails, the gate.
    failure: str | None
    message: str
    agent_ending: str | None
    durations: dict[str, float]
    record: Path | None
    details: dict[str, Any] = field(default_factory=dict)
    test_log_tail: str = ""
    agent_log_tail: str = ""
    #: How many times an error made this trial start again before this result.
    retries: int = 0
    #: {"files": [...], "added": N, "removed": N} of the agent's diff.
    diff_stat: dict[str, Any] = field(default_factory=dict)
    #: Role ("agent", "verifier") -> digest of the image the sandbox was booted from.
    images: dict[str, str] = field(default_factory=dict)
    #: Submission audit findings ("kind: path (detail)").
    audit: list[str] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        return {
            "task": self.task_id,
            "agent": self.agent,
            "verdict": self.verdict.value,
            "reward": self.reward,
            "gates": self.gates,
            "failure": self.failure,
            "message": self.message,
            "agent_ending": self.agent_ending,
            "durations": {k: round(v, 3) for k, v in self.durations.items()},
            "details": self.details,
            "images": self.images,
            "audit": self.audit,
            "diff": self.diff_stat,
        }
