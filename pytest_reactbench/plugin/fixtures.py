"""Fixtures: every stage of a trial that a project may want to replace in its
conftest.py (the backend, the images, the sandboxes, the agent)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_reactbench import __version__
from pytest_reactbench.agents import Agent
from pytest_reactbench.plugin.items import RECORD
from pytest_reactbench.plugin.progress import progress_printer
from pytest_reactbench.plugin.session import SESSION_KEY
from pytest_reactbench.results import TrialRecord
from pytest_reactbench.sandbox.base import Backend, BootingSandbox, Image, ImageRecipe, Limits, Sandbox
from pytest_reactbench.tasks import EnvironmentConfig, Task
from pytest_reactbench.trial import TrialResult, Verdict, run_trial

DURATIONS = pytest.StashKey[dict[str, float]]()
IMAGES = pytest.StashKey[dict[str, str]]()


def _limits(env: EnvironmentConfig) -> Limits:
    return Limits(cpus=env.cpus, memory_mb=env.memory_mb, storage_mb=env.storage_mb)


def _timed_stage(request: pytest.FixtureRequest, phase: str, started: float) -> None:
    request.node.stash.setdefault(DURATIONS, {})[phase] = (
        request.node.stash.setdefault(DURATIONS, {}).get(phase, 0.0) + time.monotonic() - started
    )


@pytest.fixture(scope="session")
def reactbench_backend(request: pytest.FixtureRequest) -> Backend:
    """The sandbox backend chosen with --reactbench-sandbox, shared by the session."""
    return request.config.stash[SESSION_KEY].backend()


@pytest.fixture
def reactbench_task(request: pytest.FixtureRequest) -> Task:
    task: Task = request.node.task
    return task


@pytest.fixture
def reactbench_agent(request: pytest.FixtureRequest) -> Agent:
    agent: Agent = request.node.agent
    return agent


def _open_record(request: pytest.FixtureRequest, task: Task, agent: Agent,
                 retry_of: TrialRecord | None = None) -> TrialRecord:
    session = request.config.stash[SESSION_KEY]
    config = task.config
    attempt: int = getattr(request.node, "attempt", 1)
    manifest: dict[str, Any] = {
        "task": task.id,
        "task_path": str(task.path),
        "agent": agent.name,
        "agent_spec": session.agent_specs.get(agent.name, agent.name),
        "attempt": attempt,
        "nodeid": request.node.nodeid,
        "plugin_version": __version__,
        "backend": session.settings.backend,
        "run_id": session.records.run_id,
        "limits": {"agent": config.environment.model_dump(),
                   "verifier": config.verifier_environment.model_dump()},
        "timeouts": {"agent": config.agent.timeout_sec, "verifier": config.verifier.timeout_sec},
        "options": session.replay_options,
        **({"retry_of": str(retry_of.path)} if retry_of else {}),
    }
    record = session.records.open_trial(task.id, agent.name, attempt, manifest)
    request.node.stash[RECORD] = record
    return record


@pytest.fixture
def reactbench_record(request: pytest.FixtureRequest, reactbench_task: Task,
                      reactbench_agent: Agent) -> TrialRecord:
    """This trial's run record directory (never reused)."""
    return _open_record(request, reactbench_task, reactbench_agent)


def _bake(request: pytest.FixtureRequest, backend: Backend, task: Task, record: TrialRecord,
          role: str) -> Image:
    """Bake the agent image (environment/) or the verifier's (tests/)."""
    folder = task.environment_dir if role == "agent" else task.tests_dir
    env = task.config.environment if role == "agent" else task.config.verifier_environment
    recipe = ImageRecipe(
        name=f"{task.id}/{folder.name}",
        dockerfile=folder / "Dockerfile",
        context=folder,
        timeout=env.build_timeout_sec,
    )
    started = time.monotonic()
    record.event("bake-start", image=recipe.name)
    image = backend.bake(recipe, progress_printer(request.config))
    _timed_stage(request, "bake", started)
    request.node.stash.setdefault(IMAGES, {})[role] = image.digest
    record.event("bake-end", image=recipe.name, digest=image.digest, cached=image.cached)
    return image


@pytest.fixture
def reactbench_agent_image(request: pytest.FixtureRequest, reactbench_backend: Backend,
                           reactbench_task: Task, reactbench_record: TrialRecord) -> Image:
    """The agent's workspace image, baked from environment/Dockerfile."""
    return _bake(request, reactbench_backend, reactbench_task, reactbench_record, "agent")


