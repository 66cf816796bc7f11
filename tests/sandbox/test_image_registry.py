"""Baked images shared through a registry: parsing the option (pure), and on the real
engine against Debian's `docker-registry` on loopback: a bake pushes, an engine without
the image pulls it instead of baking, and a registry that is down costs one warning."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.docker.image_registry import ImageRegistry, is_missing
from pytest_reactbench.sandbox.options import parse_image_registry
from tests.sandbox.helpers import busybox_image, free_port, loopback_registry, recipe


@pytest.mark.parametrize("value", ["127.0.0.1:5000/reactbench", "registry.example.com/team/bench",
                                   "localhost:5000/a-b.c_d"])
def test_registry_names_that_are_accepted(value: str) -> None:
    assert parse_image_registry(value + "/", "--reactbench-image-registry") == value


@pytest.mark.parametrize(("value", "why"), [
    ("http://127.0.0.1:5000/x", "without a scheme"),
    ("127.0.0.1:5000", "HOST\\[:PORT\\]/PREFIX"),
    ("127.0.0.1:5000/Upper", "lowercase"),
    ("127.0.0.1:5000/x:tag", "no tag"),
    ("127.0.0.1:99999/x", "port 99999 is out of range"),
])
def test_bad_registry_names_are_refused_naming_the_option(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"^ini reactbench_image_registry: .*{why}"):
        parse_image_registry(value, "ini reactbench_image_registry")


def test_registry_names_of_our_tags() -> None:
    registry = ImageRegistry("127.0.0.1:5000/team")
    assert registry.remote("reactbench/counter-reset-tests:ab12") == \
        "127.0.0.1:5000/team/counter-reset-tests:ab12"
    assert registry.remote("reactbench/debian-root:bookworm") == \
        "127.0.0.1:5000/team/debian-root:bookworm"


def test_a_missing_tag_is_a_miss_and_an_unreachable_registry_is_not() -> None:
    assert is_missing("manifest for 127.0.0.1:5000/x:k not found: manifest unknown: manifest unknown")
    assert not is_missing('Get "http://127.0.0.1:5/v2/": dial tcp 127.0.0.1:5: connect: connection refused')
    assert not is_missing('Get "https://x.invalid/v2/": dial tcp: lookup x.invalid: no such host')
    assert not is_missing("pull access denied, repository does not exist or may require 'docker login'")


# -- on the engine -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(docker_client: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny base image the recipes build on (not under any public name)."""
    tag = f"reactbench-test/registry-base:{uuid.uuid4().hex[:8]}"
    busybox_image(docker_client, tmp_path_factory.mktemp("base"), "base", tag)
    yield tag
    docker_client.images.remove(tag, force=True)  # type: ignore[attr-defined]


@pytest.mark.docker
def test_a_fresh_engine_pulls_a_baked_image_instead_of_baking_it(
        tmp_path: Path, docker_client: object, base: str, tidy: list[str]) -> None:
    from pytest_reactbench.sandbox.docker import DockerBackend

    with loopback_registry(tmp_path / "registry") as port:
        prefix = f"127.0.0.1:{port}/shared"
        r = recipe(tmp_path, f"FROM {base}\nRUN echo {uuid.uuid4().hex} > /baked\n", timeout=300)
        first_lines: list[str] = []
        first = DockerBackend(environment_sandbox_options(cache=tmp_path / "one", image_registry=prefix))
        try:
            baked = first.bake(r, first_lines.append)
        finally:
            first.close()
        tidy.append(baked.ref)
        remote = ImageRegistry(prefix).remote(baked.ref)
        assert any(line.startswith(f"pushed {remote} in ") for line in first_lines), first_lines
        assert [b.how for b in first.bakes] == ["baked"]
        # Only the registry's copy is left: what an engine that never baked it sees.
        docker_client.images.remove(baked.ref)  # type: ignore[attr-defined]
        assert docker_client.images.list(name=remote.rsplit(":", 1)[0]) == []  # type: ignore[attr-defined]

        lines: list[str] = []
        second = DockerBackend(environment_sandbox_options(cache=tmp_path / "two", image_registry=prefix))
        try:
            pulled = second.bake(r, lines.append)
        finally:
            second.close()
    assert not any("building" in line or "Step " in line for line in lines), lines
    assert any(line.startswith(f"test: pulled baked image {baked.ref.rsplit(':', 1)[1][:12]} from the "
                               "image registry") for line in lines), lines
    assert [b.how for b in second.bakes] == ["pulled"]
    assert (pulled.ref, pulled.digest) == (baked.ref, baked.digest)
    assert pulled.cached
    # The registry's name does not stay on the engine: only reactbench/ names do.
    assert docker_client.images.list(name=remote.rsplit(":", 1)[0]) == []  # type: ignore[attr-defined]


@pytest.mark.docker
def test_a_registry_that_is_down_means_baking_with_one_warning(
        tmp_path: Path, base: str, tidy: list[str]) -> None:
    from pytest_reactbench.sandbox.docker import DockerBackend

    down = f"127.0.0.1:{free_port()}/shared"
    backend = DockerBackend(environment_sandbox_options(cache=tmp_path / "cache", image_registry=down))
    lines: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in range(2):
                r = recipe(tmp_path / str(n), f"FROM {base}\nRUN echo {uuid.uuid4().hex} > /baked\n",
                           timeout=300)
                tidy.append(backend.bake(r, lines.append).ref)
    finally:
        backend.close()
    assert [b.how for b in backend.bakes] == ["baked", "baked"]
    # One line says it, and no warning object (with our source line) besides.
    assert [str(w.message) for w in caught if "reactbench" in str(w.message)] == []
    (said,) = [line for line in lines if "warning: the image registry" in line]
    assert f"the image registry {down} cannot be used" in said and "connection refused" in said


def test_a_bad_registry_option_is_a_usage_error_naming_it(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-image-registry=http://h:5000/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--reactbench-image-registry: 'http://h:5000/x' must be HOST[[]:PORT]/PREFIX*"])
    suite.makeini("[pytest]\nreactbench_image_registry = h:5000\n")
    result = suite.runpytest("--reactbench-agent=oracle")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini reactbench_image_registry: 'h:5000' must be HOST[[]:PORT]/PREFIX*"])


def test_the_local_backend_notes_once_that_it_does_not_use_the_registry(tmp_path: Path) -> None:
    from pytest_reactbench.sandbox.local import LocalBackend

    backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache",
                                                       image_registry="127.0.0.1:5000/x"))
    lines: list[str] = []
    for n in range(2):
        backend.bake(recipe(tmp_path / str(n), f"FROM reactbench/system\nRUN echo {n} > /tmp/n\n"),
                     lines.append)
    backend.close()
    assert [line for line in lines if "registry" in line] == [
        "note: the local backend does not use the image registry 127.0.0.1:5000/x; its images are "
        "baked on this host"]
    assert [b.how for b in backend.bakes if b.name == "test"] == ["baked", "baked"]
