"""The lifecycle of a Trial, one agent attempt at one task from bake to verdict: bake
both images, boot the sandboxes, let the agent act, carry its declared artifacts to a
fresh verifier, grade, tear down, and retry what ended in an error. Every exit path
goes through `Trial.run`, which always returns one TrialResult with a finished
record."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pytest_reactbench.agents import Agent, AgentAPIError, AgentAuthError, AgentContext, AgentOutcome
from pytest_reactbench.agents.output import failed_by_egress
from pytest_reactbench.results import (
    Event,
    Failure,
    Grading,
    Provenance,
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
    Sandbox,
)
from pytest_reactbench.sandbox.errors import EngineLost, SandboxError
from pytest_reactbench.sandbox.heartbeat import HEARTBEAT_SEC, heartbeat
from pytest_reactbench.tasks import Task
from pytest_reactbench.trial.diff import Tree, stat_of, tree_diff
from pytest_reactbench.trial.judge import agent_run, judge, tail
from pytest_reactbench.trial.stages import Role, Stages, UnsupportedTaskError, ask_version, unsupported
from pytest_reactbench.verifier import (
    SubmissionFailure,
    Transfer,
    VerifierError,
    audit,
    collect,
    grade,
    parse_index,
    sanitize,
)

#: Taken before the agent acts: what counts as unchanged for the audit.
BASE_INDEX_COMMAND = "cd /app 2>/dev/null && git ls-files -s -z 2>/dev/null; true"
#: The most of the agent's diff a run record keeps.
MAX_RECORDED_DIFF = 10 * 1024 * 1024


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

@contextmanager
def _timed(durations: dict[str, float], phase: str, record: TrialRecord,
           event: bool = True) -> Iterator[None]:
    if event:
        record.event(Event.start(phase))
    started = time.monotonic()
    try:
        yield
    finally:
        durations[phase] = durations.get(phase, 0.0) + time.monotonic() - started
        if event:
            record.event(Event.end(phase), seconds=round(durations[phase], 3))


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
            if result.failure.is_(EngineLost):
                # Like a worker that died: the trial never reached a verdict.
                record.mark_incomplete(result.message, result.status())
            else:
                record.finish(result)
            if result.verdict is not Verdict.ERROR or retries >= self.options.retries or not result.retryable:
                return result
            retries += 1
            record.event(Event.RETRIED, failure=result.failure, retry=retries)
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
                durations: Mapping[str, float], *, failure: Failure, message: str, retryable: bool = True,
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
                           agent_run=agent_run(self.agent.version, outcome),
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
            return self._result(record, Verdict.ERROR, images, durations, failure=Failure.of(exc),
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
                record.event(Event.ROOM_WAIT, seconds=round(agent_box.room_wait, 3))
            if agent_box.engine:
                self._engine = agent_box.engine
                record.event(Event.ENGINE, engine=agent_box.engine)
            return self._act_and_grade(record, agent_box, verifier, durations, images)
        except (SandboxError, VerifierError) as exc:
            return error(exc)
        except Exception as exc:
            # A fault of the harness itself (or of a conftest's stage): recorded, no score.
            return error(exc, f"{exc!r}\n{tail(traceback.format_exc())}")
        finally:
            for role, box in reversed(boxes):
                started = time.monotonic()
                try:
                    box.close()
                except Exception as exc:  # the other sandbox is still closed, the verdict kept
                    record.event(Event.TEARDOWN_FAILED, role=role, error=repr(exc))
                record.event(Event.TEARDOWN, role=role, seconds=round(time.monotonic() - started, 3))

    def _verifier_image(self, record: TrialRecord, images: dict[str, Image]) -> None:
        """The verifier's image, baked in the thread its sandbox boots in."""
        name = f"{self.task.id}/verifier"
        record.event(Event.BAKE_START, image=name)
        started = time.monotonic()
        image = self.stages.bake(self.task, "verifier")
        images["verifier"] = image
        record.event(Event.BAKE_END, image=name, digest=image.digest, cached=image.cached,
                     seconds=round(time.monotonic() - started, 3))

    def _act_and_grade(self, record: TrialRecord, agent_box: Sandbox, verifier: BootingSandbox,
                       durations: dict[str, float], images: dict[str, Image]) -> TrialResult:
        task, agent = self.task, self.agent
        outcome: AgentOutcome | None = None
        submission: Submission | None = None

        def finish(verdict: Verdict, failure: Failure, message: str, retryable: bool = True,
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
                record.event(Event.AGENT_VERSION, output=answer)
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
                record.event(Event.LEFTOVERS_NOT_ENDED, error=str(exc)[:2000])
            record.event(Event.AGENT_ENDED, ending=outcome.ending, exit_code=outcome.exit_code)
            _write_trajectory(record, task, outcome)
            requests = agent_box.egress_requests()
            if requests:
                record.write_json("egress.json", requests)
            if not outcome.auth_failure and not outcome.api_failure:
                # A CLI that did not say so: what its proxy saw may.
                outcome.api_failure = failed_by_egress(requests)
            if outcome.auth_failure:
                # Nothing the agent left is its work: no score, and a retry would be refused too.
                return finish(Verdict.ERROR, Failure.of(AgentAuthError), outcome.auth_failure,
                              retryable(AgentAuthError))
            if outcome.api_failure:
                # The model API's fault, not the agent's work: no score; a retry may get through.
                return finish(Verdict.ERROR, Failure.of(AgentAPIError), outcome.api_failure)
            transfers, submission = _collected(record, agent_box, task, before, base_index, durations)
            if self.options.strict and submission.audit:
                return finish(Verdict.FAILED, Failure.AUDIT, "--reactbench-strict: the submission touches "
                              + f"{len(submission.audit)} file(s) that can fool a grader: "
                              + "; ".join(submission.audit[:10]))
            durations["verifier_boot"] = durations.get("verifier_boot", 0.0) + verifier.ready()
            with _timed(durations, "verify", record), self._beat("grading"):
                graded = grade(verifier, transfers, self.verifier_timeout,
                               record.path / "verifier", self.options.timeout_multiplier)
        except SubmissionFailure as exc:
            # The submission broke the grading once its code or files were in play.
            return finish(Verdict.FAILED, Failure(exc.failure), str(exc))
        except (SandboxError, VerifierError) as exc:
            return finish(Verdict.ERROR, Failure.of(exc), str(exc), retryable(exc))
        if graded.details is not None:
            # Our verifier times its parts: the task's test command and the React Doctor scan.
            for phase in ("test_command", "scan"):
                if phase in graded.details.timings:
                    durations[phase] = graded.details.timings[phase]
        verdict, failure, message, grading = judge(graded, transfers, record,
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


def _baked(record: TrialRecord, durations: dict[str, float], name: str, make: Callable[[], Image],
           **event: Any) -> Image:
    """One bake of the trial, timed under "bake" and recorded as events."""
    record.event(Event.BAKE_START, image=name, **event)
    with _timed(durations, "bake", record, event=False):
        image = make()
    record.event(Event.BAKE_END, image=name, digest=image.digest, cached=image.cached)
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
        record.event(Event.TRAJECTORY_NOT_WRITTEN, error=repr(exc)[:2000])


def _run_agent(agent: Agent, task: Task, sandbox: Sandbox, record: TrialRecord,
               timeout: float) -> AgentOutcome:
    try:
        return agent.run(AgentContext(task, sandbox, timeout, record.event))
    except SandboxError:
        raise
    except Exception:
        # An agent that crashes is still graded on what it left, as the public suite does.
        return AgentOutcome("crashed", None, traceback.format_exc())
