"""A gate-level JUnit file inside each trial's record (`junit.xml`), written with the
junit-xml library: one test case per gate, one per failing spec, so that a CI system
that renders JUnit shows why one trial scored what it did, not only that it failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string


def gate_report(task: str, agent: str, verdict: str, gates: dict[str, bool | None],
                details: dict[str, Any], failure: str | None, message: str,
                durations: dict[str, float]) -> str:
    suite_name = f"{task}::{agent}"
    cases = []
    if verdict == "error":
        case = TestCase("trial", classname=suite_name, elapsed_sec=sum(durations.values()))
        case.add_error_info(message=f"{failure}: {message}", error_type=failure or "error")
        cases.append(case)
    for gate, passed in gates.items():
        case = TestCase(gate, classname=suite_name,
                        elapsed_sec=durations.get("verify", 0.0) if gate == "tests" else 0.0)
        if passed is False:
            if gate == "tests":
                failing = (details.get("tests") or {}).get("failing") or []
                case.add_failure_info(message=f"{len(failing)} failing spec(s)", output="\n".join(failing))
            else:
                doctor = details.get("react_doctor") or {}
                lines = [f"{f.get('file')}:{f.get('line') or ''} {f.get('rule')} {f.get('title', '')}"
                         for f in doctor.get("new") or []]
                lines += [f"still present: {t}" for t in doctor.get("remaining_targets") or []]
                lines += [f"not analysed: {t}" for t in doctor.get("unscanned") or []]
                case.add_failure_info(message=f"{len(doctor.get('new') or [])} new finding(s)",
                                      output="\n".join(lines))
        cases.append(case)
    for spec in (details.get("tests") or {}).get("failing") or []:
        case = TestCase(spec, classname=f"{suite_name}.specs")
        case.add_failure_info(message="failed")
        cases.append(case)
    if verdict == "failed" and not gates:
        case = TestCase("submission", classname=suite_name)
        case.add_failure_info(message=f"{failure}: {message}")
        cases.append(case)
    return str(to_xml_report_string([TestSuite(suite_name, cases)]))


def write_gate_report(path: Path, **kwargs: Any) -> None:
    path.write_text(gate_report(**kwargs), encoding="utf-8")
