"""`-n 1` against `-n 2` on the warm shipped suite: how well trials run in parallel.

    python benchmarks/scaling.py [--backend local] [--agents oracle,nop] [--workers 1,2]

A first run bakes (or finds the bakes) and is not measured; then one run per worker
count, timed from outside. Prints the wall times and the ratio to the first count."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import run_suite

from pytest_reactbench.plugin.options import setting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--agents", default="oracle,nop")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--dist", default="load", help="xdist's scheduling (load, worksteal, ...)")
    parser.add_argument("--attempts", type=int, default=1, help="trials per task and agent")
    parser.add_argument("--cache", type=Path, default=setting("cache"))
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="reactbench-scaling-") as tmp:
        run_suite(cache=args.cache, records=Path(tmp, "warmup"), backend=args.backend, agents=args.agents)
        runs = [(n, run_suite(cache=args.cache, records=Path(tmp, f"n{n}"), backend=args.backend,
                              agents=args.agents, workers=n,
                              extra=[f"--dist={args.dist}", f"--reactbench-attempts={args.attempts}"]))
                for n in counts]
    print(f"command: python benchmarks/scaling.py --backend {args.backend} --agents {args.agents} "
          f"--workers {args.workers} --dist {args.dist} --attempts {args.attempts}")
    base = runs[0][1].seconds
    for n, run in runs:
        print(f"-n {n}: {run.seconds:7.1f} s   {base / run.seconds:4.2f}x of -n {counts[0]}"
              f"   ({run.summary})")


if __name__ == "__main__":
    main()
