"""A pool of 2 Docker engines against 1, on this one machine, and what the pool's
bookkeeping costs per trial.

    python benchmarks/pool.py [--tasks 8] [--workers 4] [--seconds 6]

Starts a second engine (its own dockerd, socket, data root and bridge; removed at the
end), bakes tiny tasks (a static busybox) on the main engine, and times the same
session (`-n WORKERS`, oracle only) over 1 engine and over the pool of 2, for two kinds
of agent: one that waits (`sleep`: an agent waiting for its model, the usual case) and
one that computes (a busy loop on one core). Each trial asks for 1 CPU, so one engine
of NCPU cores holds NCPU trials at once (the room ledger): the pool doubles the trials
that run at once, which helps waiting agents and cannot help computing ones beyond the
machine's cores. Then times the pool's own work for one trial: placing it (a ledger
read per engine, a ping of the chosen one), reserving and releasing its room.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from pytest_reactbench.sandbox.engines import EnginePool  # noqa: E402
from pytest_reactbench.sandbox.options import SandboxOptions  # noqa: E402
from tests.sandbox.extra_engines import build_tiny_base, extra_engine, tiny_task  # noqa: E402

MAIN = "unix:///var/run/docker.sock"
AGENTS = {
    "waits": "sleep {s}; echo hello > /app/out.txt",
    "computes": "end=$(( $(date +%s) + {s} )); while [ $(date +%s) -lt $end ]; do :; done; "
                "echo hello > /app/out.txt",
}


def session(folder: Path, hosts: list[str], workers: int, cache: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
         "--reactbench-sandbox=docker", "--reactbench-agent=oracle", f"--reactbench-cache={cache}",
         "--reactbench-records=records", *(f"--reactbench-docker-host={h}" for h in hosts), "tasks"],
        cwd=folder, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the session failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return seconds


def bookkeeping(hosts: list[str], cache: Path, rounds: int) -> dict[str, float]:
    """Milliseconds per trial of placing it and of taking and giving back its room."""
    pool = EnginePool(SandboxOptions(cache=cache, docker_hosts=tuple(hosts)))
    try:
        place, room = [], []
        for _ in range(rounds):
            began = time.perf_counter()
            engine = pool._place()  # the step a trial's first bake takes
            place.append(time.perf_counter() - began)
            pool.end_placement()
            began = time.perf_counter()
            holder = engine.ledger.reserve("benchmark", 1, 512)
            engine.ledger.release(holder)
            room.append(time.perf_counter() - began)
        return {"place_ms": 1000 * statistics.median(place), "room_ms": 1000 * statistics.median(room)}
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=6, help="how long each agent works")
    parser.add_argument("--rounds", type=int, default=200, help="bookkeeping rounds")
    args = parser.parse_args()
    client = docker.from_env()
    info = client.info()
    print(f"machine: {info['NCPU']} CPU(s), {int(info['MemTotal']) // 2**20} MiB; "
          f"{args.tasks} trials of 1 CPU each, -n {args.workers}, agents work {args.seconds}s")
    with tempfile.TemporaryDirectory(prefix="reactbench-pool-") as tmp, extra_engine(9) as second:
        folder, cache = Path(tmp), Path(tmp, "cache")
        base = build_tiny_base(client, Path(tempfile.mkdtemp(dir=tmp)))
        try:
            for kind, solve in AGENTS.items():
                tasks = folder / "tasks"
                if tasks.exists():
                    subprocess.run(["rm", "-rf", str(tasks)], check=True)
                for n in range(args.tasks):
                    tiny_task(tasks, f"bench-{kind}-{n}", base, solve=solve.format(s=args.seconds))
                # Bakes on the main engine and copies to the second, not measured.
                session(folder, [MAIN, second.url], args.workers, cache)
                one = session(folder, [MAIN], args.workers, cache)
                two = session(folder, [MAIN, second.url], args.workers, cache)
                print(f"agent that {kind:8}: 1 engine {one:6.1f}s, pool of 2 {two:6.1f}s, "
                      f"ratio {one / two:.2f}x")
            figures = bookkeeping([MAIN, second.url], cache, args.rounds)
            print(f"bookkeeping per trial: placing {figures['place_ms']:.2f} ms, "
                  f"room (reserve + release) {figures['room_ms']:.2f} ms per sandbox")
        finally:
            for image in client.images.list(filters={"label": "reactbench.recipe"}):
                for name in image.tags:
                    if name.startswith("reactbench/bench-"):
                        client.images.remove(name)
            client.images.remove(base)


if __name__ == "__main__":
    main()
