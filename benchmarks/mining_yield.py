"""How many of a repository's recent changes `reactbench mine` makes into valid tasks.

    python benchmarks/mining_yield.py REPO... [--last 20] [--sandbox docker] [--jobs 2]
                                      [--out /tmp/mining-yield]

For each local clone, mines the last N first-parent changes (`reactbench mine --range`)
into OUT/<repo>/ and removes the task images its controls baked as it goes, then
prints one Markdown row per repository: its toolchain, the changes, those that change
both source and a spec, how many were mined (oracle 1, nop 0), and the refusals and
failures by reason. The tasks stay in OUT: they contain the repositories' source, so
keep them out of any commit."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

#: Refusals read from the change alone: it does not change both source and a spec.
NOT_CANDIDATES = {"only-tests", "only-docs", "no-source", "no-spec", "empty"}
BEFORE_BAKE = NOT_CANDIDATES | {"toolchain", "workspace", "no-runner", "unreadable", "test-command"}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "repo"


def sweep_images(repo: str, out: Path, stop: threading.Event) -> None:
    """Remove the task images of changes whose check is over (no scratch folder left)."""
    import docker
    import requests

    client = docker.from_env()
    pattern = re.compile(rf"^reactbench/({re.escape(slug(repo))}-[0-9a-f]{{10}})-(environment|tests):")
    while True:
        try:
            for image in client.images.list():
                for tag in image.tags:
                    match = pattern.match(tag)
                    if match and not list(out.glob(f".mining-*/{match.group(1)}")):
                        client.images.remove(tag, force=True)
        except (docker.errors.DockerException, requests.RequestException) as exc:
            # A busy engine answers late: the next round sweeps what this one missed.
            print(f"sweep: {exc}; trying again in 30 s", file=sys.stderr)
        if stop.wait(30):
            return


def mine(repo: Path, last: int, sandbox: str, jobs: int, out: Path) -> dict[str, Any]:
    commits = subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent", "-n", str(last + 1),
                              "HEAD"], capture_output=True, text=True, check=True).stdout.split()
    stop = threading.Event()
    sweeper = threading.Thread(target=sweep_images, args=(repo.name, out, stop), daemon=True)
    if sandbox == "docker":
        sweeper.start()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest_reactbench.cli", "mine", "--repo", str(repo),
                    "--range", f"{commits[-1]}..{commits[0]}", "--sandbox", sandbox, "--jobs", str(jobs),
                    "--out", str(out)], check=False)
    stop.set()
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    summary["seconds"] = round(time.monotonic() - started)
    return summary


def row(name: str, summary: dict[str, Any]) -> str:
    each: list[dict[str, Any]] = summary["each"]

    def codes(change: dict[str, Any]) -> set[str]:
        return {str(r["code"]) for r in change["reasons"]}

    candidates = [c for c in each if not codes(c) & NOT_CANDIDATES]
    before = Counter(code for c in each if c["state"] == "refused" for code in codes(c) & BEFORE_BAKE)
    controls = Counter(code for c in each if c["state"] == "refused" for code in codes(c) - BEFORE_BAKE)
    failed = Counter(str(r["code"]) for c in each if c["state"] == "failed"
                     for r in c["reasons"] if r["failed"])

    def counts(counter: Counter[str]) -> str:
        return ", ".join(f"{code} {n}" for code, n in counter.most_common()) or "-"

    return (f"| {name} | {len(each)} | {len(candidates)} | {summary['mined']} | {counts(before)} | "
            f"{counts(controls)} | {counts(failed)} | {summary.get('seconds', '-')} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--last", type=int, default=20)
    parser.add_argument("--sandbox", default="docker")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/mining-yield"))
    args = parser.parse_args()
    rows = []
    for repo in args.repos:
        summary = mine(repo.resolve(), args.last, args.sandbox, args.jobs, args.out / repo.name)
        rows.append(row(repo.name, summary))
    print("| repository | changes | source + spec | mined | refused before a bake | "
          "refused by the controls | failed | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
