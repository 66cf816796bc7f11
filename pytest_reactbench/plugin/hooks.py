"""The plugin's hook implementations: options, collection, the session's run loop,
reports and JUnit properties (the package's __init__ registers them)."""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench import __version__
from pytest_reactbench.agents import AgentConfigError
from pytest_reactbench.plugin import bakes, builtins, hookspecs, shards
from pytest_reactbench.plugin.items import (
    AGENTS_KEY,
    TaskDirectory,
    TrialErrored,
    TrialFailed,
    TrialItem,
    register_task_markers,
)
from pytest_reactbench.plugin.progress import progress_printer
from pytest_reactbench.plugin.report import describe_failure
from pytest_reactbench.plugin.session import SESSION_KEY, ReactbenchSession
from pytest_reactbench.plugin.settings import addoption, read_settings
from pytest_reactbench.plugin.summary import ResultsSummary
from pytest_reactbench.results import Provenance, TrialResult, Verdict, new_run_id
from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.prebake import start as start_prebake
from pytest_reactbench.tasks import Task, TaskError, find_tasks, load_task
from pytest_reactbench.trial import Stages

VERDICT = "reactbench.verdict"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    pluginmanager.register(builtins, "reactbench-builtins")


def pytest_addoption(parser: pytest.Parser) -> None:
    addoption(parser)


