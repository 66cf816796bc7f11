"""Collection: a task directory is a collector, each agent (and attempt) an item."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.agents import Agent, AgentConfigError
from pytest_reactbench.plugin.session import SESSION_KEY
from pytest_reactbench.results import TrialResult, Verdict
from pytest_reactbench.sandbox.dockerfile import DockerfileError, check_instructions
from pytest_reactbench.tasks import Task, TaskError, find_tasks, load_task

AGENTS_KEY = pytest.StashKey[dict[str, Agent]]()


class TrialFailed(Exception):
    """The agent's work scored 0 (a gate failed)."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.message)
        self.result = result


class TrialErrored(Exception):
    """The harness, sandbox or verifier broke: no score."""

    def __init__(self, result: TrialResult) -> None:
        super().__init__(result.message)
        self.result = result


#: What `-m` reads as one name (pytest's mark expression grammar).
_MARK_CHARS = re.compile(r"[^\w:+\-.\[\]\\/]+")
_MARK_KEYWORDS = ("and", "or", "not")


def marker_name(tag: str) -> str:
    """The marker of a task tag, difficulty or category: the tag as written wherever
    `-m` can name it (`write-react`); otherwise each run of other characters becomes
    `_` (`React 19` -> `React_19`) and a bare keyword of `-m` gets a trailing `_`."""
    name = _MARK_CHARS.sub("_", tag.strip()).strip("_")
    return f"{name}_" if name in _MARK_KEYWORDS else name


def register_markers(config: pytest.Config, tags: Iterable[str]) -> None:
    """Task tags as registered markers (listed by `pytest --markers`, accepted by
    --strict-markers)."""
    known = {line.split(":")[0].strip() for line in config.getini("markers")}
    for tag in tags:
        name = marker_name(tag)
        if name and name not in known:
            known.add(name)
            config.addinivalue_line("markers", f"{name}: tasks tagged {tag!r} (task.toml [metadata])")


def _trial(reactbench_trial: TrialResult) -> None:
    """The body of every item: the verdict comes from the reactbench_trial fixture
    (which raises TrialErrored itself: an error is the item's setup error)."""
    if reactbench_trial.verdict is Verdict.FAILED:
        raise TrialFailed(reactbench_trial)


def register_task_markers(config: pytest.Config, roots: Iterable[Path]) -> None:
    """The tags of every task under the roots, registered before collection so that
    `pytest --markers` lists them (a task that does not load is skipped here: it is a
    collection error later)."""
    for root in roots:
        for path in find_tasks(root) if root.is_dir() else ():
            try:
                register_markers(config, load_task(path).markers)
            except TaskError:
                continue


def check_dockerfiles(task: Task) -> None:
    """The task's two Dockerfiles hold only Docker's instructions, whatever the backend:
    raises DockerfileError naming the file, the line and the instruction."""
    check_instructions(task.environment_dir / "Dockerfile")
    check_instructions(task.tests_dir / "Dockerfile")


class TaskDirectory(pytest.Directory):
    """A directory holding task.toml; its items are `<task path>::<agent>`."""

    def collect(self) -> list[pytest.Item]:
        try:
            task = load_task(self.path)
            check_dockerfiles(task)
        except (TaskError, DockerfileError) as exc:
            raise self.CollectError(str(exc)) from None
        agents = self.config.stash[AGENTS_KEY]
        self.config.stash[SESSION_KEY].collected_tasks.add(task.id)
        items: list[pytest.Item] = []
        attempts = self.config.stash[SESSION_KEY].settings.attempts
        for name, agent in agents.items():
            try:
                agent.check(task)
            except AgentConfigError as exc:
                raise self.CollectError(f"agent {name}: {exc}") from None
            reason = agent.not_attempted(task)
            for attempt in range(1, attempts + 1):
                item = TrialItem.from_parent(
                    self, name=name if attempts == 1 else f"{name}#{attempt}", callobj=_trial,
                    task=task, agent=agent, attempt=attempt, not_attempted=reason)
                if reason:
                    # Reported apart (N, NOT ATTEMPTED): neither a pass nor a silent skip.
                    item.add_marker(pytest.mark.skip(reason=f"not attempted: {reason}"))
                items.append(item)
        return items

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, self.CollectError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))


class TrialItem(pytest.Function):
    """One agent's attempt at one task. A `pytest.Function` so that its sandboxes,
    images and agent are ordinary fixtures a conftest.py can override."""

    def __init__(self, *, task: Task, agent: Agent, attempt: int = 1, not_attempted: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.agent = agent
        self.attempt = attempt
        #: Why the agent has nothing for this task (the item is skipped), or None.
        self.not_attempted = not_attempted
        register_markers(self.config, task.markers)
        for tag in task.markers:
            if marker_name(tag):
                self.add_marker(marker_name(tag))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path / "task.toml", 0, f"{self.task.id} [{self.agent.name}]"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        from pytest_reactbench.plugin.report import describe_failure

        if isinstance(excinfo.value, TrialFailed | TrialErrored):
            return describe_failure(excinfo.value.result)
        return str(super().repr_failure(excinfo))
