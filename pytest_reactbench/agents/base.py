"""The Agent contract: what an agent gets (a task, a sandbox, a time limit) and
what it reports back (how it ended). Agents never see `tests/`; only `oracle`
sees `solution/`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_reactbench.sandbox.base import Sandbox
from pytest_reactbench.tasks import Task

Ending = Literal["completed", "exited-nonzero", "timeout", "crashed"]


class AgentConfigError(Exception):
    """An agent that cannot run a task as configured (a usage error, not a verdict)."""


class AgentAuthError(Exception):
    """The agent's model API refused its credentials mid-run: an error of its own class
    (no score, never retried), not a fail."""

    retryable = False


class AgentAPIError(Exception):
    """The agent's model API failed it: refused the connection, answered 5xx or 429
    past the CLI's own retries, or sent a stream that could not be read. Not the
    agent's work: no score, retried like any error, and a baseline gate calls a run
    with such errors inconclusive, not a regression."""


@dataclass(frozen=True)
class Install:
    """What an agent adds to a task's image: Dockerfile steps baked as a layer on top of
    the task's environment image, cached by `name` and pinned `version` (and the
    steps' text), so the same CLI runs on every task, ours and the public ones."""

    name: str
    version: str
    #: Dockerfile instructions (RUN, ENV...) after `FROM <the task's image>`.
    steps: str
    #: Prints the installed version; preflight runs it in the baked image.
    version_command: str = ""
    #: The user the CLI runs as ("" for the image's default).
    user: str = ""


def _no_event(kind: str, **data: Any) -> None:
    return None


@dataclass
class AgentContext:
    task: Task
    sandbox: Sandbox
    timeout: float
    #: Records an event in the run record: `event(Event.TOOL, tool="bash", ...)`.
    event: Callable[..., None] = field(default=_no_event)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    #: In US dollars, as the CLI reports it; None when it does not say.
    cost_usd: float | None = None


@dataclass
class AgentOutcome:
    """How the agent ended. The trial grades whatever it left, however it ended."""

    ending: Ending
    exit_code: int | None = None
    log: str = ""
    details: dict[str, str] = field(default_factory=dict)
    #: Tokens and cost the agent reported (its CLI's own output, or the API's usage).
    usage: Usage | None = None
    #: The model API refused the agent's credentials: the trial is an error, not a fail.
    auth_failure: str = ""
    #: The model API failed the agent (what its CLI or SDK said): an error, not a fail.
    api_failure: str = ""
    #: The agent's last word as its CLI reports it (its result text), if it says one.
    said: str = ""
    #: What a failing trial says first when the agent's ending explains the verdict
    #: (a patch that did not apply), before the gates it failed.
    headline: str = ""


class Agent(ABC):
    #: The name shown in item ids and records, e.g. "oracle".
    name: str
    #: Hosts the agent must reach (a model API); all other network stays cut.
    model_hosts: tuple[str, ...] = ()
    #: The CLI layer baked on top of the task's image, if the agent needs one.
    install: Install | None = None
    #: Its work is the task's own (a control agent): a backend that cannot hold an
    #: untrusted agent (`Capabilities.untrusted_refusal`) still runs it.
    trusted: bool = False

    @property
    def version(self) -> str:
        """The agent's pinned version, recorded with every trial ("" if it has none)."""
        return self.install.version if self.install else ""

    def preflight(self, environ: Mapping[str, str]) -> None:
        """Raise AgentConfigError, before any trial runs, naming what the agent lacks on
        this host (credentials, say)."""

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
