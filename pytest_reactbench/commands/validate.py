"""`reactbench validate`: a task's schema and files, then its controls (the oracle
scores 1, nop 0)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_reactbench.controls import CONTROLS, run_controls, stop_controls_on_sigterm
from pytest_reactbench.plugin.items import check_dockerfiles
from pytest_reactbench.sandbox.dockerfile import DockerfileError
from pytest_reactbench.tasks import TaskError, load_task
from pytest_reactbench.tasks.load import parse_json
from pytest_reactbench.tasks.models import TestsConfig


def run_validate(args: argparse.Namespace) -> int:
    stop_controls_on_sigterm()
    problems = 0
    tasks = []
    for raw in args.tasks:
        folder = Path(raw).resolve()
        try:
            task = load_task(folder)
            if not (task.solution_dir / "solve.sh").is_file():
                raise TaskError(task.solution_dir / "solve.sh", "file is missing (the oracle runs it)")
            if (task.tests_dir / "config.json").is_file():
                parse_json(task.tests_dir / "config.json", TestsConfig)
            check_dockerfiles(task)
        except (TaskError, DockerfileError) as exc:
            print(f"INVALID {exc}")
            problems += 1
            continue
        print(f"schema  ok   {folder}")
        tasks.append(task)
    if not tasks:
        return 1
    records = Path(args.records) if args.records else Path(".reactbench", "records")
    try:
        controls = run_controls([t.path for t in tasks], sandbox=args.sandbox,
                                records=records.resolve(), workers=args.n,
                                echo=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("reactbench validate: interrupted", file=sys.stderr)
        return 130
    for task in tasks:
        for agent, expected in CONTROLS.items():
            got = controls.verdict(task.id, agent)
            ok = got == expected
            problems += not ok
            reason = controls.reason(task.id, agent)
            print(f"{'ok     ' if ok else 'WRONG  '} {task.id}: {agent} {got}"
                  + ("" if ok else f" (must be {expected})") + (f": {reason}" if reason else ""))
            result = controls.result(task.id, agent)
            if not ok and result is not None and result.record:
                print(f"          record: {result.record}")
    for run in controls.run_dirs:
        print(f"records: {run}")
    if problems and args.verbose:
        print(controls.output[-6000:])
    elif problems:
        print("(the controls' pytest output: run again with -v)")
    return 1 if problems else 0
