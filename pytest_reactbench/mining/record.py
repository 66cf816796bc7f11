"""Stage 4: the task's mining.json (MiningRecord), from what the stages found."""

from __future__ import annotations

import time

from pydantic import BaseModel

from pytest_reactbench.mining.request import Outcome, Request
from pytest_reactbench.mining.survey import Survey
from pytest_reactbench.mining.writer import TaskPlan
from pytest_reactbench.verifier.contract import DoctorFinding


class ChangeRecord(BaseModel):
    status: str
    path: str
    old_path: str | None
    kind: str
    binary: bool


class MiningRecord(BaseModel):
    """mining.json, next to task.toml: where the task came from and how it was judged."""

    repository: str
    base: str
    head: str
    merge: str | None
    title: str
    description_from: str
    package_manager: str
    toolchain_from: str
    engines_node: str | None
    package: str
    runners: list[str]
    test_command: str
    e2e_command: str | None
    expected_from: str | None
    #: React Doctor findings the reference adds, which the task tolerates ("rule file:line title").
    react_doctor_tolerated: list[str] = []
    changes: list[ChangeRecord]
    controls: dict[str, dict[str, str]]
    accepted: bool
    refused_because: list[str]
    mined_at: str


def mining_record(request: Request, plan: TaskPlan, found: Survey, origin: str, outcome: Outcome,
                  expected: dict[str, list[str]], tolerated: list[DoctorFinding]) -> MiningRecord:
    """Stage 4: the task's mining.json, from what the stages found."""
    toolchain = plan.toolchain
    return MiningRecord(
        repository=str(plan.repo), base=plan.base, head=plan.head, merge=request.merge, title=plan.title,
        description_from=origin, package_manager=toolchain.label, toolchain_from=toolchain.why,
        engines_node=toolchain.node, package=found.package, runners=list(found.runners.names),
        test_command=plan.tests.cmd, e2e_command=plan.tests.e2e_cmd,
        expected_from="the oracle control's reports" if expected else None,
        react_doctor_tolerated=[f"{f.rule} {f.file}:{f.line or ''} {f.title}".rstrip() for f in tolerated],
        changes=[ChangeRecord(status=c.status, path=c.path, old_path=c.old_path, kind=c.kind.value,
                              binary=c.binary) for c in plan.changes],
        controls=outcome.controls, accepted=not outcome.reasons,
        refused_because=[str(r) for r in outcome.reasons],
        mined_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
