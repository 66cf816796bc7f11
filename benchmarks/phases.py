"""Where a trial's time goes, per backend, from the run records of a warm run of the
shipped suite; with --before, the grading time of an earlier commit's verifier beside
today's, measured in the same run.

    python benchmarks/phases.py [--backend local,docker] [--agents oracle] [--cache DIR]
                                [--before REF] [--repeat N]

Irreducible work is the task's own grading: its test commands and the React Doctor
scan of the submission, timed by the verifier inside the sandbox (grade.json
`timings`: `grading` is the two together, which overlap where the scan runs beside the
tests); the agent's time is the agent's. The harness overhead is everything else: bake
lookups, boots, artifact transfer, the verifier's clean room and log copy, teardown.
The first run of each backend (and of each tree) bakes, or finds its bakes, and is not
measured.

--before REF checks out REF (`git archive`, into a temporary directory) and runs its
plugin, images and tasks as they were, alternating with this checkout's, `--repeat`
times each (the order flips every round, so that a drift in the machine's load hits
both alike); it prints each task's mean grading time before and after and the ratio,
and the phases of this checkout's last round (whose bakes, if it made any, show in the
bake column: the grading figures do not include them)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, trial_records

from pytest_reactbench.plugin.options import setting

PHASES = ("bake", "boot", "agent", "artifacts", "verifier_boot", "clean_room", "grading",
          "teardown", "other")


def grade_timings(trial: dict[str, object]) -> dict[str, float]:
    """grade.json `timings` of the trial's record (empty for a grader that is not ours)."""
    path = Path(str(trial.get("record", ""))) / "verifier" / "grade.json"
    try:
        return {k: float(v) for k, v in json.loads(path.read_text())["timings"].items()}
    except (OSError, ValueError, KeyError):
        return {}


def grading_seconds(timings: dict[str, float]) -> float:
    """The scan and the test commands together; a verifier from before `grading` was
    timed ran them one after the other."""
    if "grading" in timings:
        return timings["grading"]
    return timings.get("scan", 0.0) + timings.get("test_command", 0.0)


def phases(durations: dict[str, float], span: float, timings: dict[str, float]) -> dict[str, float]:
    """The record's durations, with the verify phase split into the grading and the
    rest (clean room, logs); `other` is the rest of the trial's span that no phase
    accounts for (records, bookkeeping)."""
    out = {name: float(durations.get(name, 0.0)) for name in PHASES}
    verify = float(durations.get("verify", 0.0))
    out["grading"] = grading_seconds(timings) if timings else verify
    out["clean_room"] = max(0.0, verify - out["grading"])
    out["other"] = max(0.0, span - sum(out.values()))
    return out


def table(label: str, trials: list[dict[str, object]]) -> tuple[float, float]:
    print(f"\n{label}: {len(trials)} trials (seconds)")
    print(f"{'trial':34}" + "".join(f"{p[:10]:>11}" for p in PHASES) + f"{'overhead':>10}")
    totals = dict.fromkeys(PHASES, 0.0)
    for trial in trials:
        row = phases(trial["durations"], float(trial["span"]), grade_timings(trial))  # type: ignore[arg-type]
        over = sum(v for k, v in row.items() if k not in ("grading", "agent"))
        print(f"{str(trial['trial'])[:34]:34}" + "".join(f"{row[p]:11.2f}" for p in PHASES) + f"{over:10.2f}")
        for k, v in row.items():
            totals[k] += v
    n = max(1, len(trials))
    print(f"{'mean':34}" + "".join(f"{totals[p] / n:11.2f}" for p in PHASES))
    overhead = sum(v for k, v in totals.items() if k not in ("grading", "agent")) / n
    return totals["grading"] / n, overhead


