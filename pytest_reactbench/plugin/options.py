"""The plugin's options as one table.

Each row declares a command-line option, its ini key and environment variable (when
it has them) and how its text becomes a value. The table declares the options to
pytest and resolves them: the command line, then the environment, then the ini file,
then the default. A repeatable option takes the ini's entries, then the command
line's (or, when it `replaces`, the command line's alone when it gives any). A value
that does not parse is a usage error naming where it came from.

The table is the only reader of the settings' `REACTBENCH_*` variables (the sandbox
layer is given each value): an entry point without a pytest Config (a script, a test
fixture) reads them through `setting` and `environment_sandbox_options`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_reactbench.agents.base import AgentConfigError
from pytest_reactbench.agents.command import parse_commands
from pytest_reactbench.plugin.shards import parse_shard
from pytest_reactbench.sandbox.mirrors import parse_git_mirrors
from pytest_reactbench.sandbox.options import (
    IMAGES_MODES,
    SandboxOptions,
    default_ca_bundle,
    default_cache,
    images_mode,
    parse_docker_hosts,
    parse_image_registry,
    parse_yes,
)
from pytest_reactbench.sandbox.recipes import parse_image_map

Kind = Literal["value", "many", "flag"]
IniType = Literal["args", "linelist", "bool"]


@dataclass(frozen=True)
class Source:
    """Where a value was read: its name in messages, and the folder a relative path in
    it is relative to (the invocation folder, or the ini file's for ini values)."""

    name: str
    base: Path

    def path(self, value: str) -> Path:
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else self.base / path

    def path_or_none(self, value: str) -> Path | None:
        return None if value == "none" else self.path(value)


#: How a row's text becomes its value: the text (a string, a list of them, or a bool),
#: where it was read, and the values of the rows above it.
Convert = Callable[[Any, Source, Mapping[str, Any]], Any]


def _same(raw: Any, source: Source, values: Mapping[str, Any]) -> Any:
    return raw


@dataclass(frozen=True)
class Option:
    #: The Settings field it sets.
    field: str
    flag: str
    help: str
    kind: Kind = "value"
    ini: str = ""
    #: The ini key's one-line description.
    ini_help: str = ""
    #: The ini key's type (pytest's addini): None for text, "args", "linelist", "bool".
    ini_type: IniType | None = None
    env: str = ""
    metavar: str | None = None
    #: The text used when nothing sets it (and the ini key's default).
    default: Any = None
    #: How the default reads in --help, when it is not `default` itself.
    shown_default: str = ""
    convert: Convert = _same
    #: A repeatable option whose command-line entries replace the ini's.
    replaces: bool = False
    choices: tuple[str, ...] | None = None
    number: type | None = None
    #: A replay of one of the run's trials repeats it (`reactbench replay`): it decides
    #: what the trial's agent and sandbox were.
    replayed: bool = False
    #: A resumed run keeps the value its manifest records, read back by this (None: the
    #: resuming session decides).
    inherited: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def as_args(self, value: Any) -> list[str]:
        """The value as pytest arguments that give it again, whatever an ini file there
        says: a repeatable row that adds to the ini's entries clears them first (`-o`),
        a flag that is off says so to the ini."""
        cleared = ["-o", f"{self.ini}="] if self.kind == "many" and self.ini and not self.replaces else []
        if value is None or value is False or (isinstance(value, (str, tuple, list, dict)) and not value):
            return cleared + (["-o", f"{self.ini}=false"] if self.kind == "flag" and self.ini else [])
        if self.kind == "flag":
            return [self.flag]
        if isinstance(value, dict):
            return cleared + [f"{self.flag}={key}={item}" for key, item in value.items()]
        if isinstance(value, (tuple, list)):
            return cleared + [f"{self.flag}={item}" for item in value]
        return [f"{self.flag}={value:g}" if isinstance(value, float) else f"{self.flag}={value}"]

    def full_help(self, ini: bool = True) -> str:
        where = [f"ini: {self.ini}"] if self.ini and ini else []
        where += [f"env {self.env}"] if self.env else []
        shown = self.shown_default or ("" if self.default in (None, "", [], False) else str(self.default))
        where += [f"default: {shown}"] if shown else []
        return f"{self.help} ({'; '.join(where)})" if where else self.help

    def _argument(self, ini: bool) -> dict[str, Any]:
        """argparse's keywords for it (pytest's addoption takes the same)."""
        kwargs: dict[str, Any] = {"help": self.full_help(ini)}
        if self.kind == "flag":
            kwargs.update(action="store_true", default=None)
        elif self.kind == "many":
            kwargs.update(action="append", default=[], metavar=self.metavar)
        else:
            kwargs.update(default=None, metavar=self.metavar, choices=self.choices, type=self.number)
        return kwargs

    def declare(self, parser: pytest.Parser, group: Any) -> None:
        group.addoption(self.flag, **self._argument(ini=True))
        if self.ini:
            default = self.default if self.default is not None else ("" if self.ini_type is None else [])
            parser.addini(self.ini, self.ini_help, type=self.ini_type, default=default)

    def declare_command(self, parser: argparse.ArgumentParser) -> None:
        """Declare it to an argparse command of `reactbench`, as `--reactbench-X` and
        its short form `--X` (no ini file there: the command line, the environment,
        then the default)."""
        parser.add_argument("--" + self.flag.removeprefix("--reactbench-"), self.flag, dest=self.dest,
                            **self._argument(ini=False))

    def resolve(self, given: Any, ini: Any, here: Path, ini_base: Path, values: Mapping[str, Any]) -> Any:
        """Its value from what the command line gave, what the ini file says (None: no
        ini file), the environment and the default."""
        from_ini = Source(f"ini {self.ini}", ini_base)
        from_flag = Source(self.flag, here)
        if self.kind == "many":
            ini = list(ini or [])
            if self.replaces or not ini:
                raw, source = (given, from_flag) if given or not ini else (ini, from_ini)
            else:
                raw, source = [*ini, *given], Source(f"{self.flag} / ini {self.ini}", here)
        elif given is not None:
            raw, source = given, from_flag
        elif self.env and os.environ.get(self.env):
            raw, source = os.environ[self.env], Source(f"env {self.env}", here)
        elif ini not in ("", None):
            raw, source = ini, from_ini
        else:
            raw, source = self.default, Source(f"the default of {self.flag}", here)
        try:
            return self.convert(raw, source, values)
        except (ValueError, AgentConfigError) as exc:
            raise pytest.UsageError(str(exc)) from None


def _whole(low: int, high: int) -> Convert:
    def convert(raw: Any, source: Source, values: Mapping[str, Any]) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{source.name}: expected a whole number, got {raw!r}") from None
        if not low <= value <= high:
            raise ValueError(f"{source.name}: {value} is outside {low}..{high}")
        return value
    return convert


def _multiplier(raw: Any, source: Source, values: Mapping[str, Any]) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{source.name}: {raw!r} is not a number") from None
    if not 0 < value <= 100:
        raise ValueError(f"{source.name}: {value:g} must be above 0 and at most 100")
    return value


def _agents(raw: list[str], source: Source, values: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.strip() for entry in raw for a in entry.split(",") if a.strip()))


