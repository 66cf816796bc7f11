"""What the benchmark scripts share: running the shipped suite through pytest in a
subprocess, and reading the run records it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class SuiteRun:
    seconds: float
    summary: str
    output: str
    records: Path


def run_suite(*, cache: Path, records: Path, backend: str, agents: str, workers: int = 0,
              tasks: list[Path] | None = None, extra: list[str] | None = None) -> SuiteRun:
    """One pytest session over the shipped tasks (or `tasks`), timed from outside."""
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        f"--reactbench-agent={agents}", f"--reactbench-sandbox={backend}",
        f"--reactbench-cache={cache}", f"--reactbench-records={records}",
        *(extra or []), *(str(t) for t in tasks or []),
    ]
    if workers:
        command += ["-n", str(workers)]
    # Python's default: compiled modules are cached (some machines turn that off).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - started
    lines = proc.stdout.strip().splitlines() or ["(no output)"]
    if proc.returncode not in (0, 1):
        sys.exit(f"the suite run failed (exit {proc.returncode}):\n"
                 f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return SuiteRun(seconds, lines[-1], proc.stdout + proc.stderr, records)


def trial_records(records: Path) -> list[dict[str, object]]:
    """Every trial of every run under `records`: its status.json, plus from events.jsonl
    the teardown seconds and the trial's whole span (first event to last)."""
    out = []
    for status_path in sorted(records.glob("*/*/status.json")):
        status = json.loads(status_path.read_text())
        events = [json.loads(line) for line in (status_path.parent / "events.jsonl").read_text().splitlines()]
        teardown = sum(float(e.get("seconds", 0)) for e in events if e.get("event") == "teardown")
        status["durations"] = {**status.get("durations", {}), "teardown": teardown}
        status["span"] = events[-1]["t"] - events[0]["t"] if events else 0.0
        status["trial"] = status_path.parent.name
        status["record"] = str(status_path.parent)
        out.append(status)
    return out
