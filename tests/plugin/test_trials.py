"""Whole trials through pytest on the local backend: verdict classes, records,
JUnit properties, teardown. The tasks' verifiers are plain bash."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_reactbench.results import Gate, TrialResult
from tests.helpers import junit_results, write_task

SLEEPER_CONFTEST = """
import pytest
from pytest_reactbench.agents import Agent, AgentOutcome


class Sleeper(Agent):
    name = "sleeper"

    def run(self, ctx):
        # Leaves its work half done, then hangs with a child process.
        ctx.sandbox.exec("echo hello > /app/out.txt")
        result = ctx.sandbox.exec("sleep 600 & sleep 600", timeout=ctx.timeout)
        return AgentOutcome("timeout" if result.timed_out else "completed", result.exit_code)


class Crasher(Agent):
    name = "crasher"

    def run(self, ctx):
        raise RuntimeError("the agent fell over")


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"sleeper": lambda arg, settings: Sleeper(),
            "crasher": lambda arg, settings: Crasher()}
"""


def results(xml: Path) -> dict[str, TrialResult]:
    return {f"{r.task}::{r.agent}": r for r in junit_results(xml)}


def leftover_sandboxes(cache: Path) -> list[Path]:
    return list((cache / "local" / "sandboxes").iterdir())


def statuses(suite: pytest.Pytester) -> dict[str, dict[str, object]]:
    out = {}
    for status in (suite.path / "records").glob("*/*/status.json"):
        out[status.parent.name] = json.loads(status.read_text())
    return out


def test_pass_and_fail_with_junit_properties(suite: pytest.Pytester, bake_cache: Path) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--junitxml=r.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*FAILED: reward 0; failed gate tests*",
        "*gate tests: FAIL*",
        "*tests gate: 0*",
        "*Run record: *alpha__nop__1*",
    ])
    outcomes = results(suite.path / "r.xml")
    oracle = next(v for k, v in outcomes.items() if k.endswith("oracle"))
    nop = next(v for k, v in outcomes.items() if k.endswith("nop"))
    assert oracle.verdict == "passed" and oracle.grading.reward == 1
    assert oracle.grading.gates == {Gate.TESTS: True, Gate.REACT_DOCTOR: True}
    assert oracle.provenance.backend == "local" and oracle.task == "alpha"
    assert oracle.durations["verify"] > 0
    assert {"bake", "agent"} <= oracle.durations.keys()
    assert nop.verdict == "failed" and nop.failure == "tests"
    records = statuses(suite)
    assert records["alpha__oracle__1"]["verdict"] == "passed"
    # Each record holds a gate-level JUnit file of its own.
    (gate_xml,) = (suite.path / "records").glob("*/alpha__nop__1/junit.xml")
    cases = {c.get("name"): c for c in ET.parse(gate_xml).getroot().iter("testcase")}
    assert set(cases) == {"tests", "react_doctor"}
    assert cases["tests"].find("failure") is not None and cases["react_doctor"].find("failure") is None
    assert records["alpha__nop__1"]["status"] == "complete"
    assert leftover_sandboxes(bake_cache) == []


def test_timed_out_and_crashed_agents_are_still_graded(suite: pytest.Pytester,
                                                       bake_cache: Path) -> None:
    suite.makeconftest(SLEEPER_CONFTEST)
    write_task(suite.path / "tasks", "alpha", agent_timeout=1)
    result = suite.runpytest("--reactbench-agent=sleeper,crasher", "--junitxml=r.xml")
    # The sleeper wrote the answer before it hung: graded, and it passes.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*The agent ended: crashed.*"])
    outcomes = results(suite.path / "r.xml")
    sleeper = next(v for k, v in outcomes.items() if k.endswith("sleeper"))
    crasher = next(v for k, v in outcomes.items() if k.endswith("crasher"))
    assert sleeper.agent_run.ending == "timeout"
    assert sleeper.verdict == "passed"
    assert crasher.agent_run.ending == "crashed"
    assert "the agent fell over" in next(
        (suite.path / "records").glob("*/alpha__crasher__1/agent.log")).read_text()
    assert leftover_sandboxes(bake_cache) == []


def test_fixtures_can_be_overridden_in_conftest(suite: pytest.Pytester) -> None:
    suite.makeconftest("""
