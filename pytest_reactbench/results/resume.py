"""Resuming a run: which run, and which of its trials are kept as they are.

A resumed run keeps the scored trials (passed and failed) of its records and runs
again only the missing, errored and incomplete ones, into the same run folder."""

from __future__ import annotations

from pathlib import Path

from pytest_reactbench.results.load import ResultsError, from_records
from pytest_reactbench.results.trial_result import TrialResult

#: (task id, agent, attempt)
TrialKey = tuple[str, str, int]


def resolve_run(records: Path, run: str) -> Path:
    """The run folder `run` names under the records folder (`last`: the newest run)."""
    runs = sorted(p for p in records.iterdir() if (p / "manifest.json").is_file()) \
        if records.is_dir() else []
    if run == "last":
        if not runs:
            raise ResultsError(f"--reactbench-resume=last: {records} holds no run to resume")
        return runs[-1]
    folder = records / run
    if "/" in run or not (folder / "manifest.json").is_file():
        known = ", ".join(p.name for p in runs[-3:]) or "none"
        raise ResultsError(f"--reactbench-resume: no run {run!r} in {records} "
                           f"(the latest: {known}; or use 'last')")
    return folder


def kept_trials(run_dir: Path) -> dict[TrialKey, TrialResult]:
    """The scored trials of a run, as their records say."""
    return {(r.task, r.agent, r.attempt): r for r in from_records(run_dir) if r.valid}
