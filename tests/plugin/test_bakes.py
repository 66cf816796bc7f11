"""The session's bakes: planned before the first trial and run side by side, a line
per step with its elapsed time, and a summary at the end (terminal and bakes.json)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pytest_reactbench.plugin import bakes
from pytest_reactbench.plugin.bakes import summary_lines
from pytest_reactbench.sandbox.downloads import Traffic
from tests.helpers import write_task


def test_the_summary_counts_each_image_once_by_how_it_was_had() -> None:
    records = [
        # Side by side: each bake's figures count what the other fetched meanwhile.
        {"name": "a/environment", "key": "k1", "how": "baked", "seconds": 30.0,
         "fetched_bytes": 5_000_000, "served_bytes": 9_000_000},
        {"name": "b/environment", "key": "k2", "how": "baked", "seconds": 10.0,
         "fetched_bytes": 5_000_000, "served_bytes": 9_000_000},
        {"name": "system", "key": "k3", "how": "pulled", "seconds": 4.0},
        {"name": "stand-in", "key": "k4", "how": "reused", "seconds": 0.0},
    ]
    # The session's packages are the download cache's own counts.
    assert summary_lines(records, Traffic(fetched_bytes=5_000_000, served_bytes=12_000_000)) == [
        "2 image(s) baked here: 40 s in all, the longest a/environment (30 s)",
        "1 image(s) pulled from the image registry: 4 s in all, the longest system (4 s)",
        "1 image(s) reused",
        "packages: 12.0 MB served to bakes by the download cache, 5.0 MB of it fetched from the registry",
    ]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_bakes_of_different_tasks_run_side_by_side_before_the_trials(
        suite: pytest.Pytester, workers: list[str]) -> None:
    unique = uuid.uuid4().hex
    for name in ("slow-a", "slow-b"):
        # A step that takes a while and a key of its own (nothing to reuse).
        write_task(suite.path / "tasks", name, environment=(
            "FROM reactbench/system\nWORKDIR /app\n"
            f"RUN echo {name}-{unique} > /app/id && sleep 3\n"))
    result = suite.runpytest_subprocess("--reactbench-agent=oracle", *workers)
    result.assert_outcomes(passed=2)
    lines = [line.split("] ", 1)[1] for line in result.outlines + result.errlines
             if line.startswith("[reactbench")]
    # Both tasks' images (the verifiers' may be baked already, by another test).
    assert any(line.startswith("baking ") and line.endswith(" image(s), 2 at a time")
               for line in lines), lines
    # Both bakes were under way before either ended.
    started = [n for n, line in enumerate(lines) if "RUN echo slow-" in line]
    ended = [n for n, line in enumerate(lines) if "/environment: baked image " in line]
    assert len(started) == 2 and len(ended) == 2, lines
    assert max(started) < min(ended), lines
    # Each step line says how long the bake has run.
    assert all(line.endswith(" s)") for line in lines if "RUN echo slow-" in line), lines
    assert "reactbench bakes" in result.stdout.str()
    result.stdout.fnmatch_lines(["* image(s) baked here: * s in all, the longest slow-*/environment (* s)"])
    (run,) = (suite.path / "records").iterdir()
    recorded = json.loads((run / "bakes.json").read_text())
    slow = [r for r in recorded if r["name"].endswith("/environment")]
    assert sorted((r["name"], r["how"]) for r in slow) == [
        ("slow-a/environment", "baked"), ("slow-b/environment", "baked")]
    assert all(r["seconds"] >= 3 for r in slow)
    assert not (run / ".bakes").exists()


def test_a_trial_starts_when_its_own_images_are_there_while_the_pool_bakes_on(
        suite: pytest.Pytester) -> None:
    """The first task's trial runs while the second task's slow image is still being
    baked: the session waits for the rest of the pool only at its end. (The slow step
    leaves the quick trial a wide margin on a loaded machine; it sleeps, it does not
    take a CPU.)"""
    unique = uuid.uuid4().hex
    write_task(suite.path / "tasks", "a-quick", environment=(
        f"FROM reactbench/system\nWORKDIR /app\nRUN echo {unique} > /app/id\n"))
    write_task(suite.path / "tasks", "b-slow", environment=(
        f"FROM reactbench/system\nWORKDIR /app\nRUN echo {unique} > /app/id && sleep 30\n"))
    result = suite.runpytest_subprocess("--reactbench-agent=oracle", "tasks/a-quick", "tasks/b-slow")
    result.assert_outcomes(passed=2)
    (run,) = (suite.path / "records").iterdir()
    started = json.loads((run / "manifest.json").read_text())["started_at"]
    slow = next(r for r in json.loads((run / "bakes.json").read_text())
                if r["name"] == "b-slow/environment")
    assert slow["how"] == "baked" and slow["seconds"] >= 30
    (quick,) = run.glob("a-quick*/status.json")
    # a-quick's trial was scored before b-slow's bake could have ended.
    assert json.loads(quick.read_text())["finished_at"] < started + slow["seconds"]


def test_one_process_of_a_session_claims_its_prebake(tmp_path: Path) -> None:
    # xdist's workers of one session: the first to ask, and only it.
    assert [bakes.claims_prebake(tmp_path, "run-a") for _ in range(3)] == [True, False, False]
    # Another session over the same run directory (a resume) bakes ahead again.
    assert bakes.claims_prebake(tmp_path, "run-b")
    # Without xdist the one process does, always.
    assert bakes.claims_prebake(tmp_path, None) and bakes.claims_prebake(tmp_path, None)
    # The claims go with the parts when the controller merges them, leaving no trace.
    bakes.merge_parts(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_session_folder_is_xdists_alone_and_goes_with_the_session(tmp_path: Path) -> None:
    assert bakes.session_folder(tmp_path, None) is None
    folder = bakes.session_folder(tmp_path, "run-a")
    assert folder is not None and folder != bakes.session_folder(tmp_path, "run-b")
    folder.mkdir(parents=True)
    (folder / "unavailable.json").write_text("{}")
    bakes.merge_parts(tmp_path)
    assert list(tmp_path.iterdir()) == []
