"""Resuming a run: which run, and which of its trials are kept as they are.

A resumed run keeps the scored trials (passed and failed) of its records and runs
again only the missing, errored and incomplete ones, into the same run folder."""

from __future__ import annotations

from pathlib import Path

from pytest_reactbench.results.load import ResultsError, from_records
from pytest_reactbench.results.records import live_session
from pytest_reactbench.results.trial_result import TrialResult

#: (task id, agent, attempt)
TrialKey = tuple[str, str, int]


def resolve_run(records: Path, run: str, *, live_ok: bool = False) -> Path:
    """The run folder `run` names under the records folder (`last`: the newest run that
    no session is running). A run that a session is running now is refused (unless
    `live_ok`: an xdist worker of the session that runs it)."""
    runs = sorted(p for p in records.iterdir() if (p / "manifest.json").is_file()) \
        if records.is_dir() else []
    if run == "last":
        if not runs:
            raise ResultsError(f"--reactbench-resume=last: {records} holds no run to resume")
        for folder in reversed(runs):
            if live_ok or live_session(folder) is None:
                return folder
        raise ResultsError(f"--reactbench-resume=last: every run in {records} is in progress "
                           f"(the latest, {runs[-1].name}, pid {live_session(runs[-1])})")
    folder = records / run
    if "/" in run or not (folder / "manifest.json").is_file():
        known = ", ".join(p.name for p in runs[-3:]) or "none"
        raise ResultsError(f"--reactbench-resume: no run {run!r} in {records} "
                           f"(the latest: {known}; or use 'last')")
    pid = None if live_ok else live_session(folder)
    if pid is not None:
        raise ResultsError(f"--reactbench-resume: run {run} is in progress, pid {pid}: "
                           "let it end (or stop it) before resuming it")
    return folder


def kept_trials(run_dir: Path) -> dict[TrialKey, TrialResult]:
    """The scored trials of a run, as their records say."""
    return {(r.task, r.agent, r.attempt): r for r in from_records(run_dir) if r.valid}
