"""A Trial owns one agent attempt at one task, from bake to verdict: bake both
images, boot the sandboxes, let the agent act, carry its declared artifacts to a
fresh verifier, grade, tear down, and retry what ended in an error. Every exit path
goes through `Trial.run`, which always returns one TrialResult with a finished
record."""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pytest_reactbench.agents import Agent, AgentAPIError, AgentAuthError, AgentContext, AgentOutcome
from pytest_reactbench.agents.output import failed_by_egress, readable_log
from pytest_reactbench.results import (
    AGENT_SAID,
    AgentRun,
    DiffStat,
    Finding,
    Gate,
    Grading,
    Provenance,
    Refusal,
    RunRecords,
    Submission,
    TrialRecord,
    TrialResult,
    Verdict,
    retryable,
)
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.results.trajectory import write_trajectory
from pytest_reactbench.sandbox.archives import tar_of
from pytest_reactbench.sandbox.base import (
    Backend,
    BootingSandbox,
    Image,
    ImageRecipe,
    Limits,
    Progress,
    Sandbox,
)
from pytest_reactbench.sandbox.errors import BakeError, EngineLost, SandboxError
from pytest_reactbench.sandbox.heartbeat import HEARTBEAT_SEC, heartbeat
from pytest_reactbench.tasks import EnvironmentConfig, Task
from pytest_reactbench.trial.diff import Tree, tree_diff
from pytest_reactbench.verifier import (
    Grade,
    SubmissionFailure,
    Transfer,
    VerifierError,
    audit,
    collect,
    grade,
    parse_index,
    sanitize,
)
from pytest_reactbench.verifier.layer import grader_layer, uses_grader

Role = Literal["agent", "verifier"]

LOG_TAIL_LINES = 20
#: Taken before the agent acts: what counts as unchanged for the audit.
BASE_INDEX_COMMAND = "cd /app 2>/dev/null && git ls-files -s -z 2>/dev/null; true"
#: The least time an agent's CLI layer gets to bake (an npm or pip install).
INSTALL_TIMEOUT = 1800.0
#: The most of the agent's diff a run record keeps.
MAX_RECORDED_DIFF = 10 * 1024 * 1024


class AgentUnavailable(SandboxError):
    """The agent's CLI is missing from its image or its `--version` fails: no retry
    mends that, and the agent never acted."""

    retryable = False


class UnsupportedTaskError(SandboxError):
    """The task asks for something this backend or harness does not provide: an error
    no retry can mend."""

    retryable = False


@dataclass(frozen=True)
class TrialOptions:
    """What a run decides for all its trials."""

    #: Fail submissions the audit flags, on every task.
    strict: bool = False
    #: How many times a trial that ended in an error starts again.
    retries: int = 0
    #: Scales every task's agent and verifier time limits (a slow machine: 2).
    timeout_multiplier: float = 1.0
    #: Labels on every sandbox (run id, worker...), so leftovers can be found.
    labels: Mapping[str, str] = field(default_factory=dict)
    #: More entries of every trial's manifest.json (how to replay it...).
    manifest: Mapping[str, Any] = field(default_factory=dict)
    #: The shard of its run the session is ("K/N"), if it is one.
    shard: str = ""
    #: How often an agent at work or a grading says it is still going.
    heartbeat_sec: float = HEARTBEAT_SEC


def limits_of(env: EnvironmentConfig) -> Limits:
    return Limits(cpus=env.cpus, memory_mb=env.memory_mb, storage_mb=env.storage_mb)


