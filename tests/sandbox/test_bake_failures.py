"""A bake that fails is built once a session: the threads of one process and the
processes of one session (xdist's workers) that wait on its lock learn of the
failure instead of building it again; a later session tries again."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.local import LocalBackend
from tests.sandbox.helpers import recipe

#: A step slow enough that every other bake is waiting on the lock when it fails.
FAILING = "FROM reactbench/system\nRUN echo {tag} && sleep 2 && exit 3\n"


def starts(lines: list[str]) -> int:
    """How many times the failing step began, by the bakes' progress lines."""
    return sum(1 for line in lines if ": step " in line and " RUN echo " in line)


def test_a_failed_bake_is_not_built_again_by_a_thread_waiting_on_it(tmp_path: Path) -> None:
    backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={}))
    r = recipe(tmp_path, FAILING.format(tag=tmp_path.name))
    lines: list[str] = []
    errors: list[str] = []

    def bake() -> None:
        try:
            backend.bake(r, lines.append)
        except BakeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=bake) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert starts(lines) == 1, lines
    assert len(errors) == 2 and errors[0] == errors[1] and "exit code 3" in errors[0]


BAKE = """
import sys
from pathlib import Path
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.base import ImageRecipe
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.plugin.options import environment_sandbox_options
cache, session, dockerfile = (Path(a) for a in sys.argv[1:4])
backend = LocalBackend(environment_sandbox_options(cache=cache, image_map={}, session_dir=session))
try:
    backend.bake(ImageRecipe("test", dockerfile, dockerfile.parent), lambda line: print(line, flush=True))
except BakeError as exc:
    print("failed:", str(exc).splitlines()[0], flush=True)
"""


def bake_in_processes(count: int, cache: Path, session: Path, dockerfile: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    processes = [subprocess.Popen([sys.executable, "-c", BAKE, str(cache), str(session), str(dockerfile)],
                                  stdout=subprocess.PIPE, text=True, env=env) for _ in range(count)]
    lines: list[str] = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        lines += out.splitlines()
    return lines


def test_a_failed_bake_is_built_once_by_the_processes_of_a_session(tmp_path: Path) -> None:
    r = recipe(tmp_path, FAILING.format(tag=tmp_path.name))
    cache = tmp_path / "cache"
    lines = bake_in_processes(2, cache, tmp_path / "session-a", r.dockerfile)
    assert starts(lines) == 1, lines
    assert sum(1 for line in lines if line.startswith("failed:") and "exit code 3" in line) == 2, lines
    # Another session (its own folder) tries again: what failed may have been passing.
    again = bake_in_processes(1, cache, tmp_path / "session-b", r.dockerfile)
    assert starts(again) == 1, again


@pytest.mark.parametrize("scope", ["thread", "process"])
def test_the_recorded_failure_names_the_first_cause(tmp_path: Path, scope: str) -> None:
    """What a waiting bake raises is the failure itself, not a generic refusal."""
    backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={},
                                                       session_dir=tmp_path / "session"))
    r = recipe(tmp_path, "FROM reactbench/system\nRUN echo broken-step && exit 4\n")
    with pytest.raises(BakeError) as first:
        backend.bake(r, lambda _: None)
    other = backend if scope == "thread" else LocalBackend(
        environment_sandbox_options(cache=tmp_path / "cache", image_map={}, session_dir=tmp_path / "session"))
    lines: list[str] = []
    with pytest.raises(BakeError) as second:
        other.bake(r, lines.append)
    assert str(second.value) == str(first.value) and "broken-step" in str(second.value)
    assert starts(lines) == 0
