"""One trial, from a booted agent sandbox to a verdict: the agent acts, its
declared artifacts cross to a fresh verifier sandbox, test.sh grades them."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_reactbench.agents import Agent, AgentContext, AgentOutcome
from pytest_reactbench.results import TrialRecord
from pytest_reactbench.results.gates import write_gate_report
from pytest_reactbench.sandbox.base import Sandbox, SandboxError
from pytest_reactbench.tasks import Task
from pytest_reactbench.trial.outcome import TrialResult, Verdict
from pytest_reactbench.verifier import (
    Grade,
    SubmissionFailure,
    VerifierError,
    audit,
    collect,
    grade,
    parse_index,
)

DIFF_COMMAND = (
    "cd /app 2>/dev/null && git rev-parse --verify -q HEAD >/dev/null && "
    "git add -A -N . >/dev/null 2>&1; git diff --binary HEAD"
)
LOG_TAIL_LINES = 20
#: Taken before the agent acts: what counts as unchanged for the audit.
BASE_INDEX_COMMAND = "cd /app 2>/dev/null && git ls-files -s -z 2>/dev/null; true"
#: The most of the agent's diff a run record keeps.
MAX_RECORDED_DIFF = 10 * 1024 * 1024


@contextmanager
def _timed(durations: dict[str, float], phase: str, record: TrialRecord) -> Iterator[None]:
    record.event(f"{phase}-start")
    started = time.monotonic()
    try:
        yield
    finally:
        durations[phase] = time.monotonic() - started
        record.event(f"{phase}-end", seconds=round(durations[phase], 3))


def stat_of(diff: str) -> dict[str, Any]:
    """Changed files and added/removed line counts of a unified diff."""
    files = [line.split(" b/", 1)[-1] for line in diff.splitlines() if line.startswith("diff --git ")]
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    return {"files": files, "added": added, "removed": removed}


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _run_agent(agent: Agent, task: Task, sandbox: Sandbox, record: TrialRecord) -> AgentOutcome:
    try:
        return agent.run(AgentContext(task, sandbox, task.config.agent.timeout_sec, record.event))
    except SandboxError:
        raise
    except Exception:
        # An agent that crashes is still graded on what it left, as the public suite does.
        return AgentOutcome("crashed", None, traceback.format_exc())


def run_trial(
    task: Task,
    agent: Agent,
    agent_sandbox: Sandbox,
    verifier_sandbox: Sandbox,
    record: TrialRecord,
    durations: dict[str, float],
    images: dict[str, str] | None = None,
    strict: bool = False,
) -> TrialResult:
    outcome: AgentOutcome | None = None
    graded: Grade | None = None
    findings: list[str] = []
    diff_stat: dict[str, Any] = {}
    logs_dir = record.path / "verifier"

    def finish(verdict: Verdict, failure: str | None, message: str) -> TrialResult:
        return _finish(task, agent, record, durations, outcome, graded, verdict, failure,
                       message, images, findings, diff_stat)

    try:
        base_index = parse_index(agent_sandbox.exec(BASE_INDEX_COMMAND, cwd="/", timeout=120).text)
        with _timed(durations, "agent", record):
            outcome = _run_agent(agent, task, agent_sandbox, record)
        record.write_text("agent.log", outcome.log)
        record.event("agent-ended", ending=outcome.ending, exit_code=outcome.exit_code)
        diff = agent_sandbox.exec(DIFF_COMMAND, cwd="/", timeout=120).stdout
        if len(diff) > MAX_RECORDED_DIFF:
            diff = diff[:MAX_RECORDED_DIFF] + b"\n[diff truncated at 10 MiB by the run record]\n"
        record.write_text("diff.patch", diff)
        diff_stat = stat_of(diff.decode("utf-8", "replace"))
        with _timed(durations, "artifacts", record):
            transfers = collect(agent_sandbox, task.config.artifacts)
        record.write_json("artifacts.json", [
            {"source": t.artifact.source, "files": t.files, "bytes": t.size,
             "dropped": [{"path": p, "reason": r} for p, r in t.dropped]}
            for t in transfers
        ])
        findings = [str(f) for f in audit(transfers, base_index)]
        record.write_json("audit.json", findings)
        if strict and findings:
            return finish(Verdict.FAILED, "audit", "--reactbench-strict: the submission touches "
                          + f"{len(findings)} file(s) that can fool a grader: " + "; ".join(findings[:10]))
        waited = verifier_sandbox.ready()
        durations["verifier_boot"] = durations.get("verifier_boot", 0.0) + waited
        with _timed(durations, "verify", record):
            graded = grade(verifier_sandbox, transfers, task.config.verifier.timeout_sec, logs_dir)
        # Our verifier times its parts: the task's test command and the React Doctor scan.
        timings = graded.details.get("timings")
        if isinstance(timings, dict):
            for phase in ("test_command", "scan"):
                if isinstance(timings.get(phase), int | float):
                    durations[phase] = float(timings[phase])
    except SubmissionFailure as exc:
        return finish(Verdict.FAILED, exc.failure, str(exc))
    except (SandboxError, VerifierError) as exc:
        return finish(Verdict.ERROR, type(exc).__name__, str(exc))
    verdict = Verdict.PASSED if graded.passed else Verdict.FAILED
    failed_gates = [g for g in ("tests", "react_doctor") if graded.gate(g) is False]
    failure = None if graded.passed else ("+".join(failed_gates) or "reward")
    message = "" if graded.passed else _failure_message(graded, failed_gates)
    return finish(verdict, failure, message)


def _failure_message(graded: Grade, failed_gates: list[str]) -> str:
    if not failed_gates:
        return f"reward {graded.reward.reward:g} < 1"
    return "failed gate" + ("s " if len(failed_gates) > 1 else " ") + ", ".join(failed_gates)


def _finish(
    task: Task,
    agent: Agent,
    record: TrialRecord,
    durations: dict[str, float],
    outcome: AgentOutcome | None,
    graded: Grade | None,
    verdict: Verdict,
    failure: str | None,
    message: str,
    images: dict[str, str] | None,
    findings: list[str],
    diff_stat: dict[str, Any],
) -> TrialResult:
    test_log = record.path / "verifier" / "test-stdout.txt"
    result = TrialResult(
        task_id=task.id,
        agent=agent.name,
        verdict=verdict,
        reward=graded.reward.reward if graded else None,
        gates={g: graded.gate(g) for g in ("tests", "react_doctor")} if graded else {},
        failure=failure,
        message=message,
        agent_ending=outcome.ending if outcome else None,
        durations=durations,
        record=record.path,
        details=graded.details if graded else {},
        test_log_tail=_tail(test_log.read_text(errors="replace")) if test_log.is_file() else "",
        images=dict(images or {}),
        audit=findings,
        agent_log_tail=_tail(outcome.log) if outcome else "",
        diff_stat=diff_stat,
    )
    write_gate_report(record.path / "junit.xml", task=task.id, agent=agent.name,
                      verdict=verdict.value, gates=result.gates, details=result.details,
                      failure=failure, message=message, durations=durations)
    record.finish(result.status())
    return result
