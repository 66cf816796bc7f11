"""--reactbench-timeout-multiplier scales each task's agent and verifier time limits, and
the run's manifests say so."""

import json

import pytest

from tests.helpers import write_task

SLOW_AGENT = "--reactbench-agent-command=slow=sleep 3; echo hello > /app/out.txt"


@pytest.mark.parametrize(("args", "ini", "outcome", "limit"), [
    ((), "", "timeout", 2.0),
    (("--reactbench-timeout-multiplier=3",), "", "completed", 6.0),
    ((), "reactbench_timeout_multiplier = 2.5", "completed", 5.0),
])
def test_the_agent_gets_the_scaled_time(suite: pytest.Pytester, args: tuple[str, ...], ini: str,
                                        outcome: str, limit: float) -> None:
    if ini:
        ini_file = suite.path / "tox.ini"
        ini_file.write_text(ini_file.read_text().rstrip("\n") + "\n" + ini + "\n")
    write_task(suite.path / "tasks", "alpha", agent_timeout=2)
    result = suite.runpytest(SLOW_AGENT, "--reactbench-agent=slow", *args)
    record = next((suite.path / "records").glob("*/alpha__slow__1"))
    status = json.loads((record / "status.json").read_text())
    assert status["agent_run"]["ending"] == outcome
    manifest = json.loads((record / "manifest.json").read_text())
    assert manifest["timeouts"] == {"agent": limit, "verifier": 30 * limit / 2}
    run = json.loads((record.parent / "manifest.json").read_text())
    assert run["timeout_multiplier"] == limit / 2
    result.assert_outcomes(passed=1) if outcome == "completed" else result.assert_outcomes(failed=1)


def test_a_bad_multiplier_is_a_usage_error(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=nop", "--reactbench-timeout-multiplier=0")
    result.stderr.fnmatch_lines(["*--reactbench-timeout-multiplier: 0 must be above 0 and at most 100*"])
