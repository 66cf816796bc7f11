"""The extension points' registries (agents, sandbox backends), composed by one
function for a pytest session and for a `reactbench` command alike: every plugin's
answer to the hooks, the built-ins' included, merged; a name given twice, or asked
for and unknown, is a usage error naming what exists."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pluggy
import pytest

from pytest_reactbench.agents.base import AgentConfigError
from pytest_reactbench.agents.registry import AgentFactory, merge_agents
from pytest_reactbench.plugin import builtins, hookspecs
from pytest_reactbench.sandbox.registry import BackendFactory, BackendRegistryError, merge_backends


@dataclass(frozen=True)
class Registered:
    agents: dict[str, AgentFactory]
    backends: dict[str, BackendFactory]

    def backend(self, name: str, where: str) -> BackendFactory:
        """The factory of the backend `name` (`where`: the option that named it)."""
        factory = self.backends.get(name)
        if factory is None:
            known = ", ".join(sorted(self.backends))
            raise pytest.UsageError(f"{where}: unknown backend {name!r}; known: {known}")
        return factory


def registered(hook: Any) -> Registered:
    """What the plugins registered through `hook` (a session's `config.hook`, or
    `command_hook`'s)."""
    try:
        return Registered(merge_agents(hook.pytest_reactbench_agents()),
                          merge_backends(hook.pytest_reactbench_sandbox_backends()))
    except (AgentConfigError, BackendRegistryError) as exc:
        raise pytest.UsageError(str(exc)) from None


def command_hook(plugins: Sequence[str]) -> Any:
    """The hooks as a pytest session would have them, for a `reactbench` command: the
    built-ins, the installed pytest plugins (the `pytest11` entry points) and the
    modules named with -p."""
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.register(builtins, "reactbench-builtins")
    manager.load_setuptools_entrypoints("pytest11")
    for name in plugins:
        manager.register(importlib.import_module(name), name)
    return manager.hook
