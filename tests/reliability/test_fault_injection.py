"""Faults injected into real trials on both backends. Each case asserts the verdict
class, the trial's record, and that nothing of the run is left on the machine.

The agents are shell commands (`--reactbench-agent-command`) and the verifiers plain
bash, so a case costs a sandbox boot, not a React build."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.helpers import BACKENDS, write_task
from tests.reliability.faults import (
    junit_properties,
    kill_tree_when_seen,
    leftovers,
    pids_with,
    remove_container_when_seen,
    trial_records,
)

#: How long past its time limit a timed-out command may take to be gone.
KILL_BOUND_SEC = 10.0


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_trial(suite: pytest.Pytester, backend: str, agent_command: str | None = None,
              agent: str = "fault") -> tuple[pytest.RunResult, dict[str, str], dict[str, object]]:
    """One trial of the task `t` through pytest; its JUnit properties and status."""
    args = [f"--reactbench-sandbox={backend}", "--junitxml=r.xml", f"--reactbench-agent={agent}"]
    if agent_command is not None:
        args.append(f"--reactbench-agent-command=fault={agent_command}")
    result = suite.runpytest(*args)
    (props,) = junit_properties(suite.path / "r.xml").values()
    (status,) = trial_records(suite.path / "records").values()
    return result, props, status


def assert_clean(suite: pytest.Pytester, bake_cache: Path) -> None:
    assert leftovers(suite.path / "records", bake_cache) == []


def agent_log(suite: pytest.Pytester) -> str:
    (log,) = (suite.path / "records").glob("*/*/agent.log")
    return log.read_text(errors="replace")


def agent_exit_code(suite: pytest.Pytester) -> object:
    (events,) = (suite.path / "records").glob("*/*/events.jsonl")
    ended = [json.loads(line) for line in events.read_text().splitlines() if "agent-ended" in line]
    return ended[0]["exit_code"]


def test_agent_process_tree_killed_mid_agent(suite: pytest.Pytester, bake_cache: Path,
                                             backend: str) -> None:
    marker = f"fault-{uuid.uuid4().hex[:8]}"
    write_task(suite.path / "tasks", "t")
    killer = kill_tree_when_seen(marker)
    result, props, status = run_trial(suite, backend, f"echo hello > /app/out.txt; sleep 300; : {marker}")
    killer.join()
    # The agent died by SIGKILL; what it left is still graded.
    assert props["reactbench.agent_ending"] == "exited-nonzero", props
    assert props["reactbench.verdict"] == "passed"
    assert status["status"] == "complete" and status["verdict"] == "passed"
    assert float(props["reactbench.duration.agent"]) < 60
    result.assert_outcomes(passed=1)
    assert_clean(suite, bake_cache)


def test_verifier_killed_mid_grading(suite: pytest.Pytester, bake_cache: Path, backend: str) -> None:
    marker = f"fault-{uuid.uuid4().hex[:8]}"
    # test.sh becomes a process whose command line the killer can find.
    write_task(suite.path / "tasks", "t",
               test_sh=f"#!/bin/bash\nexec bash -c 'echo grading; sleep 300; : {marker}'\n")
    killer = kill_tree_when_seen(marker)
    result, props, status = run_trial(suite, backend, agent="oracle")
    killer.join()
    result.stdout.fnmatch_lines(["*ERROR (VerifierKilledError): tests/test.sh was killed*"])
    assert props["reactbench.verdict"] == "error" and props["reactbench.failure"] == "VerifierKilledError"
    assert status["status"] == "complete" and status["verdict"] == "error"
    assert_clean(suite, bake_cache)


@pytest.mark.docker
def test_container_removed_from_outside(suite: pytest.Pytester, bake_cache: Path) -> None:
    marker = f"fault-{uuid.uuid4().hex[:8]}"
    write_task(suite.path / "tasks", "t")
    remover = remove_container_when_seen(marker)
    result, props, status = run_trial(suite, "docker", f"sleep 300; : {marker}")
    remover.join()
    result.stdout.fnmatch_lines(["*ERROR (SandboxError): *"])
    assert props["reactbench.verdict"] == "error" and props["reactbench.failure"] == "SandboxError"
    assert status["status"] == "complete" and status["verdict"] == "error"
    assert_clean(suite, bake_cache)


@pytest.mark.parametrize(
    ("command", "limits", "evidence"),
    [
        # Memory: the kernel kills the hog (SIGKILL) inside the sandbox's limit.
        ("node -e 'const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))'", "memory_mb = 256", 137),
        # /tmp is a 64 MiB tmpfs: filling it is ENOSPC, not a full host disk.
        ("dd if=/dev/zero of=/tmp/fill bs=1M count=4096", "storage_mb = 64", "No space left on device"),
    ],
    ids=["memory", "tmp"],
)
def test_resource_hogs_are_stopped_and_still_graded(suite: pytest.Pytester, bake_cache: Path,
                                                    backend: str, command: str, limits: str,
                                                    evidence: str | int) -> None:
    write_task(suite.path / "tasks", "t", extra_toml=f"[environment]\n{limits}\n")
    _, props, status = run_trial(suite, backend, f"echo hello > /app/out.txt; {command}")
    if isinstance(evidence, int):
        assert agent_exit_code(suite) == evidence
    else:
        assert evidence in agent_log(suite)
    assert props["reactbench.agent_ending"] == "exited-nonzero", props
    assert props["reactbench.verdict"] == "passed" and status["status"] == "complete"
    assert_clean(suite, bake_cache)


def test_fork_bomb_stops_at_the_pids_limit(suite: pytest.Pytester, bake_cache: Path,
                                           backend: str) -> None:
    marker = f"{uuid.uuid4().int % 100000 + 100000}"
    # Long enough for 2048 forks on a heavily loaded machine (a load of 20 needed more
    # than 20 s); bash backs off between failed forks and gives up well before.
    write_task(suite.path / "tasks", "t", agent_timeout=60)
    # 3000 processes would be harmless where nothing limits them; here the 2048th
    # fork fails, and the time limit ends the rest.
    _, props, status = run_trial(
        suite, backend, f"echo hello > /app/out.txt; for i in $(seq 3000); do sleep {marker} & done; wait")
    assert "Resource temporarily unavailable" in agent_log(suite)
    # bash gives up once its retries of a refused fork run out, or the time limit comes first.
    assert props["reactbench.agent_ending"] in ("timeout", "exited-nonzero")
    assert float(props["reactbench.duration.agent"]) < 60 + KILL_BOUND_SEC
    assert props["reactbench.verdict"] == "passed" and status["status"] == "complete"
    assert pids_with(f"sleep {marker}") == []
    assert_clean(suite, bake_cache)


def test_agent_that_never_exits_is_killed_within_the_bound(suite: pytest.Pytester, bake_cache: Path,
                                                           backend: str) -> None:
    write_task(suite.path / "tasks", "t", agent_timeout=2)
    _, props, status = run_trial(
        suite, backend, "echo hello > /app/out.txt; (setsid sleep 6001 &); sleep 6001")
    assert props["reactbench.agent_ending"] == "timeout"
    assert float(props["reactbench.duration.agent"]) < 2 + KILL_BOUND_SEC
    assert props["reactbench.verdict"] == "passed" and status["status"] == "complete"
    assert pids_with("sleep 6001") == []
    assert_clean(suite, bake_cache)


@pytest.mark.parametrize(
    ("test_sh", "failure", "message"),
    [
        ("#!/bin/bash\necho no reward\n", "RewardFileNotFoundError", "neither"),
        ("#!/bin/bash\necho '{bad' > /logs/verifier/reward.json\n", "RewardFileError",
         "is not valid JSON"),
        ("#!/bin/bash\n: > /logs/verifier/reward.json\n", "RewardFileError", "file is empty"),
        ('#!/bin/bash\necho \'{"reward": 1, "tests": 0}\' > /logs/verifier/reward.json\n',
         "RewardFileError", "reward is 1 while a gate failed"),
        ("#!/bin/bash\nsleep 600 & sleep 600\n", "VerifierTimeoutError", "did not finish within"),
    ],
    ids=["no-reward", "garbled", "empty", "inconsistent", "timeout"],
)
def test_verifier_breakdowns_are_errors(suite: pytest.Pytester, bake_cache: Path, backend: str,
                                        test_sh: str, failure: str, message: str) -> None:
    write_task(suite.path / "tasks", "t", test_sh=test_sh, verifier_timeout=2)
    result, props, status = run_trial(suite, backend, agent="oracle")
    result.stdout.fnmatch_lines([f"*ERROR ({failure}): *{message}*", "*No score*", "*1 error in*"])
    assert result.ret == 1
    assert props["reactbench.verdict"] == "error" and props["reactbench.failure"] == failure
    assert props["reactbench.reward"] == ""
    assert status["verdict"] == "error" and status["status"] == "complete"
    assert_clean(suite, bake_cache)


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ("FROM reactbench/system\nRUN echo broken step && exit 3\n",
         "*environment/Dockerfile*exit code 3*"),
        ("FROM reactbench/system\nCOPY missing.txt /app/\n", "*environment/Dockerfile*missing.txt*"),
    ],
    ids=["broken-step", "missing-copy-source"],
)
def test_bake_failures_are_errors_naming_the_step(suite: pytest.Pytester, bake_cache: Path,
                                                  backend: str, environment: str, message: str) -> None:
    write_task(suite.path / "tasks", "t", environment=environment)
    result, props, status = run_trial(suite, backend, agent="oracle")
    result.stdout.fnmatch_lines([f"*ERROR (BakeError): {message}"])
    assert props["reactbench.verdict"] == "error" and props["reactbench.failure"] == "BakeError"
    assert status["verdict"] == "error" and status["status"] == "complete"
    assert_clean(suite, bake_cache)
