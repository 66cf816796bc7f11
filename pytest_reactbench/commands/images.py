"""`reactbench images`: the base images of the image map on each backend, baked (public
or stand-in), listed, or pruned."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_reactbench.plugin.extensions import command_hook, registered
from pytest_reactbench.plugin.options import resolve_command, sandbox_options
from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox.bake import BakingBackend
from pytest_reactbench.sandbox.base import Backend, ImageRecipe, Progress
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.heartbeat import heartbeat
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import recipe_dir


def _base_image(backend: Backend, public: str, recipe: ImageRecipe,
                progress: Progress | None) -> BaseImage | None:
    """How a bake on `backend` resolves FROM `public`: baked (with progress) or looked up."""
    if isinstance(backend, BakingBackend):
        return backend.base_image(public, progress)
    image = backend.bake(recipe, progress) if progress else backend.baked(recipe)
    return BaseImage(name=public, digest=image.digest, origin="stand-in") if image else None


def run_images(args: argparse.Namespace) -> int:
    try:
        values = resolve_command(args, Path.cwd())
        backends = registered(command_hook(args.plugin))
        chosen = sorted(backends.backends) if args.list and not args.sandbox else [args.sandbox or "docker"]
        factories = {name: backends.backend(name, "--sandbox") for name in chosen}
    except (pytest.UsageError, ImportError) as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 2
    options = sandbox_options(values)
    image_map = options.image_map
    names = args.only or sorted(k for k, v in image_map.items() if recipe_dir(v) is not None)
    recipes: dict[str, ImageRecipe] = {}
    for public in names:
        directory = recipe_dir(image_map.get(public, public))
        if directory is None:
            print(f"reactbench images: {public} has no recipe under images/", file=sys.stderr)
            return 2
        recipes[public] = ImageRecipe(directory.name, directory / "Dockerfile", directory, timeout=3600)
    started = time.monotonic()
    last = ["starting"]

    def progress(line: str) -> None:
        if "still running after" not in line:
            last[0] = line
        # With --json, stdout is the document alone.
        print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True,
              file=sys.stderr if args.json else sys.stdout)

    failed = 0
    found: dict[str, list[dict[str, str]]] = {}
    with heartbeat(progress, lambda: f"(after: {last[0]})"):
        for name in chosen:
            failed += _images_on(name, factories[name], options, args, recipes, progress,
                                 found.setdefault(name, []))
    if args.json:
        print(json.dumps(found, indent=2))
    return 1 if failed else 0


def _images_on(name: str, factory: Callable[[SandboxOptions], Backend], options: SandboxOptions,
               args: argparse.Namespace, recipes: dict[str, ImageRecipe], progress: Progress,
               found: list[dict[str, str]]) -> int:
    """Bake (or list, or prune) the stand-ins on the backend `name`, each added to
    `found`; 1 when that fails."""
    say = progress if args.json else print
    try:
        backend = factory(options)
    except SandboxError as exc:
        say(f"{name}: unavailable: {exc}")
        return 0 if args.list else 1
    if args.prune is not None:
        return _prune(name, backend, args.prune, progress)
    formal = backend.capabilities.formal
    say(f"{name} ({'its results can be formal' if formal else 'its results are not formal'})")
    try:
        for public, recipe in recipes.items():
            base = _base_image(backend, public, recipe, None if args.list else progress)
            entry = {"name": public, "origin": base.origin if base else "not baked",
                     "image": base.digest if base else "",
                     **({"recipe": f"images/{recipe.name}"} if base and base.origin == "stand-in" else {})}
            found.append(entry)
            shown = (f"{entry['origin']:9} {entry['image']}"
                     + (f" ({entry['recipe']})" if "recipe" in entry else "")) if base else "not baked"
            say(f"  {public:55} {shown}")
        if stand_ins := sum(e["origin"] == "stand-in" for e in found):
            say(f"{name}: {stand_ins} of {len(found)} image(s) are stand-ins: results on them are "
                "not formal" + ("" if stand_ins == len(found) else " (tasks on the public images are)"))
    except SandboxError as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    return 0


def _prune(name: str, backend: Backend, days: float, progress: Progress) -> int:
    """Remove `backend`'s images unused for `days`; 1 when it cannot prune."""
    try:
        if not isinstance(backend, BakingBackend):
            raise NotImplementedError(f"the {name} backend does not prune its images")
        pruned = backend.prune(days * 86400, progress)
    except (NotImplementedError, SandboxError) as exc:
        print(f"reactbench images --prune: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    print(f"{name}: removed {pruned.images} image(s) unused for {days:g} day(s), "
          f"{pruned.freed_bytes / 1e9:.1f} GB freed"
          + (f"; {pruned.kept} stale image(s) kept (in use)" if pruned.kept else ""))
    return 0
