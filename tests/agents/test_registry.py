"""The agents' registry: built-ins and plugins' factories by name, made from the
run's AgentOptions, with no pytest in between (the plugin and the CLI share it)."""

import pytest

from pytest_reactbench.agents import AgentConfigError, NopAgent, OracleAgent
from pytest_reactbench.agents.command import CommandAgent
from pytest_reactbench.agents.registry import AgentOptions, builtin_agents, make_agents, merge_agents


def test_specs_make_their_agents_with_the_runs_options() -> None:
    options = AgentOptions(agent_env=("MY_KEY",), model_hosts=("api.example.com",),
                           commands={"mine": "echo hi > /app/out.txt"})
    made = make_agents(builtin_agents(), ["oracle", "nop", "mine"], options)
    assert {name: spec for name, (_, spec) in made.items()} == {
        "oracle": "oracle", "nop": "nop", "mine": "mine"}
    assert isinstance(made["oracle"][0], OracleAgent) and isinstance(made["nop"][0], NopAgent)
    command = made["mine"][0]
    assert isinstance(command, CommandAgent)
    assert command.extra_env == ("MY_KEY",) and "api.example.com" in command.model_hosts


def test_what_cannot_be_made_is_said_with_what_exists() -> None:
    unknown = r"unknown agent 'oracel'; did you mean 'oracle'\? \(known: .*nop"
    with pytest.raises(AgentConfigError, match=unknown):
        make_agents(builtin_agents(), ["oracel"], AgentOptions())
    with pytest.raises(AgentConfigError, match="needs --reactbench-patch=PATH"):
        make_agents(builtin_agents(), ["patch"], AgentOptions())
    with pytest.raises(AgentConfigError, match="'nop' is already an agent's name"):
        make_agents(builtin_agents(), ["nop"], AgentOptions(commands={"nop": "true"}))
    with pytest.raises(AgentConfigError, match="two agents are named 'nop'"):
        make_agents(builtin_agents(), ["nop", "nop"], AgentOptions())
    with pytest.raises(AgentConfigError, match=r"^--reactbench-agent: "):
        make_agents(builtin_agents(), ["python:no.such.module:Agent"], AgentOptions())


def test_two_plugins_cannot_register_one_name() -> None:
    first, second = builtin_agents(), {"oracle": lambda arg, options: OracleAgent()}
    with pytest.raises(AgentConfigError, match="two plugins register the agent 'oracle'"):
        merge_agents([first, second])
    # The same factory registered twice (a module seen by two paths) is one agent.
    assert merge_agents([first, first]).keys() == first.keys()


def test_a_python_agent_that_cannot_be_found_says_what_to_do(tmp_path, monkeypatch) -> None:
    with pytest.raises(AgentConfigError, match=r"no module no_such_agents on the import path: run pytest "
                       r"from the folder that holds it"):
        make_agents(builtin_agents(), ["python:no_such_agents:Mine"], AgentOptions())
    (tmp_path / "my_agents.py").write_text(
        "from pytest_reactbench.agents import NopAgent\n"
        "class Mine(NopAgent):\n    pass\n"
        "class Helper:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentConfigError, match=r"my_agents has no Nope \(its agent classes: Mine\)"):
        make_agents(builtin_agents(), ["python:my_agents:Nope"], AgentOptions())
    with pytest.raises(AgentConfigError, match=r"my_agents.Helper is not a subclass"):
        make_agents(builtin_agents(), ["python:my_agents:Helper"], AgentOptions())
    ((agent, spec),) = make_agents(builtin_agents(), ["python:my_agents:Mine"], AgentOptions()).values()
    assert type(agent).__name__ == "Mine" and spec == "python:my_agents:Mine"
