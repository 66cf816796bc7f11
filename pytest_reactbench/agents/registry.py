"""The agents by name. Built-ins are listed here; another package adds one through
the `pytest_reactbench_agents` hook, returning `{name: factory}` where
`factory(arg, options)` makes the agent (or several: a predictions file of several
models) from the text after `name:` in `--reactbench-agent` and the run's
`AgentOptions`. As the sandbox backends' registry, with `SandboxOptions`."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_reactbench.agents.base import Agent, AgentConfigError
from pytest_reactbench.agents.command import CommandAgent, CommandSpec, load_presets
from pytest_reactbench.agents.nop import NopAgent
from pytest_reactbench.agents.oracle import OracleAgent
from pytest_reactbench.agents.patch import PatchAgent, PatchInputError, load_predictions
from pytest_reactbench.agents.raw_model import tools_agent
from pytest_reactbench.agents.tools import load_agent_class
from pytest_reactbench.sandbox.registry import merge_registered


@dataclass(frozen=True)
class AgentOptions:
    """What a run gives every agent factory."""

    #: The predictions file of `--reactbench-agent=patch` (None: not given).
    patch: Path | None = None
    #: Host variables passed to every command agent (`--reactbench-agent-env`).
    agent_env: tuple[str, ...] = ()
    #: Model hosts every command agent may reach (`--reactbench-model-host`).
    model_hosts: tuple[str, ...] = ()
    #: The user's own command agents by name (`--reactbench-agent-command`).
    commands: Mapping[str, str] = field(default_factory=dict)


AgentFactory = Callable[[str, AgentOptions], "Agent | list[Agent]"]


def command_factory(spec: CommandSpec) -> AgentFactory:
    def make(arg: str, options: AgentOptions) -> Agent:
        return CommandAgent(spec, options.agent_env, options.model_hosts)

    return make


def _patch_agents(arg: str, options: AgentOptions) -> list[Agent]:
    if options.patch is None:
        raise AgentConfigError("--reactbench-agent=patch needs --reactbench-patch=PATH")
    try:
        predictions = load_predictions(options.patch)
    except PatchInputError as exc:
        raise AgentConfigError(str(exc)) from None
    # An empty predictions file still makes an agent: every task is then not attempted.
    predictions = predictions or {"patch": {}}
    return [PatchAgent(name, by_task, options.patch) for name, by_task in sorted(predictions.items())]


def _named(make: Callable[[str], Agent], arg: str) -> Agent:
    try:
        return make(arg)
    except AgentConfigError as exc:
        raise AgentConfigError(f"--reactbench-agent: {exc}") from None


def builtin_agents() -> dict[str, AgentFactory]:
    """The controls, the patch, Python and tools agents, and the CLI presets."""
    return {
        "oracle": lambda arg, options: OracleAgent(),
        "nop": lambda arg, options: NopAgent(),
        "patch": _patch_agents,
        "python": lambda arg, options: _named(load_agent_class, arg),
        "tools": lambda arg, options: _named(tools_agent, arg),
        **{name: command_factory(spec) for name, spec in load_presets().items()},
    }


def merge_agents(registered: Iterable[Mapping[str, AgentFactory]]) -> dict[str, AgentFactory]:
    return merge_registered(registered, "agent", AgentConfigError)


def make_agents(factories: Mapping[str, AgentFactory], specs: Sequence[str],
                options: AgentOptions) -> dict[str, tuple[Agent, str]]:
    """The agents `specs` (`name` or `name:arg`, as `--reactbench-agent` gives them) ask
    for, by name, each with the spec that made it; the user's command agents join the
    registry first. AgentConfigError names what is wrong, and what exists."""
    factories = dict(factories)
    for name, command in options.commands.items():
        if name in factories:
            raise AgentConfigError(f"--reactbench-agent-command: {name!r} is already an agent's name")
        factories[name] = command_factory(CommandSpec(name, command))
    agents: dict[str, tuple[Agent, str]] = {}
    for spec in specs:
        name, _, arg = spec.partition(":")
        factory = factories.get(name)
        if factory is None:
            near = difflib.get_close_matches(name, list(factories), n=1)
            raise AgentConfigError(
                f"--reactbench-agent: unknown agent {name!r}"
                + (f"; did you mean {near[0]!r}?" if near else "")
                + f" (known: {', '.join(sorted(factories))})")
        made = factory(arg, options)
        # A factory may make several agents (a predictions file of several models).
        for agent in made if isinstance(made, list) else [made]:
            if agent.name in agents:
                raise AgentConfigError(f"--reactbench-agent: two agents are named {agent.name!r}")
            agents[agent.name] = (agent, spec)
    return agents
