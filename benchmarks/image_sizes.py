"""What the docker backend's images weigh: each stand-in's size, its own layers (the
sizes `docker history` gives, largest first), the shipped tasks' images (each task's
environment and verifier, the grader layer included), and the distinct layers of the
stand-ins and of the whole shipped suite (what a fresh engine pulls or bakes once).

    python benchmarks/image_sizes.py [--cache DIR] [--docker-host URL] [--top N]

Bakes what is missing first (`reactbench images --sandbox docker`, then each task's
two images), then reads the engine: the images the current recipes bake to (their
keys), not older ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_reactbench.plugin.options import environment_sandbox_options, setting
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP, recipe_dir
from pytest_reactbench.tasks.load import load_task
from pytest_reactbench.trial import Stages

MB = 1e6
TASKS = Path(__file__).resolve().parents[1] / "tasks"


def _step(created_by: str) -> str:
    """A layer's step without the build arguments the engine writes before it."""
    step = created_by.partition("/bin/sh -c ")[2] or created_by or "(the debootstrap root)"
    return step.replace("#(nop) ", "").strip()[:40]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=setting("cache"))
    parser.add_argument("--docker-host", default="")
    parser.add_argument("--top", type=int, default=3, help="layers shown per image")
    args = parser.parse_args()
    env = {**os.environ, **({"DOCKER_HOST": args.docker_host} if args.docker_host else {})}
    baked = subprocess.run(["reactbench", "images", "--sandbox", "docker",
                            "--cache", str(args.cache)], env=env, capture_output=True, text=True)
    if baked.returncode != 0:
        print(baked.stdout[-3000:] + baked.stderr[-3000:], file=sys.stderr)
        return 1
    if args.docker_host:
        os.environ["DOCKER_HOST"] = args.docker_host
    backend = DockerBackend(environment_sandbox_options(cache=args.cache))
    try:
        import docker

        client = docker.from_env()
        layers: dict[str, int] = {}
        rows = []

        def own_layers(digest: str) -> tuple[int, list[dict], set[str]]:
            """An image's size, its layers with content, and their keys."""
            image = client.images.get(digest)
            history = [e for e in image.history() if e.get("Size")]
            keys = set()
            for entry in history:
                key = f"{entry['Id']}:{entry['Created']}:{entry['CreatedBy']}"
                layers[key] = int(entry["Size"])
                keys.add(key)
            return int(image.attrs["Size"]), sorted(history, key=lambda e: -int(e["Size"])), keys

        # A stand-in serving two public names is one image, shown once.
        for stand_in, public in sorted({v: k for k, v in DEFAULT_IMAGE_MAP.items()}.items()):
            if recipe_dir(stand_in) is None:
                continue
            base = backend.base_image(public, None)
            if base is None:
                print(f"{public}: not baked", file=sys.stderr)
                return 1
            size, own, _ = own_layers(base.digest)
            rows.append((stand_in, size, own[:args.top]))
        stand_ins = sum(layers.values())
        stand_in_keys = set(layers)
        stages = Stages(backend, lambda _: None, {})
        tasks = []
        for folder in sorted(p.parent for p in TASKS.glob("*/task.toml")):
            task = load_task(folder)
            for role in ("agent", "verifier"):
                image = stages.bake(task, role)
                size, _, keys = own_layers(image.digest)
                added = sum(layers[k] for k in keys - stand_in_keys)
                tasks.append((f"{task.id}/{'environment' if role == 'agent' else 'tests'}", size, added))
        root = client.images.get("reactbench/debian-root:bookworm")
        print(f"{'image':36}{'size':>10}  largest layers")
        print(f"{'debian-root (debootstrap)':36}{root.attrs['Size'] / MB:>8.0f} MB")
        for name, size, own in rows:
            shown = "; ".join(f"{int(e['Size']) / MB:.0f} MB {_step(e['CreatedBy'])!r}" for e in own)
            print(f"{name:36}{size / MB:>8.0f} MB  {shown}")
        print(f"{'task image':36}{'size':>10}  {'above the stand-ins':>20}")
        for name, size, added in tasks:
            print(f"{name:36}{size / MB:>8.0f} MB  {added / MB:>17.0f} MB")
        print(f"distinct layers of the stand-ins: {stand_ins / MB:.0f} MB "
              f"({len(stand_in_keys)} layers with content)")
        print(f"distinct layers of the shipped suite's images: {sum(layers.values()) / MB:.0f} MB "
              f"({len(layers)} layers with content)")
        print(f"largest stand-in: {max(size for _, size, _ in rows) / MB:.0f} MB")
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