class Stages:
    """The stages a trial delegates to its backend: baking an image, baking an agent's
    install layer on it, and booting a sandbox from it. A project replaces any in its
    conftest.py by overriding the `reactbench_stages` fixture with a subclass."""

    def __init__(self, backend: Backend, progress: Progress, labels: Mapping[str, str]) -> None:
        self.backend = backend
        self.progress = progress
        self.labels = dict(labels)

    def recipe(self, task: Task, role: Role) -> ImageRecipe:
        """The image of `role`; a verifier that runs our grader gets it as a layer on
        its base."""
        folder = task.environment_dir if role == "agent" else task.tests_dir
        env = task.config.environment if role == "agent" else task.config.verifier_environment
        layer = grader_layer() if role == "verifier" and uses_grader(folder) else None
        return ImageRecipe(name=f"{task.id}/{folder.name}", dockerfile=folder / "Dockerfile",
                           context=folder, timeout=env.build_timeout_sec, layer=layer)

    def bake(self, task: Task, role: Role) -> Image:
        """The agent's image (environment/) or the verifier's (tests/)."""
        return self.backend.bake(self.recipe(task, role), self.progress)

    def install(self, task: Task, agent: Agent, image: Image) -> Image:
        """The agent's CLI baked as a layer on top of the task's image (cached by the
        agent's name, pinned version and steps, and the task image's digest)."""
        if agent.install is None:
            return image
        timeout = max(task.config.environment.build_timeout_sec, INSTALL_TIMEOUT)
        with tempfile.TemporaryDirectory(prefix="reactbench-agent-") as folder:
            dockerfile = Path(folder) / "Dockerfile"
            dockerfile.write_text(f"FROM {image.ref}\n{agent.install.steps.strip()}\n")
            recipe = ImageRecipe(name=f"agent-{agent.install.name}", dockerfile=dockerfile,
                                 context=Path(folder), timeout=timeout, baked={image.ref: image})
            return self.backend.bake(recipe, self.progress)

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        """A fresh sandbox, offline but for `egress` (the agent's model hosts)."""
        env = task.config.environment if role == "agent" else task.config.verifier_environment
        return self.backend.boot(image, network=False, egress=egress, limits=limits_of(env),
                                 labels={**self.labels, "task": task.id, "role": role})


def unsupported(task: Task) -> str | None:
    """Why no backend here can run the task as it is declared, or None."""
    config, toml = task.config, task.path / "task.toml"
    for section, env in (("environment", config.environment),
                         ("verifier.environment", config.verifier.environment)):
        if env is not None and env.gpus > 0:
            return f"{toml}: [{section}].gpus = {env.gpus}: no sandbox backend here provides GPUs"
    if config.verifier.environment_mode != "separate":
        return (f"{toml}: [verifier].environment_mode = {config.verifier.environment_mode!r}: "
                "the verifier always runs in a separate, clean sandbox here")
    return None


def ask_version(agent: Agent, box: Sandbox) -> str | None:
    """What the agent's CLI answers to its version command in `box` (None for an agent
    without one). Raises AgentUnavailable when it does not answer."""
    install = agent.install
    if install is None or not install.version_command:
        return None
    check = box.exec(install.version_command, cwd="/app", timeout=120, user=install.user or None)
    output = _tail(check.text + check.error_text, 5)
    if not check.ok:
        raise AgentUnavailable(f"agent {agent.name!r}: `{install.version_command}` failed in its image "
                               f"(exit {check.exit_code}): {output}")
    return output


def preflight(stages: Stages, task: Task, agent: Agent) -> str | None:
    """Before any trial: bake the agent's layer on `task`'s image and ask its CLI for its
    version. Returns the answer (None for an agent with nothing to check). Raises
    AgentUnavailable when the layer does not install or the CLI does not answer, and
    lets the task's own BakeError through (that is the task's error, which its trials
    report)."""
    if agent.install is None or not agent.install.version_command:
        return None
    image = stages.bake(task, "agent")
    try:
        layered = stages.install(task, agent, image)
    except BakeError as exc:
        raise AgentUnavailable(f"agent {agent.name!r}: its CLI did not install on the image of "
                               f"{task.id}: {exc}") from None
    box = stages.boot(task, "agent", layered)
    try:
        return ask_version(agent, box)
    finally:
        box.close()


