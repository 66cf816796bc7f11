"""Where a trial's time goes, per backend, from the run records of a warm run of the
shipped suite.

    python benchmarks/phases.py [--backend local,docker] [--agents oracle] [--cache DIR]

Irreducible work is the task's own test command plus the React Doctor scans (both
timed by the verifier inside the sandbox); the agent's time is the agent's. The
harness overhead is everything else: bake lookups, boots, artifact transfer, the
verifier's clean room and log copy, teardown. The first run of each backend bakes
(or finds its bakes) and is not measured."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import run_suite, trial_records

from pytest_reactbench.plugin.settings import default_cache

PHASES = ("bake", "boot", "agent", "artifacts", "verifier_boot", "clean_room", "test_command", "scan",
          "teardown", "other")
IRREDUCIBLE = ("test_command", "scan")


def phases(durations: dict[str, float], span: float) -> dict[str, float]:
    """The record's durations, with the verify phase split into its parts; `other` is
    the rest of the trial's span that no phase accounts for (records, bookkeeping)."""
    out = {name: float(durations.get(name, 0.0)) for name in PHASES}
    verify = float(durations.get("verify", 0.0))
    if "test_command" not in durations:  # a verifier that does not time itself
        out["test_command"] = verify
    out["clean_room"] = max(0.0, verify - out["test_command"] - out["scan"])
    out["other"] = max(0.0, span - sum(out.values()))
    return out


def table(backend: str, trials: list[dict[str, object]]) -> tuple[float, float]:
    print(f"\n{backend}: {len(trials)} trials (seconds)")
    print(f"{'trial':34}" + "".join(f"{p[:10]:>11}" for p in PHASES) + f"{'overhead':>10}")
    totals = dict.fromkeys(PHASES, 0.0)
    for trial in trials:
        row = phases(trial["durations"], float(trial["span"]))  # type: ignore[arg-type]
        over = sum(v for k, v in row.items() if k not in IRREDUCIBLE and k != "agent")
        print(f"{str(trial['trial'])[:34]:34}" + "".join(f"{row[p]:11.2f}" for p in PHASES) + f"{over:10.2f}")
        for k, v in row.items():
            totals[k] += v
    n = max(1, len(trials))
    print(f"{'mean':34}" + "".join(f"{totals[p] / n:11.2f}" for p in PHASES))
    irreducible = sum(totals[p] for p in IRREDUCIBLE) / n
    overhead = sum(v for k, v in totals.items() if k not in IRREDUCIBLE and k != "agent") / n
    return irreducible, overhead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local,docker")
    parser.add_argument("--agents", default="oracle")
    parser.add_argument("--cache", type=Path, default=default_cache(),
                        help="bake cache (default: the user's, so bakes are reused)")
    args = parser.parse_args()
    summary = []
    for backend in args.backend.split(","):
        with tempfile.TemporaryDirectory(prefix="reactbench-phases-") as tmp:
            run_suite(cache=args.cache, records=Path(tmp, "warmup"), backend=backend, agents=args.agents)
            run = run_suite(cache=args.cache, records=Path(tmp, "records"), backend=backend,
                            agents=args.agents)
            irreducible, overhead = table(backend, trial_records(run.records))
        summary.append((backend, irreducible, overhead, run.summary))
    print(f"\ncommand: python benchmarks/phases.py --backend {args.backend} --agents {args.agents}")
    for backend, irreducible, overhead, outcome in summary:
        print(f"{backend:7} per trial: irreducible {irreducible:6.2f} s, overhead {overhead:6.2f} s "
              f"= {100 * overhead / max(irreducible, 1e-9):5.1f}% of irreducible   ({outcome})")


if __name__ == "__main__":
    main()
