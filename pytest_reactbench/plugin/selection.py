"""Which items a session runs: item ids given as arguments (`tasks/x::oracle`), the
paths given, and a resumed run's own selection, which this session's arguments may
only narrow."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.plugin.session import ReactbenchSession
from pytest_reactbench.results.manifest import RunManifest


def node_prefix(config: pytest.Config, path: Path) -> str:
    """The node id of a task directory (its path from the rootdir, or its name when it
    lies outside)."""
    return path.relative_to(config.rootpath).as_posix() if path.is_relative_to(config.rootpath) \
        else path.name


def item_arguments(config: pytest.Config) -> list[str]:
    """`tasks/x::oracle` as a command-line argument: pytest refuses `::` after a
    directory, so the argument becomes the task directory and the item id is kept to
    select from what it collects. Returns the ids."""
    selected = []
    for index, arg in enumerate(config.args):
        where, sep, name = arg.partition("::")
        path = (config.invocation_params.dir / where).resolve()
        if not sep or not (path / "task.toml").is_file():
            continue
        config.args[index] = where
        selected.append(f"{node_prefix(config, path)}::{name}")
    return selected


def resolved_arg(config: pytest.Config, arg: str) -> str:
    """A collection argument with its path made absolute (`/abs/tasks/x`, `/abs/t.py::f`)."""
    where, sep, rest = arg.partition("::")
    return str((config.invocation_params.dir / where).resolve()) + sep + rest


def given_paths(config: pytest.Config) -> tuple[list[Path], list[Path]]:
    """The paths given as arguments: those that are not item ids (`tasks/x`), and the
    task directories of those that are (`tasks/x::nop`)."""
    plain: list[Path] = []
    of_items: list[Path] = []
    for arg in config.args:
        where, sep, _ = arg.partition("::")
        path = (config.invocation_params.dir / where).resolve()
        (of_items if sep and (path / "task.toml").is_file() else plain).append(path)
    return plain, of_items


def keep_selection(config: pytest.Config, session: ReactbenchSession, manifest: RunManifest,
                    given: tuple[list[Path], list[Path]], named: list[str]) -> None:
    """A resumed run is of the tasks it was made of: this session collects what the run's
    first one did (its paths, item ids, -k and -m) whatever it is given. Paths and ids
    given here only narrow that to some of the run's tasks; one outside the run, or
    another -k or -m, is a usage error naming it."""
    assert manifest.selection is not None
    recorded = [Path(arg.partition("::")[0]) for arg in manifest.selection]
    paths = given[0]
    outside = [p for p in given[0] + given[1] if not any(p.is_relative_to(r) for r in recorded)]
    if outside:
        shown = ", ".join(_shown_path(config, p) for p in recorded)
        raise pytest.UsageError(
            f"--reactbench-resume: run {manifest.run_id} was made of {shown}, and this command gives "
            f"{', '.join(_shown_path(config, p) for p in outside)}, which is not in it; a resumed run "
            "keeps its own tasks: give none of its paths (or some of them), or start a new run")
    for option, dest, value in (("-k", "keyword", manifest.keyword), ("-m", "markexpr", manifest.markexpr)):
        asked = getattr(config.option, dest) or ""
        if value and asked and asked != value:
            raise pytest.UsageError(
                f"--reactbench-resume: run {manifest.run_id} was made with {option} {value!r}, and this "
                f"command gives {option} {asked!r}; a resumed run keeps its own: drop {option}, "
                "or start a new run")
        setattr(config.option, dest, asked or value)
    config.args[:] = list(manifest.selection)
    if session.worker == "controller":
        session.selected = list(manifest.items)  # (xdist's workers get it from the controller)
    if paths or named:
        session.narrowed = (paths, named)


def _shown_path(config: pytest.Config, path: Path) -> str:
    return str(path.relative_to(config.invocation_params.dir)) \
        if path.is_relative_to(config.invocation_params.dir) else str(path)


def check_named_items(named: list[str], ids: list[str]) -> None:
    """Every item id given as an argument names a collected item (or every attempt of
    one agent's): one that does not is a usage error naming what the task has."""
    for wanted in named:
        if wanted in ids or any(nodeid.partition("#")[0] == wanted for nodeid in ids):
            continue
        task = wanted.rpartition("::")[0]
        there = [nodeid for nodeid in ids if nodeid.rpartition("::")[0] == task]
        raise pytest.UsageError(
            f"{wanted}: no such item in this run; {task} has "
            + (", ".join(there) if there else "none")
            + " (an item is TASK::AGENT, or TASK::AGENT#ATTEMPT with --reactbench-attempts)")
