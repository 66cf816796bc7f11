"""The `docker` backend: the faithful one, for formal results.

Images are built by the real engine (docker-py, `DOCKER_HOST` honoured) and tagged by
a content hash of the recipe and everything it builds on, so an unchanged recipe is
never rebuilt. A public base image is used as it is when the engine has it or can pull
it; otherwise (or when asked) its stand-in is built from `images/`. Only names under
`reactbench/` are ever tagged: the resolved base reaches the build as its `ARG` (as
`BASE_IMAGE`), and a FROM that names a public image literally is rewritten in a copy
of the Dockerfile made for that build alone.
Sandboxes are containers started with an init (they stop at once), labelled with the
run, task, role and owner; a later run removes what a dead one left.
Several engines (`--reactbench-docker-host`, repeated) are one backend: the pool
(`pool.py`), which places each trial on one of them.
"""

from __future__ import annotations

from pytest_reactbench.sandbox.base import Backend
from pytest_reactbench.sandbox.docker.backend import DockerBackend, RegistryWarning
from pytest_reactbench.sandbox.docker.images import ROOT_IMAGE
from pytest_reactbench.sandbox.docker.pool import EnginePool
from pytest_reactbench.sandbox.docker.sandbox import LABEL, DockerSandbox, engine_kwargs
from pytest_reactbench.sandbox.docker.share import RECIPE_LABEL
from pytest_reactbench.sandbox.options import SandboxOptions

__all__ = ["LABEL", "RECIPE_LABEL", "ROOT_IMAGE", "DockerBackend", "DockerSandbox", "EnginePool",
           "RegistryWarning", "docker_backend", "engine_kwargs"]


def docker_backend(options: SandboxOptions) -> Backend:
    """The docker backend the options ask for: one engine, or a pool of several."""
    if len(options.docker_hosts) > 1:
        return EnginePool(options)
    return DockerBackend(options, options.docker_hosts[0] if options.docker_hosts else None)
