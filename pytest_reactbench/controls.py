"""The control agents on task directories, through pytest in a subprocess.

`reactbench validate` and `reactbench mine` both ask the same question of a task:
does the reference solution score 1 (`oracle` passes) and the untouched repository 0
(`nop` fails)? They ask it by running the plugin itself, as a user would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_reactbench.results import TrialResult, strip_ansi
from pytest_reactbench.results.load import from_junit

#: What each control agent must score on a valid task.
CONTROLS = {"oracle": "passed", "nop": "failed"}

#: The control runs under way, for `stop_controls`, and those it has stopped.
_running: set[subprocess.Popen[str]] = set()
_stopped: set[int] = set()
_lock = threading.Lock()


def stop_controls() -> None:
    """Ctrl-C for every control run under way, once: each runs in its own process
    group (where a terminal's Ctrl-C does not reach), so this is how its trials end
    and their sandboxes go, xdist's workers' included."""
    with _lock:
        running = [p for p in _running if p.pid not in _stopped]
        _stopped.update(p.pid for p in running)
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)


def stop_controls_on_sigterm() -> None:
    """From now on SIGTERM (a CI job cancelled, `kill`) stops this command as Ctrl-C
    does: KeyboardInterrupt in the main thread, whose handlers stop the controls."""
    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)


@dataclass(frozen=True)
class ControlRun:
    """The result of each (task id, agent) item, and the run's output (ANSI codes
    stripped)."""

    results: dict[tuple[str, str], TrialResult]
    output: str
    #: Where the run records were kept; None when they went with a temporary folder.
    records: Path | None = None

    @property
    def run_dirs(self) -> list[Path]:
        """The run folders the controls' records are in (while they are kept)."""
        if self.records is None:
            return []
        return sorted({Path(r.record).parent for r in self.results.values() if r.record})

    def result(self, task: str, agent: str) -> TrialResult | None:
        return self.results.get((task, agent))

    def verdict(self, task: str, agent: str) -> str:
        result = self.result(task, agent)
        return "not run" if result is None else result.verdict.value

    def reason(self, task: str, agent: str) -> str:
        """Why the control ended as it did, in one line."""
        result = self.result(task, agent)
        if result is None:
            return "the item did not run (see the output)"
        first = result.message.splitlines()[0] if result.message else ""
        return f"{result.failure}: {first}" if first and result.failure else first or result.failure


def run_controls(
    tasks: Sequence[Path],
    *,
    sandbox: str = "local",
    records: Path | None = None,
    workers: int = 0,
    echo: Callable[[str], None] = print,
) -> ControlRun:
    """Run `oracle` and `nop` on each task directory and read their verdicts. Without
    `records` the records go with a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="reactbench-controls-") as tmp:
        xml = Path(tmp, "controls.xml")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "--reactbench-agent=" + ",".join(CONTROLS), f"--reactbench-sandbox={sandbox}",
                   f"--reactbench-records={records or Path(tmp, 'records')}",
                   f"--junitxml={xml}", f"--rootdir={tmp}", *(str(t) for t in tasks)]
        if workers:
            command += ["-n", str(workers)]
        echo("controls: " + " ".join(command[3:]))
        proc = subprocess.Popen(command, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        with _lock:
            _running.add(proc)
        try:
            try:
                stdout, stderr = proc.communicate()
            except KeyboardInterrupt:
                # Its cleanup is waited for, so that no sandbox outlives this command.
                stop_controls()
                proc.communicate()
                raise
        finally:
            with _lock:
                _running.discard(proc)
                _stopped.discard(proc.pid)
        results = {(r.task, r.agent): r for r in (from_junit(xml) if xml.exists() else [])}
    return ControlRun(results, strip_ansi(stdout + stderr), records)
