"""The controls on every shipped task, for real: bubblewrap, Node, pnpm, Vitest,
React Doctor. oracle must score 1 and nop 0, under xdist, with JUnit properties."""

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_reactbench.results import Gate
from pytest_reactbench.tasks import find_tasks, load_task
from tests.helpers import junit_results

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in find_tasks(ROOT / "tasks"))


def test_every_shipped_task_loads_and_its_verifier_sees_the_agent_base() -> None:
    assert len(SHIPPED) >= 2
    for name in SHIPPED:
        task = load_task(ROOT / "tasks" / name)
        # The verifier bakes the same base source as the agent's workspace.
        env_app, tests_app = task.environment_dir / "app", task.tests_dir / "app"
        env_files = sorted(p.relative_to(env_app) for p in env_app.rglob("*") if p.is_file())
        tests_files = sorted(p.relative_to(tests_app) for p in tests_app.rglob("*") if p.is_file())
        assert env_files == tests_files, name
        for rel in env_files:
            assert (env_app / rel).read_bytes() == (tests_app / rel).read_bytes(), f"{name}: {rel}"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local"])
def test_controls_on_shipped_tasks(tmp_path: Path, backend: str) -> None:
    """On docker, the same verdicts are asserted of the same run over three engines
    (tests/sandbox/test_engine_pool.py), one of them the main engine."""
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--reactbench-agent=oracle,nop", f"--reactbench-sandbox={backend}",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert xml.exists(), proc.stdout + proc.stderr
    verdicts = {(r.task, r.agent): r for r in junit_results(xml)}
    assert set(verdicts) == {(t, a) for t in SHIPPED for a in ("oracle", "nop")}, proc.stdout
    for task in SHIPPED:
        oracle, nop = verdicts[(task, "oracle")], verdicts[(task, "nop")]
        assert oracle.verdict == "passed", proc.stdout[-4000:]
        assert oracle.grading.gates.get(Gate.REACT_DOCTOR) is True
        assert nop.verdict == "failed", proc.stdout[-4000:]
        assert nop.grading.gates.get(Gate.TESTS) is False
        assert oracle.provenance.backend == backend
    assert proc.returncode == 1  # the nop items fail, as they must
