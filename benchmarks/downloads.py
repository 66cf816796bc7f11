"""What the download cache saves: the given tasks' images baked one after another on
docker, first with an empty download cache, then again on an engine without them (the
baked images removed) with the cache the first round filled.

    python benchmarks/downloads.py TASK_DIR... [--role environment|tests|both]
        [--git-mirror PREFIX=LOCATION] [--docker-host unix:///path/docker.sock]

Prints, per bake, its seconds and the package bytes it fetched from the npm registry
and was served by the cache (the cache's own counters), and the rounds' ratio. The
base images (the system layer, the stand-ins) are baked before the first round and
kept, so both rounds bake the same task layers. Only the images it baked are removed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_reactbench.sandbox.base import ImageRecipe
from pytest_reactbench.sandbox.mirrors import parse_git_mirrors
from pytest_reactbench.sandbox.options import SandboxOptions, default_ca_bundle, default_cache
from pytest_reactbench.tasks import load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--role", default="environment", choices=("environment", "tests", "both"))
    parser.add_argument("--git-mirror", action="append", default=[])
    parser.add_argument("--docker-host")
    args = parser.parse_args()
    if args.docker_host:
        os.environ["DOCKER_HOST"] = args.docker_host
    from pytest_reactbench.sandbox.docker import DockerBackend

    folders = ["environment", "tests"] if args.role == "both" else [args.role]
    recipes = []
    for path in args.tasks:
        task = load_task(path)
        for folder in folders:
            env = task.config.environment if folder == "environment" else task.config.verifier_environment
            recipes.append(ImageRecipe(f"{task.id}/{folder}", path / folder / "Dockerfile", path / folder,
                                       timeout=env.build_timeout_sec))
    mirrors = parse_git_mirrors(args.git_mirror, "--git-mirror")
    rounds: list[list[tuple[str, float, int, int]]] = []
    with tempfile.TemporaryDirectory(prefix="reactbench-downloads-") as tmp:
        for label in ("empty download cache", "warm download cache"):
            # A bake cache of its own per round (the task layers' locks and contexts);
            # the base images are on the engine under their content tags either way.
            options = SandboxOptions(cache=Path(tmp, f"bakes-{len(rounds)}"), git_mirrors=mirrors,
                                     ca_bundle=default_ca_bundle(), download_cache=Path(tmp, "downloads"))
            backend = DockerBackend(options)
            baked = []
            try:
                if not rounds:
                    shared = DockerBackend(SandboxOptions(cache=default_cache(),
                                                          ca_bundle=default_ca_bundle()))
                    for recipe in recipes:  # the bases only: a look-up of each FROM
                        for line in recipe.dockerfile.read_text().splitlines():
                            if line.startswith("ARG BASE_IMAGE="):
                                shared.base_image(line.split("=", 1)[1], print)
                    shared.close()
                print(f"-- {label}", flush=True)
                results = []
                for recipe in recipes:
                    started = time.monotonic()
                    image = backend.bake(recipe, lambda line: None)
                    baked.append(image.ref)
                    record = backend.bakes[-1]
                    results.append((recipe.name, time.monotonic() - started, record.fetched_bytes,
                                    record.served_bytes))
                    print(f"{recipe.name:60} {results[-1][1]:6.1f} s  "
                          f"fetched {record.fetched_bytes / 1e6:7.1f} MB  "
                          f"served {record.served_bytes / 1e6:7.1f} MB", flush=True)
                rounds.append(results)
            finally:
                for ref in baked:
                    backend.client.images.remove(ref, force=True)
                backend.close()
    print(f"command: python benchmarks/downloads.py {' '.join(map(str, args.tasks))} --role {args.role}"
          + "".join(f" --git-mirror {m}" for m in args.git_mirror))
    first = rounds[0]
    if len(first) > 1 and first[0][2]:
        for name, _, fetched, _ in first[1:]:
            print(f"{name}: fetched {100 * fetched / first[0][2]:.1f}% of the bytes {first[0][0]} fetched")
    total = [sum(r[1] for r in results) for results in rounds]
    print(f"bakes, empty download cache: {total[0]:.1f} s; warm download cache: {total[1]:.1f} s; "
          f"{total[0] / total[1]:.2f}x")


if __name__ == "__main__":
    main()
