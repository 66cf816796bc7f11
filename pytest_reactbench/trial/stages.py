"""The stages a trial delegates to its backend (baking its images, baking an agent's
CLI layer on them, booting its sandboxes), and the checks made before any trial: what
no backend here can run, and whether an agent's CLI answers in its image."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pytest_reactbench.agents import Agent
from pytest_reactbench.sandbox.base import (
    Backend,
    Image,
    ImageRecipe,
    Limits,
    Progress,
    Sandbox,
)
from pytest_reactbench.sandbox.errors import BakeError, SandboxError
from pytest_reactbench.tasks import EnvironmentConfig, Task
from pytest_reactbench.trial.judge import tail
from pytest_reactbench.verifier.layer import grader_layer, uses_grader

Role = Literal["agent", "verifier"]

#: The least time an agent's CLI layer gets to bake (an npm or pip install).
INSTALL_TIMEOUT = 1800.0


class AgentUnavailable(SandboxError):
    """The agent's CLI is missing from its image or its `--version` fails: no retry
    mends that, and the agent never acted."""

    retryable = False


class UnsupportedTaskError(SandboxError):
    """The task asks for something this backend or harness does not provide: an error
    no retry can mend."""

    retryable = False

def limits_of(env: EnvironmentConfig) -> Limits:
    return Limits(cpus=env.cpus, memory_mb=env.memory_mb, storage_mb=env.storage_mb)


class Stages:
    """The stages a trial delegates to its backend: baking an image, baking an agent's
    install layer on it, and booting a sandbox from it. A project replaces any in its
    conftest.py by overriding the `reactbench_stages` fixture with a subclass."""

    def __init__(self, backend: Backend, progress: Progress, labels: Mapping[str, str]) -> None:
        self.backend = backend
        self.progress = progress
        self.labels = dict(labels)

    def recipe(self, task: Task, role: Role) -> ImageRecipe:
        """The image of `role`; a verifier that runs our grader gets it as a layer on
        its base."""
        folder = task.environment_dir if role == "agent" else task.tests_dir
        env = task.config.environment if role == "agent" else task.config.verifier_environment
        layer = grader_layer() if role == "verifier" and uses_grader(folder) else None
        return ImageRecipe(name=f"{task.id}/{folder.name}", dockerfile=folder / "Dockerfile",
                           context=folder, timeout=env.build_timeout_sec, layer=layer)

    def bake(self, task: Task, role: Role) -> Image:
        """The agent's image (environment/) or the verifier's (tests/)."""
        return self.backend.bake(self.recipe(task, role), self.progress)

    def install(self, task: Task, agent: Agent, image: Image) -> Image:
        """The agent's CLI baked as a layer on top of the task's image (cached by the
        agent's name, pinned version and steps, and the task image's digest)."""
        if agent.install is None:
            return image
        timeout = max(task.config.environment.build_timeout_sec, INSTALL_TIMEOUT)
        with tempfile.TemporaryDirectory(prefix="reactbench-agent-") as folder:
            dockerfile = Path(folder) / "Dockerfile"
            dockerfile.write_text(f"FROM {image.ref}\n{agent.install.steps.strip()}\n")
            recipe = ImageRecipe(name=f"agent-{agent.install.name}", dockerfile=dockerfile,
                                 context=Path(folder), timeout=timeout, baked={image.ref: image})
            return self.backend.bake(recipe, self.progress)

    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        """A fresh sandbox, offline but for `egress` (the agent's model hosts)."""
        env = task.config.environment if role == "agent" else task.config.verifier_environment
        return self.backend.boot(image, network=False, egress=egress, limits=limits_of(env),
                                 labels={**self.labels, "task": task.id, "role": role})


def unsupported(task: Task) -> str | None:
    """Why no backend here can run the task as it is declared, or None."""
    config, toml = task.config, task.path / "task.toml"
    for section, env in (("environment", config.environment),
                         ("verifier.environment", config.verifier.environment)):
        if env is not None and env.gpus > 0:
            return f"{toml}: [{section}].gpus = {env.gpus}: no sandbox backend here provides GPUs"
    if config.verifier.environment_mode != "separate":
        return (f"{toml}: [verifier].environment_mode = {config.verifier.environment_mode!r}: "
                "the verifier always runs in a separate, clean sandbox here")
    return None


def ask_version(agent: Agent, box: Sandbox) -> str | None:
    """What the agent's CLI answers to its version command in `box` (None for an agent
    without one). Raises AgentUnavailable when it does not answer."""
    install = agent.install
    if install is None or not install.version_command:
        return None
    check = box.exec(install.version_command, cwd="/app", timeout=120, user=install.user or None)
    output = tail(check.text + check.error_text, 5)
    if not check.ok:
        raise AgentUnavailable(f"agent {agent.name!r}: `{install.version_command}` failed in its image "
                               f"(exit {check.exit_code}): {output}")
    return output


def preflight(stages: Stages, task: Task, agent: Agent) -> str | None:
    """Before any trial: bake the agent's layer on `task`'s image and ask its CLI for its
    version. Returns the answer (None for an agent with nothing to check). Raises
    AgentUnavailable when the layer does not install or the CLI does not answer, and
    lets the task's own BakeError through (that is the task's error, which its trials
    report)."""
    if agent.install is None or not agent.install.version_command:
        return None
    image = stages.bake(task, "agent")
    try:
        layered = stages.install(task, agent, image)
    except BakeError as exc:
        raise AgentUnavailable(f"agent {agent.name!r}: its CLI did not install on the image of "
                               f"{task.id}: {exc}") from None
    box = stages.boot(task, "agent", layered)
    try:
        return ask_version(agent, box)
    finally:
        box.close()
