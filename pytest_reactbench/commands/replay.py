"""`reactbench replay`: one recorded trial run again (the same task, agent and options),
its records beside the recorded run's."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.manifest import TrialManifest


def run_replay(args: argparse.Namespace) -> int:
    record = Path(args.record).resolve()
    try:
        manifest = TrialManifest.read(record)
        if not manifest.task_path:
            raise ResultsError(f"{record / 'manifest.json'}: task_path: missing")
    except ResultsError as exc:
        trials = sorted(d.name for d in record.glob("*") if (d / "status.json").is_file())
        if trials:
            # A run's directory: replay is of one of its trials.
            shown = ", ".join(trials[:10]) + (f" (and {len(trials) - 10} more)" if len(trials) > 10 else "")
            print(f"reactbench replay: {record} is a run, not a trial: give one of its trial "
                  f"directories, e.g. {record / trials[0]} (it holds {shown})", file=sys.stderr)
            return 2
        print(f"reactbench replay: {record} is not a trial's record (not a trial's manifest: {exc})",
              file=sys.stderr)
        return 2
    task_path = Path(manifest.task_path)
    # The replay's records go beside the recorded run's, one trial: this attempt alone.
    records = Path(args.records) if args.records else record.parent.parent
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               f"--reactbench-agent={manifest.agent_spec or manifest.agent}", *manifest.options,
               f"--reactbench-records={records}", "--reactbench-attempts=1",
               f"--rootdir={task_path.parent}", str(task_path), *args.pytest_args]
    print("replay: " + " ".join(command[3:]), flush=True)
    return subprocess.run(command, cwd=task_path.parent).returncode
