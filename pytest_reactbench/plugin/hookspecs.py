"""The plugin's own hooks. Another installed package, or a conftest.py, adds an
agent or a sandbox backend by implementing them; built-ins use the same hooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_reactbench.agents.registry import AgentFactory
    from pytest_reactbench.results import TrialResult
    from pytest_reactbench.sandbox.registry import BackendFactory


@pytest.hookspec
def pytest_reactbench_agents() -> Mapping[str, AgentFactory]:  # type: ignore[empty-body]
    """Return agents by name: ``{"my-agent": factory}``.

    ``--reactbench-agent=my-agent`` (or ``my-agent:ARG``) calls ``factory(ARG, options)``
    once per session, ``options`` the run's
    :class:`~pytest_reactbench.agents.registry.AgentOptions`, and must return an
    :class:`~pytest_reactbench.agents.Agent` (or a list of them).
    Results of all implementations are merged; a later plugin cannot silently
    replace a name (a clash is a usage error).
    """


@pytest.hookspec
def pytest_reactbench_sandbox_backends() -> Mapping[str, BackendFactory]:  # type: ignore[empty-body]
    """Return sandbox backends by name: ``{"my-backend": factory}``, selected with
    ``--reactbench-sandbox=my-backend``. ``factory(options)`` is given the
    :class:`~pytest_reactbench.sandbox.options.SandboxOptions` and returns a
    :class:`~pytest_reactbench.sandbox.base.Backend`; ``reactbench images`` lists it too.
    A name registered twice is a usage error."""


@pytest.hookspec
def pytest_reactbench_trial_finished(result: TrialResult, item: pytest.Item) -> None:
    """Called on the worker that ran it when a trial has its verdict (pass, fail,
    error or not attempted; a setup error included), after its run record is complete.
    A trial a resumed run keeps from its records, and one whose xdist worker died, get
    no call: neither was run to its verdict by this session's workers."""