def _paths(raw: list[str], source: Source, values: Mapping[str, Any]) -> tuple[Path, ...]:
    return tuple(source.path(p) for p in raw)


def _existing(raw: list[str], source: Source, values: Mapping[str, Any]) -> tuple[Path, ...]:
    for path in _paths(raw, source, values):
        if not path.exists():
            raise ValueError(f"{source.name}: {path} does not exist")
    return _paths(raw, source, values)


def _cache(raw: str, source: Source, values: Mapping[str, Any]) -> Path:
    return source.path(raw) if raw else default_cache()


def _ca_bundle(raw: str, source: Source, values: Mapping[str, Any]) -> Path | None:
    bundle = source.path_or_none(raw) if raw else default_ca_bundle()
    if bundle is not None and not bundle.is_file():
        raise ValueError(f"{source.name}: {bundle} is not a file")
    return bundle


def _download_cache(raw: str, source: Source, values: Mapping[str, Any]) -> Path | None:
    return source.path_or_none(raw) if raw else values["cache"] / "downloads"


def _unique(raw: list[str], source: Source, values: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(raw))


def _yes(raw: Any, source: Source, values: Mapping[str, Any]) -> bool:
    return raw if isinstance(raw, bool) else parse_yes(str(raw or ""), source.name)


OPTIONS: tuple[Option, ...] = (
    Option("agents", "--reactbench-agent", kind="many", metavar="NAME[,NAME...]", convert=_agents,
           inherited=tuple,
           help="agents to run: oracle, nop, or one registered by a plugin; one item per task and "
           "agent. Without it no task is collected (but for an id such as tasks/x::nop)"),
    Option("task_roots", "--reactbench-tasks", kind="many", metavar="DIR", replaces=True,
           ini="reactbench_tasks", ini_type="args", ini_help="task roots", default=["tasks"],
           shown_default="tasks", convert=_paths, help="task roots to collect when no path is given"),
    Option("backend", "--reactbench-sandbox", metavar="BACKEND", ini="reactbench_sandbox",
           ini_help="sandbox backend", default="local", replayed=True, inherited=str,
           help="sandbox backend: local (bubblewrap) or docker"),
    Option("records", "--reactbench-records", metavar="DIR", ini="reactbench_records",
           ini_help="run record directory", default=".reactbench/records",
           convert=lambda raw, source, values: source.path(raw), help="where run records are written"),
    Option("cache", "--reactbench-cache", metavar="DIR", ini="reactbench_cache", env="REACTBENCH_CACHE",
           ini_help="bake cache directory", default="", shown_default="~/.cache/reactbench",
           convert=_cache, help="where baked images live"),
    Option("image_map", "--reactbench-image-map", kind="many", metavar="FROM=TO", ini="reactbench_image_map",
           ini_type="linelist", ini_help="FROM=TO image replacements", replayed=True,
           convert=lambda raw, source, values: parse_image_map(raw, source.name),
           help="replace a FROM image by a recipe under images/ or another image (repeatable)"),
    Option("images", "--reactbench-images", choices=IMAGES_MODES, ini="reactbench_images",
           ini_help="auto, public or stand-in base images", default="auto", replayed=True, inherited=str,
           convert=lambda raw, source, values: images_mode(raw, source.name),
           help="public base images of the image map: auto (the public image when the engine has it "
           "or can pull it, else its stand-in, with a warning), public (never a stand-in), stand-in "
           "(never the public image)"),
    Option("git_mirrors", "--reactbench-git-mirror", kind="many", metavar="PREFIX=LOCATION",
           ini="reactbench_git_mirrors", ini_type="linelist",
           ini_help="PREFIX=LOCATION git mirrors for bakes",
           convert=lambda raw, source, values: parse_git_mirrors(raw, source.name),
           help="during bakes, fetch git URLs starting with PREFIX from LOCATION (a directory of bare "
           "repositories laid out like the URLs, or a git URL), e.g. https://github.com/=/srv/git "
           "(repeatable; for the same prefix the command line's entry wins)"),
    Option("ca_bundle", "--reactbench-ca-bundle", metavar="PEM", ini="reactbench_ca_bundle",
           env="REACTBENCH_CA_BUNDLE", ini_help="CA bundle for bakes", default="",
           shown_default="the host's /etc/ssl/certs/ca-certificates.crt", convert=_ca_bundle,
           help="CA bundle that bakes trust for package downloads, e.g. behind a TLS-inspecting "
           "proxy; 'none' for none"),
    Option("unsigned_registry", "--reactbench-unsigned-registry", kind="flag",
           ini="reactbench_unsigned_registry", ini_type="bool", env="REACTBENCH_UNSIGNED_REGISTRY",
           ini_help="accept a package registry that serves no npm signatures", default=False,
           convert=_yes, replayed=True, inherited=bool,
           help="let the bakes' package managers (corepack, pnpm's switch to a pinned version) accept "
           "a registry that serves packages without npm's signatures, as a mirror may; recorded in "
           "the run's manifest"),
    Option("image_registry", "--reactbench-image-registry", metavar="HOST[:PORT]/PREFIX",
           ini="reactbench_image_registry", ini_help="HOST[:PORT]/PREFIX registry of baked images",
           default="", convert=lambda raw, source, values: parse_image_registry(raw, source.name),
           help="share baked images through this registry: pull an image's content-hashed tag before "
           "baking it, push it after; credentials are the engine's (docker login). A registry that "
           "cannot be used means baking, with one warning (docker backend)"),
    Option("download_cache", "--reactbench-download-cache", metavar="DIR", ini="reactbench_download_cache",
           ini_help="host cache of the bakes' package downloads", default="",
           shown_default="<cache>/downloads", convert=_download_cache,
           help="the host cache of package downloads (npm, pnpm, yarn) that every bake shares, "
           "through a caching registry proxy on loopback; 'none' for none"),
    Option("strict", "--reactbench-strict", kind="flag", ini="reactbench_strict", ini_type="bool",
           ini_help="fail submissions the audit flags", default=False, convert=_yes, replayed=True,
           inherited=bool,
           help="fail a trial whose submission touches files that can fool a grader (package-manager "
           "hooks, runner or linter configs, test files, shadowing modules...), even on tasks whose "
           "grader refuses them itself"),
    Option("patch", "--reactbench-patch", metavar="PATH", replayed=True,
           convert=lambda raw, source, values: source.path(raw) if raw else None,
           help="for the patch agent: a unified diff (every task), a directory of <task id>.patch "
           "files, or a .json/.jsonl predictions file of {task_id, model_patch, agent_name} records"),
    Option("commands", "--reactbench-agent-command", kind="many", metavar="NAME=COMMAND",
           ini="reactbench_agent_commands", ini_type="linelist", ini_help="NAME=COMMAND command agents",
           replayed=True,
           convert=lambda raw, source, values: {
               name: spec.command for name, spec in parse_commands(raw, source.name).items()},
           help="a command agent: run COMMAND in the agent sandbox (cwd /app; the instruction is in "
           "$REACTBENCH_INSTRUCTION_FILE); select it with --reactbench-agent=NAME (repeatable)"),
    Option("agent_env", "--reactbench-agent-env", kind="many", metavar="NAME", ini="reactbench_agent_env",
           ini_type="args", ini_help="variables passed to command agents", convert=_unique, replayed=True,
           help="a host environment variable passed to command agents, e.g. an API key; its value is "
           "never logged (repeatable)"),
    Option("model_hosts", "--reactbench-model-host", kind="many", metavar="HOST",
           ini="reactbench_model_hosts", ini_type="args", ini_help="hosts command agents may reach",
           convert=_unique, replayed=True,
           help="a host command agents may reach (their only network; repeatable)"),
    Option("attempts", "--reactbench-attempts", metavar="N", number=int, ini="reactbench_attempts",
           ini_help="attempts per task and agent", default="1", convert=_whole(1, 100), inherited=int,
           help="attempts per task and agent, one item each"),
    Option("retries", "--reactbench-retries", metavar="N", number=int, ini="reactbench_retries",
           ini_help="retries of trials that ended in an error", default="0", convert=_whole(0, 10),
           inherited=int,
           help="retry a trial that ended in an error (never a pass or a fail) up to N times; each "
           "retry has its own record"),
    Option("baselines", "--reactbench-baseline", kind="many", metavar="PATH", convert=_existing,
           help="a JUnit XML file or run record directory to compare this run with; a regression makes "
           "the session fail (repeatable: the shards of one baseline run)"),
    Option("allow_missing", "--reactbench-allow-missing", kind="flag", convert=_yes,
           help="with --reactbench-baseline: a baseline item missing from this run is not a regression"),
    Option("resume_id", "--reactbench-resume", metavar="RUN_ID",
           help="resume a run (its id under the records folder, or 'last'): its scored trials are kept "
           "from their records, the missing, errored and incomplete ones run again into the same run "
           "folder, and one leaderboard covers the whole run; the agents default to the run's"),
    Option("timeout_multiplier", "--reactbench-timeout-multiplier", metavar="F", number=float,
           ini="reactbench_timeout_multiplier", ini_help="scale of agent and verifier time limits",
           default="1", convert=_multiplier, replayed=True, inherited=float,
           help="scale every task's agent and verifier time limits by F, e.g. 2 on a slow machine"),
    Option("shard", "--reactbench-shard", metavar="K/N",
           convert=lambda raw, source, values: parse_shard(raw, source.name) if raw else None,
           inherited=lambda text: parse_shard(text, "manifest shard"),
           help="run only shard K of N: the tasks whose id hashes to K (stable when tasks are added); "
           "`reactbench report` merges the shards' results into one run"),
    Option("docker_hosts", "--reactbench-docker-host", kind="many", metavar="URL", replaces=True,
           ini="reactbench_docker_hosts", ini_type="args",
           ini_help="Docker engines of the docker backend's pool",
           shown_default="DOCKER_HOST or the local socket", replayed=True,
           convert=lambda raw, source, values: parse_docker_hosts(raw, source.name),
           help="a Docker engine of the docker backend's pool (unix://, tcp:// with DOCKER_TLS_VERIFY "
           "and DOCKER_CERT_PATH, ssh://); repeatable: trials are spread over the engines by room"),
)


