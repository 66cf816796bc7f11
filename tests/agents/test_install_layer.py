"""An agent's install layer is baked on top of the task's image, cached by agent and
version, and its CLI is checked before the agent acts (local backend: the same bake
template as docker)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.helpers import run_folder, write_task

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
    records = [run_folder(run) / "alpha__layered__1" for run in (first, second)]
    events = [[json.loads(line) for line in (r / "events.jsonl").read_text().splitlines()] for r in records]
    bakes = [[e for e in run if e["event"] == "bake-end" and e["image"] == "agent-layered"] for run in events]
    # The first run bakes it once, before any trial (its CLI is checked there).
    assert first.stderr.str().count("agent-layered: baking") == 1
    assert [b[0]["cached"] for b in bakes] == [True, True]
    assert bakes[0][0]["digest"] == bakes[1][0]["digest"]
    status = json.loads((records[0] / "status.json").read_text())
    assert status["agent_run"]["version"] == "1.2.3"
    assert json.loads((records[0] / "manifest.json").read_text())["agent_version"] == "1.2.3"
    assert "layer 1.2.3" in (records[0] / "agent.log").read_text()  # the layer's ENV reached it


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_cli_that_does_not_answer_is_a_usage_error_before_any_trial(
        suite: pytest.Pytester, workers: list[str]) -> None:
    suite.makepyfile(layered_agents=AGENTS)
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    # A subprocess: xdist's workers import the agent's module from its PYTHONPATH too.
    result = suite.runpytest_subprocess("--reactbench-agent=python:layered_agents:Broken", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--reactbench-agent: agent 'broken': `broken-cli --version` failed in its image*"])
    assert not list((suite.path / "records").glob("*/*__broken__*"))  # no trial ran


def test_a_cli_that_answers_is_named_with_its_version_before_the_trials(
        suite: pytest.Pytester) -> None:
    suite.makepyfile(layered_agents=AGENTS)
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest_subprocess("--reactbench-agent=python:layered_agents:Layered", "-n", "2")
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines + result.stderr.lines
    assert any("agent layered 1.2.3: `test \"$LAYERED_CLI\" = 1.2.3` answers (exit 0)" in line
               for line in lines), lines
