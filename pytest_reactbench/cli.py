"""The `reactbench` command: work that is not a test run.

    reactbench images [--sandbox docker|local]   build the stand-in base images once
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pytest_reactbench.plugin import pytest_reactbench_sandbox_backends
from pytest_reactbench.plugin.settings import Settings, default_ca_bundle, default_cache
from pytest_reactbench.sandbox.base import ImageRecipe, SandboxError
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP, parse_image_map, recipe_dir


def _images(args: argparse.Namespace) -> int:
    try:
        image_map = parse_image_map(args.image_map, "--image-map")
    except ValueError as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 2
    ca_bundle = (None if args.ca_bundle == "none" else Path(args.ca_bundle)) if args.ca_bundle \
        else default_ca_bundle()
    settings = Settings(agents=(), task_roots=(), backend=args.sandbox, records=Path("."),
                        cache=Path(args.cache) if args.cache else default_cache(),
                        image_map=image_map, ca_bundle=ca_bundle)
    factory = pytest_reactbench_sandbox_backends().get(args.sandbox)
    if factory is None:
        print(f"reactbench images: unknown backend {args.sandbox!r}", file=sys.stderr)
        return 2
    started = time.monotonic()

    def progress(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True)

    try:
        backend = factory(settings)
        names = args.only or sorted(DEFAULT_IMAGE_MAP)
        for public in names:
            directory = recipe_dir(image_map.get(public, public))
            if directory is None:
                print(f"reactbench images: {public} has no recipe under images/", file=sys.stderr)
                return 2
            recipe = ImageRecipe(directory.name, directory / "Dockerfile", directory, timeout=3600)
            image = backend.bake(recipe, progress)
            print(f"{public:55} {image.ref}  {'(reused)' if image.cached else '(built)'}")
        backend.close()
    except SandboxError as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reactbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    images = commands.add_parser("images", help="build the stand-ins of the public base images")
    images.add_argument("--sandbox", default="docker", help="backend to build for (default docker)")
    images.add_argument("--cache", help="bake cache (default ~/.cache/reactbench)")
    images.add_argument("--ca-bundle", help="CA bundle for downloads ('none' for none)")
    images.add_argument("--image-map", action="append", default=[], metavar="FROM=TO")
    images.add_argument("--only", action="append", metavar="IMAGE",
                        help="a public image name to build (repeatable; default: all four)")
    images.set_defaults(run=_images)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
