"""Reading results back: from run record directories or from JUnit XML."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path

from pytest_reactbench.results.errors import ResultsError
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.results.trial_result import TrialResult

__all__ = ["ResultsError", "check_one_run", "from_junit", "from_records", "junit_testcases",
           "load_outcomes", "load_run", "read_record"]


def _trial_dirs(path: Path) -> Iterator[Path]:
    if (path / "status.json").is_file():
        yield path
        return
    for child in sorted(path.iterdir()):
        if child.is_dir():
            yield from _trial_dirs(child)


def read_record(trial: Path) -> TrialResult:
    """One trial's record directory. A record left incomplete (an interrupted or
    crashed run) is an error: no score."""
    try:
        status = json.loads((trial / "status.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{trial}: unreadable record ({exc})") from None
    manifest = TrialManifest.read(trial)
    try:
        return TrialResult.from_status(status, manifest.to_json(), record=str(trial))
    except ValueError as exc:
        raise ResultsError(f"{trial / 'status.json'}: {exc}") from None


def _retry_number(trial: Path) -> int:
    match = re.search(r"\.(\d+)$", trial.name)
    return int(match.group(1)) if match else 0


def from_records(path: Path) -> list[TrialResult]:
    """One result per trial of each run under `path`. A trial started again (a retry
    of an error, a resumed run) has several records (`x__a__1`, `x__a__1.1`...): the
    one that counts is its last scored record, else its last record."""
    trials: dict[tuple[Path, str], list[Path]] = {}
    for trial in _trial_dirs(path):
        trials.setdefault((trial.parent, re.sub(r"\.\d+$", "", trial.name)), []).append(trial)
    results = []
    for records in trials.values():
        read = [read_record(r) for r in sorted(records, key=_retry_number)]
        scored = [r for r in read if r.valid]
        results.append((scored or read)[-1])
    return results


def junit_testcases(path: Path) -> list[tuple[str, dict[str, str]]]:
    """Each testcase of a JUnit XML file: its name and its properties."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ResultsError(f"{path}: not readable JUnit XML ({exc})") from None
    return [(str(case.get("name")),
             {str(p.get("name")): str(p.get("value") or "") for p in case.iter("property")})
            for case in root.iter("testcase")]


def junit_suite_properties(path: Path) -> dict[str, str]:
    """The properties of a JUnit XML file's suites (pytest's global properties)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ResultsError(f"{path}: not readable JUnit XML ({exc})") from None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    return {str(p.get("name")): str(p.get("value") or "")
            for suite in suites for props in suite.findall("properties") for p in props.iter("property")}


def from_junit(path: Path) -> list[TrialResult]:
    return [result for _, props in junit_testcases(path)
            if (result := TrialResult.from_properties(props)) is not None]


def load_outcomes(path: Path) -> list[TrialResult]:
    """A run record directory (or a folder of runs), or a JUnit XML file."""
    if not path.exists():
        raise ResultsError(f"{path} does not exist")
    outcomes = from_records(path) if path.is_dir() else from_junit(path)
    if not outcomes:
        raise ResultsError(f"{path}: no ReactBench results in it")
    return outcomes


def _described(run: str, outcomes: list[TrialResult]) -> str:
    agents = ",".join(dict.fromkeys(o.agent for o in outcomes))
    backends = ",".join(sorted({o.provenance.backend for o in outcomes if o.provenance.backend})) or "?"
    return f"{run} ({backends}; {agents}; {len({o.task for o in outcomes})} task(s))"


def check_one_run(outcomes: Sequence[TrialResult], merge_runs: bool = False) -> None:
    """Refuse to rank together what is not one run: trials of different backends
    (never comparable), or of different runs that are not the shards of one (unless
    `merge_runs`: runs of the same backend, ranked on one leaderboard on purpose).
    Results from before trials named their run are taken as they come."""
    backends = sorted({o.provenance.backend for o in outcomes if o.provenance.backend})
    if len(backends) > 1:
        raise ResultsError(f"these results ran on different backends ({', '.join(backends)}): "
                           "their verdicts are not comparable; report each backend's run on its own")
    runs: dict[str, list[TrialResult]] = {}
    for outcome in outcomes:
        if outcome.provenance.run:
            runs.setdefault(outcome.provenance.run, []).append(outcome)
    if len(runs) < 2 or merge_runs:
        return
    shards = {run: {o.provenance.shard for o in found} for run, found in runs.items()}
    of = {shard.partition("/")[2] for found in shards.values() for shard in found}
    if (all(len(found) == 1 and "" not in found for found in shards.values()) and len(of) == 1
            and len({next(iter(found)) for found in shards.values()}) == len(runs)):
        return  # the distinct shards K/N of one N: one run
    described = "; ".join(_described(run, found) for run, found in sorted(runs.items()))
    raise ResultsError(f"these are {len(runs)} different runs, not the shards of one: {described}. "
                       "Report each on its own, or give --merge-runs to rank them on one leaderboard")


def missing_shards(outcomes: Sequence[TrialResult]) -> str:
    """What the shards given leave out of their run ("" when nothing): a report of
    shard 1/2 alone reads as the whole run otherwise."""
    seen: dict[int, set[int]] = {}
    for outcome in outcomes:
        k, _, n = outcome.provenance.shard.partition("/")
        if k.isdigit() and n.isdigit():
            seen.setdefault(int(n), set()).add(int(k))
    gaps = [f"{k}/{n}" for n, found in sorted(seen.items()) for k in range(1, n + 1) if k not in found]
    if not gaps:
        return ""
    given = ", ".join(f"{k}/{n}" for n, found in sorted(seen.items()) for k in sorted(found))
    return (f"shard(s) {', '.join(gaps)} of this run are not among the results given (these are "
            f"shard(s) {given} only): the figures cover part of the run")


def load_run(paths: Sequence[Path], merge_runs: bool = False) -> list[TrialResult]:
    """Several JUnit files or run folders (the shards of one run) as one run. A trial
    (task, agent, attempt) found in two of them is an error naming both: shards of one
    run never overlap, and counting it twice would weigh it twice. Different runs are
    refused (`check_one_run`)."""
    seen: dict[tuple[str, str, int], tuple[Path, str]] = {}
    outcomes: list[TrialResult] = []
    for path in paths:
        if any(path == where for where, _ in seen.values()):
            raise ResultsError(f"{path} is given twice")
        found = load_outcomes(path)
        for outcome in found:
            key = (outcome.task, outcome.agent, outcome.attempt)
            if key in seen:
                where, run = seen[key]
                two = run and outcome.provenance.run and run != outcome.provenance.run
                raise ResultsError(
                    f"{outcome.task} [{outcome.agent}] attempt {outcome.attempt} is in both {where} "
                    f"and {path}: the shards of one run must not overlap"
                    + (f" (these are two runs, {run} and {outcome.provenance.run}: to review one beside "
                       f"the other, `reactbench compare --base {where} --new {path} --html DIR`)"
                       if two else ""))
        seen.update({(o.task, o.agent, o.attempt): (path, o.provenance.run) for o in found})
        outcomes += found
    check_one_run(outcomes, merge_runs)
    return outcomes
