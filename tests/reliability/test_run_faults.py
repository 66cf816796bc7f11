"""Faults of the run itself: a worker killed mid-trial, more workers than cores, and
two sessions sharing one bake cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import BACKENDS, write_task
from tests.reliability.faults import leftovers

KILLER_CONFTEST = """
import os, signal
import pytest
from pytest_reactbench.agents import Agent, AgentOutcome


class Killer(Agent):
    name = "killer"

    def run(self, ctx):
        ctx.sandbox.exec("echo started > /app/started")
        os.kill(os.getpid(), signal.SIGKILL)  # the xdist worker dies mid-trial


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"killer": lambda arg, settings: Killer()}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_killed_worker_is_an_error_and_the_run_completes(suite: pytest.Pytester, bake_cache: Path,
                                                            backend: str) -> None:
    suite.makeconftest(KILLER_CONFTEST)
    for name in ("alpha", "beta"):
        write_task(suite.path / "tasks", name)
    result = suite.runpytest_subprocess("--reactbench-agent=killer,oracle", "-n", "2",
                                        f"--reactbench-sandbox={backend}")
    result.stdout.fnmatch_lines(["*worker*crashed while running*killer*", "killer*0/2*2/2*unranked*"])
    assert "2 failed, 2 passed" in result.stdout.lines[-1]
    statuses = [json.loads(p.read_text()) for p in (suite.path / "records").glob("*/*killer*/status.json")]
    assert statuses and {s["status"] for s in statuses} == {"incomplete"}
    # The dead workers' sandboxes (containers, directories, cgroups) were swept.
    assert leftovers(suite.path / "records", bake_cache) == []


def test_more_workers_than_cores(suite: pytest.Pytester) -> None:
    for name in ("a1", "a2", "a3", "a4"):
        write_task(suite.path / "tasks", name)
    result = suite.runpytest_subprocess("--reactbench-agent=oracle,nop", "-n", "4")
    result.assert_outcomes(passed=4, failed=4)
    # Eight concurrent trials, eight records of their own, all complete.
    statuses = [json.loads(p.read_text()) for p in (suite.path / "records").glob("*/*/status.json")]
    assert len(statuses) == 8 and {s["status"] for s in statuses} == {"complete"}


def test_two_sessions_share_one_bake_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    runs = []
    for name in ("one", "two"):
        root = tmp_path / name
        write_task(root / "tasks", "shared")
        (root / "pytest.ini").write_text("[pytest]\n")
        runs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle,nop",
             f"--reactbench-cache={cache}", f"--reactbench-records={root / 'records'}", f"--rootdir={root}",
             str(root / "tasks")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    for out in outputs:
        assert "1 failed, 1 passed" in out, out
    # One bake of each image between them: the other session waited and reused it.
    images = [p for p in (cache / "local" / "images").iterdir() if p.is_dir()]
    assert len(images) == 2, images
    assert list((cache / "local" / "sandboxes").iterdir()) == []
