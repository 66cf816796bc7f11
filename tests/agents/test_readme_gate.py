"""The README's CI gate for agent changes, run as written: its `agent-regression-gate`
job's two steps, read out of README.md, in a project that holds one shipped task, with
the key present (and the scripted model server standing in for the API: its URL is the
only variable the README does not set), then without the key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_reactbench.results import TrialResult
from tests.agents.model_server import ModelServer, Script
from tests.agents.test_cli_agents import KEY, SHIPPED, bridge_gateway
from tests.helpers import junit_results

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def readme_gate_job() -> dict[str, dict[str, Any]]:
    """The steps of the README's `agent-regression-gate` workflow, by name."""
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```yaml\n")[1:]]
    workflow = next(yaml.safe_load(b) for b in blocks if b.startswith("name: agent-regression-gate"))
    steps = workflow["jobs"]["reactbench"]["steps"]
    return {step["name"]: step for step in steps if "name" in step}


def step(job: dict[str, dict[str, Any]], prefix: str, project: Path,
         env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One step's `run:` in bash, as GitHub Actions runs it, in the project."""
    name = next(n for n in job if n.startswith(prefix))
    return subprocess.run(["bash", "-e", "-c", job[name]["run"]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=1800)


def test_the_readme_ci_gate_works_as_written(tmp_path: Path, bake_cache: Path) -> None:
    job = readme_gate_job()
    run_env = job[next(n for n in job if n.startswith("Run the suite"))]["env"]
    assert set(run_env) == {"ANTHROPIC_API_KEY"}, run_env  # the only variable it needs
    project = tmp_path / "project"
    shutil.copytree(SHIPPED, project / "tasks" / SHIPPED.name)
    (project / "ci").mkdir()
    (project / "pytest.ini").write_text(f"[pytest]\nreactbench_cache = {bake_cache}\n")
    right = (SHIPPED / "solution" / "solve.sh").read_text()
    counter = right.split("<<'TSX'\n", 1)[1].rsplit("TSX\n", 1)[0]
    base = (SHIPPED / "environment" / "app" / "src" / "Counter.tsx").read_text()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PYTEST_"))}

    def run_suite(answer: str) -> tuple[subprocess.CompletedProcess[str], dict[str, TrialResult]]:
        script = Script(answers={"Add a **Reset** button": {"src/Counter.tsx": answer}}, key=KEY)
        (project / "new.xml").unlink(missing_ok=True)
        with ModelServer(script, host=bridge_gateway()) as server:
            done = step(job, "Run the suite", project,
                        {**env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url})
        print(done.stdout[-4000:], done.stderr[-2000:])
        cases = {f"{r.task}#{r.attempt}": r for r in junit_results(project / "new.xml")}
        return done, cases

    # The main branch's run: the agent solves the task in each of its three attempts.
    done, cases = run_suite(counter)
    assert done.returncode == 0
    assert sorted(cases) == ["counter-reset#1", "counter-reset#2", "counter-reset#3"]
    assert {r.verdict for r in cases.values()} == {"passed"}
    assert all((r.agent_run.output_tokens or 0) > 0 for r in cases.values())
    assert list((project / ".reactbench" / "records").glob("*/counter-reset__claude-code__3/status.json"))
    shutil.copy(project / "new.xml", project / "ci" / "baseline.xml")
    same = step(job, "Gate on the baseline", project, env)
    assert same.returncode == 0, same.stdout + same.stderr

    # The changed agent leaves the counter as it was: its items fail, the run step
    # goes on (pytest's exit 1), and the gate step fails the job on the regression.
    done, cases = run_suite(base)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {r.verdict for r in cases.values()} == {"failed"}
    gate = step(job, "Gate on the baseline", project, env)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "1 regression(s)" in gate.stdout, gate.stdout
    assert "counter-reset [claude-code]: worse (3/3 -> 0/3" in gate.stdout, gate.stdout

    # Without the key the run step stops before any trial, naming it, and fails the job.
    (project / "new.xml").unlink()
    trials = len(list((project / ".reactbench" / "records").glob("*/*/status.json")))
    keyless = step(job, "Run the suite", project, env)
    # (pytest's usage error, exit 4, is not the `|| [ $? -eq 1 ]` the step lets through.)
    assert keyless.returncode == 1, keyless.stdout + keyless.stderr
    assert "agent 'claude-code': ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is not set" in keyless.stderr, \
        keyless.stderr
    assert len(list((project / ".reactbench" / "records").glob("*/*/status.json"))) == trials
