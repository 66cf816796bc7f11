"""Mining: one change of a repository's history becomes a task, or is refused with
the reason.

A change is refused before any sandbox when it has nothing to ask of an agent
(it touches only tests, only docs, or no source) or nothing to grade it with (no
spec added or changed, no test runner). The written task is then run through the
plugin with the controls: the hidden specs must fail at the base (`nop` scores 0)
and pass with the reference (`oracle` scores 1, React Doctor included).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from pytest_reactbench.controls import ControlRun, run_controls
from pytest_reactbench.mining.changes import (
    Change,
    Kind,
    MiningError,
    git,
    is_spec,
    of_kind,
    read_changes,
    resolve,
)
from pytest_reactbench.mining.runners import (
    detect_runners,
    package_manager,
    source_roots,
    verifier_command,
)
from pytest_reactbench.mining.writer import TaskPlan, write_task
from pytest_reactbench.results import Gate

MERGE_SUBJECT = re.compile(r"^Merge (pull request|branch) ")


@dataclass(frozen=True)
class Request:
    """What the user asked to mine."""

    repo: Path
    base: str | None = None
    head: str | None = None
    merge: str | None = None
    out: Path | None = None
    title: str | None = None
    body: str | None = None
    pull_request: str | None = None
    keep_anyway: bool = False
    sandbox: str = "local"
    records: Path | None = None


@dataclass
class Outcome:
    """What became of the change: `task` is None when it was refused and not kept."""

    task: Path | None
    reasons: list[str] = field(default_factory=list)
    controls: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return not self.reasons


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
    runners: list[str]
    test_command: str
    changes: list[ChangeRecord]
    controls: dict[str, dict[str, str]]
    accepted: bool
    refused_because: list[str]
    mined_at: str


def describe(request: Request, base: str, head: str) -> tuple[str, str, str]:
    """(title, description, where they came from)."""
    if request.title:
        return request.title, request.body or "", "given"
    if request.pull_request and shutil.which("gh"):
        # Optional: without the GitHub CLI, or offline, the commits tell the story.
        try:
            proc = subprocess.run(["gh", "pr", "view", request.pull_request, "--json", "title,body"],
                                  cwd=request.repo, capture_output=True, text=True, timeout=60)
            if proc.returncode == 0:
                loaded = json.loads(proc.stdout)
                return str(loaded["title"]), str(loaded.get("body") or ""), "pull request"
        except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
            pass
    messages = [m.strip() for m in git(request.repo, "log", "--reverse", "--no-merges", "-z",
                                       "--format=%B", f"{base}..{head}").decode().split("\0")
                if m.strip()]
    top = git(request.repo, "log", "-1", "--format=%B", head).decode().strip()
    if request.merge and MERGE_SUBJECT.match(top):
        # A pull request's merge commit: its title is the line after the subject.
        rest = top.split("\n", 1)[1].strip() if "\n" in top else ""
        if rest:
            title, _, body = rest.partition("\n")
            return title.strip(), request.body or body.strip() or _listed(messages), "merge commit"
    if len(messages) == 1 or not messages:
        title, _, body = (messages[0] if messages else top).partition("\n")
        return title.strip(), request.body or body.strip(), "commit message"
    title = messages[-1].partition("\n")[0]
    return title.strip(), request.body or _listed(messages), "commit messages"


def _listed(messages: list[str]) -> str:
    """The commit messages as a Markdown list, in the order they were made."""
    def item(message: str) -> str:
        first, *rest = message.splitlines()
        return "- " + first + "".join("\n" + ("  " + line if line.strip() else "") for line in rest)
    return "\n\n".join(item(m) for m in messages)


def early_refusals(changes: list[Change], specs: list[str], runners: tuple[str, ...]) -> list[str]:
    """Why a change cannot make a task, read from the change alone."""
    if not changes:
        return ["the range changes nothing"]
    kinds = {c.kind for c in changes}
    reasons: list[str] = []
    if kinds == {Kind.TEST}:
        reasons.append("it touches only tests: there is no source for an agent to write")
    elif kinds == {Kind.DOCS}:
        reasons.append("it touches only docs: there is no source for an agent to write")
    else:
        if Kind.SOURCE not in kinds:
            reasons.append("it changes no source (only " + ", ".join(sorted(k.value for k in kinds))
                           + "): there is nothing for an agent to write")
        if not specs:
            reasons.append("it adds or changes no spec file: nothing would tell a solution from the base")
    if specs and not runners:
        reasons.append("no test runner (Vitest, Jest or Playwright) is named by package.json or a "
                       "config file at the repository's root")
    return reasons


def control_refusals(controls: ControlRun, task_id: str) -> list[str]:
    """Why the controls say the task is not valid: nop must fail the tests, oracle pass."""
    reasons: list[str] = []
    nop, oracle = controls.verdict(task_id, "nop"), controls.verdict(task_id, "oracle")
    if nop == "passed":
        reasons.append("its tests already pass at the base revision (nop scored 1)")
    elif nop != "failed":
        reasons.append(f"the nop control ended in {nop} {controls.reason(task_id, 'nop')}".strip())
    result = controls.result(task_id, "oracle")
    if oracle == "failed" and result is not None:
        failed = result.failed_gates
        if Gate.TESTS in failed:
            failing = "; ".join(result.failing_specs[:5])
            reasons.append("its tests do not pass with the reference change (oracle: tests gate 0)"
                           + (f": {failing}" if failing else ""))
        if Gate.REACT_DOCTOR in failed:
            findings = "; ".join(map(str, result.findings[:5]))
            reasons.append("the reference change introduces React Doctor findings (oracle: "
                           "react_doctor gate 0)" + (f": {findings}" if findings else ""))
        if not failed:
            reasons.append(f"the oracle control failed: {result.failure}")
    elif oracle != "passed":
        reasons.append(f"the oracle control ended in {oracle} {controls.reason(task_id, 'oracle')}"
                       .strip())
    return reasons


def _root_entries(repo: Path, rev: str) -> set[str]:
    return set(git(repo, "ls-tree", "-z", "--name-only", rev).decode().split("\0")) - {""}


def _read_at(repo: Path, rev: str) -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        try:
            return git(repo, "cat-file", "blob", f"{rev}:{path}").decode(errors="replace")
        except MiningError:
            return None
    return read


def _revisions(repo: Path, request: Request) -> tuple[str, str]:
    """(base, head) as commit ids."""
    try:
        git(repo, "rev-parse", "--git-dir")
    except MiningError:
        raise MiningError(f"{repo} is not a git repository") from None
    if request.merge:
        head = resolve(repo, request.merge)
        try:
            return resolve(repo, f"{head}^1"), head
        except MiningError:
            raise MiningError(f"{request.merge} has no parent to mine against") from None
    if request.base and request.head:
        return resolve(repo, request.base), resolve(repo, request.head)
    raise MiningError("name the change: --base and --head, or --merge")


def _summary(controls: ControlRun, task_id: str, records_kept: bool) -> dict[str, dict[str, str]]:
    """Each control's verdict, gates and failure (and record, when records are kept)."""
    summary: dict[str, dict[str, str]] = {}
    for agent in ("oracle", "nop"):
        result = controls.result(task_id, agent)
        if result is None:
            summary[agent] = {"verdict": "not run"}
            continue
        summary[agent] = {"verdict": result.verdict.value, "failure": result.failure,
                          **{f"gate.{g.value}": "" if v is None else str(int(v))
                             for g, v in result.gates.items()},
                          **({"record": result.record} if records_kept else {})}
    return summary


