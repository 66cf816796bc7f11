"""The Agent contract: what an agent gets (a task, a sandbox, a time limit) and
what it reports back (how it ended). Agents never see `tests/`; only `oracle`
sees `solution/`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_reactbench.sandbox.base import Sandbox
from pytest_reactbench.tasks import Task

Ending = Literal["completed", "exited-nonzero", "timeout", "crashed"]


class AgentConfigError(Exception):
    """An agent that cannot run a task as configured (a usage error, not a verdict)."""


def _no_event(kind: str, **data: Any) -> None:
    return None


@dataclass
class AgentContext:
    task: Task
    sandbox: Sandbox
    timeout: float
    #: Records an event in the run record: `event("tool", tool="bash", ...)`.
    event: Callable[..., None] = field(default=_no_event)


@dataclass
class AgentOutcome:
    """How the agent ended. The trial grades whatever it left, however it ended."""

    ending: Ending
    exit_code: int | None = None
    log: str = ""
    details: dict[str, str] = field(default_factory=dict)


class Agent(ABC):
    #: The name shown in item ids and records, e.g. "oracle".
    name: str
    #: Hosts the agent must reach (a model API); all other network stays cut.
    model_hosts: tuple[str, ...] = ()

    def check(self, task: Task) -> None:
        """Raise AgentConfigError when this agent cannot attempt the task."""

    def not_attempted(self, task: Task) -> str | None:
        """Why this agent has nothing for the task (reported as not attempted), or None."""
        return None

    def check_tasks(self, task_ids: set[str]) -> None:
        """Raise AgentConfigError when the agent's own input names tasks that are not
        among `task_ids` (every task under the collected roots)."""

    @abstractmethod
    def run(self, ctx: AgentContext) -> AgentOutcome:
        """Act in `ctx.sandbox` on the task, within `ctx.timeout` seconds."""


def shell_outcome(exit_code: int, timed_out: bool, log: str) -> AgentOutcome:
    if timed_out:
        return AgentOutcome("timeout", None, log)
    return AgentOutcome("completed" if exit_code == 0 else "exited-nonzero", exit_code, log)
