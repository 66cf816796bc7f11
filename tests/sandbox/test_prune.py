"""`reactbench images --prune`: the images no run asked for in a while go, the others
and what they are built on stay (local backend, and a Docker engine of the test's own,
so that the machine's images are never at stake)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend
from tests.sandbox.helpers import busybox_image, recipe

HOUR = 3600.0


def _use_at(cache: Path, key: str, when: float) -> None:
    """The image `key` was last asked for at `when`."""
    stamp = cache / "used" / key
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    os.utime(stamp, (when, when))


def test_local_prune_keeps_used_images_and_the_layers_under_them(tmp_path: Path) -> None:
    parent_dir = tmp_path / "parent"
    parent_dir.mkdir()
    (parent_dir / "Dockerfile").write_text("FROM reactbench/system\nRUN echo parent > /app/p.txt\n")
    backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache",
                                                       image_map={"example.com/parent": str(parent_dir)}))
    try:
        # The child's chain holds the parent's layer: the parent stays with it.
        child = backend.bake(recipe(tmp_path / "c", "FROM example.com/parent\nRUN echo child > /app/c.txt\n"),
                             lambda _: None)
        stale_recipe = recipe(tmp_path / "s", "FROM reactbench/system\nRUN echo stale > /app/s.txt\n")
        stale = backend.bake(stale_recipe, lambda _: None)
        keys = {p.name for p in backend.images.iterdir() if p.is_dir()}
        (parent,) = keys - {child.ref, stale.ref}
        later = time.time() + 10 * HOUR
        _use_at(backend.cache_dir, child.ref, later)
        lines: list[str] = []
        pruned = backend.prune(HOUR, lines.append, now=later)
        assert {p.name for p in backend.images.iterdir() if p.is_dir()} == {child.ref, parent}
        assert pruned.images == 1 and pruned.freed_bytes > 0, pruned
        assert any(stale.ref in line for line in lines), lines
        # The child's sandbox still boots on its layers; what was pruned is baked again.
        box = backend.boot(child, network=False, limits=Limits(), labels={"task": "prune"})
        try:
            assert box.exec("cat /app/p.txt /app/c.txt").text == "parent\nchild\n"
        finally:
            box.close()
        assert not backend.bake(stale_recipe, lambda _: None).cached
        # Nothing used since: every image goes.
        pruned = backend.prune(HOUR, lines.append, now=later + 10 * HOUR)
        assert pruned.images == 3 and not [p for p in backend.images.iterdir() if p.is_dir()]
    finally:
        backend.close()


@pytest.mark.docker
def test_docker_prune_removes_only_what_no_run_used(tmp_path: Path) -> None:
    from pytest_reactbench.sandbox.docker import DockerBackend
    from tests.sandbox.extra_engines import extra_engine

    with extra_engine(7) as engine:
        client = engine.client()
        base = f"reactbench-test/prune-base:{uuid.uuid4().hex[:8]}"
        busybox_image(client, tmp_path, "base", base)
        backend = DockerBackend(environment_sandbox_options(cache=tmp_path / "cache"), engine.url)
        try:
            stale = backend.bake(recipe(tmp_path / "s", f"FROM {base}\nRUN echo stale > /stale\n",
                                        timeout=300), lambda _: None)
            fresh = backend.bake(recipe(tmp_path / "f", f"FROM {base}\nRUN echo fresh > /fresh\n",
                                        timeout=300), lambda _: None)
            later = time.time() + 10 * HOUR
            _use_at(backend.cache_dir, fresh.ref.rpartition(":")[2], later)
            busy = client.containers.create(fresh.ref, "true")  # in use: never removed
            lines: list[str] = []
            pruned = backend.prune(HOUR, lines.append, now=later)
            tags = {tag for image in client.images.list() for tag in image.tags}
            assert fresh.ref in tags and stale.ref not in tags, (tags, lines)
            assert base in tags  # not baked by the plugin: not the prune's business
            assert pruned.images == 1 and pruned.freed_bytes > 0, pruned
            # With nothing used since, only the image a container holds stays.
            pruned = backend.prune(0, lines.append, now=later + 100 * HOUR)
            assert fresh.ref in {tag for image in client.images.list() for tag in image.tags}
            assert pruned.images == 0 and pruned.kept == 1, (pruned, lines)
            busy.remove()
        finally:
            backend.close()
            client.close()
