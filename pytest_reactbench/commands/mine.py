"""`reactbench mine`: a task from one change of a repository's history, or from each
change of a range (in parallel)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_reactbench.controls import stop_controls_on_sigterm
from pytest_reactbench.mining import MiningError, Request, commits_in, mine, mine_many, write_summary


def run_mine(args: argparse.Namespace) -> int:
    try:
        body = Path(args.body_file).read_text() if args.body_file else None
    except OSError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    request = Request(
        repo=Path(args.repo), base=args.base, head=args.head, merge=args.merge,
        out=Path(args.out) if args.out else None, title=args.title, body=body,
        pull_request=args.pr, keep_anyway=args.keep_anyway, sandbox=args.sandbox,
        strict_react_doctor=args.strict_react_doctor,
        records=Path(args.records) if args.records else None,
    )
    stop_controls_on_sigterm()
    if args.range or args.merges:
        return _mine_many(args, request)
    try:
        outcome = mine(request, echo=lambda line: print(line, flush=True))
    except MiningError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("reactbench mine: interrupted", file=sys.stderr)
        return 130  # as a shell reports a command Ctrl-C stopped
    for reason in outcome.reasons:
        print(f"{'FAILED ' if reason.failed else 'REFUSED'}  {reason}")
    if outcome.task is not None:
        state = "kept anyway (the reasons are in mining.json)" if outcome.reasons else "accepted"
        print(f"{state}: {outcome.task}")
    return 0 if outcome.accepted else 1


def _mine_many(args: argparse.Namespace, request: Request) -> int:
    if args.base or args.head or args.merge or args.title or args.body_file or args.pr:
        print("reactbench mine: --range and --merges take no --base, --head, --merge, --title, "
              "--body-file or --pr (each change is described by its own commits)", file=sys.stderr)
        return 2
    out = Path(args.out or "tasks")
    try:
        commits = commits_in(request.repo, args.range) if args.range else list(args.merges)
        result = mine_many(request, commits, out, jobs=args.jobs,
                           progress=lambda line: print(line, flush=True))
    except MiningError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    write_summary(result, request.repo, args.range or " ".join(args.merges), out,
                  echo=lambda line: print(line, flush=True))
    if result.interrupted:
        return 130  # as a shell reports a command Ctrl-C stopped
    return 0 if result.count("mined") else 1
