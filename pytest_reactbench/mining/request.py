"""What the user asks of a mining (Request) and what became of the change (Outcome)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_reactbench.mining.refusals import Reason


@dataclass(frozen=True)
class Request:
    """What the user asked to mine."""

    repo: Path
    base: str | None = None
    head: str | None = None
    merge: str | None = None
    out: Path | None = None
    title: str | None = None
    body: str | None = None
    pull_request: str | None = None
    keep_anyway: bool = False
    #: Refuse a change whose reference adds React Doctor findings, rather than tolerate
    #: exactly those (rule, file, title) in the task, as the public suite's tasks do.
    strict_react_doctor: bool = False
    sandbox: str = "local"
    records: Path | None = None


@dataclass
class Outcome:
    """What became of the change: `task` is None when it was refused and not kept."""

    task: Path | None
    reasons: list[Reason] = field(default_factory=list)
    controls: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return not self.reasons
