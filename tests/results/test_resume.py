"""Resuming a run, for real on the local backend: the scored trials are kept from
their records, the missing, errored and incomplete ones run again into the same run
folder, and one leaderboard covers the whole run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results import TrialRecord
from pytest_reactbench.results.load import from_records
from tests.helpers import junit_results, write_task


def solver_failing_on_beta(flag: str, fault: str) -> str:
    """A conftest whose agent solves every task but beta, where it raises `fault`
    while a file named `flag` sits beside it."""
    return f"""
from pathlib import Path

import pytest
from pytest_reactbench.agents import Agent, AgentOutcome
from pytest_reactbench.sandbox.errors import SandboxError


class Solver(Agent):
    name = "solver"

    def run(self, ctx):
        if ctx.task.id == "beta" and Path(__file__).with_name("{flag}").exists():
            raise {fault}
        ctx.sandbox.exec("echo hello > /app/out.txt")
        return AgentOutcome("completed", 0)


@pytest.hookimpl
def pytest_reactbench_agents():
    return {{"solver": lambda arg, settings: Solver()}}
"""


BREAKS_ON_BETA = solver_failing_on_beta("break-beta", 'SandboxError("the engine went away (injected)")')


def _trials(run: Path) -> list[str]:
    return sorted(p.name for p in run.iterdir() if (p / "status.json").is_file())


def test_resume_runs_only_what_has_no_score(suite: pytest.Pytester) -> None:
    suite.makeconftest(BREAKS_ON_BETA)
    for name in ("alpha", "beta", "gamma", "delta"):
        write_task(suite.path / "tasks", name)
    (suite.path / "break-beta").write_text("")
    # The first session: beta errors, and gamma is never reached (what a dead machine
    # leaves: no record of it at all).
    first = suite.runpytest("--reactbench-agent=solver,nop")
    first.assert_outcomes(passed=3, failed=4, errors=1)
    (run,) = (suite.path / "records").iterdir()
    for gone in run.glob("gamma__*"):
        shutil.rmtree(gone)
    # delta's solver trial was cut short (what a killed worker leaves).
    TrialRecord(run / "delta__solver__1").mark_incomplete("its process (1) died")
    before = _trials(run)
    (suite.path / "break-beta").unlink()

    result = suite.runpytest("--reactbench-resume=last", "--junitxml=resumed.xml", "-v")
    # The agents come from the run; kept trials report their recorded verdicts.
    result.assert_outcomes(passed=4, failed=4)
    result.stdout.fnmatch_lines([
        f"resumed run {run.name}: 4 scored trial(s) kept from its records, 4 run in this session",
        "*alpha*pass 1.00*FAIL 0.00*", "*beta*pass 1.00*FAIL 0.00*",
        "*delta*pass 1.00*FAIL 0.00*", "*gamma*pass 1.00*FAIL 0.00*",
    ])
    assert list((suite.path / "records").iterdir()) == [run]
    after = _trials(run)
    # Nothing was overwritten; only the unscored and the missing trials ran.
    assert set(before) <= set(after)
    assert sorted(set(after) - set(before)) == [
        "beta__solver__1.1", "delta__solver__1.1", "gamma__nop__1", "gamma__solver__1"]
    # The kept trials' JUnit entries point at their first records.
    kept = {(r.task, r.agent): r for r in junit_results(suite.path / "resumed.xml")}
    assert kept["alpha", "nop"].record == str(run / "alpha__nop__1")
    assert kept["beta", "solver"].record == str(run / "beta__solver__1.1")
    # One leaderboard for the whole run, from the session and from the records alike.
    report = (run / "report.md").read_text()
    assert "| solver | 100% |" in report and "| 4/4 | 0/4 |" in report
    results = from_records(run)
    assert len(results) == 8 and all(r.valid for r in results)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["agents"] == ["solver", "nop"] and manifest["resumed"][0]["kept"] == 4
    # The run's pages: one per trial that counts (beta's errored record is superseded).
    assert sorted(p.name for p in (run / "trials").iterdir()) == [
        f"{name}.html" for name in sorted(set(after) - {"beta__solver__1", "delta__solver__1"})]

    # Resumed again (through xdist workers this time), nothing is left to run.
    again = suite.runpytest(f"--reactbench-resume={run.name}", "-n", "2")
    again.assert_outcomes(passed=4, failed=4)
    again.stdout.fnmatch_lines(["resumed run *: 8 scored trial(s) kept from its records, 0 run*"])
    assert _trials(run) == after


def test_resume_of_an_unknown_run_says_which_exist(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-resume=last")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reactbench-resume=last: *records holds no run to resume*"])
    suite.runpytest("--reactbench-agent=nop").assert_outcomes(failed=1)
    result = suite.runpytest("--reactbench-resume=nope")
    result.stderr.fnmatch_lines(["*--reactbench-resume: no run 'nope' in *records (the latest: 2*; "
                                 "or use 'last')"])
    # A record that cannot be read stops the resumption, naming it.
    (run,) = (suite.path / "records").iterdir()
    (run / "alpha__nop__1" / "status.json").write_text("{garbled")
    result = suite.runpytest("--reactbench-resume=last")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--reactbench-resume: *alpha__nop__1: unreadable record*"])


def test_a_resumed_run_keeps_its_attempts_and_refuses_other_options(suite: pytest.Pytester) -> None:
    suite.makeconftest(BREAKS_ON_BETA)
    for name in ("alpha", "beta"):
        write_task(suite.path / "tasks", name)
    (suite.path / "break-beta").write_text("")
    suite.runpytest("--reactbench-agent=solver", "--reactbench-attempts=2").assert_outcomes(
        passed=2, errors=2)
    (run,) = (suite.path / "records").iterdir()
    (suite.path / "break-beta").unlink()
    # Without --reactbench-attempts, the run's two attempts, not the default one.
    result = suite.runpytest("--reactbench-resume=last")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        f"resumed run {run.name}: 2 scored trial(s) kept from its records, 2 run in this session"])
    # The run's report is rewritten over what the run had: two attempts a task.
    assert "(k=2)" in (run / "report.md").read_text()
    # An option that would score the run under other settings is refused by name.
    for option, said in (("--reactbench-attempts=3", "--reactbench-attempts=2"),
                         ("--reactbench-agent=nop", "--reactbench-agent=solver"),
                         ("--reactbench-timeout-multiplier=2", "--reactbench-timeout-multiplier=1")):
        refused = suite.runpytest("--reactbench-resume=last", option)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines([f"*--reactbench-resume: run {run.name} was made with {said}, "
                                      f"and this command gives {option}; a resumed run keeps its own*"])
    # The same value, given again, is no conflict.
    suite.runpytest("--reactbench-resume=last", "--reactbench-attempts=2").assert_outcomes(passed=4)
    # Resuming some of its tasks never makes the run's report smaller.
    whole = (run / "report.md").read_text()
    assert "beta" in whole
    suite.runpytest("--reactbench-resume=last", "tasks/alpha").assert_outcomes(passed=2)
    assert (run / "report.md").read_text() == whole


# What Ctrl-C does to the session while beta runs.
INTERRUPTS_ON_BETA = solver_failing_on_beta("interrupt", "KeyboardInterrupt")


def test_an_interrupted_run_says_what_never_ran_and_how_to_resume(suite: pytest.Pytester) -> None:
    suite.makeconftest(INTERRUPTS_ON_BETA)
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    (suite.path / "interrupt").write_text("")
    # In a process of its own: an interrupt in-process would stop this session too.
    result = suite.runpytest_subprocess("--reactbench-agent=solver", "--junitxml=r.xml")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (run,) = (suite.path / "records").iterdir()
    said = (f"2 of 3 item(s) never ran (interrupted); resume the run with: "
            f"pytest --reactbench-resume={run.name}")
    result.stdout.fnmatch_lines([f"reactbench: INCOMPLETE run: {said}"])
    # pytest's own last line counts what never ran: no green "1 passed" over it.
    assert "2 never ran" in result.stdout.lines[-1], result.stdout.lines[-1]
    assert f"**INCOMPLETE**: {said}" in (run / "report.md").read_text()
    assert json.loads((run / "manifest.json").read_text())["incomplete"] == said
    assert f'name="reactbench.incomplete" value="{said}"' in (suite.path / "r.xml").read_text()
    # A report made from the JUnit file alone says so too.
    assert main(["report", str(suite.path / "r.xml"), "--out", str(suite.path / "from-junit")]) == 0
    assert f"**INCOMPLETE**: run {run.name}: {said}" in (suite.path / "from-junit" / "report.md").read_text()
    assert "INCOMPLETE" in (suite.path / "from-junit" / "report.html").read_text()

    # The printed command resumes it, and the run is whole again.
    (suite.path / "interrupt").unlink()
    resumed = suite.runpytest(said.rpartition(": ")[2].removeprefix("pytest "))
    resumed.assert_outcomes(passed=3)
    assert "INCOMPLETE" not in resumed.stdout.str()
    assert "INCOMPLETE" not in (run / "report.md").read_text()
    assert "incomplete" not in json.loads((run / "manifest.json").read_text())


def test_resuming_without_paths_runs_only_the_run_s_own_tasks(suite: pytest.Pytester) -> None:
    suite.makeconftest(INTERRUPTS_ON_BETA)
    for name in ("alpha", "beta", "gamma", "delta"):
        write_task(suite.path / "tasks", name)
    (suite.path / "interrupt").write_text("")
    # A run of two of the four tasks, interrupted on the second.
    first = suite.runpytest_subprocess("--reactbench-agent=solver", "tasks/alpha", "tasks/beta")
    assert first.ret == pytest.ExitCode.INTERRUPTED
    (run,) = (suite.path / "records").iterdir()
    (suite.path / "interrupt").unlink()
    # A path outside the run is refused by name, and nothing runs.
    refused = suite.runpytest("--reactbench-resume=last", "tasks/gamma")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        f"*--reactbench-resume: run {run.name} was made of tasks/alpha, tasks/beta, and this command "
        "gives tasks/gamma, which is not in it; a resumed run keeps its own tasks*"])
    assert _trials(run) == ["alpha__solver__1", "beta__solver__1"]
    # The README's line, as written: exactly the missing trial runs.
    resumed = suite.runpytest(f"--reactbench-resume={run.name}")
    resumed.assert_outcomes(passed=2)
    resumed.stdout.fnmatch_lines([f"resumed run {run.name}: 1 scored trial(s) kept from its records, "
                                  "1 run in this session"])
    assert _trials(run) == ["alpha__solver__1", "beta__solver__1", "beta__solver__1.1"]
    report = (run / "report.md").read_text()
    assert "gamma" not in report and "delta" not in report and "INCOMPLETE" not in report
    # Some of its tasks may be named (nothing is left to run in them).
    suite.runpytest("--reactbench-resume=last", "tasks/beta").assert_outcomes(passed=1)
    assert _trials(run) == ["alpha__solver__1", "beta__solver__1", "beta__solver__1.1"]


WAITS = """
import time
from pathlib import Path

