"""Mining: one change of a repository's history becomes a task, or is refused with
the reason.

A change is refused before any sandbox when it has nothing to ask of an agent
(it touches only tests, only docs, or no source) or nothing to grade it with (no
spec added or changed, no test runner). The written task is then run through the
plugin with the controls: the hidden specs must fail at the base (`nop` scores 0)
and pass with the reference (`oracle` scores 1, React Doctor included).

This module runs the stages in order; each is apart: `survey` (stage 1, what the
repository says, and 2, triage), `proof` (stage 3, the controls), `record` (stage 4,
mining.json), and `description` (the instruction's title and description).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from pytest_reactbench.mining.admissible import settle_sources
from pytest_reactbench.mining.changes import (
    Change,
    Kind,
    MiningError,
    check_repository,
    of_kind,
    read_changes,
    resolve,
)
from pytest_reactbench.mining.description import describe
from pytest_reactbench.mining.proof import control_summary, expected_tests, prove
from pytest_reactbench.mining.record import mining_record
from pytest_reactbench.mining.request import Outcome, Request
from pytest_reactbench.mining.runners import source_roots
from pytest_reactbench.mining.survey import sandbox_node, survey, triage
from pytest_reactbench.mining.writer import TaskPlan, tests_config, write_task


def _revisions(repo: Path, request: Request) -> tuple[str, str]:
    """(base, head) as commit ids."""
    check_repository(repo)
    if request.merge:
        head = resolve(repo, request.merge)
        try:
            return resolve(repo, f"{head}^1"), head
        except MiningError:
            raise MiningError(f"{request.merge} has no parent to mine against") from None
    if request.base and request.head:
        return resolve(repo, request.base), resolve(repo, request.head)
    raise MiningError("name the change: --base and --head, or --merge")


def _echo_changes(changes: list[Change], given: dict[str, str], echo: Callable[[str], None]) -> None:
    for change in changes:
        moved = f"{change.old_path} -> " if change.old_path else ""
        echo(f"  {change.status} {change.kind.value:10} {moved}{change.path}"
             + ("  (binary)" if change.binary else "")
             + (f"  (given as at head: {given[change.path]})" if change.path in given else ""))


def publish_task(draft: Path, out: Path) -> None:
    """An accepted task appears whole, under its name."""
    draft.rename(out)


def mine(request: Request, echo: Callable[[str], None] = print,
         publish: Callable[[Path, Path], None] = publish_task) -> Outcome:
    """Mine one change into a task directory; refuse it with the reasons."""
    repo = request.repo.resolve()
    base, head = _revisions(repo, request)
    changes, given, declared = settle_sources(repo, head, read_changes(repo, base, head))
    found = survey(repo, head, changes)
    reasons, tests = triage(found, changes, sandbox_node(request.sandbox))
    task_id = f"{slug(repo.name)}-{head[:10]}"
    out = (request.out or Path("tasks") / task_id).resolve()
    task_id = out.name
    if out.exists():
        raise MiningError(f"{out} already exists")
    title, body, origin = describe(request, base, head)
    echo(f"mining {repo.name} {base[:10]}..{head[:10]}: {title}")
    if found.e2e_dropped and found.specs:
        echo(f"  Playwright specs carried but not run ({', '.join(found.e2e_dropped)}): "
             f"{found.runners.e2e_unserved}")
    _echo_changes(changes, given, echo)
    if tests is None:
        if request.keep_anyway:
            echo("  not kept: without a spec and a test runner there is no verifier to write")
        return Outcome(None, reasons)
    sources = [p for c in of_kind(changes, Kind.SOURCE) for p in c.paths]
    plan = TaskPlan(
        task_id=task_id, repo=repo, base=base, head=head, title=title, body=body,
        changes=tuple(changes), toolchain=found.toolchain, runners=found.runners, specs=tuple(found.specs),
        sources=tuple(source_roots(sources, found.root)), tests=tests, package=found.runs_in,
        declared=tuple(declared),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written and checked under its own name in a scratch folder beside the target: a
    # refused change leaves nothing behind, an accepted one appears whole.
    with tempfile.TemporaryDirectory(prefix=".mining-", dir=out.parent) as scratch:
        draft = Path(scratch) / task_id
        write_task(plan, draft)
        echo(f"  {found.toolchain.label} (from {found.toolchain.why})"
             + (f", package {found.package}" if found.package else "") + f", tests: {tests.cmd}"
             + (f"; e2e: {tests.e2e_cmd}" if tests.e2e_cmd else ""))
        records = request.records or Path(scratch) / "records"
        controls, reasons, tolerated = prove(draft, request, records, echo)
        outcome = Outcome(None, reasons, control_summary(controls, task_id, request.records is not None))
        for agent, props in outcome.controls.items():
            echo(f"  {agent}: {props.get('verdict', 'not run')} (tests {props.get('gate.tests', '-')}, "
                 f"react_doctor {props.get('gate.react_doctor', '-')})")
        if reasons and not request.keep_anyway:
            if not controls.results:
                echo(controls.output[-4000:])
            return outcome
        oracle = controls.result(task_id, "oracle")
        expected = expected_tests(Path(oracle.record)) if oracle and oracle.record and not reasons else {}
        if expected or tolerated:
            # The tests the reference passed are the ones the gate holds every solution to:
            # a skipped or missing one then fails, as in a hand-written task.
            (draft / "tests" / "config.json").write_text(
                json.dumps(tests_config(plan, expected, tolerated), indent=2) + "\n")
        record = mining_record(request, plan, found, origin, outcome, expected, tolerated)
        (draft / "mining.json").write_text(record.model_dump_json(indent=2) + "\n")
        publish(draft, out)
    outcome.task = out
    return outcome


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "repo"
