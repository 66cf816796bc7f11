"""The results' commands: `reactbench report` (a leaderboard), `reactbench export`
(Harbor job folders) and `reactbench compare` (the regression gate, and the page of two
runs side by side)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_reactbench.results.compare import ALPHA, compare
from pytest_reactbench.results.compare_page import write_comparison
from pytest_reactbench.results.harbor_export import export_harbor
from pytest_reactbench.results.load import ResultsError, load_outcomes, load_run, missing_shards
from pytest_reactbench.results.render import markdown
from pytest_reactbench.results.site import RunInfo, junit_run_info, write_site

REPORT_TITLE = "ReactBench results"
COMPARE_TITLE = "ReactBench: baseline and candidate"


def _run_infos(paths: list[str]) -> list[RunInfo]:
    """What each run folder's manifest (or a JUnit file alone) says of its run."""
    runs = []
    for raw in paths:
        folder = Path(raw)
        if folder.is_file():
            # A JUnit file alone: what it says of its run (incomplete, say).
            info = junit_run_info(folder, load_outcomes(folder))
            runs += [info] if info is not None else []
            continue
        for manifest in ([folder / "manifest.json"] if (folder / "manifest.json").is_file()
                         else sorted(folder.glob("*/manifest.json")) if folder.is_dir() else []):
            info = RunInfo.read(manifest.parent)
            if info is not None:
                runs.append(info)
    return runs


def run_report(args: argparse.Namespace) -> int:
    if args.baseline:
        # Two runs (of one agent, most often) are two sides, not the shards of one.
        if not args.out:
            print("reactbench report: --baseline writes a folder of its own: give --out DIR", file=sys.stderr)
            return 2
        return _side_by_side("report", args.baseline, args.runs, out=Path(args.out),
                             title=args.title or COMPARE_TITLE)
    try:
        # The runs (or the shards of one run) as one leaderboard.
        outcomes = load_run([Path(raw) for raw in args.runs], merge_runs=args.merge_runs)
        runs = _run_infos(args.runs)
    except ResultsError as exc:
        print(f"reactbench report: {exc}", file=sys.stderr)
        return 2
    title = args.title or REPORT_TITLE
    out = Path(args.out) if args.out else Path(args.runs[0] if Path(args.runs[0]).is_dir() else ".")
    out.mkdir(parents=True, exist_ok=True)
    incomplete = [f"run {r.run_id}: {r.incomplete}" for r in runs if r.incomplete]
    if partial := missing_shards(outcomes):
        print(f"reactbench report: warning: {partial}", file=sys.stderr)
        incomplete.append(partial)
    text = markdown(outcomes, title, incomplete=incomplete)
    (out / "report.md").write_text(text)
    index = write_site(outcomes, out, title=title, runs=runs)
    print(text)
    print(f"wrote {out / 'report.md'} and {index} (with a page per trial under {out / 'trials'})")
    return 0


def run_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        exported = export_harbor([Path(raw) for raw in args.harbor], out)
    except ResultsError as exc:
        print(f"reactbench export: {exc}", file=sys.stderr)
        return 2
    for job in exported:
        print(f"{job.job}: {job.trials} trial(s), {job.trajectories} with a trajectory")
    print(f"open them in Harbor's viewer: harbor view {out}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    base = [*([args.base_run] if args.base_run else []), *args.base]
    new = [*([args.new_run] if args.new_run else []), *args.new]
    if not base or not new:
        print("reactbench compare: give a baseline and a new run (BASE NEW, or --base ... --new ...)",
              file=sys.stderr)
        return 2
    return _side_by_side("compare", base, new, out=Path(args.html) if args.html else None, title=args.title,
                         alpha=args.alpha, allow_missing=args.allow_missing)


def _side_by_side(command: str, base: list[str], new: list[str], *, out: Path | None, title: str,
                  alpha: float = ALPHA, allow_missing: bool = False) -> int:
    """The regression gate between a baseline and a new run (each the shards of one
    run), and with `out` the page that shows them side by side; the gate's exit code."""
    inside = [p for p in (*base, *new) if out is not None and out.resolve().is_relative_to(Path(p).resolve())]
    if inside:
        # The pages copy the records they link: copies inside a run would be read as its trials.
        print(f"reactbench {command}: {out} is inside {inside[0]}: write the pages outside the runs",
              file=sys.stderr)
        return 2
    try:
        sides = {"baseline": load_run([Path(p) for p in base]), "new run": load_run([Path(p) for p in new])}
        runs = (_run_infos(base), _run_infos(new)) if out is not None else ([], [])
    except ResultsError as exc:
        print(f"reactbench {command}: {exc}", file=sys.stderr)
        return 2
    for side, outcomes in sides.items():
        if partial := missing_shards(outcomes):
            print(f"reactbench {command}: warning: the {side}'s {partial}", file=sys.stderr)
    comparison = compare(sides["baseline"], sides["new run"], alpha=alpha, allow_missing=allow_missing)
    print(comparison.summary())
    if comparison.only_new:
        print("  only in the new run: " + ", ".join(f"{t} [{a}]" for t, a in comparison.only_new))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        index = write_comparison(comparison, sides["baseline"], sides["new run"], out, title=title, runs=runs)
        print(f"wrote {index} (each run's report and trial pages under {out / 'baseline'} and "
              f"{out / 'candidate'})")
    return comparison.exit_code
