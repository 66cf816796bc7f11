"""Cold vs warm run of the shipped suite on one backend: the second run reuses every
bake, so it costs only the trials.

    python benchmarks/cold_warm.py [--backend local|docker] [--agents oracle,nop] [-n 2]

Prints the wall time of each run and their ratio. The cold run starts from an empty
bake cache (a temporary directory); on docker it also removes every image the plugin
built from the engine (they are rebuilt by the cold run), the Debian root included."""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from common import run_suite


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--agents", default="oracle,nop")
    parser.add_argument("-n", type=int, default=0, help="xdist workers (0: none)")
    args = parser.parse_args()
    if args.backend == "docker":
        print(f"removed {clear_docker_images()} images the plugin had built")
    with tempfile.TemporaryDirectory(prefix="reactbench-bench-") as tmp:
        cache = Path(tmp, "cache")
        cold, warm = (run_suite(cache=cache, records=Path(tmp, name), backend=args.backend,
                                agents=args.agents, workers=args.n) for name in ("cold", "warm"))
    reused = len(re.findall(r"reusing baked image", warm.output))
    rebuilt = len(re.findall(r": baking |: building ", warm.output))
    print(f"command: python benchmarks/cold_warm.py --backend {args.backend} "
          f"--agents {args.agents}" + (f" -n {args.n}" if args.n else ""))
    print(f"cold run: {cold.seconds:7.1f} s   {cold.summary}")
    print(f"warm run: {warm.seconds:7.1f} s   {warm.summary}")
    print(f"warm run reused {reused} baked images and rebuilt {rebuilt}")
    print(f"cold / warm: {cold.seconds / warm.seconds:.1f}x")


if __name__ == "__main__":
    main()