def run_suite(tree: Path, *, cache: Path, records: Path, backend: str, agents: str) -> str:
    """One pytest session over the shipped tasks of `tree`, with the plugin of `tree`."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               f"--reactbench-agent={agents}", f"--reactbench-sandbox={backend}",
               f"--reactbench-cache={cache}", f"--reactbench-records={records}"]
    # Python's default: compiled modules are cached (some machines turn that off).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):
        sys.exit(f"the suite run in {tree} failed (exit {proc.returncode}):\n"
                 f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return (proc.stdout.strip().splitlines() or ["(no output)"])[-1]


def export(ref: str, into: Path) -> Path:
    """The tree of `ref`, as files (the repository's worktrees are left alone)."""
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"--before {ref}: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def per_task(trials: list[dict[str, object]]) -> dict[str, list[float]]:
    """Grading seconds per task; a trial whose verifier left no grade.json (killed at
    its time limit, say) has no figure and is named instead of counted as zero."""
    out: dict[str, list[float]] = {}
    for trial in trials:
        timings = grade_timings(trial)
        if timings:
            out.setdefault(str(trial["task"]), []).append(grading_seconds(timings))
        else:
            print(f"  {trial['trial']}: no grading time recorded ({trial.get('verdict')}: "
                  f"{str(trial.get('message', ''))[:120]})", file=sys.stderr)
    return out


def side_by_side(backend: str, args: argparse.Namespace, tmp: Path) -> tuple[float, float, Path]:
    """Rounds of the suite with the verifier of `--before` and with this checkout's; the
    grading is timed inside the verifier sandbox, so a bake made in the first round
    (before the trial that needs it starts) does not count in it."""
    trees = {"before": export(args.before, tmp / "before-tree"), "after": ROOT}
    grading: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    last = tmp
    for round_ in range(args.repeat):
        order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for label in order:
            records = tmp / f"{label}-{round_}"
            outcome = run_suite(trees[label], cache=args.cache, records=records, backend=backend,
                                agents=args.agents)
            print(f"[{backend} round {round_ + 1} {label}] {outcome}", file=sys.stderr, flush=True)
            for task, seconds in per_task(trial_records(records)).items():
                grading[label].setdefault(task, []).extend(seconds)
            if label == "after":
                last = records
    print(f"\n{backend}: grading time per trial (scan and test commands), mean of "
          f"{args.repeat} run(s) each, before = {args.before}")
    print(f"{'task':24}{'before s':>10}{'after s':>10}{'after/before':>14}")
    both = sorted(set(grading["before"]) & set(grading["after"]))
    for task in both:
        b, a = statistics.mean(grading["before"][task]), statistics.mean(grading["after"][task])
        print(f"{task:24}{b:10.2f}{a:10.2f}{a / max(b, 1e-9):14.2f}")
    # The mean trial: each task weighs the same on both sides.
    before = statistics.mean(statistics.mean(grading["before"][t]) for t in both) if both else 0.0
    after = statistics.mean(statistics.mean(grading["after"][t]) for t in both) if both else 0.0
    print(f"{'mean of the tasks':24}{before:10.2f}{after:10.2f}{after / max(before, 1e-9):14.2f}")
    return before, after, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local,docker")
    parser.add_argument("--agents", default="oracle")
    parser.add_argument("--cache", type=Path, default=setting("cache"),
                        help="bake cache (default: the user's, so bakes are reused)")
    parser.add_argument("--before", metavar="REF",
                        help="also run the verifier of this commit, side by side, and compare")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of the side by side")
    args = parser.parse_args()
    summary = []
    compared = []
    started = time.monotonic()
    for backend in args.backend.split(","):
        with tempfile.TemporaryDirectory(prefix="reactbench-phases-") as name:
            tmp = Path(name)
            if args.before:
                before, after, records = side_by_side(backend, args, tmp)
                compared.append((backend, before, after))
                outcome = "the last round of this checkout"
            else:
                run_suite(ROOT, cache=args.cache, records=tmp / "warmup", backend=backend,
                          agents=args.agents)
                records = tmp / "records"
                outcome = run_suite(ROOT, cache=args.cache, records=records, backend=backend,
                                    agents=args.agents)
            irreducible, overhead = table(backend, trial_records(records))
            summary.append((backend, irreducible, overhead, outcome))
    command = f"python benchmarks/phases.py --backend {args.backend} --agents {args.agents}"
    if args.before:
        command += f" --before {args.before} --repeat {args.repeat}"
    print(f"\ncommand: {command}   ({time.monotonic() - started:.0f} s)")
    for backend, irreducible, overhead, outcome in summary:
        print(f"{backend:7} per trial: grading {irreducible:6.2f} s, overhead {overhead:6.2f} s "
              f"= {100 * overhead / max(irreducible, 1e-9):5.1f}% of grading   ({outcome})")
    for backend, before, after in compared:
        print(f"{backend:7} grading per trial: before {before:6.2f} s, after {after:6.2f} s, "
              f"after/before {after / max(before, 1e-9):.2f} (target <= 0.70)")


if __name__ == "__main__":
    main()
