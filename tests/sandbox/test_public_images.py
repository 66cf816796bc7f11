"""Public images first, on the real engine, against a registry on loopback (Debian's
`docker-registry`, started here): the pull, its digest in the image's provenance, the
stand-in when the registry is down, the images modes, and that no image under a
public name is ever made or replaced by a bake."""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import docker
import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox.base import Image, Limits
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.options import ImagesMode
from tests.sandbox.helpers import busybox_image, free_port, loopback_registry, recipe

pytestmark = pytest.mark.docker


@dataclass
class Registry:
    port: int
    #: A public image pushed to it: its name and the registry's digest of it.
    name: str
    digest: str
    #: A name on a port where nothing listens: a registry that is down.
    down: str
    #: A recipe standing in for both (it writes "stand-in" to /origin).
    stand_in: Path


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory,
             docker_client: docker.DockerClient) -> Iterator[Registry]:
    if shutil.which("docker-registry") is None or shutil.which("busybox") is None:
        pytest.fail("these tests need Debian's docker-registry and busybox-static (.ci/setup installs them)")
    root = tmp_path_factory.mktemp("registry")
    made: list[str] = []
    try:
        with loopback_registry(root) as port:
            unique = uuid.uuid4().hex[:8]
            base = f"reactbench-test/busybox:{unique}"
            busybox_image(docker_client, root, "stand-in-base", base)
            made.append(base)
            name = f"127.0.0.1:{port}/react-bench-probe:{unique}"
            busybox_image(docker_client, root, "public", name)
            pushed = [line for line in docker_client.images.push(name, stream=True, decode=True)
                      if "aux" in line]
            digest = pushed[-1]["aux"]["Digest"]
            # Only the registry has it now: a bake must pull it.
            docker_client.images.remove(name)
            stand_in = root / "stand-in"
            stand_in.mkdir()
            (stand_in / "Dockerfile").write_text(f"FROM {base}\nRUN echo stand-in > /origin\n")
            yield Registry(port, name, digest, f"127.0.0.1:{free_port()}/react-bench-probe:{unique}",
                           stand_in)
    finally:
        for ref in made:
            docker_client.images.remove(ref, force=True)


def backend_for(cache: Path, reg: Registry, images: ImagesMode) -> DockerBackend:
    stand_in = str(reg.stand_in)
    image_map = {reg.name.rsplit(":", 1)[0]: stand_in, reg.down.rsplit(":", 1)[0]: stand_in}
    return DockerBackend(environment_sandbox_options(cache=cache, image_map=image_map, images=images))


def bake_and_read(backend: DockerBackend, tmp_path: Path, dockerfile: str, tidy: list[str],
                  lines: list[str] | None = None) -> tuple[Image, str]:
    """Bakes a task image on the given FROM and reads the /origin it inherited."""
    image = backend.bake(recipe(tmp_path, dockerfile + "RUN cp /origin /seen\n", timeout=600),
                         (lines if lines is not None else []).append)
    tidy.append(image.ref)
    box = backend.boot(image, network=False, limits=Limits(), labels={"task": "public-images"})
    try:
        return image, box.exec(["cat", "/seen"]).text.strip()
    finally:
        box.close()


def names_on_engine(docker_client: docker.DockerClient, name: str) -> list[str]:
    return [str(i.id) for i in docker_client.images.list(name=name.rsplit(":", 1)[0])]


def test_a_public_image_is_pulled_and_its_digest_recorded(
        tmp_path: Path, bake_cache: Path, registry: Registry, docker_client: docker.DockerClient,
        tidy: list[str]) -> None:
    backend = backend_for(bake_cache, registry, "auto")
    tidy.append(registry.name)
    lines: list[str] = []
    try:
        dockerfile = f"ARG BASE_IMAGE={registry.name}\nFROM ${{BASE_IMAGE}}\n"
        image, seen = bake_and_read(backend, tmp_path, dockerfile, tidy, lines)
    finally:
        backend.close()
    assert seen == "public"
    assert image.bases == (BaseImage(name=registry.name, digest=registry.digest, origin="public"),)
    assert image.formal
    assert f"pulling {registry.name}" in lines
    assert any(line.startswith(f"pulled {registry.name} in ") for line in lines)
    # The build ran on the public image itself: nothing was tagged under its name.
    assert docker_client.images.get(registry.name).attrs["RepoDigests"] == [
        f"{registry.name.rsplit(':', 1)[0]}@{registry.digest}"]


def test_the_stand_in_when_the_registry_is_down(tmp_path: Path, bake_cache: Path, registry: Registry,
                                                docker_client: docker.DockerClient, tidy: list[str]) -> None:
    backend = backend_for(bake_cache, registry, "auto")
    lines: list[str] = []
    started = time.monotonic()
    try:
        image, seen = bake_and_read(backend, tmp_path, f"FROM {registry.down}\n", tidy, lines)
    finally:
        backend.close()
    assert time.monotonic() - started < 120
    assert seen == "stand-in"
    # The stand-in, then what it was built on (its bases' bases count too).
    base, under = image.bases
    assert (base.name, base.origin) == (registry.down, "stand-in") and not image.formal
    assert under.name.startswith("reactbench-test/busybox:") and under.origin == "public"
    assert [line for line in lines if line.startswith("warning:")] == [
        f"warning: {registry.down} is not available ({base_reason(lines)}); using its stand-in "
        f"stand-in (results are not formal)"]
    # A literal FROM built on the stand-in through a rewritten copy: no alias was made.
    assert names_on_engine(docker_client, registry.down) == []


