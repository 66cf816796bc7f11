"""Why a change makes no task, as the miner says it: read from the change alone,
from the toolchain the images cannot serve, and from what the controls did."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_reactbench.controls import ControlRun
from pytest_reactbench.mining.changes import Change, Kind, is_cypress
from pytest_reactbench.mining.runners import REGISTRY_LACKS, Toolchain, node_ceiling, node_floor
from pytest_reactbench.results import Gate
from pytest_reactbench.sandbox.errors import BakeError


@dataclass(frozen=True)
class Reason:
    """Why a change made no task: `code` sorts it in a summary; `failed` when a
    control broke (a bake, a sandbox) rather than judged the change."""

    code: str
    text: str
    failed: bool = False

    def __str__(self) -> str:
        return self.text


def early_refusals(changes: list[Change], specs: list[str], runners: tuple[str, ...]) -> list[Reason]:
    """Why a change cannot make a task, read from the change alone."""
    if not changes:
        return [Reason("empty", "the range changes nothing")]
    kinds = {c.kind for c in changes}
    reasons: list[Reason] = []
    if kinds == {Kind.TEST}:
        reasons.append(Reason("only-tests", "it touches only tests: there is no source for an agent "
                              "to write"))
    elif kinds == {Kind.DOCS}:
        reasons.append(Reason("only-docs", "it touches only docs: there is no source for an agent "
                              "to write"))
    else:
        if Kind.SOURCE not in kinds:
            reasons.append(Reason("no-source", "it changes no source (only " + ", ".join(
                sorted(k.value for k in kinds)) + "): there is nothing for an agent to write"))
        cypress = [c.path for c in changes if c.kind is Kind.TEST and not c.deleted
                   and is_cypress(c.path)]
        if not specs and cypress:
            reasons.append(Reason("no-runner", "its only specs are Cypress specs ("
                                  + ", ".join(cypress[:3]) + (", ..." if len(cypress) > 3 else "")
                                  + "): the verifier runs Vitest, Jest and Playwright, not Cypress"))
        elif not specs:
            reasons.append(Reason("no-spec", "it adds or changes no spec file: nothing would tell "
                                  "a solution from the base"))
    if specs and not runners:
        reasons.append(Reason("no-runner", "no test runner (Vitest, Jest or Playwright) is named by "
                              "the package.json or a config file of the package its specs are in"))
    return reasons


#: Output lines that say what went wrong, in a bake's tail.
ERROR_LINE = re.compile(r"ERR_|MODULE_NOT_FOUND|\berror\b|Error:|not found|No such|Usage Error|"
                        r"YN\d{4}|failed|Cannot find|ENOENT|EACCES|ETIMEDOUT|ECONNRESET|"
                        r"Unsupported engine", re.I)


#: Lines of a package manager's failure that say where to look, not what went wrong.
BOILERPLATE = re.compile(r"complete log of this run|^npm (error|ERR!) (code|path|errno)\b|"
                         r"^npm (error|ERR!) command failed$|^error Command failed with exit code|"
                         r"^info Visit https://|^➤ YN0000: ·|^Removing intermediate container|"
                         r"^---> |^npm (error|ERR!) \w+$|^npm (error|ERR!) (syscall|enoent This is)|"
                         # npm's advice and report paths around a peer dependency conflict
                         r"^npm (error|ERR!)( /\S+| node_modules/\S+| For a full report see:)?$|"
                         r"^npm (error|ERR!) (Fix the upstream|this command with --force|to accept an "
                         r"incorrect)")


def one_line(message: str, limit: int = 400) -> str:
    """A failure message in one line: its first line (the failing step) and the
    lines of its output's tail that name the error."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    head, tail = lines[0], [line for line in lines[1:] if not BOILERPLATE.search(line)]
    errors = [line for line in tail if ERROR_LINE.search(line)][-2:] or tail[-2:]
    text = " | ".join([head.rstrip(":"), *errors])
    return text if len(text) <= limit else text[:limit - 3] + "..."


def control_refusals(controls: ControlRun, task_id: str) -> list[Reason]:
    """Why the controls say the task is not valid: nop must fail the tests, oracle pass."""
    reasons: list[Reason] = []
    nop, oracle = controls.verdict(task_id, "nop"), controls.verdict(task_id, "oracle")
    broken = {agent: controls.result(task_id, agent) for agent, verdict in
              (("nop", nop), ("oracle", oracle)) if verdict not in ("passed", "failed")}
    if broken:
        # Both controls bake the same images: one broken bake is one reason.
        said: set[str] = set()
        for agent, result in broken.items():
            if result is None:
                line = "the item did not run (see the output)"
                code = "not-run"
            else:
                line = one_line(result.message) or result.failure
                code = "bake" if result.failure.is_(BakeError) else (result.failure or "error").lower()
                if code == "bake" and REGISTRY_LACKS in result.message:
                    code = "registry"  # no bake can get past it: apart from the others
            if line in said:
                continue
            said.add(line)
            verdict = nop if agent == "nop" else oracle
            what = "the bake failed" if code in ("bake", "registry") else \
                f"the {agent} control ended in {verdict}"
            reasons.append(Reason(code, f"{what}: {line}", failed=True))
    if nop == "passed":
        reasons.append(Reason("nop-passes", "its tests already pass at the base revision (nop scored 1)"))
    result = controls.result(task_id, "oracle")
    if oracle == "failed" and result is not None:
        failed = result.grading.failed_gates
        if Gate.TESTS in failed:
            failing = "; ".join(result.grading.failing_specs[:5])
            reasons.append(Reason("oracle-tests", "its tests do not pass with the reference change "
                                  "(oracle: tests gate 0)" + (f": {failing}" if failing else "")))
        if Gate.REACT_DOCTOR in failed and result.grading.findings:
            findings = "; ".join(map(str, result.grading.findings[:5]))
            reasons.append(Reason("oracle-react-doctor", "the reference change introduces React "
                                  f"Doctor findings (oracle: react_doctor gate 0): {findings}"))
        if Gate.REACT_DOCTOR in failed and result.grading.unscanned:
            # A gate that did not look at a changed file passes no solution that changes it.
            reasons.append(Reason("oracle-react-doctor", "the reference changes files React Doctor "
                                  "does not analyse (oracle: react_doctor gate 0): "
                                  + ", ".join(result.grading.unscanned[:5])))
        elif Gate.REACT_DOCTOR in failed and not result.grading.findings:
            why = one_line(result.message)
            reasons.append(Reason("oracle-react-doctor", "the reference fails the React Doctor gate "
                                  "(oracle: react_doctor gate 0)" + (f": {why}" if why else "")))
        if not failed:
            reasons.append(Reason("oracle-failed", f"the oracle control failed: {result.failure}: "
                                  + one_line(result.message)))
    return reasons


def toolchain_refusals(toolchain: Toolchain, node: int | None) -> list[Reason]:
    """What the images cannot serve, said before any bake."""
    reasons: list[Reason] = []
    if toolchain.name == "bun":
        reasons.append(Reason("toolchain", f"it installs with bun ({toolchain.why}), which the "
                              "images do not have"))
    floor, ceiling = node_floor(toolchain.node), node_ceiling(toolchain.node)
    if node is not None and ((floor is not None and node < floor)
                             or (ceiling is not None and node > ceiling)):
        reasons.append(Reason("toolchain", f"package.json's engines.node {toolchain.node!r} "
                              f"excludes Node {node}, the Node of the sandbox's images"))
    return reasons
