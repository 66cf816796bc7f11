"""The judge: a grade into a verdict. What the verifier said of a submission becomes
the result's grading (reward, gates, the reasons behind them), its verdict, its
failure class and the message a reader sees first; and what the agent did becomes the
result's account of its run."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_reactbench.agents import AgentOutcome
from pytest_reactbench.agents.output import readable_log
from pytest_reactbench.results import (
    AGENT_SAID,
    AgentRun,
    Failure,
    Finding,
    Gate,
    Grading,
    Refusal,
    TrialRecord,
    Verdict,
)
from pytest_reactbench.verifier import Grade, Transfer

#: The lines of a log a result keeps.
LOG_TAIL_LINES = 20


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of `text`."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def judge(graded: Grade, transfers: Sequence[Transfer], record: TrialRecord,
          headline: str) -> tuple[Verdict, Failure, str, Grading]:
    """The verdict of a graded submission: its failure class and message, and the
    result's grading (refusals, the test log's tail)."""
    # What could not cross to the verifier is refused too (its base version graded).
    dropped = [Refusal(path=path, reason=f"not carried to the verifier: {why}")
               for transfer in transfers for path, why in transfer.dropped]
    test_log = record.path / "verifier" / "test-stdout.txt"
    grading, stopped = _grading(graded, dropped,
                                tail(test_log.read_text(errors="replace")) if test_log.is_file() else "")
    refused = grading.refused
    if graded.passed:
        return Verdict.PASSED, Failure.NONE, "", grading
    failed = [gate.value for gate in grading.failed_gates]
    message = (f"reward {graded.reward.reward:g} < 1" if not failed else
               "failed gate" + ("s " if len(failed) > 1 else " ") + ", ".join(failed))
    if stopped:
        message += "; " + stopped
    if refused:
        # A file the graded code needs may be among them: the refusal comes first,
        # not only the failure it caused.
        first = refused[0]
        message = (f"{len(refused)} file(s) of the submission refused ({first.path}: {first.reason}"
                   + (", and more" if len(refused) > 1 else "") + f"); {message}")
    failure = Failure.of_gates(failed)
    if graded.details is not None and graded.details.tests.tampered:
        # The grader's canaries were reported otherwise than planted: the code
        # under test rewrote the test results, which says more than any of them.
        failure, message = Failure.TAMPERED, f"{graded.details.tests.tampered[0]}; {message}"
    if headline:
        message = f"{headline}; {message}"
    return Verdict.FAILED, failure, message, grading


def _grading(graded: Grade, dropped: Sequence[Refusal], test_log_tail: str) -> tuple[Grading, str]:
    """What the failure screen, JUnit and the report show of a grade: the reward and
    gates, and from our verifier's typed grade.json the reasons behind them, with the
    files that could not cross to the verifier (`dropped`) among the refused; and why
    grading stopped early, when the submission broke it ("" when it did not)."""
    gates = {gate: graded.gate(gate.value) for gate in Gate}
    report = graded.details
    if report is None:  # a grader of the task's own: reward.json is all there is
        return Grading(reward=graded.reward.reward, gates=gates, refused=list(dropped),
                       test_log_tail=test_log_tail), ""
    doctor = report.react_doctor
    grading = Grading(
        reward=graded.reward.reward, gates=gates,
        failing_specs=report.tests.failing,
        spec_messages={f"{spec.file} > {spec.name}": spec.message for spec in report.tests.specs
                       if spec.status != "passed" and spec.message},
        findings=[Finding(rule=f.rule, file=f.file, line=f.line, message=f.title or f.message)
                  for f in doctor.new],
        remaining_targets=doctor.remaining_targets,
        unscanned=doctor.unscanned,
        refused=[*(Refusal(path=r.path, reason=r.reason) for r in report.submission.refused), *dropped],
        test_log_tail=test_log_tail,
    )
    stopped = "" if report.failure is None else \
        f"grading stopped during {report.failure.phase}: {report.failure.reason}"
    return grading, stopped


def agent_run(version: str, outcome: AgentOutcome | None) -> AgentRun:
    """What the agent did, from how its run ended (None: it never ran)."""
    if outcome is None:
        return AgentRun(version=version)
    usage = outcome.usage
    return AgentRun(
        version=version, ending=outcome.ending,
        # What the CLI said in the end, rather than the tail of its raw stream.
        log_tail=AGENT_SAID + outcome.said if outcome.said else tail(readable_log(outcome.log)),
        input_tokens=usage.input_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        cost_usd=usage.cost_usd if usage else None)
