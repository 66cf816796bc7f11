"""Cold vs warm run of the shipped suite on one backend: the second run reuses every
bake, so it costs only the trials.

    python benchmarks/cold_warm.py [--backend local|docker] [--agents oracle,nop] [-n 2]
                                   [--registry [--registry-dir DIR]] [--timeline]
                                   [--docker-host unix:///path/docker.sock]

Prints the wall time of each run and their ratio. The cold run starts from an empty
bake cache (a temporary directory, the download cache in it included); on docker it
also removes every image the plugin built from the engine (they are rebuilt by the cold
run), the Debian root included. Run it against an engine of its own (`--docker-host`):
the removal takes the images from under anything else that uses the engine. Such an
engine needs its own data root, exec root, socket and pid file:

    dockerd --data-root /var/tmp/rb-engine/data --exec-root /var/tmp/rb-engine/exec \
      -H unix:///var/tmp/rb-engine/docker.sock --pidfile /var/tmp/rb-engine/docker.pid \
      --bridge=none --iptables=false --ip-masq=false

The benchmark's trials and bakes need no bridge, but `--bridge=none` deletes the
machine's `docker0`: the first engine's builds and containers then fail to find it
until that engine is restarted (which makes it again).

With `--registry` (docker) it starts Debian's `docker-registry` on loopback and
measures a fresh engine with a warm registry: the registry filled (the base images by
`reactbench images`, then a run that bakes the tasks' images and pushes them), the
engine's images and the bake cache removed again, a cold run that pulls every image
instead of baking it, and the warm run. `--registry-dir` keeps the registry's storage
across runs: a later run fills it by pulls. `--timeline` prints each trial's steps in
seconds from the run's first trial: when its images were there, the agent's work, the
grading.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SuiteRun, run_suite, trial_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.sandbox.helpers import loopback_registry


def clear_docker_images() -> int:
    import docker

    client = docker.from_env()
    removed = 0
    for image in client.images.list():
        names = image.tags or []
        ours = (image.labels or {}).get("reactbench.recipe") or any(
            n.startswith(("reactbench/", "ghcr.io/millionco/react-bench-")) for n in names)
        if ours:
            for name in names or [image.id]:
                client.images.remove(name, force=True)
            removed += 1
    client.images.prune(filters={"dangling": True})
    return removed


def bakes_of(run: SuiteRun) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for path in run.records.glob("*/bakes.json"):
        found += json.loads(path.read_text())
    return found


def describe(run: SuiteRun) -> str:
    bakes = bakes_of(run)
    counts = {how: sum(1 for b in bakes if b["how"] == how) for how in ("baked", "pulled", "reused")}
    # The download cache's own counts (a bake's figures overlap those of the bakes beside it).
    traffic = [json.loads(path.read_text()) for path in run.records.glob("*/downloads.json")]
    served = sum(int(t.get("served_bytes", 0)) for t in traffic)
    fetched = sum(int(t.get("fetched_bytes", 0)) for t in traffic)
    return (f"{counts['baked']} baked, {counts['pulled']} pulled, {counts['reused']} reused; "
            f"packages {served / 1e6:.0f} MB served, {fetched / 1e6:.0f} MB fetched")


def phases(run: SuiteRun) -> str:
    """Where the run's time went: the images pulled (summed, and the longest), and each
    trial phase summed over the trials (they run side by side, so sums exceed the wall)."""
    pulls = {str(b["name"]): float(b["seconds"]) for b in bakes_of(run)  # type: ignore[arg-type]
             if b["how"] == "pulled"}
    totals: dict[str, float] = {}
    for trial in trial_records(run.records):
        durations: dict[str, float] = trial.get("durations", {})  # type: ignore[assignment]
        for phase, seconds in durations.items():
            totals[phase] = totals.get(phase, 0.0) + float(seconds)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    line = "trials: " + ", ".join(f"{phase} {seconds:.0f}" for phase, seconds in ranked if seconds >= 0.5)
    if pulls:
        longest = max(pulls, key=lambda name: pulls[name])
        line = (f"pulls {sum(pulls.values()):.0f} s in all (longest {longest} {pulls[longest]:.0f} s); "
                + line)
    return line + " (s, summed over the trials)"


def timeline(run: SuiteRun) -> list[str]:
    """Each trial's steps in seconds from the run's first trial event: its two images'
    bakes (or pulls, or reuse), the agent's work and the grading."""
    trials = []
    for status in trial_records(run.records):
        lines = Path(str(status["record"]), "events.jsonl").read_text().splitlines()
        trials.append((str(status["trial"]), [json.loads(line) for line in lines]))
    if not trials:
        return []
    zero = min(events[0]["t"] for _, events in trials if events)
    out = []
    for name, events in sorted(trials, key=lambda t: t[1][0]["t"] if t[1] else 0):
        spans: dict[str, list[float]] = {}
        for e in events:
            kind = str(e["event"])
            what = (str(e.get("image", "")).rsplit("/", 1)[-1] + " image") if kind.startswith("bake") else ""
            for edge, index in (("-start", 0), ("-end", 1)):
                if kind.endswith(edge):
                    step = what or kind[: -len(edge)]
                    spans.setdefault(step, [0.0, 0.0])[index] = e["t"] - zero
        steps = ", ".join(f"{step} {a:.1f}-{b:.1f}" for step, (a, b) in spans.items() if b)
        out.append(f"{name}: {steps}; ends {events[-1]['t'] - zero:.1f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--agents", default="oracle,nop")
    parser.add_argument("-n", type=int, default=0, help="xdist workers (0: none)")
    parser.add_argument("--registry", action="store_true",
                        help="also measure a fresh engine with a warm image registry (docker)")
    parser.add_argument("--docker-host", help="the engine to use (DOCKER_HOST), e.g. one of its own")
    parser.add_argument("--timeline", action="store_true",
                        help="print each trial's steps (bakes, agent, grading) in time")
    parser.add_argument("--registry-dir", type=Path,
                        help="keep the registry's storage here across runs (with --registry): a "
                             "later run fills it by pulls instead of bakes")
    args = parser.parse_args()
    if args.registry and args.backend != "docker":
        parser.error("--registry needs --backend docker")
    if args.docker_host:
        os.environ["DOCKER_HOST"] = args.docker_host
    if args.registry and shutil.which("docker-registry") is None:
        parser.error("--registry needs Debian's docker-registry (apt-get install docker-registry)")
    command = (f"python benchmarks/cold_warm.py --backend {args.backend} --agents {args.agents}"
               + (f" -n {args.n}" if args.n else "") + (" --registry" if args.registry else "")
               + (f" --docker-host {args.docker_host}" if args.docker_host else "")
               + (f" --registry-dir {args.registry_dir}" if args.registry_dir else ""))

    def fresh() -> None:
        if args.backend == "docker":
            print(f"removed {clear_docker_images()} images the plugin had built", flush=True)

    with tempfile.TemporaryDirectory(prefix="reactbench-bench-") as tmp:
        runs: dict[str, SuiteRun] = {}

        def run(name: str, cache: Path, extra: list[str] | None = None) -> None:
            started = time.monotonic()
            runs[name] = run_suite(cache=cache, records=Path(tmp, name), backend=args.backend,
                                   agents=args.agents, workers=args.n, extra=extra)
            print(f"{name}: {time.monotonic() - started:.1f} s", flush=True)

        fresh()
        if args.registry:
            with loopback_registry(args.registry_dir or Path(tmp)) as port:
                where = f"127.0.0.1:{port}"
                option = [f"--reactbench-image-registry={where}/reactbench"]
                # The registry filled: the base images by `reactbench images` (their own
                # time limit: a loaded machine can take longer than a task's
                # build_timeout_sec for the whole chain), then the cold run bakes the
                # tasks' images and pushes them.
                started = time.monotonic()
                subprocess.run([sys.executable, "-m", "pytest_reactbench.cli", "images", "--sandbox",
                                "docker", "--cache", str(Path(tmp, "cache-push")),
                                f"--image-registry={where}/reactbench"], check=True,
                               stdout=subprocess.DEVNULL)
                print(f"base images baked and pushed: {time.monotonic() - started:.1f} s", flush=True)
                run("cold (base images baked)", Path(tmp, "cache-push"), option)
                fresh()
                run("cold, warm registry", Path(tmp, "cache-pull"), option)
                run("warm", Path(tmp, "cache-pull"), option)
        else:
            run("cold", Path(tmp, "cache-cold"))
            run("warm", Path(tmp, "cache-cold"))
        print(f"command: {command}")
        for name, suite in runs.items():
            print(f"{name + ' run:':26} {suite.seconds:7.1f} s   {suite.summary}")
            print(f"{'':26} bakes: {describe(suite)}")
            print(f"{'':26} {phases(suite)}")
            if args.timeline:
                for line in timeline(suite):
                    print(f"{'':28}{line}")
        warm = runs["warm"]
        reused = len(re.findall(r"reusing baked image", warm.output))
        rebuilt = len(re.findall(r": baking |: building ", warm.output))
        print(f"warm run reused {reused} baked images and rebuilt {rebuilt}")
        if "cold" in runs:
            print(f"cold / warm: {runs['cold'].seconds / warm.seconds:.1f}x")
        if args.registry:
            print(f"cold with a warm registry / warm: "
                  f"{runs['cold, warm registry'].seconds / warm.seconds:.2f}x")


if __name__ == "__main__":
    main()
