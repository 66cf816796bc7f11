"""What the docker backend's stand-ins weigh: each one's size, its own layers (the
sizes `docker history` gives, largest first), and the distinct layers of them all
(what a fresh engine pulls or bakes once).

    python benchmarks/image_sizes.py [--cache DIR] [--docker-host URL] [--top N]

Bakes what is missing first (`reactbench images --sandbox docker`), then reads the
engine: the images the current recipes bake to (their keys), not older ones.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.options import SandboxOptions, default_ca_bundle, default_cache
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP, recipe_dir

MB = 1e6


def _step(created_by: str) -> str:
    """A layer's step without the build arguments the engine writes before it."""
    step = created_by.partition("/bin/sh -c ")[2] or created_by or "(the debootstrap root)"
    return step.replace("#(nop) ", "").strip()[:40]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=default_cache())
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
    backend = DockerBackend(SandboxOptions(cache=args.cache, ca_bundle=default_ca_bundle()))
    try:
        import docker

        client = docker.from_env()
        layers: dict[str, int] = {}
        rows = []
        for public, stand_in in sorted(DEFAULT_IMAGE_MAP.items()):
            if recipe_dir(stand_in) is None:
                continue
            base = backend.base_image(public, None)
            if base is None:
                print(f"{public}: not baked", file=sys.stderr)
                return 1
            image = client.images.get(base.digest)
            history = image.history()
            for entry in history:
                if entry.get("Size"):
                    layers[f"{entry['Id']}:{entry['Created']}:{entry['CreatedBy']}"] = int(entry["Size"])
            own = sorted((e for e in history if e.get("Size")), key=lambda e: -int(e["Size"]))
            rows.append((stand_in, int(image.attrs["Size"]), own[:args.top]))
        root = client.images.get("reactbench/debian-root:bookworm")
        print(f"{'image':36}{'size':>10}  largest layers")
        print(f"{'debian-root (debootstrap)':36}{root.attrs['Size'] / MB:>8.0f} MB")
        for name, size, own in rows:
            shown = "; ".join(f"{int(e['Size']) / MB:.0f} MB {_step(e['CreatedBy'])!r}" for e in own)
            print(f"{name:36}{size / MB:>8.0f} MB  {shown}")
        print(f"distinct layers of the stand-ins: {sum(layers.values()) / MB:.0f} MB "
              f"({len(layers)} layers with content)")
        print(f"largest stand-in: {max(size for _, size, _ in rows) / MB:.0f} MB")
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