import pytest

from pytest_reactbench.trial import Stages


class Planting(Stages):
    def boot(self, task, role, image, egress=()):
        sandbox = super().boot(task, role, image, egress)
        if role == "agent":
            sandbox.write_file("/app/out.txt", "hello\\n")
        return sandbox


@pytest.fixture
def reactbench_stages(reactbench_stages):
    return Planting(reactbench_stages.backend, reactbench_stages.progress, reactbench_stages.labels)
""")
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=nop").assert_outcomes(passed=1)


def test_every_verdict_passes_the_trial_finished_hook(suite: pytest.Pytester) -> None:
    """Not attempted and setup errors included: an observer sees every item's verdict."""
    from tests.agents.test_patch import DIFF

    suite.makeconftest("""
import json
import pytest


@pytest.fixture
def reactbench_stages(request, reactbench_stages):
    if request.node.task.id == "beta":
        raise RuntimeError("this stage broke before the trial began")
    return reactbench_stages


def pytest_reactbench_trial_finished(result, item):
    with open("finished.jsonl", "a") as f:
        f.write(json.dumps({"item": item.nodeid, "verdict": result.verdict.value,
                            "failure": result.failure}) + "\\n")
""")
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    preds = suite.path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"task_id": t, "model_patch": DIFF, "agent_name": "modelA"}) + "\n"
                             for t in ("alpha", "beta")))
    suite.runpytest("--reactbench-agent=patch", f"--reactbench-patch={preds}")
    finished = [json.loads(line) for line in (suite.path / "finished.jsonl").read_text().splitlines()]
    assert sorted((f["item"], f["verdict"], f["failure"]) for f in finished) == [
        ("tasks/alpha::modelA", "passed", ""),
        ("tasks/beta::modelA", "error", "RuntimeError"),
        ("tasks/gamma::modelA", "not-attempted", ""),
    ]


def test_only_declared_artifacts_cross(suite: pytest.Pytester) -> None:
    check = """#!/bin/bash
ok=1
[ -f /app/src/keep.ts ] || ok=0
[ -e /app/node_modules/planted.js ] && ok=0
[ -e /app/base.txt ] || ok=0
[ -e /opt/agent-secret ] && ok=0
echo "{\\"reward\\": $ok}" > /logs/verifier/reward.json
"""
    solve = """#!/bin/bash
mkdir -p /app/src /app/node_modules
echo keep > /app/src/keep.ts
echo planted > /app/node_modules/planted.js
echo secret > /opt/agent-secret
"""
    write_task(suite.path / "tasks", "alpha", test_sh=check, solve_sh=solve)
    suite.runpytest("--reactbench-agent=oracle").assert_outcomes(passed=1)
    (record,) = (suite.path / "records").glob("*/alpha__oracle__1")
    transfer = json.loads((record / "artifacts.json").read_text())
    assert transfer[0]["source"] == "/app" and transfer[0]["files"] == 2  # base.txt, keep.ts


def test_xdist_and_last_failed(suite: pytest.Pytester, bake_cache: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    result = suite.runpytest_subprocess("--reactbench-agent=oracle,nop", "-n", "2",
                                        "--junitxml=r.xml")
    result.assert_outcomes(passed=3, failed=3)
    outcomes = results(suite.path / "r.xml")
    assert len(outcomes) == 6
    assert {r.verdict for r in outcomes.values()} == {"passed", "failed"}
    run_dirs = list((suite.path / "records").iterdir())
    assert len(run_dirs) == 1, "all workers write into one run"
    assert len(list(run_dirs[0].glob("*/status.json"))) == 6
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--lf", "-q")
    result.assert_outcomes(failed=3)
    assert leftover_sandboxes(bake_cache) == []
