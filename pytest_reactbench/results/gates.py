"""A gate-level JUnit file inside each trial's record (`junit.xml`), written with the
junit-xml library: one test case per gate, one per failing spec, so that a CI system
that renders JUnit shows why one trial scored what it did, not only that it failed."""

from __future__ import annotations

from junit_xml import TestCase, TestSuite, to_xml_report_string

from pytest_reactbench.results.trial_result import Gate, TrialResult, Verdict


def _gate_case(result: TrialResult, gate: Gate, passed: bool | None, suite: str) -> TestCase:
    case = TestCase(gate.value, classname=suite,
                    elapsed_sec=result.durations.get("verify", 0.0) if gate is Gate.TESTS else 0.0)
    if passed is not False:
        return case
    if gate is Gate.TESTS:
        case.add_failure_info(message=f"{len(result.grading.failing_specs)} failing spec(s)",
                              output="\n".join(f"{spec}\n{result.grading.spec_message(spec)}".rstrip()
                                               for spec in result.grading.failing_specs))
    else:
        lines = [f"{f.file}:{f.line or ''} {f.rule} {f.message}".rstrip() for f in result.grading.findings]
        lines += [f"still present: {t}" for t in result.grading.remaining_targets]
        lines += [f"not analysed: {t}" for t in result.grading.unscanned]
        found = len(result.grading.findings)
        case.add_failure_info(message=f"{found} new finding(s)", output="\n".join(lines))
    return case


def gate_report(result: TrialResult) -> str:
    suite = f"{result.task}::{result.agent}"
    cases = []
    if result.verdict is Verdict.ERROR:
        case = TestCase("trial", classname=suite, elapsed_sec=sum(result.durations.values()))
        case.add_error_info(message=f"{result.failure}: {result.message}",
                            error_type=result.failure or "error")
        cases.append(case)
    cases += [_gate_case(result, gate, passed, suite) for gate, passed in result.grading.gates.items()]
    for spec in result.grading.failing_specs:
        case = TestCase(spec, classname=f"{suite}.specs")
        case.add_failure_info(message=result.grading.spec_message(spec).partition("\n")[0] or "failed",
                              output=result.grading.spec_message(spec) or None)
        cases.append(case)
    if result.verdict is Verdict.FAILED and not result.grading.gates:
        case = TestCase("submission", classname=suite)
        case.add_failure_info(message=f"{result.failure}: {result.message}")
        cases.append(case)
    return str(to_xml_report_string([TestSuite(suite, cases)]))
