"""What the download cache saves: the given images baked one after another, first
with an empty download cache, then again from scratch with the cache the first round
filled.

    python benchmarks/downloads.py DIR... [--backend docker|local] [--role environment|tests|both]
        [--git-mirror PREFIX=LOCATION] [--docker-host unix:///path/docker.sock]

DIR is a task (its environment/ or tests/ image, by --role) or any directory with a
Dockerfile (a stand-in under images/). Prints, per bake, its seconds and the package
bytes it fetched from the npm registry and was served by the cache (the cache's own
counters), and the rounds' ratio. On docker, the base images (the system layer, the
stand-ins) are baked before the first round and kept, so both rounds bake the same
layers, and only the images it baked are removed; on local, each round has a bake
cache of its own, so each bakes the whole chain.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import ImageRecipe
from pytest_reactbench.sandbox.mirrors import parse_git_mirrors
from pytest_reactbench.tasks import load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--backend", default="docker", choices=("docker", "local"))
    parser.add_argument("--role", default="environment", choices=("environment", "tests", "both"))
    parser.add_argument("--git-mirror", action="append", default=[])
    parser.add_argument("--docker-host")
    args = parser.parse_args()
    if args.docker_host:
        os.environ["DOCKER_HOST"] = args.docker_host
    from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS

    folders = ["environment", "tests"] if args.role == "both" else [args.role]
    recipes = []
    for path in args.paths:
        if (path / "Dockerfile").is_file():
            recipes.append(ImageRecipe(path.name, path / "Dockerfile", path, timeout=3600))
            continue
        task = load_task(path)
        for folder in folders:
            env = task.config.environment if folder == "environment" else task.config.verifier_environment
            recipes.append(ImageRecipe(f"{task.id}/{folder}", path / folder / "Dockerfile", path / folder,
                                       timeout=env.build_timeout_sec))
    mirrors = parse_git_mirrors(args.git_mirror, "--git-mirror")
    rounds: list[list[tuple[str, float, int, int]]] = []
    with tempfile.TemporaryDirectory(prefix="reactbench-downloads-") as tmp:
        for label in ("empty download cache", "warm download cache"):
            options = environment_sandbox_options(cache=Path(tmp, f"bakes-{len(rounds)}"),
                                                  git_mirrors=mirrors, download_cache=Path(tmp, "downloads"))
            backend = BUILTIN_BACKENDS[args.backend](options)
            baked = []
            try:
                if not rounds and args.backend == "docker":
                    shared = BUILTIN_BACKENDS["docker"](environment_sandbox_options())
                    for recipe in recipes:  # the bases only: a look-up of each FROM
                        for line in recipe.dockerfile.read_text().splitlines():
                            if line.startswith("ARG BASE_IMAGE="):
                                shared.base_image(line.split("=", 1)[1], print)
                    shared.close()
                print(f"-- {label}", flush=True)
                for recipe in recipes:
                    baked.append(backend.bake(recipe, lambda line: None).ref)
                results = [(r.name, r.seconds, r.fetched_bytes, r.served_bytes)
                           for r in backend.bake_records() if r.how == "baked"]
                for name, seconds, fetched, served in results:
                    print(f"{name:60} {seconds:6.1f} s  fetched {fetched / 1e6:7.1f} MB  "
                          f"served {served / 1e6:7.1f} MB", flush=True)
                rounds.append(results)
            finally:
                if args.backend == "docker":
                    for ref in baked:
                        backend.client.images.remove(ref, force=True)  # type: ignore[attr-defined]
                backend.close()
    print(f"command: python benchmarks/downloads.py {' '.join(map(str, args.paths))} "
          f"--backend {args.backend} --role {args.role}"
          + "".join(f" --git-mirror {m}" for m in args.git_mirror))
    fetched = [sum(r[2] for r in results) for results in rounds]
    if fetched[0]:
        print(f"package bytes fetched: {fetched[0] / 1e6:.1f} MB, then {fetched[1] / 1e6:.1f} MB "
              f"({100 * fetched[1] / fetched[0]:.1f}% of the first)")
    total = [sum(r[1] for r in results) for results in rounds]
    print(f"bakes, empty download cache: {total[0]:.1f} s; warm download cache: {total[1]:.1f} s; "
          f"{total[0] / total[1]:.2f}x")


if __name__ == "__main__":
    main()
