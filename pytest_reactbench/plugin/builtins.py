"""The built-in agents and sandbox backends, registered through the plugin's own
hooks exactly as another package registers its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_reactbench.agents import (
    Agent,
    AgentConfigError,
    NopAgent,
    OracleAgent,
    PatchAgent,
    PatchInputError,
    load_agent_class,
    load_predictions,
)
from pytest_reactbench.agents.command import load_presets
from pytest_reactbench.agents.models import tools_agent
from pytest_reactbench.plugin.session import command_factory
from pytest_reactbench.plugin.settings import Settings
from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS, BackendFactory


def _patch_agents(arg: str, settings: Settings) -> list[PatchAgent]:
    if settings.patch is None:
        raise pytest.UsageError("--reactbench-agent=patch needs --reactbench-patch=PATH")
    try:
        predictions = load_predictions(settings.patch)
    except PatchInputError as exc:
        raise pytest.UsageError(str(exc)) from None
    # An empty predictions file still makes an agent: every task is then not attempted.
    predictions = predictions or {"patch": {}}
    return [PatchAgent(name, by_task, settings.patch) for name, by_task in sorted(predictions.items())]


def _python_agent(arg: str, settings: Settings) -> Agent:
    try:
        return load_agent_class(arg)
    except AgentConfigError as exc:
        raise pytest.UsageError(f"--reactbench-agent: {exc}") from None


def _tools_agent(arg: str, settings: Settings) -> Agent:
    try:
        return tools_agent(arg)
    except AgentConfigError as exc:
        raise pytest.UsageError(f"--reactbench-agent: {exc}") from None


@pytest.hookimpl
def pytest_reactbench_agents() -> Mapping[str, Any]:
    return {
        "oracle": lambda arg, settings: OracleAgent(),
        "nop": lambda arg, settings: NopAgent(),
        "patch": _patch_agents,
        "python": _python_agent,
        "tools": _tools_agent,
        **{name: command_factory(spec) for name, spec in load_presets().items()},
    }


@pytest.hookimpl
def pytest_reactbench_sandbox_backends() -> Mapping[str, BackendFactory]:
    return BUILTIN_BACKENDS
