"""A third backend in one module and one hook implementation: `wrapped`, the local
backend with every command's duration counted. Registered with `-p tests.sandbox.wrapped`
(or from a conftest.py), it is what docs/extending.md shows and what the contract
suite runs on to prove a backend added through the hook is a full citizen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pytest_reactbench.sandbox.base import (
    Backend,
    Capabilities,
    ExecResult,
    Image,
    ImageRecipe,
    Limits,
    Progress,
    Sandbox,
)
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.registry import BackendFactory


class TimedSandbox(Sandbox):
    backend = "wrapped"

    def __init__(self, inner: Sandbox, owner: WrappedBackend) -> None:
        self.inner = inner
        self.owner = owner

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        result = self.inner.exec(cmd, cwd=cwd, env=env, timeout=timeout, user=user)
        self.owner.exec_seconds += result.duration
        return result

    def put_archive(self, dest: str, data: bytes) -> None:
        self.inner.put_archive(dest, data)

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        return self.inner.collect(src, exclude, limit)

    def close(self) -> None:
        self.inner.close()


class WrappedBackend(Backend):
    name = "wrapped"
    capabilities = Capabilities(formal=False)

    def __init__(self, options: SandboxOptions) -> None:
        self.inner = LocalBackend(options)
        self.exec_seconds = 0.0

    def bake(self, recipe: ImageRecipe, progress: Progress) -> Image:
        return self.inner.bake(recipe, progress)

    def baked(self, recipe: ImageRecipe) -> Image | None:
        return self.inner.baked(recipe)

    def boot(self, image: Image, *, network: bool, limits: Limits, labels: Mapping[str, str],
             egress: Sequence[str] = ()) -> Sandbox:
        return TimedSandbox(self.inner.boot(image, network=network, limits=limits, labels=labels,
                                            egress=egress), self)

    def sweep(self) -> int:
        return self.inner.sweep()


@pytest.hookimpl
def pytest_reactbench_sandbox_backends() -> Mapping[str, BackendFactory]:
    return {"wrapped": WrappedBackend}