#: What a replay of one trial repeats, and what a resumed run keeps from its manifest.
REPLAYED = tuple(o for o in OPTIONS if o.replayed)
INHERITED = tuple(o for o in OPTIONS if o.inherited is not None)


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("reactbench", "ReactBench tasks as test items")
    for option in OPTIONS:
        option.declare(parser, group)


def _resolved(rows: tuple[Option, ...], given: Callable[[Option], Any], ini: Callable[[Option], Any],
              here: Path, ini_base: Path) -> dict[str, Any]:
    """The rows' values, by their Settings fields, in the table's order (a row's
    conversion may read the rows above it)."""
    values: dict[str, Any] = {}
    for option in rows:
        values[option.field] = option.resolve(given(option), ini(option), here, ini_base, values)
    return values


def resolve(config: pytest.Config) -> dict[str, Any]:
    """Every row's value, from a pytest session's command line, environment and ini."""
    return _resolved(OPTIONS, lambda o: getattr(config.option, o.dest),
                     lambda o: config.getini(o.ini) if o.ini else None,
                     config.invocation_params.dir, config.rootpath)


#: The rows that make a backend's SandboxOptions, in the table's order.
SANDBOX_OPTIONS = tuple(o for o in OPTIONS if o.field in {f.name for f in fields(SandboxOptions)})