@contextmanager
def _timed(durations: dict[str, float], phase: str, record: TrialRecord,
           event: bool = True) -> Iterator[None]:
    if event:
        record.event(f"{phase}-start")
    started = time.monotonic()
    try:
        yield
    finally:
        durations[phase] = durations.get(phase, 0.0) + time.monotonic() - started
        if event:
            record.event(f"{phase}-end", seconds=round(durations[phase], 3))


def stat_of(diff: str) -> DiffStat:
    """Changed files and added/removed line counts of a unified diff."""
    lines = diff.splitlines()
    return DiffStat(
        files=[line.split(" b/", 1)[-1] for line in lines if line.startswith("diff --git ")],
        added=sum(1 for line in lines if line.startswith("+") and not line.startswith("+++")),
        removed=sum(1 for line in lines if line.startswith("-") and not line.startswith("---")),
    )


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _grading(graded: Grade, dropped: Sequence[Refusal], test_log_tail: str) -> tuple[Grading, str]:
    """What the failure screen, JUnit and the report show of a grade: the reward and
    gates, and from our verifier's typed grade.json the reasons behind them, with the
    files that could not cross to the verifier (`dropped`) among the refused; and why
    grading stopped early, when the submission broke it ("" when it did not)."""
    gates = {gate: graded.gate(gate.value) for gate in Gate}
    report = graded.details
    if report is None:  # a grader of the task's own: reward.json is all there is
        return Grading(reward=graded.reward.reward, gates=gates, refused=list(dropped),
                       test_log_tail=test_log_tail), ""
    doctor = report.react_doctor
    grading = Grading(
        reward=graded.reward.reward, gates=gates,
        failing_specs=report.tests.failing,
        spec_messages={f"{spec.file} > {spec.name}": spec.message for spec in report.tests.specs
                       if spec.status != "passed" and spec.message},
        findings=[Finding(rule=f.rule, file=f.file, line=f.line, message=f.title or f.message)
                  for f in doctor.new],
        remaining_targets=doctor.remaining_targets,
        unscanned=doctor.unscanned,
        refused=[*(Refusal(path=r.path, reason=r.reason) for r in report.submission.refused), *dropped],
        test_log_tail=test_log_tail,
    )
    stopped = "" if report.failure is None else \
        f"grading stopped during {report.failure.phase}: {report.failure.reason}"
    return grading, stopped


def _agent_run(version: str, outcome: AgentOutcome | None) -> AgentRun:
    """What the agent did, from how its run ended (None: it never ran)."""
    if outcome is None:
        return AgentRun(version=version)
    usage = outcome.usage
    return AgentRun(
        version=version, ending=outcome.ending,
        # What the CLI said in the end, rather than the tail of its raw stream.
        log_tail=AGENT_SAID + outcome.said if outcome.said else _tail(readable_log(outcome.log)),
        input_tokens=usage.input_tokens if usage else None,
        output_tokens=usage.output_tokens if usage else None,
        cost_usd=usage.cost_usd if usage else None)


