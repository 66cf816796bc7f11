"""Reading results back: from run record directories or from JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_reactbench.results.aggregate import Outcome

PROPERTY = "reactbench."


class ResultsError(ValueError):
    pass


def _float(value: Any) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def _trial_dirs(path: Path) -> Iterator[Path]:
    if (path / "status.json").is_file():
        yield path
        return
    for child in sorted(path.iterdir()):
        if child.is_dir():
            yield from _trial_dirs(child)


def from_records(path: Path) -> list[Outcome]:
    outcomes = []
    for trial in _trial_dirs(path):
        try:
            status = json.loads((trial / "status.json").read_text())
            manifest = json.loads((trial / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultsError(f"{trial}: unreadable record ({exc})") from None
        complete = status.get("status") == "complete"
        outcomes.append(Outcome(
            task=str(manifest.get("task")),
            agent=str(manifest.get("agent")),
            attempt=int(manifest.get("attempt", 1)),
            # A record left incomplete (an interrupted or crashed run) is no score.
            verdict=str(status.get("verdict", "error")) if complete else "error",
            reward=_float(status.get("reward")) if complete else None,
            failure=str(status.get("failure") or ("" if complete else "incomplete record")),
            gates={k: "" if v is None else str(int(v)) for k, v in (status.get("gates") or {}).items()},
            durations={k: float(v) for k, v in (status.get("durations") or {}).items()},
            record=str(trial),
        ))
    return outcomes


def from_junit(path: Path) -> list[Outcome]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ResultsError(f"{path}: not readable JUnit XML ({exc})") from None
    outcomes = []
    for case in root.iter("testcase"):
        props = {str(p.get("name")): str(p.get("value") or "") for p in case.iter("property")}
        if f"{PROPERTY}task" not in props:
            continue
        outcomes.append(Outcome(
            task=props[f"{PROPERTY}task"],
            agent=props.get(f"{PROPERTY}agent", ""),
            attempt=int(props.get(f"{PROPERTY}attempt") or 1),
            verdict=props.get(f"{PROPERTY}verdict", "error"),
            reward=_float(props.get(f"{PROPERTY}reward")),
            failure=props.get(f"{PROPERTY}failure", ""),
            gates={g: props.get(f"{PROPERTY}gate.{g}", "") for g in ("tests", "react_doctor")},
            durations={k.removeprefix(f"{PROPERTY}duration."): float(v) for k, v in props.items()
                       if k.startswith(f"{PROPERTY}duration.") and _float(v) is not None},
            record=props.get(f"{PROPERTY}record", ""),
        ))
    return outcomes


def load_outcomes(path: Path) -> list[Outcome]:
    """A run record directory (or a folder of runs), or a JUnit XML file."""
    if not path.exists():
        raise ResultsError(f"{path} does not exist")
    outcomes = from_records(path) if path.is_dir() else from_junit(path)
    if not outcomes:
        raise ResultsError(f"{path}: no ReactBench results in it")
    return outcomes
