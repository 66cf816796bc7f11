"""The readable JUnit properties are a published format (the README's list): the names
a real session writes are pinned here, once, against that list. Every other test reads
results through TrialResult (`tests.helpers.junit_results`), not by these names."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from pytest_reactbench.results.load import junit_testcases
from pytest_reactbench.results.trial_result import (
    AgentRun,
    BaseImage,
    DiffStat,
    Finding,
    Gate,
    Grading,
    Provenance,
    Submission,
    TrialResult,
    Verdict,
)
from tests.helpers import write_task

README = Path(__file__).resolve().parents[2] / "README.md"
LEAD = "JUnit XML (`--junitxml`) carries per testcase the properties"


def documented() -> set[str]:
    """The testcase property names (`*` for a family) of the README's paragraph on JUnit
    (not the suite property it names as one)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(LEAD)
    paragraph = text[start:text.index("\n\n", start)]
    suite = set(re.findall(r"suite property\s+`(reactbench\.[a-z_.]+)`", paragraph))
    assert suite == {"reactbench.incomplete"}, suite
    return set(re.findall(r"`(reactbench\.[a-z_.*]+)`", paragraph)) - suite


def undocumented(names: set[str]) -> set[str]:
    listed = documented()
    return {name for name in names if not any(fnmatchcase(name, pattern) for pattern in listed)}


def test_a_sessions_junit_properties_are_the_documented_ones(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--junitxml=r.xml")
    result.assert_outcomes(passed=1, failed=1)
    cases = junit_testcases(suite.path / "r.xml")
    assert len(cases) == 2
    for name, props in cases:
        assert not undocumented(set(props)), (name, sorted(props))
        # What every trial writes.
        assert {f"reactbench.{n}" for n in (
            "task", "agent", "attempt", "verdict", "reward", "gate.tests", "gate.react_doctor",
            "failure", "agent_ending", "backend", "formal", "duration.agent", "duration.verify",
            "record", "result")} <= set(props), (name, sorted(props))


def test_the_documented_names_are_all_still_written() -> None:
    """A result with every part filled writes each documented name (a family at least
    once): the list holds no name the product stopped writing."""
    full = TrialResult(
        task="t", agent="a", verdict=Verdict.FAILED, failure="tests", message="m", retries=1,
        durations={"agent": 1.0},
        agent_run=AgentRun(ending="completed", version="1", input_tokens=1, output_tokens=1, cost_usd=0.1),
        grading=Grading(reward=0, gates={Gate.TESTS: False, Gate.REACT_DOCTOR: True},
                        failing_specs=["s (failed)"], findings=[Finding(rule="r", file="f", line=1)],
                        unscanned=["u.tsx"]),
        submission=Submission(diff=DiffStat(files=["f"], added=1), audit=["hook: x"]),
        provenance=Provenance(record="/r", backend="docker", engine="unix:///e", formal=True,
                              images={"agent": "sha256:1", "verifier": "sha256:2"},
                              bases=[BaseImage(name="b", digest="sha256:3")]))
    names = {name for name, _ in full.properties()}
    assert not undocumented(names), sorted(names)
    unwritten = {pattern for pattern in documented() if not any(fnmatchcase(n, pattern) for n in names)}
    assert not unwritten, sorted(unwritten)


def test_usage_goes_through_its_properties_and_back() -> None:
    """An agent CLI's version, tokens and cost, as their properties write them."""
    original = TrialResult(task="counter-reset", agent="claude-code", verdict=Verdict.PASSED,
                           agent_run=AgentRun(version="2.1.332", input_tokens=2400, output_tokens=160,
                                              cost_usd=0.0128))
    props = dict(original.properties())
    assert props["reactbench.agent_version"] == "2.1.332"
    assert props["reactbench.input_tokens"] == "2400" and props["reactbench.output_tokens"] == "160"
    assert props["reactbench.cost_usd"] == "0.012800"
    readable = {name: value for name, value in props.items() if name != "reactbench.result"}
    for given in (props, readable):  # the whole result, and the readable properties alone
        back = TrialResult.from_properties(given)
        assert back is not None
        run = back.agent_run
        assert (run.version, run.input_tokens, run.output_tokens, run.cost_usd) == (
            "2.1.332", 2400, 160, 0.0128)


def test_no_usage_no_property() -> None:
    props = dict(TrialResult(task="t", agent="oracle", verdict=Verdict.PASSED).properties())
    assert not any(k.endswith(("_tokens", "cost_usd", "agent_version")) for k in props)