class Trial:
    """One agent attempt at one task (with its retries), on one backend."""

    def __init__(self, task: Task, agent: Agent, *, stages: Stages, records: RunRecords,
                 attempt: int = 1, options: TrialOptions | None = None) -> None:
        self.task = task
        self.agent = agent
        self.stages = stages
        self.records = records
        self.attempt = attempt
        self.options = options or TrialOptions()
        #: The engine the current attempt's agent sandbox runs on, once booted.
        self._engine = ""

    @property
    def backend(self) -> Backend:
        return self.stages.backend

    @property
    def agent_timeout(self) -> float:
        return self.task.config.agent.timeout_sec * self.options.timeout_multiplier

    @property
    def verifier_timeout(self) -> float:
        return self.task.config.verifier.timeout_sec * self.options.timeout_multiplier

    def run(self) -> TrialResult:
        """The verdict, after at most `retries` fresh starts of a trial that errored."""
        retry_of: TrialRecord | None = None
        retries = 0
        while True:
            record = self.records.open_trial(self._manifest(retry_of))
            result = self._run_once(record).retried(retries)
            if result.failure == EngineLost.__name__:
                # Like a worker that died: the trial never reached a verdict.
                record.mark_incomplete(result.message, result.status())
            else:
                record.finish(result)
            if result.verdict is not Verdict.ERROR or retries >= self.options.retries or not result.retryable:
                return result
            retries += 1
            record.event("retried", failure=result.failure, retry=retries)
            said = (result.message.splitlines() or [""])[0][:200]
            self.stages.progress(f"{self.task.id} [{self.agent.name}]#{self.attempt}: ended in an error "
                                 f"({result.failure}: {said}); retry {retries} of {self.options.retries}, "
                                 "in a fresh trial")
            retry_of = record

    def _beat(self, what: str) -> Any:
        return heartbeat(self.stages.progress, lambda: f"{self.task.id} [{self.agent.name}]: {what}",
                         self.options.heartbeat_sec)

    def _manifest(self, retry_of: TrialRecord | None) -> TrialManifest:
        config = self.task.config
        return TrialManifest.model_validate({
            **self.options.manifest,
            "task": self.task.id,
            "task_path": str(self.task.path),
            "agent": self.agent.name,
            "agent_version": self.agent.version,
            "attempt": self.attempt,
            "backend": self.backend.name,
            "limits": {"agent": config.environment.model_dump(),
                       "verifier": config.verifier_environment.model_dump()},
            "timeouts": {"agent": self.agent_timeout, "verifier": self.verifier_timeout},
            "timeout_multiplier": self.options.timeout_multiplier,
            "retry_of": str(retry_of.path) if retry_of else None,
        })

    def _result(self, record: TrialRecord, verdict: Verdict, images: Mapping[str, Image],
                durations: Mapping[str, float], *, failure: str, message: str, retryable: bool = True,
                outcome: AgentOutcome | None = None, grading: Grading | None = None,
                submission: Submission | None = None) -> TrialResult:
        bases = {base.name: base for image in images.values() for base in image.bases}
        where = Provenance(
            run=self.records.run_id, shard=self.options.shard, record=str(record.path),
            backend=self.backend.name, engine=self._engine,
            # Said only of a scored trial, on a formal backend and the public images: an
            # errored trial (a failed bake has no image at all) is no formal result.
            formal=verdict.valid and bool(images) and self.backend.capabilities.formal
            and all(image.formal for image in images.values()),
            images={role: image.digest for role, image in images.items()}, bases=list(bases.values()))
        return TrialResult(task=self.task.id, agent=self.agent.name, attempt=self.attempt, verdict=verdict,
                           failure=failure, message=message, retryable=retryable, durations=dict(durations),
                           agent_run=_agent_run(self.agent.version, outcome),
                           grading=grading or Grading(), submission=submission or Submission(),
                           provenance=where)

    def _run_once(self, record: TrialRecord) -> TrialResult:
        durations: dict[str, float] = {}
        images: dict[str, Image] = {}
        boxes: list[tuple[Role, Sandbox]] = []
        self._engine = ""

        def error(exc: BaseException, message: str | None = None) -> TrialResult:
            if isinstance(exc, EngineLost) and exc.engine and not self._engine:
                self._engine = exc.engine  # lost while its sandbox booted
            return self._result(record, Verdict.ERROR, images, durations, failure=type(exc).__name__,
                                message=str(exc) if message is None else message,
                                retryable=retryable(exc))

        try:
            problem = unsupported(self.task)
            if problem:
                raise UnsupportedTaskError(problem)
            with self._beat("baking its images"):
                images["agent"] = _baked(record, durations, f"{self.task.id}/agent",
                                         partial(self.stages.bake, self.task, "agent"))
                # The verifier's image is baked (on a fresh machine with a registry: pulled)
                # and its sandbox booted while the agent's CLI layer is baked, its sandbox
                # boots and the agent works; the trial records only the time it waits for
                # them after the work ("verifier_boot"). The agent's image goes first: the
                # agent's chain is not slowed by the verifier's pulls.
                verifier = BootingSandbox(
                    lambda: self.stages.boot(self.task, "verifier", images["verifier"]), "verifier",
                    prepare=partial(self._verifier_image, record, images))
                boxes.append(("verifier", verifier))
                if (install := self.agent.install) is not None:
                    images["agent"] = _baked(
                        record, durations, f"agent-{install.name}",
                        partial(self.stages.install, self.task, self.agent, images["agent"]),
                        version=install.version)
            with _timed(durations, "boot", record, event=False), self._beat(
                    "its sandbox boots (it waits while the engine has no room for it)"):
                agent_box = self.stages.boot(self.task, "agent", images["agent"], self.agent.model_hosts)
            boxes.append(("agent", agent_box))
            if agent_box.room_wait >= 1:
                # Booked as a wait, not as boot: the engine was full (another run held it).
                durations["boot"] -= agent_box.room_wait
                durations["room_wait"] = agent_box.room_wait
                record.event("room-wait", seconds=round(agent_box.room_wait, 3))
            if agent_box.engine:
                self._engine = agent_box.engine
                record.event("engine", engine=agent_box.engine)
            return self._act_and_grade(record, agent_box, verifier, durations, images)
        except (SandboxError, VerifierError) as exc:
            return error(exc)
        except Exception as exc:
            # A fault of the harness itself (or of a conftest's stage): recorded, no score.
            return error(exc, f"{exc!r}\n{_tail(traceback.format_exc())}")
        finally:
            for role, box in reversed(boxes):
                started = time.monotonic()
                try:
                    box.close()
                except Exception as exc:  # the other sandbox is still closed, the verdict kept
                    record.event("teardown-failed", role=role, error=repr(exc))
                record.event("teardown", role=role, seconds=round(time.monotonic() - started, 3))

    def _verifier_image(self, record: TrialRecord, images: dict[str, Image]) -> None:
        """The verifier's image, baked in the thread its sandbox boots in."""
        name = f"{self.task.id}/verifier"
        record.event("bake-start", image=name)
        started = time.monotonic()
        image = self.stages.bake(self.task, "verifier")
        images["verifier"] = image
        record.event("bake-end", image=name, digest=image.digest, cached=image.cached,
                     seconds=round(time.monotonic() - started, 3))

    def _act_and_grade(self, record: TrialRecord, agent_box: Sandbox, verifier: BootingSandbox,
                       durations: dict[str, float], images: dict[str, Image]) -> TrialResult:
        task, agent = self.task, self.agent
        outcome: AgentOutcome | None = None
        submission: Submission | None = None

        def finish(verdict: Verdict, failure: str, message: str, retryable: bool = True,
                   grading: Grading | None = None) -> TrialResult:
            return self._result(record, verdict, images, durations, failure=failure, message=message,
                                retryable=retryable, outcome=outcome, grading=grading,
                                submission=submission)

        try:
            # The artifacts' trees before anything of the agent's runs (its CLI's
            # `--version` included): the sandbox is the image's still, so what its tar
            # says is trusted; the record's diff is made from them on the host.
            before = _snapshot(agent_box, task)
            # The CLI the layer installed must answer before it is given the task.
            answer = ask_version(agent, agent_box)
            if answer is not None:
                record.event("agent-version", output=answer)
            base_index = parse_index(agent_box.exec(BASE_INDEX_COMMAND, cwd="/", timeout=120).text)
            # A verifier that could not be baked or booted by now costs no agent run
            # (one that fails later, while the agent works, is reported after it).
            verifier.raise_failure()
            with _timed(durations, "agent", record), self._beat("the agent is at work"):
                outcome = _run_agent(agent, task, agent_box, record, self.agent_timeout)
            record.write_text("agent.log", outcome.log)
            # What it left running (a background job, a daemon) must not change or
            # crowd out what is collected next. A sandbox the agent broke may refuse
            # (a fork bomb holds every process slot, its container's main process is
            # gone): that is the agent's doing after it had the sandbox, never an error.
            # Collection does not depend on it (`collect` stops every process of the
            # sandbox itself and reads the tree at rest), so it goes on; only the loss
            # of the engine itself stays an error, which collection would meet too.
            try:
                agent_box.end_leftovers()
            except EngineLost:
                raise
            except SandboxError as exc:
                record.event("leftovers-not-ended", error=str(exc)[:2000])
            record.event("agent-ended", ending=outcome.ending, exit_code=outcome.exit_code)
            _write_trajectory(record, task, outcome)
            requests = agent_box.egress_requests()
            if requests:
                record.write_json("egress.json", requests)
            if not outcome.auth_failure and not outcome.api_failure:
                # A CLI that did not say so: what its proxy saw may.
                outcome.api_failure = failed_by_egress(requests)
            if outcome.auth_failure:
                # Nothing the agent left is its work: no score, and a retry would be refused too.
                return finish(Verdict.ERROR, AgentAuthError.__name__, outcome.auth_failure,
                              retryable(AgentAuthError))
            if outcome.api_failure:
                # The model API's fault, not the agent's work: no score; a retry may get through.
                return finish(Verdict.ERROR, AgentAPIError.__name__, outcome.api_failure)
            transfers, submission = _collected(record, agent_box, task, before, base_index, durations)
            if self.options.strict and submission.audit:
                return finish(Verdict.FAILED, "audit", "--reactbench-strict: the submission touches "
                              + f"{len(submission.audit)} file(s) that can fool a grader: "
                              + "; ".join(submission.audit[:10]))
            durations["verifier_boot"] = durations.get("verifier_boot", 0.0) + verifier.ready()
            with _timed(durations, "verify", record), self._beat("grading"):
                graded = grade(verifier, transfers, self.verifier_timeout,
                               record.path / "verifier", self.options.timeout_multiplier)
        except SubmissionFailure as exc:
            # The submission broke the grading once its code or files were in play.
            return finish(Verdict.FAILED, exc.failure, str(exc))
        except (SandboxError, VerifierError) as exc:
            return finish(Verdict.ERROR, type(exc).__name__, str(exc), retryable(exc))
        if graded.details is not None:
            # Our verifier times its parts: the task's test command and the React Doctor scan.
            for phase in ("test_command", "scan"):
                if phase in graded.details.timings:
                    durations[phase] = graded.details.timings[phase]
        verdict, failure, message, grading = _judged(graded, transfers, record,
                                                      outcome.headline if outcome else "")
        return finish(verdict, failure, message, grading=grading)


