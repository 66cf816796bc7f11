"""An agent's install layer is baked on top of the task's image, cached by agent and
version, and its CLI is checked before the agent acts (local backend: the same bake
template as docker)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import write_task

AGENTS = textwrap.dedent('''\
    from pytest_reactbench.agents import Agent, AgentOutcome, Install


    class Layered(Agent):
        name = "layered"
        install = Install("layered", "1.2.3", "ENV LAYERED_CLI=1.2.3", 'test "$LAYERED_CLI" = 1.2.3')

        def run(self, ctx):
            out = ctx.sandbox.exec('echo "layer $LAYERED_CLI"; echo hello > /app/out.txt',
                                   timeout=ctx.timeout)
            return AgentOutcome("completed", out.exit_code, out.text)


    class Broken(Layered):
        name = "broken"
        install = Install("broken", "0.0.1", "ENV NOTHING=1", "broken-cli --version")
    ''')


def test_the_layer_is_baked_on_the_task_image_and_reused(suite: pytest.Pytester) -> None:
    suite.makepyfile(layered_agents=AGENTS)
    suite.syspathinsert()
    write_task(suite.path / "tasks", "alpha")
    first = suite.runpytest("--reactbench-agent=python:layered_agents:Layered")
    first.assert_outcomes(passed=1)
    second = suite.runpytest("--reactbench-agent=python:layered_agents:Layered")
    second.assert_outcomes(passed=1)
    records = sorted((suite.path / "records").glob("*/alpha__layered__1"))
    events = [[json.loads(line) for line in (r / "events.jsonl").read_text().splitlines()] for r in records]
    bakes = [[e for e in run if e["event"] == "bake-end" and e["image"] == "agent-layered"] for run in events]
    assert [b[0]["cached"] for b in bakes] == [False, True]
    assert bakes[0][0]["digest"] == bakes[1][0]["digest"]
    status = json.loads((records[0] / "status.json").read_text())
    assert status["agent_version"] == "1.2.3"
    assert json.loads((records[0] / "manifest.json").read_text())["agent_version"] == "1.2.3"
    assert "layer 1.2.3" in (records[0] / "agent.log").read_text()  # the layer's ENV reached it


def test_a_cli_that_fails_its_version_check_is_an_error_not_retried(suite: pytest.Pytester) -> None:
    suite.makepyfile(layered_agents=AGENTS)
    suite.syspathinsert()
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=python:layered_agents:Broken", "--reactbench-retries=2")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*AgentUnavailable*agent 'broken': `broken-cli --version` failed in its image*"])
    assert len(list((suite.path / "records").glob("*/alpha__broken__1*"))) == 1
