"""benchmarks/sweep.py: one command runs a suite with oracle and nop, resumes the same
run on the next call, and prints the table with a cause for every task that did not
give oracle 1 / nop 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import write_task

ROOT = Path(__file__).resolve().parents[2]


def sweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_sweep_resumes_its_run_and_tables_what_each_task_gave(tmp_path: Path) -> None:
    tasks = tmp_path / "suite"
    write_task(tasks, "alpha")
    # No package.json to install from: the bake fails.
    write_task(tasks, "beta",
               environment="FROM reactbench/system\nWORKDIR /app\nRUN pnpm install --frozen-lockfile\n")
    state = ["--state", str(tmp_path / "state"), "--backend", "local"]

    first = sweep(tmp_path, str(tasks), *state)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    run = (tmp_path / "state" / "run").read_text().strip()
    rows = {line.split()[0]: line for line in first.stdout.splitlines() if line.startswith(("alpha", "beta"))}
    assert rows["alpha"].split()[1:6] == ["-", "passed", "(1)", "failed", "(0)"], rows["alpha"]
    assert rows["beta"].split()[1] == "pnpm", rows["beta"]
    assert "error (BakeError)" in rows["beta"] and "oracle: " in rows["beta"], rows["beta"]
    assert "environment/Dockerfile:3" in rows["beta"], rows["beta"]
    assert "1 of 2 task(s) give oracle 1 / nop 0" in first.stdout

    # Mended, the next call resumes the same run: alpha is kept, beta runs again.
    write_task(tmp_path / "mended", "beta")
    (tasks / "beta" / "environment" / "Dockerfile").write_text(
        (tmp_path / "mended" / "beta" / "environment" / "Dockerfile").read_text())
    second = sweep(tmp_path, str(tasks), *state)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"--reactbench-resume={run}" in second.stdout
    assert "2 scored trial(s) kept from its records, 2 run in this session" in second.stdout
    assert (tmp_path / "state" / "run").read_text().strip() == run
    assert "2 of 2 task(s) give oracle 1 / nop 0" in second.stdout

    # The table alone runs nothing.
    shown = sweep(tmp_path, str(tasks), *state, "--table")
    assert "sweep: " not in shown.stdout and "2 of 2 task(s) give oracle 1 / nop 0" in shown.stdout