import pytest
from pytest_reactbench.agents import Agent, AgentOutcome


class Waiter(Agent):
    name = "waiter"

    def run(self, ctx):
        deadline = time.time() + 60
        while not Path(__file__).with_name("go").exists() and time.time() < deadline:
            time.sleep(0.1)
        ctx.sandbox.exec("echo hello > /app/out.txt")
        return AgentOutcome("completed", 0)


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"waiter": lambda arg, settings: Waiter()}
"""


def test_a_run_in_progress_is_not_resumed_and_last_is_the_last_that_is_not(suite: pytest.Pytester) -> None:
    suite.makeconftest(WAITS)
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=nop").assert_outcomes(failed=1)
    (ended,) = (suite.path / "records").iterdir()
    # Another terminal's run, its agent at work.
    live = subprocess.Popen([sys.executable, "-m", "pytest", "--reactbench-agent=waiter"], cwd=suite.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not [p for p in (suite.path / "records").glob("*/alpha__waiter__1")]:
            assert time.time() < deadline and live.poll() is None, "the run did not start"
            time.sleep(0.1)
        (running,) = [p for p in (suite.path / "records").iterdir() if p != ended]
        refused = suite.runpytest(f"--reactbench-resume={running.name}")
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines([f"*--reactbench-resume: run {running.name} is in progress, "
                                      f"pid {live.pid}*"])
        # `last` is the last run that is not running, named before anything runs.
        resumed = suite.runpytest("--reactbench-resume=last")
        resumed.assert_outcomes(failed=1)
        assert resumed.stdout.lines.index(next(line for line in resumed.stdout.lines if line.startswith(
            f"reactbench: resuming run {ended.name} "))) < resumed.stdout.lines.index(
            next(line for line in resumed.stdout.lines if "alpha" in line))
        assert _trials(running) == ["alpha__waiter__1"]
    finally:
        (suite.path / "go").write_text("")
        assert live.wait(timeout=120) == 0
    # Once it ended, it can be resumed (nothing is left to run).
    suite.runpytest(f"--reactbench-resume={running.name}").assert_outcomes(passed=1)
