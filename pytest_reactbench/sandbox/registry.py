"""The sandbox backends by name. Built-ins are listed here; another package adds one
through the `pytest_reactbench_sandbox_backends` hook, returning `{name: factory}`
where `factory(options)` makes the backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from pytest_reactbench.sandbox.base import Backend
from pytest_reactbench.sandbox.options import SandboxOptions

BackendFactory = Callable[[SandboxOptions], Backend]
T = TypeVar("T")


class BackendRegistryError(ValueError):
    pass


def _local(options: SandboxOptions) -> Backend:
    from pytest_reactbench.sandbox.local import LocalBackend

    return LocalBackend(options)


def _docker(options: SandboxOptions) -> Backend:
    # Imported when chosen: docker-py is only loaded by runs that use it.
    from pytest_reactbench.sandbox.docker import docker_backend

    return docker_backend(options)


BUILTIN_BACKENDS: Mapping[str, BackendFactory] = {"local": _local, "docker": _docker}


def merge_registered(registered: Iterable[Mapping[str, T]], what: str,
                     error: type[Exception]) -> dict[str, T]:
    """A hook's answers (`{name: factory}` from each plugin) merged into one registry;
    a name given twice is refused (`error`, naming `what`) rather than one plugin
    silently replacing another's. The same factory given twice is one."""
    merged: dict[str, T] = {}
    for part in registered:
        for name, factory in part.items():
            if name in merged and merged[name] is not factory:
                raise error(f"two plugins register the {what} {name!r}")
            merged[name] = factory
    return merged


def merge_backends(registered: Iterable[Mapping[str, BackendFactory]]) -> dict[str, BackendFactory]:
    return merge_registered(registered, "sandbox backend", BackendRegistryError)
