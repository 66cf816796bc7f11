"""What a user sees of a trial that did not pass: one screen that says why."""

from __future__ import annotations

import pytest

from pytest_reactbench.agents import AgentAPIError, AgentAuthError
from pytest_reactbench.agents.command import AgentCommandNotFound
from pytest_reactbench.results import AGENT_SAID, Failure, Gate, TrialResult, Verdict

MAX_LISTED = 20
#: Why an error has no score, where its class says more than "something broke".
NO_SCORE: dict[Failure, str] = {
    Failure.of(AgentAPIError):
        "No score: the model API failed the agent (retryable; not the agent's work).",
    Failure.of(AgentAuthError):
        "No score: the model API refused the agent's key (not retried: check the key the agent is given).",
    Failure.of(AgentCommandNotFound):
        "No score: the agent's command could not start (not retried: see the command and what the "
        "shell said).",
}
#: The lines of a failing spec's assertion the screen shows (the page has them all).
SPEC_LINES = 4


def _listing(title: str, entries: list[str]) -> list[str]:
    return [title, *(f"  {entry}" for entry in entries[:MAX_LISTED])] if entries else []


def _failing_specs(result: TrialResult) -> list[str]:
    """Each failing spec with the first lines of its assertion, under it."""
    lines = []
    for spec in result.grading.failing_specs[:MAX_LISTED]:
        lines.append(f"  {spec}")
        said = [line for line in result.grading.spec_message(spec).splitlines() if line.strip()]
        lines += [f"      {line}" for line in said[:SPEC_LINES]]
    return ["Failing specs:", *lines] if lines else []


def result_of(report: pytest.TestReport) -> TrialResult | None:
    """The result an item's report carries in its properties (None: not a trial's)."""
    return TrialResult.from_properties({str(k): str(v) for k, v in report.user_properties})


def describe_failure(result: TrialResult) -> str:
    lines: list[str] = []
    if result.verdict is Verdict.ERROR:
        lines.append(f"ERROR ({result.failure}): {result.message}")
        lines.append(NO_SCORE.get(result.failure, "No score: the harness, sandbox or verifier broke, "
                                                   "not the agent."))
    elif result.grading.reward is None:
        lines.append(f"FAILED ({result.failure}, not graded): {result.message}")
    else:
        lines.append(f"FAILED: reward {result.grading.reward:g}; {result.message}")
        for gate, ok in result.grading.gates.items():
            lines.append(f"  gate {gate}: {'pass' if ok else 'FAIL' if ok is False else 'n/a'}")
    if result.agent_run.ending and result.agent_run.ending != "completed":
        lines.append(f"The agent ended: {result.agent_run.ending}.")
        if result.agent_run.log_tail.startswith(AGENT_SAID):
            lines.append(result.agent_run.log_tail)  # its CLI's own last word, not its raw stream
        elif result.agent_run.log_tail:
            lines += ["Tail of the agent's log:"] + ["  " + x for x in result.agent_run.log_tail.splitlines()]
    lines += _failing_specs(result)
    lines += _listing("New React Doctor findings (rule, file:line, message):",
                      [f"{f.file}{'' if f.line is None else f':{f.line}'}  {f.rule}  {f.message}".rstrip()
                       for f in result.grading.findings])
    lines += _listing("Target findings still present:", result.grading.remaining_targets)
    lines += _listing("Changed files React Doctor did not analyse:", result.grading.unscanned)
    lines += _listing("Refused from the submission (graded from the base commit instead):",
                      [f"{r.path}: {r.reason}" for r in result.grading.refused])
    if result.grading.test_log_tail and result.grading.gates.get(Gate.TESTS) is not True:
        lines.append("Tail of the verifier's test log:")
        lines += ["  " + line for line in result.grading.test_log_tail.splitlines()]
    if result.record:
        lines.append(f"Run record: {result.record}")
    return "\n".join(lines)