@pytest.fixture
def reactbench_verifier_image(request: pytest.FixtureRequest, reactbench_backend: Backend,
                              reactbench_task: Task, reactbench_record: TrialRecord) -> Image:
    """The clean-room verifier's image, baked from tests/Dockerfile."""
    return _bake(request, reactbench_backend, reactbench_task, reactbench_record, "verifier")


def _boot(request: pytest.FixtureRequest, backend: Backend, image: Image, *,
          env: EnvironmentConfig, role: str, egress: tuple[str, ...] = ()) -> Sandbox:
    session = request.config.stash[SESSION_KEY]

    def boot() -> Sandbox:
        return backend.boot(
            image,
            network=False,
            egress=egress,
            limits=_limits(env),
            labels={"run": session.records.run_id, "task": request.node.task.id, "role": role,
                    "worker": session.worker},
        )

    if role == "verifier":
        # The verifier boots while the agent's sandbox boots and the agent works; the
        # trial records only the time it waits for it (run_trial, "verifier_boot").
        return BootingSandbox(boot, "verifier")
    started = time.monotonic()
    sandbox = boot()
    _timed_stage(request, "boot", started)
    return sandbox


@contextmanager
def _torn_down(sandbox: Sandbox, record: TrialRecord, role: str) -> Iterator[Sandbox]:
    """Yields the sandbox; closes it whatever happened and records how long that took."""
    try:
        yield sandbox
    finally:
        started = time.monotonic()
        sandbox.close()
        record.event("teardown", role=role, seconds=round(time.monotonic() - started, 3))


@pytest.fixture
def reactbench_agent_sandbox(request: pytest.FixtureRequest, reactbench_backend: Backend,
                             reactbench_agent_image: Image, reactbench_task: Task,
                             reactbench_agent: Agent, reactbench_record: TrialRecord) -> Iterator[Sandbox]:
    """The agent's sandbox: offline, but for the model hosts the agent declares."""
    sandbox = _boot(request, reactbench_backend, reactbench_agent_image,
                    egress=reactbench_agent.model_hosts,
                    env=reactbench_task.config.environment, role="agent")
    with _torn_down(sandbox, reactbench_record, "agent"):
        yield sandbox


@pytest.fixture
def reactbench_verifier_sandbox(request: pytest.FixtureRequest, reactbench_backend: Backend,
                                reactbench_verifier_image: Image,
                                reactbench_task: Task,
                                reactbench_record: TrialRecord) -> Iterator[Sandbox]:
    """A fresh verifier sandbox the agent never touched; always offline."""
    sandbox = _boot(request, reactbench_backend, reactbench_verifier_image,
                    env=reactbench_task.config.verifier_environment, role="verifier")
    with _torn_down(sandbox, reactbench_record, "verifier"):
        yield sandbox


@pytest.fixture
def reactbench_trial(request: pytest.FixtureRequest, reactbench_task: Task,
                     reactbench_agent: Agent, reactbench_record: TrialRecord,
                     reactbench_verifier_sandbox: Sandbox,
                     reactbench_agent_sandbox: Sandbox) -> TrialResult:
    """The trial's verdict: the agent acts, the verifier grades. A trial that ends in
    an error (never a pass or a fail) is retried in fresh sandboxes, with a record of
    its own, up to --reactbench-retries times."""
    settings = request.config.stash[SESSION_KEY].settings
    task, agent = reactbench_task, reactbench_agent
    durations = request.node.stash.setdefault(DURATIONS, {})
    images = request.node.stash.get(IMAGES, {})
    result = run_trial(task, agent, reactbench_agent_sandbox, reactbench_verifier_sandbox,
                       reactbench_record, durations, images, strict=settings.strict)
    record, retries = reactbench_record, 0
    while result.verdict is Verdict.ERROR and retries < settings.retries:
        retries += 1
        record.event("retried", failure=result.failure, retry=retries)
        record = _open_record(request, task, agent, retry_of=record)
        backend = request.getfixturevalue("reactbench_backend")
        boxes = [
            _boot(request, backend, request.getfixturevalue("reactbench_agent_image"),
                  egress=agent.model_hosts, env=task.config.environment, role="agent"),
            _boot(request, backend, request.getfixturevalue("reactbench_verifier_image"),
                  env=task.config.verifier_environment, role="verifier"),
        ]
        try:
            result = run_trial(task, agent, boxes[0], boxes[1], record, {}, images,
                               strict=settings.strict)
        finally:
            for box in boxes:
                box.close()
        result.retries = retries
    request.config.stash[SESSION_KEY].trial_finished(result, request.node)
    return result
