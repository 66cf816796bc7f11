"""Progress lines: each bake decision once per session, serial and under xdist."""

from collections import Counter

import pytest

from tests.helpers import write_task


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_one_line_per_bake_decision(suite: pytest.Pytester, workers: list[str]) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    # A subprocess: the workers' stderr is the one the lines are written to.
    result = suite.runpytest_subprocess("--reactbench-agent=oracle,nop", *workers)
    result.assert_outcomes(passed=3, failed=3)
    lines = [line.split("] ", 1)[1] for line in result.outlines + result.errlines
             if line.startswith("[reactbench")]
    assert lines, result.errlines
    # The three tasks share both images: two decisions, however many items asked.
    assert len([line for line in lines if "reusing baked image" in line]) <= 2, lines
    assert [line for line, n in Counter(lines).items() if n > 1] == []
    # The bookkeeping that made it so is gone with the session.
    (run,) = (suite.path / "records").iterdir()
    assert not (run / ".progress").exists()