class XdistHooks:
    """Registered only when xdist is loaded: hands the run id and the items named on
    the command line to every worker."""

    def __init__(self, run_id: str, selected: list[str]) -> None:
        self.run_id = run_id
        self.selected = selected
        self.checked = False

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["reactbench_run_id"] = self.run_id
        node.workerinput["reactbench_selected"] = self.selected

    @pytest.hookimpl(trylast=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # The controller collects nothing itself: the first worker's ids name the items,
        # and this runs before any of them is scheduled.
        if self.checked:
            return
        self.checked = True
        config: pytest.Config = node.config
        summary = config.pluginmanager.get_plugin("reactbench-summary")
        if summary is not None:
            summary.expect(ids)
        session = config.stash[SESSION_KEY]
        dirs = {_node_prefix(config, path): path for arg in config.args
                for path in find_tasks((config.invocation_params.dir / arg).resolve())}
        first: dict[str, Task] = {}
        for nodeid in ids:
            prefix, _, item = nodeid.rpartition("::")
            agent = item.partition("#")[0]
            if prefix in dirs and agent in session.agents and agent not in first:
                try:
                    first[agent] = load_task(dirs[prefix])
                except TaskError:
                    continue  # a collection error of its own
        _check_agents(session, first)


def _node_prefix(config: pytest.Config, path: Path) -> str:
    """The node id of a task directory (its path from the rootdir, or its name when it
    lies outside)."""
    return path.relative_to(config.rootpath).as_posix() if path.is_relative_to(config.rootpath) \
        else path.name


def _check_agents(session: ReactbenchSession, first: dict[str, Task]) -> None:
    """The agents' CLIs answer before any trial runs, each on the first task it has."""
    if not session.config.option.collectonly:
        session.check_agents(first)


def _trials_to_run(session: pytest.Session, state: ReactbenchSession) -> list[TrialItem]:
    """The items whose trial this session runs (not the not-attempted, not the ones a
    resumed run keeps)."""
    return [item for item in session.items if isinstance(item, TrialItem) and not item.not_attempted
            and (item.task.id, item.agent.name, item.attempt) not in state.kept]


def _item_arguments(config: pytest.Config) -> list[str]:
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
        selected.append(f"{_node_prefix(config, path)}::{name}")
    return selected


def _resolved_arg(config: pytest.Config, arg: str) -> str:
    """A collection argument with its path made absolute (`/abs/tasks/x`, `/abs/t.py::f`)."""
    where, sep, rest = arg.partition("::")
    return str((config.invocation_params.dir / where).resolve()) + sep + rest


def _given_paths(config: pytest.Config) -> tuple[list[Path], list[Path]]:
    """The paths given as arguments: those that are not item ids (`tasks/x`), and the
    task directories of those that are (`tasks/x::nop`)."""
    plain: list[Path] = []
    of_items: list[Path] = []
    for arg in config.args:
        where, sep, _ = arg.partition("::")
        path = (config.invocation_params.dir / where).resolve()
        (of_items if sep and (path / "task.toml").is_file() else plain).append(path)
    return plain, of_items


def _keep_selection(config: pytest.Config, session: ReactbenchSession, manifest: RunManifest,
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


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    settings = read_settings(config)
    if settings.active or config.option.markers:
        register_task_markers(config, settings.task_roots)
    if not settings.active:
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput:
        run_id = workerinput["reactbench_run_id"]
    else:
        run_id = settings.resume.name if settings.resume else new_run_id()
    session = ReactbenchSession(config, settings, run_id)
    # Before any trial: an agent that lacks what it needs on this host is a usage error,
    # not a column of zeros.
    for agent in session.agents.values():
        try:
            agent.preflight(os.environ)
        except AgentConfigError as exc:
            raise pytest.UsageError(f"--reactbench-agent: {exc}") from None
    explicit_paths = config.args_source is pytest.Config.ArgsSource.ARGS
    given = _given_paths(config) if explicit_paths else ([], [])
    # xdist workers may get the arguments as given: they are rewritten there too.
    named = _item_arguments(config)
    session.selected = workerinput.get("reactbench_selected", named) if workerinput else named
    config.stash[SESSION_KEY] = session
    config.stash[AGENTS_KEY] = session.agents
    # A malformed task is a collection error, and the other tasks still run.
    config.option.continue_on_collection_errors = True
    if not explicit_paths:
        # No path given: collect the task roots rather than testpaths or the cwd.
        # config.args is read by the session's collection right after configure.
        config.args[:] = [str(root) for root in settings.task_roots]
    if settings.resumed_manifest is not None and settings.resumed_manifest.selection is not None:
        _keep_selection(config, session, settings.resumed_manifest, given, named)
    if workerinput is None:
        try:
            session.records.hold()  # (the run is live until the session ends)
        except ResultsError as exc:
            raise pytest.UsageError(f"--reactbench-resume: {exc}") from None
        if settings.resume:
            session.records.add_resumption(list(config.invocation_params.args), len(session.kept))
        else:
            session.records.write_manifest(RunManifest(
                run_id=run_id, started_at=time.time(), plugin_version=__version__,
                args=list(config.invocation_params.args),
                task_roots=[str(r) for r in settings.task_roots],
                selection=[_resolved_arg(config, arg) for arg in config.args], items=list(named),
                keyword=config.option.keyword or "", markexpr=config.option.markexpr or "",
                backend=settings.backend,
                agents=list(settings.agents),
                agent_versions={a.name: a.version for a in session.agents.values() if a.version},
                attempts=settings.attempts, retries=settings.retries, strict=settings.strict,
                images=settings.images, unsigned_registry=settings.unsigned_registry,
                timeout_multiplier=settings.timeout_multiplier,
                shard=shards.shard_text(settings.shard) or None,
                engines=list(settings.docker_hosts)))
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistHooks(run_id, session.selected), "reactbench-xdist")
        config.pluginmanager.register(
            ResultsSummary(session.records, settings.baselines, lambda: session.backend().sweep(),
                           allow_missing=settings.allow_missing,
                           kept={r.record for r in session.kept.values()} if settings.resume else None),
            "reactbench-summary")


def pytest_report_header(config: pytest.Config) -> str | None:
    """A resumed run is named before anything of it runs."""
    state = config.stash.get(SESSION_KEY, None)
    if state is None or state.settings.resume is None or state.worker != "controller":
        return None
    return (f"reactbench: resuming run {state.records.run_id} ({state.records.run_dir}): "
            f"{len(state.kept)} scored trial(s) kept from its records")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if SESSION_KEY in parent.config.stash and (path / "task.toml").is_file():
        extra = {}
        if not path.is_relative_to(parent.config.rootpath):
            # A task outside the rootdir would get an empty node id; name it instead.
            extra["nodeid"] = path.name
        collector: pytest.Collector = TaskDirectory.from_parent(parent, path=path, **extra)
        return collector
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(SESSION_KEY, None)
    if state is None:
        return
    known = set(state.collected_tasks)
    for root in state.settings.task_roots:
        if root.exists():
            known.update(p.name for p in find_tasks(root))
    for agent in state.agents.values():
        try:
            agent.check_tasks(known)
        except AgentConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    if state.worker == "controller":  # without xdist; with it, XdistHooks does this
        first: dict[str, Task] = {}
        for item in _trials_to_run(session, state):
            first.setdefault(item.agent.name, item.task)
        _check_agents(state, first)


def _check_named_items(named: list[str], ids: list[str]) -> None:
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(SESSION_KEY, None)
    if state is None:
        return
    if state.worker == "controller":  # (xdist's workers each collect the same)
        _check_named_items(state.selected, [item.nodeid for item in items])
    if state.settings.shard is not None:
        kept_items, other_shards = shards.select(
            items, state.settings.shard, lambda i: i.task.id if isinstance(i, TrialItem) else None)
        if other_shards:
            config.hook.pytest_deselected(items=other_shards)
            items[:] = kept_items
    if state.narrowed is not None:
        # A resumed run of which this session runs some tasks (or items) only.
        paths, ids = state.narrowed

        def asked(item: pytest.Item) -> bool:
            return not isinstance(item, TrialItem) or item.nodeid in ids \
                or item.nodeid.partition("#")[0] in ids \
                or any(item.task.path.resolve().is_relative_to(p) for p in paths)

        others = [item for item in items if not asked(item)]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if asked(item)]
    if not state.selected:
        return
    # An id names one item (`x::oracle#2`) or every attempt of an agent (`x::oracle`).
    named = {nodeid.rpartition("::")[0] for nodeid in state.selected}

    def kept(item: pytest.Item) -> bool:
        task = item.nodeid.rpartition("::")[0]
        return task not in named or item.nodeid in state.selected \
            or item.nodeid.partition("#")[0] in state.selected

    deselected = [item for item in items if not kept(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if kept(item)]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Before the first trial: every image the items need, baked as a pool (by the one
    process that runs items, or the first of xdist's workers to claim it) that bakes on
    while the trials run: a trial starts as soon as its own two images are there."""
    state = session.config.stash.get(SESSION_KEY, None)
    if state is None or session.config.option.collectonly:
        return
    trials = _trials_to_run(session, state)
    if not trials or not bakes.claims_prebake(state.records.run_dir, state.xdist_session):
        return
    progress = progress_printer(session.config, state.once)
    # Whatever breaks here (an engine that is down, a container removed under the sweep)
    # is met again, and reported, by each trial: the plan is only a head start.
    try:
        backend = state.backend()
        stages = Stages(backend, progress, state.trial_options.labels)
        state.prebake = start_prebake(backend, (stages.recipe(item.task, role) for item in trials
                                                for role in ("agent", "verifier")), progress)
    except Exception as exc:
        progress(f"bakes not planned ahead ({type(exc).__name__}: {exc}); each trial bakes its own")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None:
        # The bakes under way end before their records are written; interrupted, the
        # session ends now (the engine cancels a build whose client went away).
        if state.prebake is not None and exitstatus != pytest.ExitCode.INTERRUPTED:
            try:
                state.prebake.join(rest=False)
            except Exception as exc:
                progress_printer(session.config, state.once)(
                    f"bakes ahead of the trials broke ({type(exc).__name__}: {exc}); "
                    "each trial baked its own")
        bakes.write_part(state.records.run_dir, state.worker, state.made_backend)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not isinstance(item, TrialItem):
        return report
    result: TrialResult | None = None
    if call.excinfo is not None and isinstance(call.excinfo.value, TrialFailed | TrialErrored):
        result = call.excinfo.value.result
        if report.when == "setup":
            # An error is explained, not traced back through the fixtures.
            report.longrepr = describe_failure(result)
    elif report.when == "call" and report.passed:
        result = item.funcargs.get("reactbench_trial")  # type: ignore[assignment]
    elif report.when == "setup" and report.skipped and item.not_attempted:
        result = item.config.stash[SESSION_KEY].not_attempted(item.task, item.agent.name, item.attempt,
                                                              item.not_attempted)
    elif report.when == "setup" and call.excinfo is not None:
        # A stage a conftest.py replaced broke before the trial began.
        run = item.config.stash[SESSION_KEY].records.run_id
        result = TrialResult.error(item.task.id, item.agent.name, item.attempt, call.excinfo.value,
                                   provenance=Provenance(run=run))
        item.config.stash[SESSION_KEY].trial_finished(result, item)
        if isinstance(call.excinfo.value, SandboxError):
            report.longrepr = describe_failure(result)  # an engine that is down, say
    if result is not None:
        item.user_properties.extend(result.properties())
        report.user_properties = list(item.user_properties)
    return report


def _verdict(report: pytest.TestReport) -> str | None:
    return next((str(v) for k, v in report.user_properties if k == VERDICT), None)


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    if report.skipped and _verdict(report) == Verdict.NOT_ATTEMPTED:
        return "not attempted", "N", "NOT ATTEMPTED"
    return None


def _task_hint(config: pytest.Config) -> str | None:
    """Tasks are under the task roots but no agent was asked for: say how to run them."""
    roots = [config.rootpath / r for r in config.getini("reactbench_tasks")]
    found = [root for root in roots if root.is_dir() and any(find_tasks(root))]
    if not found:
        return None
    where = ", ".join(str(r.relative_to(config.rootpath)) for r in found)
    return (f"reactbench: tasks are under {where}, but no agent was asked for; "
            "run them with --reactbench-agent=oracle (or nop, or your agent)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    if SESSION_KEY not in config.stash and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        hint = _task_hint(config)
        if hint:
            terminalreporter.line(hint, yellow=True)
    state = config.stash.get(SESSION_KEY, None)
    if state is not None and state.worker == "controller":
        lines = bakes.summary_lines(*bakes.merge_parts(state.records.run_dir))
        if lines:
            terminalreporter.section("reactbench bakes")
            for line in lines:
                terminalreporter.line(line)
    skipped = terminalreporter.stats.get("not attempted", [])
    if skipped:
        terminalreporter.section("not attempted (no score)")
        for report in skipped:
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            terminalreporter.line(f"{report.nodeid}: {reason}")
