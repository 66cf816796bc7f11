"""A TrialResult's two written forms (a record's status.json, a JUnit testcase's
properties) give back every field, for any result: the summary, report.md, the HTML
report and compare read one of them, so neither may lose anything."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _pytest.junitxml import bin_xml_escape
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pytest_reactbench.plugin.report import describe_failure
from pytest_reactbench.results.gates import gate_report
from pytest_reactbench.results.load import from_junit
from pytest_reactbench.results.trial_result import (
    RESULT,
    AgentRun,
    BaseImage,
    DiffStat,
    Finding,
    Gate,
    Grading,
    Provenance,
    Refusal,
    Submission,
    TrialResult,
    Verdict,
    strip_ansi,
)

# Any text a trial can hold: newlines, quotes, markup, control and non-ASCII characters
# (but none that Python's str cannot encode, and none that strip_ansi would change).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40).map(strip_ansi)
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)
# Image roles and duration phases name JUnit properties: the harness's own words.
keys = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
counts = st.integers(min_value=0, max_value=10**9)
seconds = st.floats(min_value=0, max_value=10**5, allow_nan=False).map(lambda s: round(s, 3))

results = st.builds(
    TrialResult,
    task=names, agent=names, attempt=st.integers(min_value=1, max_value=50),
    verdict=st.sampled_from(Verdict), failure=text, message=text,
    retries=st.integers(min_value=0, max_value=5), retryable=st.booleans(),
    durations=st.dictionaries(keys, seconds, max_size=4),
    agent_run=st.builds(
        AgentRun, ending=st.none() | text, version=text,
        input_tokens=st.none() | counts, output_tokens=st.none() | counts,
        cost_usd=st.none() | st.floats(min_value=0, max_value=1000, allow_nan=False), log_tail=text),
    grading=st.builds(
        Grading,
        reward=st.none() | st.floats(min_value=0, max_value=1, allow_nan=False),
        gates=st.dictionaries(st.sampled_from(Gate), st.none() | st.booleans()),
        failing_specs=st.lists(text, max_size=25),
        spec_messages=st.dictionaries(names, text, max_size=3),
        findings=st.lists(st.builds(Finding, rule=names, file=names, line=st.none() | counts,
                                    message=text), max_size=25),
        remaining_targets=st.lists(text, max_size=3), unscanned=st.lists(text, max_size=3),
        refused=st.lists(st.builds(Refusal, path=names, reason=text), max_size=3),
        test_log_tail=text),
    submission=st.builds(
        Submission,
        diff=st.builds(DiffStat, files=st.lists(names, max_size=30), added=counts, removed=counts),
        audit=st.lists(text, max_size=3)),
    provenance=st.builds(
        Provenance, run=text, shard=text, record=text, backend=text, engine=text, formal=st.booleans(),
        images=st.dictionaries(keys, text, max_size=3),
        bases=st.lists(st.builds(BaseImage, name=names, digest=text,
                                 origin=st.sampled_from(["public", "stand-in", "system"])), max_size=3)),
)


def _write_junit(path: Path, outcomes: list[TrialResult]) -> None:
    """As pytest's JUnit writer does: each property's value with the characters XML
    cannot carry replaced (its own escape), as an attribute."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite")
    for outcome in outcomes:
        case = ET.SubElement(suite, "testcase", name=bin_xml_escape(f"{outcome.task}::{outcome.agent}"))
        props = ET.SubElement(case, "properties")
        for name, value in outcome.properties():
            ET.SubElement(props, "property", name=name, value=bin_xml_escape(value))
    path.write_bytes(ET.tostring(root, encoding="utf-8"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outcome=results)
def test_status_and_junit_forms_give_back_every_field(outcome: TrialResult, tmp_path: Path) -> None:
    assert TrialResult.model_validate(outcome.status()) == outcome
    assert TrialResult.from_properties(dict(outcome.properties())) == outcome
    junit = tmp_path / "junit.xml"
    _write_junit(junit, [outcome])
    assert from_junit(junit) == [outcome]


def test_a_record_written_flat_reads_into_the_parts() -> None:
    """status.json as records kept it before the result had parts: resume and reports
    read older runs."""
    flat = {"task": "t", "agent": "nop", "verdict": "failed", "status": "complete", "reward": 0,
            "gates": {"tests": False}, "agent_ending": "completed", "agent_version": "1.2.3",
            "input_tokens": 10, "agent_log_tail": "done",
            "diff": {"files": ["a.ts"], "added": 1, "removed": 0},
            "audit": ["hook: x"], "backend": "docker", "images": {"agent": "sha256:1"}, "run": "r1"}
    outcome = TrialResult.from_status(flat, record="/records/r1/t__nop__1")
    assert outcome.grading == Grading(reward=0, gates={Gate.TESTS: False})
    assert outcome.agent_run == AgentRun(ending="completed", version="1.2.3", input_tokens=10,
                                         log_tail="done")
    assert outcome.submission == Submission(diff=DiffStat(files=["a.ts"], added=1), audit=["hook: x"])
    assert outcome.provenance == Provenance(run="r1", backend="docker", images={"agent": "sha256:1"},
                                            record="/records/r1/t__nop__1")
    # Written again, it is written in parts, and reads back the same.
    assert "grading" in outcome.status() and "reward" not in outcome.status()
    assert TrialResult.model_validate(outcome.status()) == outcome


def test_the_readable_properties_alone_still_read_back() -> None:
    # JUnit written before the whole result had a property of its own.
    outcome = TrialResult(task="counter-reset", agent="nop", verdict=Verdict.FAILED, grading=Grading(
        reward=0.0, gates={Gate.TESTS: False, Gate.REACT_DOCTOR: True},
        failing_specs=["src/Counter.test.tsx > resets (failed)"]))
    props = dict(outcome.properties())
    del props[RESULT]
    back = TrialResult.from_properties(props)
    assert back is not None
    assert (back.task, back.verdict, back.grading) == (outcome.task, outcome.verdict, outcome.grading)


def test_a_result_is_immutable() -> None:
    outcome = TrialResult(task="t", agent="oracle", verdict=Verdict.PASSED)
    with pytest.raises(ValidationError):
        outcome.retries = 2  # type: ignore[misc]
    assert outcome.retried(2).retries == 2 and outcome.retries == 0


def test_a_failing_spec_is_named_with_its_message() -> None:
    outcome = TrialResult(task="t", agent="nop", verdict=Verdict.FAILED, grading=Grading(
        failing_specs=["src/a.test.tsx > has a Reset button (failed)"],
        spec_messages={"src/a.test.tsx > has a Reset button": "Unable to find"}))
    assert outcome.grading.spec_message(outcome.grading.failing_specs[0]) == "Unable to find"
    assert outcome.grading.spec_message("src/a.test.tsx > other (failed)") == ""


def test_the_failure_screen_and_the_gate_junit_show_the_assertion() -> None:
    outcome = TrialResult(task="counter-reset", agent="nop", verdict=Verdict.FAILED, grading=Grading(
        reward=0.0, gates={Gate.TESTS: False},
        failing_specs=["src/a.test.tsx > has a Reset button (failed)"],
        spec_messages={"src/a.test.tsx > has a Reset button":
                       'Unable to find an accessible element with the role "button"\n'
                       "at a.test.tsx:9"}))
    screen = describe_failure(outcome).splitlines()
    spec = screen.index("  src/a.test.tsx > has a Reset button (failed)")
    assert screen[spec + 1].strip() == 'Unable to find an accessible element with the role "button"'
    assert screen[spec + 2].strip() == "at a.test.tsx:9"
    cases = ET.fromstring(gate_report(outcome)).iter("testcase")
    spec_case = next(c for c in cases if c.get("name") == outcome.grading.failing_specs[0])
    failure = spec_case.find("failure")
    assert failure is not None
    assert failure.get("message") == 'Unable to find an accessible element with the role "button"'


def test_an_error_screen_says_what_broke_by_its_class() -> None:
    def screen(failure: str) -> str:
        return describe_failure(TrialResult(task="t", agent="a", verdict=Verdict.ERROR, failure=failure,
                                            message="said"))
    assert "the model API failed the agent (retryable" in screen("AgentAPIError")
    assert "the model API refused the agent's key (not retried" in screen("AgentAuthError")
    assert "the harness, sandbox or verifier broke" in screen("VerifierTimeoutError")
