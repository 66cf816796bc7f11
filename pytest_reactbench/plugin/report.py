"""What a user sees: the failure screen of an item and its JUnit properties."""

from __future__ import annotations

from typing import Any

from pytest_reactbench.trial import TrialResult, Verdict

MAX_FINDINGS = 20


def _findings(details: dict[str, Any]) -> list[str]:
    rd = details.get("react_doctor") or {}
    lines = []
    for finding in (rd.get("new") or [])[:MAX_FINDINGS]:
        where = finding.get("file", "?")
        if finding.get("line"):
            where += f":{finding['line']}"
        lines.append(f"  {where}  {finding.get('rule', '?')}  {finding.get('message', '')}".rstrip())
    return lines


def describe_failure(result: TrialResult) -> str:
    lines: list[str] = []
    if result.verdict is Verdict.ERROR:
        lines.append(f"ERROR ({result.failure}): {result.message}")
        lines.append("No score: the harness, sandbox or verifier broke, not the agent.")
    elif result.reward is None:
        lines.append(f"FAILED ({result.failure}, not graded): {result.message}")
    else:
        lines.append(f"FAILED: reward {result.reward:g}; {result.message}")
        for gate, ok in result.gates.items():
            lines.append(f"  gate {gate}: {'pass' if ok else 'FAIL' if ok is False else 'n/a'}")
    if result.agent_ending and result.agent_ending != "completed":
        lines.append(f"The agent ended: {result.agent_ending}.")
        if result.agent_log_tail:
            lines += ["Tail of the agent's log:"] + ["  " + x for x in result.agent_log_tail.splitlines()]
    tests = result.details.get("tests") or {}
    failing = tests.get("failing") or []
    if failing:
        lines.append("Failing specs:")
        lines += [f"  {name}" for name in failing[:MAX_FINDINGS]]
    findings = _findings(result.details)
    if findings:
        lines.append("New React Doctor findings (rule, file:line, message):")
        lines += findings
    doctor = result.details.get("react_doctor") or {}
    for key, title in (("remaining_targets", "Target findings still present:"),
                       ("unscanned", "Changed files React Doctor did not analyse:")):
        if doctor.get(key):
            lines.append(title)
            lines += [f"  {t}" for t in doctor[key][:MAX_FINDINGS]]
    if doctor.get("reason"):
        lines.append(f"React Doctor: {doctor['reason']}")
    refused = (result.details.get("submission") or {}).get("refused") or []
    if refused:
        lines.append("Refused from the submission (graded from the base commit instead):")
        lines += [f"  {r.get('path')}: {r.get('reason')}" for r in refused[:MAX_FINDINGS]]
    if result.test_log_tail and result.gates.get("tests") is not True:
        lines.append("Tail of the verifier's test log:")
        lines += ["  " + line for line in result.test_log_tail.splitlines()]
    if result.record:
        lines.append(f"Run record: {result.record}")
    return "\n".join(lines)


def junit_properties(result: TrialResult, backend: str, attempt: int = 1) -> list[tuple[str, object]]:
    def gate(value: bool | None) -> str:
        return "" if value is None else str(int(value))

    props: list[tuple[str, object]] = [
        ("reactbench.task", result.task_id),
        ("reactbench.agent", result.agent),
        ("reactbench.attempt", str(attempt)),
        ("reactbench.verdict", result.verdict.value),
        ("reactbench.reward", "" if result.reward is None else f"{result.reward:g}"),
        ("reactbench.gate.tests", gate(result.gates.get("tests"))),
        ("reactbench.gate.react_doctor", gate(result.gates.get("react_doctor"))),
        ("reactbench.failure", result.failure or ""),
        ("reactbench.agent_ending", result.agent_ending or ""),
        ("reactbench.backend", backend),
    ]
    for phase in ("bake", "boot", "agent", "artifacts", "verifier_boot", "verify", "test_command", "scan"):
        if phase in result.durations:
            props.append((f"reactbench.duration.{phase}", f"{result.durations[phase]:.3f}"))
    if result.retries:
        props.append(("reactbench.retries", str(result.retries)))
    if result.diff_stat:
        files = result.diff_stat.get("files", [])
        props.append(("reactbench.diff.stat", f"{len(files)} files, +{result.diff_stat.get('added', 0)} "
                      f"-{result.diff_stat.get('removed', 0)}"))
        props.append(("reactbench.diff.files", " ".join(files[:MAX_FINDINGS])))
    if result.audit:
        props.append(("reactbench.audit", f"{len(result.audit)}: " + "; ".join(result.audit[:MAX_FINDINGS])))
    for role, digest in sorted(result.images.items()):
        props.append((f"reactbench.image.{role}", digest))
    new = (result.details.get("react_doctor") or {}).get("new") or []
    if new:
        props.append(("reactbench.react_doctor.new", "; ".join(
            f"{f.get('rule')} {f.get('file')}:{f.get('line', '')}" for f in new[:MAX_FINDINGS])))
    if result.record:
        props.append(("reactbench.record", str(result.record)))
    return props
