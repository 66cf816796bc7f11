"""Ctrl-C in the middle of a trial: nothing left behind, records marked incomplete."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.conftest import BACKENDS, write_task

HANGS = "#!/bin/bash\necho started > /app/started\nsleep 600\n"


def wait_for(predicate, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_mid_trial_leaves_nothing(tmp_path: Path, bake_cache: Path, backend: str) -> None:
    write_task(tmp_path / "tasks", "hangs", solve_sh=HANGS, agent_timeout=600)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle",
         f"--reactbench-sandbox={backend}", f"--reactbench-cache={bake_cache}",
         f"--reactbench-records={tmp_path / 'records'}", f"--rootdir={tmp_path}",
         str(tmp_path / "tasks")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    events = tmp_path / "records"
    wait_for(lambda: any("agent-start" in p.read_text() for p in events.glob("*/*/events.jsonl")))
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, output  # pytest's "interrupted"
    (status_file,) = events.glob("*/hangs__oracle__1/status.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "incomplete", status
    if backend == "docker":
        client = docker.from_env()
        left = client.containers.list(all=True, filters={"label": "reactbench.task=hangs"})
        assert left == [], [c.name for c in left]
    else:
        assert list((bake_cache / "local" / "sandboxes").iterdir()) == []
        bwrap = subprocess.run(["pgrep", "-f", "sleep 600"], capture_output=True, text=True)
        assert bwrap.stdout == ""