def add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    """The sandbox rows, as options of a `reactbench` command."""
    for option in SANDBOX_OPTIONS:
        option.declare_command(parser)


def sandbox_options(values: Mapping[str, Any]) -> SandboxOptions:
    """A backend's options, from the rows' values (a session's, or a command's)."""
    return SandboxOptions(**{option.field: values[option.field] for option in SANDBOX_OPTIONS})


def resolve_command(args: argparse.Namespace, here: Path) -> dict[str, Any]:
    """The sandbox rows' values for a `reactbench` command: its options, then the
    environment, then the defaults (a usage error names the option)."""
    return _resolved(SANDBOX_OPTIONS, lambda o: getattr(args, o.dest), lambda o: None, here, here)


def _nothing_given(option: Option) -> Any:
    return [] if option.kind == "many" else None


def setting(field: str, here: Path | None = None) -> Any:
    """One row's value where there is no command line nor ini file (a script, a test
    fixture): its environment variable, else its default. The rows above it are
    resolved the same way, for its conversion to read."""
    at = next((i for i, o in enumerate(OPTIONS) if o.field == field), None)
    if at is None:
        raise KeyError(f"no option sets {field!r}")
    where = here or Path.cwd()
    return _resolved(OPTIONS[:at + 1], _nothing_given, lambda o: None, where, where)[field]


def environment_sandbox_options(**given: Any) -> SandboxOptions:
    """A backend's options made outside a session or a `reactbench` command: the fields
    `given`, the sandbox rows that have a variable from it (else their default), and
    SandboxOptions' own defaults for the rest."""
    read = {o.field: setting(o.field) for o in SANDBOX_OPTIONS if o.env and o.field not in given}
    return SandboxOptions(**{**read, **given})
