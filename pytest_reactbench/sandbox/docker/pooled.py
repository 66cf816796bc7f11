"""A sandbox on one engine of the pool (`pool.py`): a failure the engine's death
explains becomes `EngineLost`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_reactbench.sandbox.base import ExecResult, Sandbox
from pytest_reactbench.sandbox.docker.backend import DockerBackend
from pytest_reactbench.sandbox.errors import EngineLost

if TYPE_CHECKING:
    from pytest_reactbench.sandbox.docker.pool import EnginePool


class PooledSandbox(Sandbox):
    """A sandbox on one engine of the pool: a failure the engine's death explains
    becomes `EngineLost`."""

    backend = "docker"

    def __init__(self, inner: Sandbox, engine: DockerBackend, pool: EnginePool) -> None:
        self.inner = inner
        self.engine = engine.engine
        self.room_wait = inner.room_wait
        self._member = engine
        self._pool = pool
        self._closed = False

    @contextlib.contextmanager
    def _watch(self) -> Iterator[None]:
        # A dead engine surfaces as anything from a SandboxError to a bare connection
        # error of the HTTP client; whichever it is, the engine's silence decides.
        try:
            yield
        except EngineLost:
            raise
        except Exception as exc:
            lost = self._pool.explain(self._member, exc)
            if lost is None:
                raise
            raise lost from None

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        with self._watch():
            return self.inner.exec(cmd, cwd=cwd, env=env, timeout=timeout, user=user)

    def put_archive(self, dest: str, data: bytes) -> None:
        with self._watch():
            self.inner.put_archive(dest, data)

    def get_archive(self, src: str, exclude: Sequence[str] = ()) -> bytes:
        with self._watch():
            return self.inner.get_archive(src, exclude)

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        with self._watch():
            return self.inner.collect(src, exclude, limit)

    def end_leftovers(self) -> None:
        with self._watch():
            self.inner.end_leftovers()

    def egress_requests(self) -> list[dict[str, Any]]:
        with self._watch():
            return self.inner.egress_requests()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.inner.close()
        finally:
            self._pool.closed(self)
