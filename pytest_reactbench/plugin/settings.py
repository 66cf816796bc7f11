"""The session's settings: the options' table (options.py) read once, a resumed run's own
settings taken from its manifest."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.agents.registry import AgentOptions
from pytest_reactbench.plugin.options import INHERITED, Source, addoption, resolve, sandbox_options
from pytest_reactbench.plugin.shards import Shard, shard_text
from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.results.resume import resolve_run
from pytest_reactbench.sandbox.mirrors import GitMirror
from pytest_reactbench.sandbox.options import ImagesMode, SandboxOptions

__all__ = ["Settings", "UsageError", "addoption", "ini_records", "read_settings"]

UsageError = pytest.UsageError


@dataclass(frozen=True)
class Settings:
    agents: tuple[str, ...]
    task_roots: tuple[Path, ...]
    backend: str
    records: Path
    cache: Path
    image_map: dict[str, str] = field(default_factory=dict)
    ca_bundle: Path | None = None
    #: Bakes accept a package registry that serves no npm signatures.
    unsigned_registry: bool = False
    images: ImagesMode = "auto"
    git_mirrors: tuple[GitMirror, ...] = ()
    image_registry: str = ""
    download_cache: Path | None = None
    strict: bool = False
    patch: Path | None = None
    commands: dict[str, str] = field(default_factory=dict)
    attempts: int = 1
    retries: int = 0
    #: The baseline run: one JUnit file or run folder, or the shards of one run.
    baselines: tuple[Path, ...] = ()
    allow_missing: bool = False
    agent_env: tuple[str, ...] = ()
    model_hosts: tuple[str, ...] = ()
    #: The run folder a resumed run continues, or None.
    resume: Path | None = None
    #: Its manifest (what it was made with: its agents, options and tasks).
    resumed_manifest: RunManifest | None = None
    timeout_multiplier: float = 1.0
    #: (K, N): only the tasks of shard K of N.
    shard: Shard | None = None
    #: The docker backend's engines (empty: DOCKER_HOST or the local socket).
    docker_hosts: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.agents)

    def agent_options(self) -> AgentOptions:
        return AgentOptions(patch=self.patch, agent_env=self.agent_env, model_hosts=self.model_hosts,
                            commands=self.commands)

    def sandbox_options(self) -> SandboxOptions:
        return sandbox_options(vars(self))


def _agents_in_ids(config: pytest.Config) -> tuple[str, ...]:
    """The agents of item ids given as arguments (`tasks/x::nop`, `tasks/x::oracle#2`),
    or with --lf / --ff, of the ids that failed last time (relative to the rootdir)."""
    ids = [(config.invocation_params.dir, arg) for arg in config.args]
    if config.getoption("lf", False) or config.getoption("failedfirst", False):
        # pytest's own cache file (its plugin may not have opened it yet).
        saved = Source("", config.rootpath).path(config.getini("cache_dir")) / "v" / "cache" / "lastfailed"
        with contextlib.suppress(OSError, ValueError):
            ids += [(config.rootpath, nodeid) for nodeid in json.loads(saved.read_text())]
    named = []
    for base, nodeid in ids:
        where, sep, name = nodeid.partition("::")
        if sep and name and (Source("", base).path(where) / "task.toml").is_file():
            named.append(name.partition("#")[0])
    return tuple(dict.fromkeys(named))


def ini_records(config: pytest.Config) -> Path:
    """The records folder a session without --reactbench-records writes to."""
    return Source("", config.rootpath).path(config.getini("reactbench_records"))


def read_settings(config: pytest.Config) -> Settings:
    values = resolve(config)
    resume_id = values.pop("resume_id")
    workerinput = getattr(config, "workerinput", None)
    if resume_id and workerinput:
        # An xdist worker resumes the run its controller resumes (and holds live).
        resume_id = workerinput["reactbench_run_id"]
    if not values["agents"] and not resume_id:
        # `pytest tasks/x::nop`, as the session prints it: the agent is in the id.
        values["agents"] = _agents_in_ids(config)
    resume = None
    if resume_id:
        try:
            resume = resolve_run(values["records"], resume_id, live_ok=bool(workerinput))
        except ResultsError as exc:
            raise UsageError(str(exc)) from None
    opt = config.option
    explicit_paths = config.args_source is pytest.Config.ArgsSource.ARGS
    if values["agents"] and (opt.reactbench_tasks or not explicit_paths):
        # The roots are collected only when no path is given (or they were asked for).
        source = "--reactbench-tasks" if opt.reactbench_tasks else "ini reactbench_tasks"
        for root in values["task_roots"]:
            if not root.exists():
                raise UsageError(f"{source}: {root} does not exist")
    settings = Settings(**values, resume=resume)
    return _resumed(settings, opt) if resume else settings


def _shown(name: str, value: Any) -> str:
    if name == "agents":
        return ",".join(value)
    if name == "shard":
        return shard_text(value) or "(none)"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _resumed(settings: Settings, opt: Any) -> Settings:
    """A resumed run goes on as it was made: the agents, backend, attempts and options
    its manifest records are its own, and a command line that asks for others is a
    usage error naming the option (a run is never scored under two settings)."""
    assert settings.resume is not None
    try:
        manifest = RunManifest.read(settings.resume)
    except ResultsError as exc:
        raise UsageError(f"--reactbench-resume: {exc}") from None
    inherited: dict[str, Any] = {}
    for row in INHERITED:
        name, option, convert = row.field, row.flag, row.inherited
        assert convert is not None
        recorded = getattr(manifest, name)
        if recorded is None or (name == "agents" and not recorded):
            continue  # an older run's manifest did not say: this session decides
        value = convert(recorded)
        given = getattr(opt, option.removeprefix("--").replace("-", "_"))
        current = getattr(settings, name)
        if given not in (None, []) and (set(current) != set(value) if name == "agents" else current != value):
            raise UsageError(
                f"--reactbench-resume: run {manifest.run_id} was made with {option}={_shown(name, value)}, "
                f"and this command gives {option}={_shown(name, current)}; a resumed run keeps its own: "
                f"drop {option}, or start a new run")
        inherited[name] = value
    if not inherited.get("agents", settings.agents):
        raise UsageError(f"--reactbench-resume: {settings.resume / 'manifest.json'} names no agents; "
                         "give them with --reactbench-agent")
    return replace(settings, **inherited, resumed_manifest=manifest)