def _snapshot(agent_box: Sandbox, task: Task) -> list[Tree]:
    """Each artifact's tree before the agent acts (a source missing then is empty), as
    sanitized as the collected one will be, for the record's diff."""
    trees = []
    for artifact in task.config.artifacts:
        there = agent_box.exec(["test", "-d", artifact.source], cwd="/", timeout=120)
        raw = agent_box.get_archive(artifact.source, exclude=artifact.exclude) if there.ok else tar_of({})
        trees.append(Tree(artifact.source, sanitize(raw, artifact.exclude, artifact.source)[0]))
    return trees


def _collected(record: TrialRecord, agent_box: Sandbox, task: Task, before: Sequence[Tree], base_index: Any,
               durations: dict[str, float]) -> tuple[list[Transfer], Submission]:
    """The agent's work out of its sandbox, once, at rest (`collect`: the sandbox runs
    nothing afterwards): the task's artifacts (recorded, with what was dropped), its
    diff (recorded: made on the host from the trees before and after, never by
    anything in the sandbox, whose git and its configuration are the agent's) and the
    audit of what can fool a grader."""
    with _timed(durations, "artifacts", record):
        transfers = collect(agent_box, task.config.artifacts)
        for transfer in transfers:
            if transfer.artifact.destination:
                record.write_text(f"artifacts/{transfer.artifact.destination}.tar", transfer.data)
    record.write_json("artifacts.json", [
        {"source": t.artifact.source, "files": t.files, "bytes": t.size,
         "dropped": [{"path": p, "reason": r} for p, r in t.dropped]}
        for t in transfers
    ])
    diff = tree_diff(before, [Tree(t.artifact.source, t.data) for t in transfers], MAX_RECORDED_DIFF)
    record.write_text("diff.patch", diff)
    submission = Submission(diff=stat_of(diff.decode("utf-8", "replace")),
                            audit=[str(f) for f in audit(transfers, base_index)])
    record.write_json("audit.json", submission.audit)
    return transfers, submission