def test_a_pull_that_failed_is_not_tried_again_by_another_worker_of_the_session(
        tmp_path: Path, bake_cache: Path, registry: Registry, tidy: list[str]) -> None:
    # Two backends over one session folder: two xdist workers of one session.
    session = tmp_path / "session"
    tried: list[list[str]] = []
    for worker in ("gw0", "gw1"):
        backend = backend_for(bake_cache, registry, "auto")
        backend.options = replace(backend.options, session_dir=session)
        lines: list[str] = []
        try:
            _, seen = bake_and_read(backend, tmp_path / worker, f"FROM {registry.down}\n", tidy, lines)
        finally:
            backend.close()
        assert seen == "stand-in", worker
        tried.append([line for line in lines if line.startswith(f"pulling {registry.down}")])
    # The first worker pulled and failed; the second learned it from the session folder.
    assert tried[0] and not tried[1], tried
    # Another session (a new folder) tries again.
    backend = backend_for(bake_cache, registry, "auto")
    backend.options = replace(backend.options, session_dir=tmp_path / "next-session")
    lines = []
    try:
        bake_and_read(backend, tmp_path / "next", f"FROM {registry.down}\n", tidy, lines)
    finally:
        backend.close()
    assert f"pulling {registry.down}" in lines


def base_reason(lines: list[str]) -> str:
    (line,) = [line for line in lines if line.startswith("warning:")]
    return line.split(" is not available (", 1)[1].rsplit("); using", 1)[0]


def test_public_mode_refuses_the_stand_in(tmp_path: Path, bake_cache: Path, registry: Registry,
                                          tidy: list[str]) -> None:
    backend = backend_for(bake_cache, registry, "public")
    lines: list[str] = []
    try:
        # Two tasks on the image: one pull, whose failure the second task is told at once.
        for n, task in enumerate(("first", "second")):
            with pytest.raises(BakeError, match=r"Dockerfile:1: FROM .*the pull failed.*"
                                                r"\(--reactbench-images=public: no stand-in\)"):
                bake_and_read(backend, tmp_path / task, f"FROM {registry.down}\nRUN echo {n}\n", tidy, lines)
    finally:
        backend.close()
    assert lines.count(f"pulling {registry.down}") == 1, lines


def test_stand_in_mode_never_pulls(tmp_path: Path, bake_cache: Path, registry: Registry,
                                   docker_client: docker.DockerClient, tidy: list[str]) -> None:
    backend = backend_for(bake_cache, registry, "stand-in")
    try:
        image, seen = bake_and_read(backend, tmp_path, f"ARG BASE_IMAGE={registry.name}\nFROM $BASE_IMAGE\n",
                                    tidy)
    finally:
        backend.close()
    assert seen == "stand-in" and image.bases[0].origin == "stand-in"
    assert names_on_engine(docker_client, registry.name) == []


def test_an_image_already_under_the_name_is_used_and_never_replaced(
        tmp_path: Path, bake_cache: Path, registry: Registry, docker_client: docker.DockerClient,
        tidy: list[str]) -> None:
    # A user's own image under the public name (not the registry's).
    busybox_image(docker_client, tmp_path, "users-own", registry.name)
    tidy.append(registry.name)
    before = str(docker_client.images.get(registry.name).id)
    for mode in ("auto", "stand-in", "public"):
        backend = backend_for(bake_cache, registry, mode)  # type: ignore[arg-type]
        try:
            _, seen = bake_and_read(backend, tmp_path / mode, f"FROM {registry.name}\n", tidy)
        finally:
            backend.close()
        assert seen == ("stand-in" if mode == "stand-in" else "users-own"), mode
        assert names_on_engine(docker_client, registry.name) == [before], mode


def test_an_unreachable_public_registry_falls_back_fast(
        tmp_path: Path, bake_cache: Path, registry: Registry, docker_client: docker.DockerClient,
        tidy: list[str]) -> None:
    # ghcr.io is out of reach from the test machines (and has no such image anyway).
    name = f"ghcr.io/millionco/react-bench-probe-{uuid.uuid4().hex[:8]}"
    backend = DockerBackend(environment_sandbox_options(cache=bake_cache,
                                                        image_map={name: str(registry.stand_in)}))
    started = time.monotonic()
    lines: list[str] = []
    try:
        dockerfile = f"ARG BASE_IMAGE={name}:latest\nFROM $BASE_IMAGE\n"
        image, seen = bake_and_read(backend, tmp_path, dockerfile, tidy, lines)
    finally:
        backend.close()
    assert seen == "stand-in" and image.bases[0].origin == "stand-in"
    assert any(line.startswith(f"warning: {name}:latest is not available") for line in lines), lines
    assert time.monotonic() - started < 60
    assert names_on_engine(docker_client, name) == []


def test_a_stand_in_an_older_version_tagged_under_the_public_name_is_not_the_public_image(
        tmp_path: Path, bake_cache: Path, registry: Registry, docker_client: docker.DockerClient,
        tidy: list[str]) -> None:
    context = tmp_path / "old-alias"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch\nLABEL reactbench.recipe=react-bench-probe\n")
    docker_client.images.build(path=str(context), tag=registry.name, rm=True, forcerm=True)
    tidy.append(registry.name)
    before = names_on_engine(docker_client, registry.name)
    backend = backend_for(bake_cache, registry, "auto")
    lines: list[str] = []
    try:
        image, seen = bake_and_read(backend, tmp_path, f"FROM {registry.name}\n", tidy, lines)
    finally:
        backend.close()
    assert seen == "stand-in" and image.bases[0].origin == "stand-in"
    assert any("is a stand-in an older version tagged so" in line for line in lines), lines
    # Neither used as the public image nor pulled over.
    assert names_on_engine(docker_client, registry.name) == before