def mine(request: Request, echo: Callable[[str], None] = print) -> Outcome:
    """Mine one change into a task directory; refuse it with the reasons."""
    repo = request.repo.resolve()
    base, head = _revisions(repo, request)
    changes = read_changes(repo, base, head)
    root = _root_entries(repo, head)
    read = _read_at(repo, head)
    manager = package_manager(root)
    runners = detect_runners(read("package.json"), root, read)
    specs = [c.path for c in of_kind(changes, Kind.TEST) if not c.deleted and is_spec(c.path)]
    reasons = early_refusals(changes, specs, runners.names)
    task_id = f"{_slug(repo.name)}-{head[:10]}"
    out = (request.out or Path("tasks") / task_id).resolve()
    task_id = out.name
    if out.exists():
        raise MiningError(f"{out} already exists")
    title, body, origin = describe(request, base, head)
    echo(f"mining {repo.name} {base[:10]}..{head[:10]}: {title}")
    for change in changes:
        moved = f"{change.old_path} -> " if change.old_path else ""
        echo(f"  {change.status} {change.kind.value:10} {moved}{change.path}"
             + ("  (binary)" if change.binary else ""))
    if reasons and not (request.keep_anyway and specs and runners.names):
        if request.keep_anyway:
            echo("  not kept: without a spec and a test runner there is no verifier to write")
        return Outcome(None, reasons)
    sources = [p for c in of_kind(changes, Kind.SOURCE) for p in c.paths]
    plan = TaskPlan(
        task_id=task_id, repo=repo, base=base, head=head, title=title, body=body,
        changes=tuple(changes), manager=manager, runners=runners, specs=tuple(specs),
        sources=tuple(source_roots(sources, root)), test_cmd=verifier_command(specs, runners, manager),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written and checked under its own name in a scratch folder beside the target: a
    # refused change leaves nothing behind, an accepted one appears whole.
    with tempfile.TemporaryDirectory(prefix=".mining-", dir=out.parent) as scratch:
        draft = Path(scratch) / task_id
        write_task(plan, draft)
        echo(f"  package manager {manager.name}, test command: {plan.test_cmd}")
        records = request.records or Path(scratch) / "records"
        controls = run_controls([draft], sandbox=request.sandbox, records=records, echo=echo)
        reasons += control_refusals(controls, task_id)
        outcome = Outcome(None, reasons, _summary(controls, task_id, request.records is not None))
        for agent, props in outcome.controls.items():
            echo(f"  {agent}: {props.get('verdict', 'not run')} (tests {props.get('gate.tests', '-')}, "
                 f"react_doctor {props.get('gate.react_doctor', '-')})")
        if reasons and not request.keep_anyway:
            if not controls.results:
                echo(controls.output[-4000:])
            return outcome
        record = MiningRecord(
            repository=str(repo), base=base, head=head, merge=request.merge, title=title,
            description_from=origin, package_manager=manager.name, runners=list(runners.names),
            test_command=plan.test_cmd,
            changes=[ChangeRecord(status=c.status, path=c.path, old_path=c.old_path, kind=c.kind.value,
                                  binary=c.binary) for c in changes],
            controls=outcome.controls, accepted=not reasons, refused_because=reasons,
            mined_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        (draft / "mining.json").write_text(record.model_dump_json(indent=2) + "\n")
        draft.rename(out)
    outcome.task = out
    return outcome


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "repo"