def _judged(graded: Grade, transfers: Sequence[Transfer], record: TrialRecord,
            headline: str) -> tuple[Verdict, str, str, Grading]:
    """The verdict of a graded submission: its failure class and message, and the
    result's grading (refusals, the test log's tail)."""
    # What could not cross to the verifier is refused too (its base version graded).
    dropped = [Refusal(path=path, reason=f"not carried to the verifier: {why}")
               for transfer in transfers for path, why in transfer.dropped]
    test_log = record.path / "verifier" / "test-stdout.txt"
    grading, stopped = _grading(graded, dropped,
                                _tail(test_log.read_text(errors="replace")) if test_log.is_file() else "")
    refused = grading.refused
    if graded.passed:
        return Verdict.PASSED, "", "", grading
    failed = [gate.value for gate in grading.failed_gates]
    message = (f"reward {graded.reward.reward:g} < 1" if not failed else
               "failed gate" + ("s " if len(failed) > 1 else " ") + ", ".join(failed))
    if stopped:
        message += "; " + stopped
    if refused:
        # A file the graded code needs may be among them: the refusal comes first,
        # not only the failure it caused.
        first = refused[0]
        message = (f"{len(refused)} file(s) of the submission refused ({first.path}: {first.reason}"
                   + (", and more" if len(refused) > 1 else "") + f"); {message}")
    failure = "+".join(failed) or "reward"
    if graded.details is not None and graded.details.tests.tampered:
        # The grader's canaries were reported otherwise than planted: the code
        # under test rewrote the test results, which says more than any of them.
        failure, message = "tampered", f"{graded.details.tests.tampered[0]}; {message}"
    if headline:
        message = f"{headline}; {message}"
    return Verdict.FAILED, failure, message, grading


