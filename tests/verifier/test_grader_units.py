"""The grader's unit tests (tests/verifier/grader/*.test.mjs, Node's test runner), one
item per file, so that `pytest` stays the one command: an item fails with what Node
printed. The grader's modules are in pytest_reactbench/verifier/grader/."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent / "grader"
FILES = sorted(UNITS.glob("*.test.mjs"))


def test_the_grader_has_unit_tests() -> None:
    assert len(FILES) >= 5, FILES


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
@pytest.mark.parametrize("file", FILES, ids=[file.name for file in FILES])
def test_grader_units(file: Path) -> None:
    # The grader's folders default to an image's; a variable of the caller's moving
    # them would change what the tests read.
    env = {key: value for key, value in os.environ.items() if not key.startswith("REACTBENCH_")}
    proc = subprocess.run(["node", "--test", str(file)], cwd=UNITS, env=env, capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"node --test {file.name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}",
                    pytrace=False)
