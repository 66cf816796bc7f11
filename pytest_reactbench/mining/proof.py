"""Stage 3: the written task run with the controls (the oracle scores 1, nop 0), and
what their run records say: each control's verdict and gates, the tests the reference
passed, the React Doctor findings it adds, a test log's last lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_reactbench.controls import CONTROLS, ControlRun, run_controls
from pytest_reactbench.mining.refusals import Reason, control_refusals
from pytest_reactbench.mining.request import Request
from pytest_reactbench.results import Gate, TrialResult, Verdict
from pytest_reactbench.verifier.contract import DoctorFinding, read_grade


def prove(draft: Path, request: Request, records: Path,
          echo: Callable[[str], None]) -> tuple[ControlRun, list[Reason], list[DoctorFinding]]:
    """Stage 3: the written task run with the controls (oracle 1, nop 0). The reasons
    to refuse it, and the React Doctor findings of the reference it tolerates."""
    task_id = draft.name
    controls = run_controls([draft], sandbox=request.sandbox, records=records, echo=echo)
    reasons = control_refusals(controls, task_id)
    tolerated: list[DoctorFinding] = []
    if [r.code for r in reasons] == ["oracle-react-doctor"] and not request.strict_react_doctor:
        tolerated = reference_findings(controls.result(task_id, "oracle"))
        if tolerated:
            reasons = []
            echo(f"  the task tolerates the {len(tolerated)} React Doctor finding(s) the reference "
                 "adds (--strict-react-doctor refuses it instead): "
                 + "; ".join(f"{f.rule} {f.file}:{f.line or ''}" for f in tolerated[:5]))
    for agent in ("oracle", "nop"):
        result = controls.result(task_id, agent)
        if result is not None and result.verdict is Verdict.ERROR:
            echo(f"  {agent} ended in error ({result.failure}):\n{result.message}")
        elif result is not None and result.verdict.value != CONTROLS[agent]:
            # The test run's own words: why a spec failed (or passed) where it should not.
            tail = test_log_tail(result)
            if tail:
                echo(f"  {agent}'s test log, last lines:\n" + "\n".join("    " + t for t in tail))
    return controls, reasons, tolerated


def control_summary(controls: ControlRun, task_id: str, records_kept: bool) -> dict[str, dict[str, str]]:
    """Each control's verdict, gates and failure (and record, when records are kept)."""
    summary: dict[str, dict[str, str]] = {}
    for agent in ("oracle", "nop"):
        result = controls.result(task_id, agent)
        if result is None:
            summary[agent] = {"verdict": "not run"}
            continue
        summary[agent] = {"verdict": result.verdict.value, "failure": result.failure,
                          **{f"gate.{g.value}": "" if v is None else str(int(v))
                             for g, v in result.grading.gates.items()},
                          **({"record": result.record} if records_kept else {})}
    return summary


def reference_findings(oracle: TrialResult | None) -> list[DoctorFinding]:
    """The new React Doctor findings the reference's grading reported, when they are the
    whole of why it failed (its tests passed; no target left, nothing unscanned): the
    team's own change, which the task may then tolerate. Empty otherwise."""
    if oracle is None or not oracle.record or oracle.grading.failed_gates != [Gate.REACT_DOCTOR]:
        return []
    grade = read_grade(Path(oracle.record) / "verifier")
    if grade is None:
        return []
    doctor = grade.react_doctor
    if not grade.tests.ok or grade.failure or doctor.remaining_targets or doctor.unscanned \
            or not all(f.title for f in doctor.new):  # a finding is tolerated by its title too
        return []
    return list(doctor.new)


def expected_tests(record: Path) -> dict[str, list[str]]:
    """Every test that passed in a grading (its grade.json, kept in its run record), by
    spec file relative to /app and title path, as tests/config.json lists them."""
    found: dict[str, list[str]] = {}
    grade = read_grade(record / "verifier")
    for spec in grade.tests.specs if grade else []:
        names = found.setdefault(spec.file, [])
        if spec.status == "passed" and spec.name not in names:
            names.append(spec.name)
    return {file: names for file, names in found.items() if names and not file.startswith("..")}


def test_log_tail(result: TrialResult, lines: int = 40) -> list[str]:
    """The last lines of a grading's test output, from its result or its run record."""
    if result.grading.test_log_tail:
        return result.grading.test_log_tail.splitlines()[-lines:]
    for name in ("test.log", "test-stdout.txt"):
        log = Path(result.record, "verifier", name) if result.record else None
        if log is not None and log.is_file():
            return log.read_text(errors="replace").splitlines()[-lines:]
    return []
