"""The built-in agents and sandbox backends, registered through the plugin's own
hooks exactly as another package registers its own."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_reactbench.agents.registry import AgentFactory, builtin_agents
from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS, BackendFactory


@pytest.hookimpl
def pytest_reactbench_agents() -> Mapping[str, AgentFactory]:
    return builtin_agents()


@pytest.hookimpl
def pytest_reactbench_sandbox_backends() -> Mapping[str, BackendFactory]:
    return BUILTIN_BACKENDS
