"""The control agents on task directories, through pytest in a subprocess.

`reactbench validate` and `reactbench mine` both ask the same question of a task:
does the reference solution score 1 (`oracle` passes) and the untouched repository 0
(`nop` fails)? They ask it by running the plugin itself, as a user would.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: What each control agent must score on a valid task.
CONTROLS = {"oracle": "passed", "nop": "failed"}


@dataclass(frozen=True)
class ControlRun:
    """The JUnit properties of each (task id, agent) item, and the run's output."""

    properties: dict[tuple[str, str], dict[str, str]]
    output: str

    def verdict(self, task: str, agent: str) -> str:
        return self.properties.get((task, agent), {}).get("reactbench.verdict", "not run")

    def gate(self, task: str, agent: str, gate: str) -> str:
        """"1", "0", or "" when the trial ended before the gate was read."""
        return self.properties.get((task, agent), {}).get(f"reactbench.gate.{gate}", "")

    def failure(self, task: str, agent: str) -> str:
        return self.properties.get((task, agent), {}).get("reactbench.failure", "")


def run_controls(
    tasks: Sequence[Path],
    *,
    sandbox: str = "local",
    records: Path | None = None,
    workers: int = 0,
    echo: Callable[[str], None] = print,
) -> ControlRun:
    """Run `oracle` and `nop` on each task directory and read their verdicts."""
    with tempfile.TemporaryDirectory(prefix="reactbench-controls-") as tmp:
        xml = Path(tmp, "controls.xml")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "--reactbench-agent=" + ",".join(CONTROLS), f"--reactbench-sandbox={sandbox}",
                   f"--reactbench-records={records or Path(tmp, 'records')}",
                   f"--junitxml={xml}", f"--rootdir={tmp}", *(str(t) for t in tasks)]
        if workers:
            command += ["-n", str(workers)]
        echo("controls: " + " ".join(command[3:]))
        proc = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
        properties: dict[tuple[str, str], dict[str, str]] = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                props = {str(p.get("name")): str(p.get("value")) for p in case.iter("property")}
                if "reactbench.task" in props:
                    properties[(props["reactbench.task"], props["reactbench.agent"])] = props
    return ControlRun(properties, proc.stdout + proc.stderr)
