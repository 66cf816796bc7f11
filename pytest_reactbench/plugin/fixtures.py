"""Fixtures: thin adapters from an item to its Trial. A project replaces a stage in
its conftest.py by overriding one of them (the backend, the stages that bake and
boot, the agent)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_reactbench.agents import Agent
from pytest_reactbench.plugin.items import TrialErrored
from pytest_reactbench.plugin.progress import progress_printer
from pytest_reactbench.plugin.session import SESSION_KEY
from pytest_reactbench.results import TrialResult, Verdict
from pytest_reactbench.sandbox.base import Backend
from pytest_reactbench.tasks import Task
from pytest_reactbench.trial import Stages, Trial


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


@pytest.fixture
def reactbench_stages(request: pytest.FixtureRequest, reactbench_backend: Backend) -> Stages:
    """How the trial bakes its images and boots its sandboxes (a `Stages`)."""
    session = request.config.stash[SESSION_KEY]
    return Stages(reactbench_backend, progress_printer(request.config, session.once),
                  session.trial_options.labels)


@pytest.fixture
def reactbench_trial(request: pytest.FixtureRequest, reactbench_task: Task, reactbench_agent: Agent,
                     reactbench_stages: Stages) -> TrialResult:
    """The trial's verdict. One that ended in an error is a setup error of the item
    (JUnit `<error>`), never a failure."""
    session = request.config.stash[SESSION_KEY]
    agent = reactbench_agent
    kept = session.kept.get((reactbench_task.id, agent.name, request.node.attempt))
    if kept is not None:
        return kept  # a resumed run: this trial was scored already
    options = replace(session.trial_options, manifest={
        **session.trial_options.manifest, "nodeid": request.node.nodeid,
        "agent_spec": session.agent_specs.get(agent.name, agent.name)})
    trial = Trial(reactbench_task, agent, stages=reactbench_stages, records=session.records,
                  attempt=request.node.attempt, options=options)
    result = trial.run()
    session.trial_finished(result, request.node)
    if result.verdict is Verdict.ERROR:
        raise TrialErrored(result)
    return result
