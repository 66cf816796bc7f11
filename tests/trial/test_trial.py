"""The Trial on its own, without pytest items: real local sandboxes (bubblewrap) and
tiny bash tasks. Stages that break on purpose wrap the real ones."""

from __future__ import annotations

import json
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_reactbench.agents import AgentContext, AgentOutcome, NopAgent, OracleAgent
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.results import RunRecords, TrialResult, Verdict
from pytest_reactbench.results.load import read_record
from pytest_reactbench.sandbox.base import Capabilities, Image, Sandbox
from pytest_reactbench.sandbox.errors import BakeError, SandboxError
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.tasks import Task, load_task
from pytest_reactbench.trial import Stages, Trial, TrialOptions
from pytest_reactbench.trial.stages import Role
from tests.helpers import write_task


@pytest.fixture
def backend(bake_cache: Path) -> Iterator[LocalBackend]:
    backend = LocalBackend(environment_sandbox_options(cache=bake_cache))
    yield backend
    backend.close()


def stages(backend: LocalBackend) -> Stages:
    return Stages(backend, lambda line: None, {"run": "trial-tests", "worker": "controller"})


def events(result: TrialResult) -> list[dict[str, object]]:
    lines = Path(result.record, "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


class BootFailsOnce(Stages):
    """The agent's sandbox fails to boot the first time: an error, retried."""

    boots = 0

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        if role == "agent":
            BootFailsOnce.boots += 1
            if BootFailsOnce.boots == 1:
                raise SandboxError("the engine refused to start the agent's sandbox")
        return super().boot(task, role, image, egress)


def test_pass_and_fail_each_end_with_one_finished_record(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    records = RunRecords(tmp_path / "records", "run1")
    passed = Trial(task, OracleAgent(), stages=stages(backend), records=records).run()
    failed = Trial(task, NopAgent(), stages=stages(backend), records=records).run()
    assert (passed.verdict, passed.grading.reward) == (Verdict.PASSED, 1.0)
    assert passed.provenance.backend == "local"
    assert passed.provenance.formal is False  # the local backend is a development backend
    assert (failed.verdict, failed.failure) == (Verdict.FAILED, "tests")
    for result in (passed, failed):
        # The record reads back as the very result the trial returned.
        assert read_record(Path(result.record)) == result
        kinds = [e["event"] for e in events(result)]
        assert kinds.count("teardown") == 2 and kinds[-1] == "teardown"
        assert {"bake", "boot", "agent", "artifacts", "verify"} <= result.durations.keys()
    assert records.open == set()


def test_a_failed_agent_boot_is_retried_in_a_fresh_trial(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    records = RunRecords(tmp_path / "records", "run1")
    BootFailsOnce.boots = 0
    result = Trial(task, OracleAgent(), stages=BootFailsOnce(backend, lambda line: None, {}),
                   records=records, options=TrialOptions(retries=1)).run()
    assert result.verdict is Verdict.PASSED and result.retries == 1
    first, second = sorted(records.run_dir.iterdir())
    assert read_record(first).verdict is Verdict.ERROR
    assert "refused to start the agent's sandbox" in read_record(first).message
    assert json.loads((second / "manifest.json").read_text())["retry_of"] == str(first)
    # The verifier that booted for the first try was torn down with it.
    assert [e["role"] for e in events(read_record(first)) if e["event"] == "teardown"] == ["verifier"]


def test_no_retry_mends_a_task_the_harness_cannot_run(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "gpu", extra_toml="[environment]\ngpus = 1\n"))
    records = RunRecords(tmp_path / "records", "run1")
    result = Trial(task, OracleAgent(), stages=stages(backend), records=records,
                   options=TrialOptions(retries=3)).run()
    assert (result.verdict, result.failure) == (Verdict.ERROR, "UnsupportedTaskError")
    assert not result.retryable
    assert result.message.endswith("task.toml: [environment].gpus = 1: no sandbox backend here provides GPUs")
    assert len(list(records.run_dir.iterdir())) == 1


def test_shared_verifier_environment_is_refused_with_the_field(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "shared",
                                extra_toml='environment_mode = "shared"\n'))
    result = Trial(task, OracleAgent(), stages=stages(backend),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert result.verdict is Verdict.ERROR
    assert "[verifier].environment_mode = 'shared'" in result.message


def test_an_artifact_with_a_destination_is_kept_in_the_record(tmp_path: Path, backend: LocalBackend) -> None:
    task_dir = write_task(tmp_path / "tasks", "alpha")
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace('source = "/app"', 'source = "/app"\ndestination = "workspace"'))
    result = Trial(load_task(task_dir), OracleAgent(), stages=stages(backend),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert result.verdict is Verdict.PASSED
    with tarfile.open(Path(result.record, "artifacts", "workspace.tar")) as tar:
        assert {"out.txt", "base.txt"} <= set(tar.getnames())


def test_a_broken_stage_is_an_error_with_its_traceback_and_a_finished_record(
        tmp_path: Path, backend: LocalBackend) -> None:
    class Broken(Stages):
        def bake(self, task: Task, role: Role) -> Image:
            raise RuntimeError("a conftest stage fell over")

    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    result = Trial(task, OracleAgent(), stages=Broken(backend, lambda line: None, {}),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert (result.verdict, result.failure) == (Verdict.ERROR, "RuntimeError")
    assert "a conftest stage fell over" in result.message and "Traceback" in result.message
    assert json.loads(Path(result.record, "status.json").read_text())["status"] == "complete"


def test_a_teardown_that_raises_keeps_the_verdict_and_closes_the_other(
        tmp_path: Path, backend: LocalBackend) -> None:
    closed: list[str] = []

    class Stubborn(Stages):
        def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
            sandbox = super().boot(task, role, image, egress)
            real_close = sandbox.close

            def close() -> None:
                real_close()
                closed.append(role)
                if role == "agent":
                    raise SandboxError("the engine hung up while removing it")

            sandbox.close = close  # type: ignore[method-assign]
            return sandbox

    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    result = Trial(task, OracleAgent(), stages=Stubborn(backend, lambda line: None, {}),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert result.verdict is Verdict.PASSED
    assert sorted(closed) == ["agent", "verifier"]
    failed = [e for e in events(result) if e["event"] == "teardown-failed"]
    assert [e["role"] for e in failed] == ["agent"] and "hung up" in str(failed[0]["error"])


class Slow(OracleAgent):
    """The oracle, after a while: long enough for a few heartbeats."""

    name = "slow"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.sandbox.exec("sleep 1.2")
        return super().run(ctx)


def test_an_agent_at_work_says_so_every_beat(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    lines: list[str] = []
    result = Trial(task, Slow(), stages=Stages(backend, lines.append, {}),
                   records=RunRecords(tmp_path / "records", "run1"),
                   options=TrialOptions(heartbeat_sec=0.4)).run()
    assert result.verdict is Verdict.PASSED
    beats = [line for line in lines if "the agent is at work, still running after" in line]
    # (at least two beats in the agent's 1.2 s, however loaded the machine)
    assert len(beats) >= 2, lines
    assert beats[0] == "alpha [slow]: the agent is at work, still running after 0 s"
    # None after the agent ended, and none for quick work at the default beat.
    lines.clear()
    Trial(task, OracleAgent(), stages=Stages(backend, lines.append, {}),
          records=RunRecords(tmp_path / "records", "run2")).run()
    assert not [line for line in lines if "still running" in line]


class Starting(OracleAgent):
    """The oracle, saying when it starts."""

    name = "starting"

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.started.set()
        return super().run(ctx)


class VerifierAfterAgent(Stages):
    """The verifier's image comes only once the agent is at work (a registry's pull, say,
    that takes longer than the agent's image), then bakes or fails."""

    def __init__(self, backend: LocalBackend, agent: Starting, fail: bool) -> None:
        super().__init__(backend, lambda line: None, {})
        self.agent, self.fail = agent, fail

    def bake(self, task: Task, role: Role) -> Image:
        if role == "verifier":
            if not self.agent.started.wait(30):
                raise BakeError("the agent never started while the verifier's image was baked")
            if self.fail:
                raise BakeError("tests/Dockerfile: the verifier's bake broke")
        return super().bake(task, role)


def test_the_verifier_is_baked_while_the_agent_works(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    agent = Starting()
    result = Trial(task, agent, stages=VerifierAfterAgent(backend, agent, fail=False),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert result.verdict is Verdict.PASSED, result.message
    assert set(result.provenance.images) == {"agent", "verifier"}
    kinds = [(e["event"], e.get("image")) for e in events(result)]
    # The verifier's bake ended after the agent started; the trial waited for it after the work.
    assert kinds.index(("bake-end", "alpha/verifier")) > kinds.index(("agent-start", None))
    assert "verifier_boot" in result.durations


def test_a_verifier_that_fails_while_the_agent_works_keeps_the_agents_work(
        tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    agent = Starting()
    result = Trial(task, agent, stages=VerifierAfterAgent(backend, agent, fail=True),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert (result.verdict, result.failure) == (Verdict.ERROR, "BakeError")
    assert result.message == "tests/Dockerfile: the verifier's bake broke"
    assert result.agent_run.ending == "completed"
    # Its work was collected before the trial waited for the verifier.
    collected = json.loads(Path(result.record, "artifacts.json").read_text())
    assert [a["source"] for a in collected] == ["/app"] and collected[0]["files"] > 0
    assert [e["role"] for e in events(result) if e["event"] == "teardown"] == ["agent", "verifier"]


class VerifierBroken(Stages):
    """The verifier's image does not bake, and says so before the agent's sandbox is up."""

    def __init__(self, backend: LocalBackend) -> None:
        super().__init__(backend, lambda line: None, {})
        self.failed = threading.Event()

    def bake(self, task: Task, role: Role) -> Image:
        if role == "verifier":
            self.failed.set()
            raise BakeError("tests/Dockerfile:3: RUN exited 1")
        return super().bake(task, role)

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        if role == "agent":
            assert self.failed.wait(30)
        return super().boot(task, role, image, egress)


def test_a_verifier_known_broken_before_the_agent_starts_costs_no_agent_run(
        tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    agent = Starting()
    result = Trial(task, agent, stages=VerifierBroken(backend),
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert (result.verdict, result.failure) == (Verdict.ERROR, "BakeError")
    assert result.message == "tests/Dockerfile:3: RUN exited 1"
    assert not agent.started.is_set() and result.agent_run.ending is None


class AgentDownVerifierSlow(Stages):
    """The agent's sandbox never boots while the verifier's image is still baking."""

    booted: bool

    def __init__(self, backend: LocalBackend) -> None:
        super().__init__(backend, lambda line: None, {})
        self.release, self.closed = threading.Event(), threading.Event()
        self.released_in_time = self.booted = False

    def bake(self, task: Task, role: Role) -> Image:
        if role == "verifier":
            self.released_in_time = self.release.wait(30)
        return super().bake(task, role)

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        if role == "agent":
            raise SandboxError("the engine refused to start the agent's sandbox")
        self.booted = True
        sandbox = super().boot(task, role, image, egress)
        real_close = sandbox.close

        def close() -> None:
            real_close()
            self.closed.set()

        sandbox.close = close  # type: ignore[method-assign]
        return sandbox


def test_a_trial_that_ends_early_does_not_wait_for_the_verifiers_bake(
        tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    staged = AgentDownVerifierSlow(backend)
    result = Trial(task, OracleAgent(), stages=staged,
                   records=RunRecords(tmp_path / "records", "run1")).run()
    assert (result.verdict, result.failure) == (Verdict.ERROR, "SandboxError")
    # The trial ended while the verifier's bake was still under way ...
    staged.release.set()
    for thread in threading.enumerate():
        if thread.name == "boot verifier":
            thread.join(30)
    assert staged.released_in_time
    # ... and no verifier's sandbox was booted after it: the thread ended without one.
    assert not staged.booted and not staged.closed.is_set()


class FormalLocal(LocalBackend):
    """The local backend as a formal one would be: only what `formal` says changes."""

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, formal=True)


class VerifierBakeFails(Stages):
    def bake(self, task: Task, role: Role) -> Image:
        if role == "verifier":
            raise BakeError("tests/Dockerfile:3: RUN exited 1")
        return super().bake(task, role)


def test_only_a_scored_trial_is_a_formal_result(tmp_path: Path, bake_cache: Path) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    records = RunRecords(tmp_path / "records", "run1")
    backend = FormalLocal(environment_sandbox_options(cache=bake_cache))
    try:
        scored = Trial(task, OracleAgent(), stages=stages(backend), records=records).run()
        failing = VerifierBakeFails(backend, lambda line: None, {"run": "t", "worker": "c"})
        errored = Trial(task, OracleAgent(), records=records, options=TrialOptions(retries=0),
                        stages=failing).run()
    finally:
        backend.close()
    assert (scored.verdict, scored.provenance.formal) == (Verdict.PASSED, True)
    # Its agent's image was baked, its verifier's was not: no score, so nothing formal.
    assert (errored.verdict, errored.failure) == (Verdict.ERROR, "BakeError")
    assert errored.provenance.formal is False
    assert read_record(Path(errored.record)).provenance.formal is False


class FullEngine(Stages):
    """The agent's sandbox boots after a wait for room, as on an engine another run holds."""

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        box = super().boot(task, role, image, egress)
        if role == "agent":
            time.sleep(1.2)
            box.room_wait = 1.2
        return box


def test_a_wait_for_room_is_booked_as_a_wait_and_said(tmp_path: Path, backend: LocalBackend) -> None:
    task = load_task(write_task(tmp_path / "tasks", "alpha"))
    said: list[str] = []
    result = Trial(task, OracleAgent(), records=RunRecords(tmp_path / "records", "run1"),
                   options=TrialOptions(heartbeat_sec=0.5),
                   stages=FullEngine(backend, said.append, {"run": "t", "worker": "c"})).run()
    assert result.verdict == Verdict.PASSED
    assert result.durations["room_wait"] == 1.2 and result.durations["boot"] < 1.0
    assert [e["seconds"] for e in events(result) if e["event"] == "room-wait"] == [1.2]
    assert any("its sandbox boots (it waits while the engine has no room for it), still running" in line
               for line in said), said
