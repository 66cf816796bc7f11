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


def own_pid_namespace(env: dict[str, str]) -> list[str]:
    """As root, a file's tests run in a PID namespace of their own: the grader ends its
    test room by killing every process of the room's user it can see, which on the host
    are every docker verifier's rooms (the same uid, 65534), graded beside the suite.
    The tests that end a room run only there (GRADER_TESTS_OWN_PIDS)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    env["GRADER_TESTS_OWN_PIDS"] = "1"
    return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def test_the_grader_has_unit_tests() -> None:
    assert len(FILES) >= 5, FILES


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
@pytest.mark.parametrize("file", FILES, ids=[file.name for file in FILES])
def test_grader_units(file: Path) -> None:
    # The grader's folders default to an image's; a variable of the caller's moving
    # them would change what the tests read.
    env = {key: value for key, value in os.environ.items() if not key.startswith("REACTBENCH_")}
    # A process of the room's user outside the tests, as a docker verifier's room is.
    bystander = room_user_process()
    try:
        proc = subprocess.run([*own_pid_namespace(env), "node", "--test", str(file)], cwd=UNITS, env=env,
                              capture_output=True, text=True, timeout=120)
        if bystander is not None:
            assert bystander.poll() is None, f"{file.name} killed a process of the room's user outside it"
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
    if proc.returncode != 0:
        pytest.fail(f"node --test {file.name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}",
                    pytrace=False)


def room_user_process() -> subprocess.Popen[bytes] | None:
    """A sleeper of the test room's user (root alone can start one)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    return subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "300"])
