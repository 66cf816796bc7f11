"""Sweep a suite: every task of a checkout with oracle and nop, in one run that
resumes where it stopped, and the table of what each gave.

    python benchmarks/sweep.py TASKS_DIR [--state DIR] [--backend docker|local] [-n N]
        [--only TASK ...] [--table] [-- PYTEST_OPTIONS ...]

The first call starts a run (`pytest --reactbench-agent=oracle,nop`) with its records
under --state (default .reactbench/sweep) and remembers its id there; every later
call resumes that run (`--reactbench-resume`): what was scored is kept from its
records, what errored, was interrupted or never ran runs again. Stopping it (Ctrl-C,
SIGTERM, a machine handed back) loses only the trials under way. The bake cache and
the download cache are the plugin's own (`~/.cache/reactbench`), shared by every call.
Options after `--` go to pytest (`--reactbench-git-mirror=...`,
`--reactbench-unsigned-registry`, `--reactbench-timeout-multiplier=2`); a resumed run
keeps the options its manifest records and refuses others, as the plugin does.

--table prints the table of the run so far without running anything. The table:
task, package manager (read from the task's Dockerfiles), oracle, nop, bake and grade
seconds (the oracle trial's), and, for a task that did not give oracle 1 / nop 0, the
cause its records give.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_reactbench.results.errors import ResultsError
from pytest_reactbench.results.load import load_outcomes
from pytest_reactbench.results.trial_result import TrialResult, Verdict

#: How a Dockerfile installs packages, first match wins.
MANAGERS = (
    ("yarn 2+", re.compile(r"\byarn\b.*--immutable|corepack enable\b.*yarn|yarn set version")),
    ("pnpm (corepack)", re.compile(r"corepack\s+(prepare\s+)?pnpm|corepack pnpm")),
    ("pnpm", re.compile(r"\bpnpm\s+(i|install)\b")),
    ("yarn 1", re.compile(r"\byarn(\s+install)?\b")),
    ("npm ci", re.compile(r"\bnpm\s+ci\b")),
    ("npm", re.compile(r"\bnpm\s+(i|install)\b")),
)


@dataclass(frozen=True)
class Row:
    task: str
    manager: str
    oracle: str
    nop: str
    bake: str
    grade: str
    cause: str


def package_manager(task_dir: Path) -> str:
    files = (task_dir / "environment" / "Dockerfile", task_dir / "tests" / "Dockerfile")
    text = "\n".join(p.read_text(errors="replace") for p in files if p.is_file())
    return next((name for name, pattern in MANAGERS if pattern.search(text)), "-")


def _verdict(result: TrialResult | None) -> str:
    if result is None:
        return "not run"
    if result.verdict == Verdict.ERROR:
        return f"error ({result.failure})"
    if result.grading.reward is None:
        return result.verdict.value
    return f"{result.verdict.value} ({result.grading.reward:g})"


def _cause(oracle: TrialResult | None, nop: TrialResult | None) -> str:
    """Why a task did not give oracle 1 / nop 0, from its records ("" when it did)."""
    for who, result in (("oracle", oracle), ("nop", nop)):
        if result is None:
            return f"{who}: not run yet"
        wrong = result.verdict != (Verdict.PASSED if who == "oracle" else Verdict.FAILED)
        if wrong:
            said = (result.message or result.failure or result.verdict.value).strip().splitlines()
            return f"{who}: {said[0][:160] if said else result.verdict.value}"
    return ""  # oracle 1 / nop 0


def table(tasks_dir: Path, run_dir: Path | None) -> list[Row]:
    results: dict[tuple[str, str], TrialResult] = {}
    if run_dir is not None and run_dir.is_dir():
        try:
            for result in load_outcomes(run_dir):
                results[(result.task, result.agent)] = result
        except ResultsError as exc:
            print(f"sweep: {exc}", file=sys.stderr)
    rows = []
    for task_dir in sorted(p.parent for p in tasks_dir.glob("*/task.toml")):
        task = task_dir.name
        oracle, nop = results.get((task, "oracle")), results.get((task, "nop"))
        timed = oracle or nop
        rows.append(Row(
            task, package_manager(task_dir), _verdict(oracle), _verdict(nop),
            f"{timed.durations.get('bake', 0):.0f}" if timed else "-",
            f"{timed.durations.get('verify', 0):.0f}" if timed else "-",
            _cause(oracle, nop)))
    return rows


def print_table(rows: list[Row]) -> None:
    head = Row("task", "package manager", "oracle", "nop", "bake s", "grade s", "cause")
    widths = [max(len(getattr(r, f)) for r in [head, *rows]) for f in ("task", "manager", "oracle", "nop",
                                                                      "bake", "grade")]
    for row in [head, *rows]:
        cells = [row.task, row.manager, row.oracle, row.nop, row.bake, row.grade]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + row.cause)
    good = sum(1 for r in rows if r.oracle.startswith("passed") and r.nop.startswith("failed"))
    print(f"\n{good} of {len(rows)} task(s) give oracle 1 / nop 0; "
          f"{sum(1 for r in rows if r.oracle == 'not run')} not run yet")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", type=Path, help="the suite's task folder (one folder per task)")
    parser.add_argument("--state", type=Path, default=Path(".reactbench/sweep"))
    parser.add_argument("--backend", default="docker")
    parser.add_argument("-n", dest="workers", default="0", help="pytest-xdist workers (default: none)")
    parser.add_argument("--only", action="append", default=[], metavar="TASK")
    parser.add_argument("--table", action="store_true", help="print the table; run nothing")
    args = parser.parse_args(argv)
    tasks_dir = args.tasks.resolve()
    if not tasks_dir.is_dir():
        parser.error(f"{args.tasks} is not a folder")
    records = (args.state / "records").resolve()
    remembered = args.state / "run"
    run_id = remembered.read_text().strip() if remembered.is_file() else ""
    run_dir = records / run_id if run_id else None
    code = 0
    if not args.table:
        chosen = [tasks_dir / t for t in args.only] or [tasks_dir]
        if run_dir is not None and run_dir.is_dir():
            options = [f"--reactbench-resume={run_id}"]
        else:
            options = ["--reactbench-agent=oracle,nop", f"--reactbench-sandbox={args.backend}"]
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={tasks_dir}",
                   f"--reactbench-records={records}", *options, *extra, *map(str, chosen)]
        if args.workers != "0":
            command += ["-n", args.workers]
        print("sweep:", " ".join(command), flush=True)
        before = set(records.iterdir()) if records.is_dir() else set()
        process = subprocess.Popen(command)
        try:
            code = process.wait()
        except KeyboardInterrupt:
            # pytest got the same interrupt: it marks the run incomplete and ends.
            code = process.wait()
        if run_dir is None or not run_dir.is_dir():
            now = set(records.iterdir()) if records.is_dir() else set()
            made = sorted(p for p in now - before if (p / "manifest.json").is_file())
            if made:
                run_dir = made[-1]
                args.state.mkdir(parents=True, exist_ok=True)
                remembered.write_text(run_dir.name + "\n")
        print(f"sweep: pytest exited {code}; the run: {run_dir} (run this again to resume it)", flush=True)
    print_table(table(tasks_dir, run_dir))
    # pytest's own exit: 0, 1 (items failed: nop always does), or an interruption's.
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    sys.exit(main())
