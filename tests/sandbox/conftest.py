"""The sandbox tests' fixtures: a local backend of the test's own, and the images a
docker test made, removed when it ends (the docker client and backend are the
suite's, in tests/conftest.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.local import LocalBackend


@pytest.fixture
def local_backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={}))


@pytest.fixture
def tidy(docker_client: Any) -> Iterator[list[str]]:
    """Images a test made (pulled or baked), removed when it ends."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        with contextlib.suppress(Exception):
            docker_client.images.remove(ref, force=True)
