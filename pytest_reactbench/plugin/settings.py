"""Command-line options and ini keys, read once into Settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.plugin.shards import Shard, parse_shard, shard_text
from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.results.resume import resolve_run
from pytest_reactbench.sandbox.image_registry import parse_image_registry
from pytest_reactbench.sandbox.mirrors import GitMirror, parse_git_mirrors
from pytest_reactbench.sandbox.options import (
    IMAGES_MODES,
    ImagesMode,
    SandboxOptions,
    default_ca_bundle,
    default_cache,
    images_mode,
    parse_docker_hosts,
)
from pytest_reactbench.sandbox.recipes import parse_image_map

UsageError = pytest.UsageError


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("reactbench", "ReactBench tasks as test items")
    group.addoption(
        "--reactbench-agent", action="append", default=[], metavar="NAME[,NAME...]",
        help="agents to run: oracle, nop, or one registered by a plugin; one item per task "
        "and agent. Without it no task is collected.",
    )
    group.addoption(
        "--reactbench-tasks", action="append", default=[], metavar="DIR",
        help="task roots to collect when no path is given (ini: reactbench_tasks; default: tasks)",
    )
    group.addoption(
        "--reactbench-sandbox", default=None, metavar="BACKEND",
        help="sandbox backend: local (bubblewrap, default) or docker (ini: reactbench_sandbox)",
    )
    group.addoption(
        "--reactbench-records", default=None, metavar="DIR",
        help="where run records are written (ini: reactbench_records; default: .reactbench/records)",
    )
    group.addoption(
        "--reactbench-cache", default=None, metavar="DIR",
        help="where baked images live (ini: reactbench_cache; env REACTBENCH_CACHE; "
        "default: ~/.cache/reactbench)",
    )
    group.addoption(
        "--reactbench-image-map", action="append", default=[], metavar="FROM=TO",
        help="replace a FROM image by a recipe under images/ or another image "
        "(repeatable; ini: reactbench_image_map)",
    )
    group.addoption(
        "--reactbench-images", default=None, choices=IMAGES_MODES,
        help="public base images of the image map: auto (the public image when the engine has it "
        "or can pull it, else its stand-in, with a warning), public (never a stand-in), stand-in "
        "(never the public image) (ini: reactbench_images; default auto)",
    )
    group.addoption(
        "--reactbench-git-mirror", action="append", default=[], metavar="PREFIX=LOCATION",
        help="during bakes, fetch git URLs starting with PREFIX from LOCATION (a directory of "
        "bare repositories laid out like the URLs, or a git URL), e.g. "
        "https://github.com/=/srv/git (repeatable; ini: reactbench_git_mirrors)",
    )
    group.addoption(
        "--reactbench-ca-bundle", default=None, metavar="PEM",
        help="CA bundle that bakes trust for package downloads, e.g. behind a TLS-inspecting "
        "proxy; 'none' for none (ini: reactbench_ca_bundle; env REACTBENCH_CA_BUNDLE; "
        "default: the host's /etc/ssl/certs/ca-certificates.crt)",
    )
    group.addoption(
        "--reactbench-image-registry", default=None, metavar="HOST[:PORT]/PREFIX",
        help="share baked images through this registry: pull an image's content-hashed tag "
        "before baking it, push it after; credentials are the engine's (docker login). A registry "
        "that cannot be used means baking, with one warning (docker backend; "
        "ini: reactbench_image_registry)",
    )
    group.addoption(
        "--reactbench-download-cache", default=None, metavar="DIR",
        help="the host cache of package downloads (npm, pnpm, yarn) that every bake shares, "
        "through a caching registry proxy on loopback; 'none' for none (ini: "
        "reactbench_download_cache; default: <cache>/downloads)",
    )
    group.addoption(
        "--reactbench-patch", default=None, metavar="PATH",
        help="for the patch agent: a unified diff (every task), a directory of "
        "<task id>.patch files, or a .json/.jsonl predictions file of "
        "{task_id, model_patch, agent_name} records",
    )
    group.addoption(
        "--reactbench-agent-command", action="append", default=[], metavar="NAME=COMMAND",
        help="a command agent: run COMMAND in the agent sandbox (cwd /app; the instruction is "
        "in $REACTBENCH_INSTRUCTION_FILE); select it with --reactbench-agent=NAME "
        "(repeatable; ini: reactbench_agent_commands)",
    )
    group.addoption(
        "--reactbench-agent-env", action="append", default=[], metavar="NAME",
        help="a host environment variable passed to command agents, e.g. an API key; its value "
        "is never logged (repeatable; ini: reactbench_agent_env)",
    )
    group.addoption(
        "--reactbench-model-host", action="append", default=[], metavar="HOST",
        help="a host command agents may reach (their only network; repeatable; "
        "ini: reactbench_model_hosts)",
    )
    group.addoption(
        "--reactbench-attempts", type=int, default=None, metavar="N",
        help="attempts per task and agent, one item each (ini: reactbench_attempts; default 1)",
    )
    group.addoption(
        "--reactbench-retries", type=int, default=None, metavar="N",
        help="retry a trial that ended in an error (never a pass or a fail) up to N times; "
        "each retry has its own record (ini: reactbench_retries; default 0)",
    )
    group.addoption(
        "--reactbench-baseline", action="append", default=[], metavar="PATH",
        help="a JUnit XML file or run record directory to compare this run with; a regression "
        "makes the session fail (repeatable: the shards of one baseline run)",
    )
    group.addoption(
        "--reactbench-allow-missing", action="store_true", default=False,
        help="with --reactbench-baseline: a baseline item missing from this run is not a regression",
    )
    group.addoption(
        "--reactbench-resume", default=None, metavar="RUN_ID",
        help="resume a run (its id under the records folder, or 'last'): its scored trials are "
        "kept from their records, the missing, errored and incomplete ones run again into the same "
        "run folder, and one leaderboard covers the whole run; the agents default to the run's",
    )
    group.addoption(
        "--reactbench-strict", action="store_true", default=None,
        help="fail a trial whose submission touches files that can fool a grader (package-"
        "manager hooks, runner or linter configs, test files, shadowing modules...), even on "
        "tasks whose grader refuses them itself (ini: reactbench_strict)",
    )
    group.addoption(
        "--reactbench-timeout-multiplier", type=float, default=None, metavar="F",
        help="scale every task's agent and verifier time limits by F, e.g. 2 on a slow "
        "machine (ini: reactbench_timeout_multiplier; default 1)",
    )
    group.addoption(
        "--reactbench-shard", default=None, metavar="K/N",
        help="run only shard K of N: the tasks whose id hashes to K (stable when tasks are "
        "added); `reactbench report` merges the shards' results into one run",
    )
    group.addoption(
        "--reactbench-docker-host", action="append", default=[], metavar="URL",
        help="a Docker engine of the docker backend's pool (unix://, tcp:// with DOCKER_TLS_VERIFY "
        "and DOCKER_CERT_PATH, ssh://); repeatable: trials are spread over the engines by room "
        "(ini: reactbench_docker_hosts; default: DOCKER_HOST or the local socket)",
    )
    parser.addini("reactbench_docker_hosts", "Docker engines of the docker backend's pool", type="args",
                  default=[])
    parser.addini("reactbench_tasks", "task roots", type="args", default=["tasks"])
    parser.addini("reactbench_strict", "fail submissions the audit flags", type="bool", default=False)
    parser.addini("reactbench_attempts", "attempts per task and agent", default="1")
    parser.addini("reactbench_retries", "retries of trials that ended in an error", default="0")
    parser.addini("reactbench_agent_commands", "NAME=COMMAND command agents", type="linelist", default=[])
    parser.addini("reactbench_agent_env", "variables passed to command agents", type="args", default=[])
    parser.addini("reactbench_model_hosts", "hosts command agents may reach", type="args", default=[])
    parser.addini("reactbench_sandbox", "sandbox backend", default="local")
    parser.addini("reactbench_records", "run record directory", default=".reactbench/records")
    parser.addini("reactbench_cache", "bake cache directory", default="")
    parser.addini("reactbench_image_map", "FROM=TO image replacements", type="linelist", default=[])
    parser.addini("reactbench_ca_bundle", "CA bundle for bakes", default="")
    parser.addini("reactbench_image_registry", "HOST[:PORT]/PREFIX registry of baked images", default="")
    parser.addini("reactbench_download_cache", "host cache of the bakes' package downloads", default="")
    parser.addini("reactbench_images", "auto, public or stand-in base images", default="auto")
    parser.addini("reactbench_git_mirrors", "PREFIX=LOCATION git mirrors for bakes", type="linelist",
                  default=[])
    parser.addini("reactbench_timeout_multiplier", "scale of agent and verifier time limits", default="1")


@dataclass(frozen=True)
class Settings:
    agents: tuple[str, ...]
    task_roots: tuple[Path, ...]
    backend: str
    records: Path
    cache: Path
    image_map: dict[str, str] = field(default_factory=dict)
    ca_bundle: Path | None = None
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
    timeout_multiplier: float = 1.0
    #: (K, N): only the tasks of shard K of N.
    shard: Shard | None = None
    #: The docker backend's engines (empty: DOCKER_HOST or the local socket).
    docker_hosts: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.agents)

    def sandbox_options(self) -> SandboxOptions:
        return SandboxOptions(cache=self.cache, image_map=self.image_map, ca_bundle=self.ca_bundle,
                              images=self.images, git_mirrors=self.git_mirrors,
                              docker_hosts=self.docker_hosts, image_registry=self.image_registry,
                              download_cache=self.download_cache)


def _ini_path(config: pytest.Config, value: str) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else config.rootpath / path


def _agents_in_ids(config: pytest.Config) -> tuple[str, ...]:
    """The agents of item ids given as arguments (`tasks/x::nop`, `tasks/x::oracle#2`)."""
    named = []
    for arg in config.args:
        where, sep, name = arg.partition("::")
        if sep and name and (_cli_path(config, where) / "task.toml").is_file():
            named.append(name.partition("#")[0])
    return tuple(dict.fromkeys(named))


def ini_records(config: pytest.Config) -> Path:
    """The records folder a session without --reactbench-records writes to."""
    return _ini_path(config, config.getini("reactbench_records"))


def _cli_path(config: pytest.Config, value: str) -> Path:
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else config.invocation_params.dir / path


def read_settings(config: pytest.Config) -> Settings:
    opt = config.option
    agents = tuple(
        dict.fromkeys(a.strip() for raw in opt.reactbench_agent for a in raw.split(",") if a.strip())
    )
    if not agents and not opt.reactbench_resume:
        # `pytest tasks/x::nop`, as the session prints it: the agent is in the id.
        agents = _agents_in_ids(config)
    if opt.reactbench_tasks:
        roots = tuple(_cli_path(config, p) for p in opt.reactbench_tasks)
    else:
        roots = tuple(_ini_path(config, p) for p in config.getini("reactbench_tasks"))
    records = (
        _cli_path(config, opt.reactbench_records) if opt.reactbench_records
        else ini_records(config)
    )
    cache_value = opt.reactbench_cache or os.environ.get("REACTBENCH_CACHE")
    if cache_value:
        cache = _cli_path(config, cache_value)
    elif config.getini("reactbench_cache"):
        cache = _ini_path(config, config.getini("reactbench_cache"))
    else:
        cache = default_cache()
    ca_bundle: Path | None
    if opt.reactbench_ca_bundle:
        value = opt.reactbench_ca_bundle
        ca_bundle = None if value == "none" else _cli_path(config, value)
    elif config.getini("reactbench_ca_bundle") and not os.environ.get("REACTBENCH_CA_BUNDLE"):
        value = config.getini("reactbench_ca_bundle")
        ca_bundle = None if value == "none" else _ini_path(config, value)
    else:
        ca_bundle = default_ca_bundle()
    if ca_bundle is not None and not ca_bundle.is_file():
        raise UsageError(f"--reactbench-ca-bundle: {ca_bundle} is not a file")
    try:
        image_map = parse_image_map(config.getini("reactbench_image_map"), "ini reactbench_image_map")
        image_map = parse_image_map(opt.reactbench_image_map, "--reactbench-image-map", image_map)
        images = (images_mode(opt.reactbench_images, "--reactbench-images") if opt.reactbench_images
                  else images_mode(config.getini("reactbench_images"), "ini reactbench_images"))
        # The command line's entries come last: for the same prefix, they win.
        git_mirrors = parse_git_mirrors(
            [*config.getini("reactbench_git_mirrors"), *opt.reactbench_git_mirror],
            "--reactbench-git-mirror / ini reactbench_git_mirrors")
        if opt.reactbench_image_registry is not None:
            image_registry = parse_image_registry(opt.reactbench_image_registry,
                                                  "--reactbench-image-registry")
        else:
            image_registry = parse_image_registry(config.getini("reactbench_image_registry"),
                                                  "ini reactbench_image_registry")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    download_cache: Path | None
    if opt.reactbench_download_cache:
        value = opt.reactbench_download_cache
        download_cache = None if value == "none" else _cli_path(config, value)
    elif config.getini("reactbench_download_cache"):
        value = config.getini("reactbench_download_cache")
        download_cache = None if value == "none" else _ini_path(config, value)
    else:
        download_cache = cache / "downloads"
    resume = None
    if opt.reactbench_resume:
        try:
            resume = resolve_run(records, opt.reactbench_resume)
        except ResultsError as exc:
            raise UsageError(str(exc)) from None
    explicit_paths = config.args_source is pytest.Config.ArgsSource.ARGS
    for baseline in opt.reactbench_baseline:
        if not _cli_path(config, baseline).exists():
            raise UsageError(f"--reactbench-baseline: {baseline} does not exist")
    try:
        shard = parse_shard(opt.reactbench_shard) if opt.reactbench_shard else None
        docker_hosts = parse_docker_hosts(
            opt.reactbench_docker_host or config.getini("reactbench_docker_hosts"),
            "--reactbench-docker-host" if opt.reactbench_docker_host else "ini reactbench_docker_hosts")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if agents and (opt.reactbench_tasks or not explicit_paths):
        # The roots are collected only when no path is given (or they were asked for).
        source = "--reactbench-tasks" if opt.reactbench_tasks else "ini reactbench_tasks"
        for root in roots:
            if not root.exists():
                raise UsageError(f"{source}: {root} does not exist")
    settings = Settings(
        agents=agents,
        task_roots=roots,
        backend=opt.reactbench_sandbox or config.getini("reactbench_sandbox"),
        records=records,
        cache=cache,
        image_map=image_map,
        ca_bundle=ca_bundle,
        images=images,
        git_mirrors=git_mirrors,
        image_registry=image_registry,
        download_cache=download_cache,
        strict=bool(opt.reactbench_strict if opt.reactbench_strict is not None
                    else config.getini("reactbench_strict")),
        patch=_cli_path(config, opt.reactbench_patch) if opt.reactbench_patch else None,
        commands=_commands([*config.getini("reactbench_agent_commands"), *opt.reactbench_agent_command]),
        attempts=_count(opt.reactbench_attempts, config.getini("reactbench_attempts"),
                        "--reactbench-attempts", 1, 100),
        retries=_count(opt.reactbench_retries, config.getini("reactbench_retries"),
                       "--reactbench-retries", 0, 10),
        baselines=tuple(_cli_path(config, b) for b in opt.reactbench_baseline),
        allow_missing=bool(opt.reactbench_allow_missing),
        agent_env=tuple(dict.fromkeys([*config.getini("reactbench_agent_env"), *opt.reactbench_agent_env])),
        model_hosts=tuple(dict.fromkeys([*config.getini("reactbench_model_hosts"),
                                         *opt.reactbench_model_host])),
        resume=resume,
        timeout_multiplier=_multiplier(opt.reactbench_timeout_multiplier,
                                       config.getini("reactbench_timeout_multiplier")),
        shard=shard,
        docker_hosts=docker_hosts,
    )
    return _resumed(settings, opt) if resume else settings


#: What a resumed run takes from its manifest: the Settings field, the option that
#: sets it (its dest on the command line), and the manifest's form of the value.
INHERITED: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("agents", "--reactbench-agent", tuple),
    ("backend", "--reactbench-sandbox", str),
    ("attempts", "--reactbench-attempts", int),
    ("retries", "--reactbench-retries", int),
    ("strict", "--reactbench-strict", bool),
    ("images", "--reactbench-images", str),
    ("timeout_multiplier", "--reactbench-timeout-multiplier", float),
    ("shard", "--reactbench-shard", lambda text: parse_shard(text, "manifest shard")),
)


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
    for name, option, convert in INHERITED:
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
    return replace(settings, **inherited)


def _multiplier(option: float | None, ini: str) -> float:
    source = "--reactbench-timeout-multiplier" if option is not None else "ini reactbench_timeout_multiplier"
    try:
        value = option if option is not None else float(ini)
    except ValueError:
        raise UsageError(f"{source}: {ini!r} is not a number") from None
    if not 0 < value <= 100:
        raise UsageError(f"{source}: {value:g} must be above 0 and at most 100")
    return value


def _count(option: int | None, ini: str, name: str, low: int, high: int) -> int:
    try:
        value = option if option is not None else int(ini)
    except ValueError:
        raise UsageError(f"{name}: expected a whole number, got {ini!r}") from None
    if not low <= value <= high:
        raise UsageError(f"{name}: {value} is outside {low}..{high}")
    return value


def _commands(entries: list[str]) -> dict[str, str]:
    commands = {}
    for entry in entries:
        name, sep, command = entry.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise UsageError(f"--reactbench-agent-command: {entry!r} must be NAME=COMMAND")
        commands[name.strip()] = command.strip()
    return commands
