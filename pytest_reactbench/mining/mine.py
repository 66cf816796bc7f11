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
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from pytest_reactbench.controls import CONTROLS, ControlRun, run_controls
from pytest_reactbench.mining.admissible import settle_sources
from pytest_reactbench.mining.changes import (
    Change,
    Kind,
    MiningError,
    check_repository,
    git,
    is_cypress,
    is_spec,
    of_kind,
    read_changes,
    resolve,
)
from pytest_reactbench.mining.refusals import (
    Reason,
    control_refusals,
    early_refusals,
    toolchain_refusals,
)
from pytest_reactbench.mining.runners import (
    Runners,
    TestPlan,
    Toolchain,
    detect_runners,
    detect_toolchain,
    merge_runners,
    package_of,
    plan_tests,
    source_roots,
)
from pytest_reactbench.mining.writer import TaskPlan, tests_config, write_task
from pytest_reactbench.results import Gate, TrialResult, Verdict
from pytest_reactbench.verifier.contract import DoctorFinding, read_grade

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
    #: Refuse a change whose reference adds React Doctor findings, rather than tolerate
    #: exactly those (rule, file, title) in the task, as the public suite's tasks do.
    strict_react_doctor: bool = False
    sandbox: str = "local"
    records: Path | None = None


@dataclass
class Outcome:
    """What became of the change: `task` is None when it was refused and not kept."""

    task: Path | None
    reasons: list[Reason] = field(default_factory=list)
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


def _root_entries(repo: Path, rev: str) -> set[str]:
    return set(git(repo, "ls-tree", "-z", "--name-only", rev).decode().split("\0")) - {""}


def _read_at(repo: Path, rev: str, folder: str = "") -> Callable[[str], str | None]:
    def read(path: str) -> str | None:
        where = f"{folder}/{path}" if folder else path
        try:
            return git(repo, "cat-file", "blob", f"{rev}:{where}").decode(errors="replace")
        except MiningError:
            return None
    return read


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
                             for g, v in result.grading.gates.items()},
                          **({"record": result.record} if records_kept else {})}
    return summary


#: The Node major of the images the docker backend runs (images/system).
IMAGES_NODE = 22


def sandbox_node(sandbox: str) -> int | None:
    """The Node major the controls' bakes run on: the host's on the local backend."""
    if sandbox != "local":
        return IMAGES_NODE
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.match(r"v(\d+)", version.strip())
    return int(found.group(1)) if found else None


def _package_files(repo: Path, rev: str, package: str) -> set[str]:
    """The names of the files at the top of a workspace package's folder."""
    names = git(repo, "--literal-pathspecs", "ls-tree", "-z", "--name-only", rev, "--",
                f"{package}/").decode()
    return {PurePosixPath(n).name for n in names.split("\0") if n}


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


@dataclass(frozen=True)
class Survey:
    """How the repository at head tests the change: its toolchain, its test runners,
    the change's specs and the package they run in."""

    toolchain: Toolchain
    runners: Runners
    #: The specs the verifier runs (Cypress's and, without a browser to serve them,
    #: Playwright's left out).
    specs: list[str]
    #: The workspace packages the specs are in ("" for the root).
    packages: list[str]
    #: The folder the tests run in: the package's, or the root's when its runner is.
    runs_in: str
    #: Playwright specs carried with the tests but not run.
    e2e_dropped: list[str]
    root: set[str]

    @property
    def package(self) -> str:
        return self.packages[0] if len(self.packages) == 1 else ""


def survey(repo: Path, head: str, changes: list[Change]) -> Survey:
    """Stage 1: what the repository at `head` says (its manifests, its runners)."""
    root = _root_entries(repo, head)
    read = _read_at(repo, head)
    toolchain = detect_toolchain(read("package.json"), root, read)
    manifests = {p for p in git(repo, "ls-tree", "-r", "-z", "--name-only", head).decode().split("\0")
                 if p == "package.json" or p.endswith("/package.json")}
    # Cypress specs stay with the test half, but nothing runs them.
    specs = [c.path for c in of_kind(changes, Kind.TEST)
             if not c.deleted and is_spec(c.path) and not is_cypress(c.path)]
    packages = sorted({package_of(spec, manifests) for spec in specs})
    package = packages[0] if len(packages) == 1 else ""
    runners = detect_runners(read("package.json"), root, read)
    runs_in = package
    if package:
        in_package = _read_at(repo, head, package)
        runners, runs_in = merge_runners(detect_runners(in_package("package.json"),
                                                        _package_files(repo, head, package), in_package),
                                         runners, package)
    if package and toolchain.name == "pnpm":
        toolchain = replace(toolchain, hoisted=True)
    e2e_dropped: list[str] = []
    if runners.e2e_unserved and specs:
        prefix = f"{runs_in}/" if runs_in else ""
        e2e_dropped = [s for s in specs if runners.runner_of(s.removeprefix(prefix)) == "playwright"]
        specs = [s for s in specs if s not in e2e_dropped]
    return Survey(toolchain, runners, specs, packages, runs_in, e2e_dropped, root)


def triage(found: Survey, changes: list[Change], node: int | None) -> tuple[list[Reason], TestPlan | None]:
    """Stage 2, before any sandbox: the reasons to refuse the change, and its test plan
    (None when there is none to make)."""
    specs = found.specs
    reasons = early_refusals(changes, specs, found.runners.names)
    if [s for s in specs if "/" not in s]:
        reasons.append(Reason("test-command", "it has specs at the repository's root ("
                              + ", ".join(s for s in specs if "/" not in s)
                              + "): the verifier's hidden specs are folders"))
    if found.e2e_dropped and not specs:
        reasons = [r for r in reasons if r.code != "no-spec"]
        reasons.append(Reason("test-command",
                              f"its only specs are Playwright's and {found.runners.e2e_unserved}"))
    if not reasons and len(found.packages) > 1:
        reasons.append(Reason("workspace", "its specs are in more than one workspace package ("
                              + ", ".join(p or "the root" for p in found.packages)
                              + "): a task runs one package's tests"))
    if not reasons:
        reasons += toolchain_refusals(found.toolchain, node)
    if reasons:
        return reasons, None
    try:
        return reasons, plan_tests(specs, found.runners, found.runs_in)
    except MiningError as exc:
        return [Reason("test-command", str(exc))], None


def _echo_changes(changes: list[Change], given: dict[str, str], echo: Callable[[str], None]) -> None:
    for change in changes:
        moved = f"{change.old_path} -> " if change.old_path else ""
        echo(f"  {change.status} {change.kind.value:10} {moved}{change.path}"
             + ("  (binary)" if change.binary else "")
             + (f"  (given as at head: {given[change.path]})" if change.path in given else ""))


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


def mine(request: Request, echo: Callable[[str], None] = print) -> Outcome:
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
        outcome = Outcome(None, reasons, _summary(controls, task_id, request.records is not None))
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
        draft.rename(out)
    outcome.task = out
    return outcome


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "repo"
