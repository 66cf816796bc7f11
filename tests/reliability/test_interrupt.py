"""Ctrl-C in the middle of a trial: nothing left behind, records marked incomplete. So
for SIGTERM (a CI job cancelled), to the session or to xdist's controller alone."""

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.helpers import BACKENDS, write_task

#: How long each case's oracle sleeps: a length no other test uses (nor the other
#: case, which may run at the same time), so that a look for leftover processes sees
#: this case's sleep alone.
HANG_SECONDS = {"local": 5101, "docker": 5102}


@pytest.fixture(autouse=True)
def ctrl_c_reaches_the_sessions() -> Iterator[None]:
    """A test session started in the background of a shell without job control ignores
    SIGINT, and every process it starts inherits that: the sessions these tests press
    Ctrl-C on would never hear it. Each is started as from a terminal (a handler of
    Python's is reset to the default in the child)."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def hangs(seconds: int) -> str:
    """An oracle that hangs in `sleep seconds`."""
    return f"#!/bin/bash\necho started > /app/started\nsleep {seconds}\n"


def wait_for(predicate, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def interrupt(proc: subprocess.Popen[str], within: float, sig: int = signal.SIGINT) -> str:
    """Ctrl-C (or `sig`) to the session, and its output once it has ended (within
    `within` s). One that does not end is killed, so that it leaves nothing in the bake
    cache other tests share, and the failure shows what it was doing."""
    proc.send_signal(sig)
    try:
        output, _ = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"the session had not ended {within:g} s after Ctrl-C; what it said:\n{output[-4000:]}")
    return output


#: What each case sends, and the session's options. Each case's task and sleep are its
#: own, so that a look at the engine or the host sees its own alone.
SIGNALS = {"ctrl-c": (signal.SIGINT, []), "sigterm": (signal.SIGTERM, []),
           "sigterm-xdist": (signal.SIGTERM, ["-n", "2"])}


@pytest.mark.parametrize("case", SIGNALS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_mid_trial_leaves_nothing(tmp_path: Path, bake_cache: Path, backend: str, case: str) -> None:
    sig, extra = SIGNALS[case]
    seconds = HANG_SECONDS[backend] + list(SIGNALS).index(case) * 10
    task = f"hangs-{case}"
    write_task(tmp_path / "tasks", task, solve_sh=hangs(seconds), agent_timeout=600)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle", *extra,
         f"--reactbench-sandbox={backend}", f"--reactbench-cache={bake_cache}",
         f"--reactbench-records={tmp_path / 'records'}", f"--rootdir={tmp_path}",
         str(tmp_path / "tasks")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    events = tmp_path / "records"
    try:
        wait_for(lambda: any("agent-start" in p.read_text() for p in events.glob("*/*/events.jsonl")))
        time.sleep(1.0)
        # To the session's process alone: with xdist, its controller, not its workers.
        output = interrupt(proc, 120, sig)
    finally:
        proc.kill()
    assert proc.returncode == 2, output  # pytest's "interrupted"
    (status_file,) = events.glob(f"*/{task}__oracle__1/status.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "incomplete", (status, output[-3000:])
    if backend == "docker":
        client = docker.from_env()
        left = client.containers.list(all=True, filters={"label": f"reactbench.task={task}"})
        assert left == [], [c.name for c in left]
    else:
        assert list((bake_cache / "local" / "sandboxes").iterdir()) == []
        bwrap = subprocess.run(["pgrep", "-fx", f"sleep {seconds}"], capture_output=True, text=True)
        assert bwrap.stdout == ""


@pytest.mark.docker
def test_ctrl_c_mid_bake_stops_the_session_and_the_build(tmp_path: Path, bake_cache: Path) -> None:
    """Ctrl-C while the session bakes ahead: pytest ends at once, not when the build
    under way is done, and the engine drops the build (its step's container goes)."""
    token = f"slow-bake-{time.time_ns()}"
    write_task(tmp_path / "tasks", "slow", environment=(
        f"FROM reactbench/system\nWORKDIR /app\nRUN echo {token} && sleep 300\n"))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    client = docker.from_env()

    def building() -> list[str]:
        # The engine's list as it is (containers come and go while it is read).
        return [c["Id"] for c in client.api.containers(all=True) if token in c.get("Command", "")]

    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle",
         "--reactbench-sandbox=docker", f"--reactbench-cache={bake_cache}",
         f"--reactbench-records={tmp_path / 'records'}", f"--rootdir={tmp_path}",
         str(tmp_path / "tasks")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for(lambda: bool(building()), timeout=600)
        output = interrupt(proc, 60)
        assert proc.returncode == 2, output  # pytest's "interrupted"
        wait_for(lambda: not building(), timeout=60)
    finally:
        proc.kill()
        client.close()
