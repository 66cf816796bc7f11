"""Collection of a large suite: 500 generated tasks (or --tasks N), timed and measured
in the controller.

    python benchmarks/collection.py [--tasks 500]

Runs `pytest --collect-only` in a subprocess over N generated task directories (the
shape of a real task: task.toml with artifacts and metadata, instruction, both
Dockerfiles, test.sh, solution) and prints the wall time of collection, as pytest
reports it and from outside, and the controller's peak RSS."""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TASK_TOML = textwrap.dedent("""\
    schema_version = "1.3"
    [task]
    name = "synthetic/task-{i}"
    description = "generated task {i}"
    [[artifacts]]
    source = "/app"
    exclude = ["**/node_modules/**", "**/.git/**", "**/dist/**"]
    [metadata]
    difficulty = "{difficulty}"
    category = "write-react"
    tags = ["synthetic", "vitest"]
    [agent]
    timeout_sec = 600.0
    [verifier]
    timeout_sec = 300.0
    environment_mode = "separate"
    [environment]
    cpus = 1
    memory_mb = 2048
    allow_internet = false
    """)


def generate(root: Path, count: int) -> None:
    for i in range(count):
        task = root / f"task-{i:04d}"
        for sub in ("environment/app/src", "tests/specs", "solution"):
            (task / sub).mkdir(parents=True)
        (task / "task.toml").write_text(TASK_TOML.format(i=i, difficulty=("easy", "medium", "hard")[i % 3]))
        (task / "instruction.md").write_text(f"Make the counter of task {i} reset.\n")
        (task / "environment" / "Dockerfile").write_text(
            "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest\nFROM ${BASE_IMAGE}\nCOPY app/ /app/\n")
        (task / "environment" / "app" / "src" / "App.tsx").write_text("export default function App() {}\n")
        (task / "tests" / "Dockerfile").write_text(
            "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-verifier-base:latest\nFROM ${BASE_IMAGE}\n")
        (task / "tests" / "test.sh").write_text("#!/bin/bash\nexit 0\n")
        (task / "tests" / "specs" / "app.spec.tsx").write_text("// spec\n")
        (task / "solution" / "solve.sh").write_text("#!/bin/bash\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reactbench-collect-") as tmp:
        root = Path(tmp)
        generate(root / "tasks", args.tasks)
        (root / "pytest.ini").write_text("[pytest]\n")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                   "--reactbench-agent=oracle", f"--rootdir={root}", str(root / "tasks")]
        started = time.monotonic()
        proc = subprocess.run(command, cwd=root, capture_output=True, text=True)
        wall = time.monotonic() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    found = re.search(r"(\d+) tests? collected in ([\d.]+)s", proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"collection failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    items, seconds = int(found.group(1)), float(found.group(2))
    print(f"command: python benchmarks/collection.py --tasks {args.tasks}")
    print(f"collected {items} items from {args.tasks} tasks in {seconds:.2f} s (pytest's figure); "
          f"{wall:.2f} s wall including interpreter start")
    print(f"controller peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