def _baked(record: TrialRecord, durations: dict[str, float], name: str, make: Callable[[], Image],
           **event: Any) -> Image:
    """One bake of the trial, timed under "bake" and recorded as events."""
    record.event("bake-start", image=name, **event)
    with _timed(durations, "bake", record, event=False):
        image = make()
    record.event("bake-end", image=name, digest=image.digest, cached=image.cached)
    return image


def _write_trajectory(record: TrialRecord, task: Task, outcome: AgentOutcome) -> None:
    """The record's agent/trajectory.json (ATIF), made from what the agent did. It is a
    view of the record: one that cannot be made is an event, never the trial's error."""
    usage = outcome.usage
    try:
        write_trajectory(record.path, task.instruction,
                         input_tokens=usage.input_tokens if usage else None,
                         output_tokens=usage.output_tokens if usage else None,
                         cost_usd=usage.cost_usd if usage else None)
    except Exception as exc:
        record.event("trajectory-not-written", error=repr(exc)[:2000])


def _run_agent(agent: Agent, task: Task, sandbox: Sandbox, record: TrialRecord,
               timeout: float) -> AgentOutcome:
    try:
        return agent.run(AgentContext(task, sandbox, timeout, record.event))
    except SandboxError:
        raise
    except Exception:
        # An agent that crashes is still graded on what it left, as the public suite does.
        return AgentOutcome("crashed", None, traceback.format_exc())

