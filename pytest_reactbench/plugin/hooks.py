"""The plugin's hook implementations: options, collection, the session's run loop,
reports and JUnit properties (the package's __init__ registers them)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench import __version__, host
from pytest_reactbench.agents import AgentConfigError
from pytest_reactbench.plugin import bakes, builtins, hookspecs, selection, shards
from pytest_reactbench.plugin.items import (
    AGENTS_KEY,
    TaskDirectory,
    TrialErrored,
    TrialFailed,
    TrialItem,
    register_task_markers,
)
from pytest_reactbench.plugin.progress import progress_printer
from pytest_reactbench.plugin.report import describe_failure, result_of
from pytest_reactbench.plugin.session import SESSION_KEY, ReactbenchSession
from pytest_reactbench.plugin.settings import addoption, read_settings
from pytest_reactbench.plugin.summary import ResultsSummary
from pytest_reactbench.results import TrialResult, Verdict, new_run_id
from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.prebake import start as start_prebake
from pytest_reactbench.tasks import Task, TaskError, find_tasks, load_task
from pytest_reactbench.trial import Stages, outcomes


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
        dirs = {selection.node_prefix(config, path): path for arg in config.args
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


def _check_agents(session: ReactbenchSession, first: dict[str, Task]) -> None:
    """The agents' CLIs answer before any trial runs, each on the first task it has."""
    if not session.config.option.collectonly:
        session.check_agents(first)


def _trials_to_run(session: pytest.Session, state: ReactbenchSession) -> list[TrialItem]:
    """The items whose trial this session runs (not the not-attempted, not the ones a
    resumed run keeps)."""
    return [item for item in session.items if isinstance(item, TrialItem) and not item.not_attempted
            and (item.task.id, item.agent.name, item.attempt) not in state.kept]


def sigterm_as_ctrl_c(config: pytest.Config) -> None:
    """From now on until the session ends, SIGTERM (a CI job cancelled, `kill`) ends it as
    Ctrl-C from a terminal does: KeyboardInterrupt here, and Ctrl-C for the processes
    this one started in its group (xdist's workers), so that every trial under way ends
    as interrupted and takes its sandbox with it. Left alone where SIGTERM already has a
    handler of someone else's, or this is not the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: object) -> None:
        for child in host.children_in_group(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGINT)
        raise KeyboardInterrupt

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, on_sigterm)
    config.add_cleanup(restore)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    settings = read_settings(config)
    if settings.active or config.option.markers:
        register_task_markers(config, settings.task_roots)
    if not settings.active:
        return
    sigterm_as_ctrl_c(config)
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
    given = selection.given_paths(config) if explicit_paths else ([], [])
    # xdist workers may get the arguments as given: they are rewritten there too.
    named = selection.item_arguments(config)
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
        selection.keep_selection(config, session, settings.resumed_manifest, given, named)
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
                selection=[selection.resolved_arg(config, arg) for arg in config.args], items=list(named),
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(SESSION_KEY, None)
    if state is None:
        return
    if state.worker == "controller":  # (xdist's workers each collect the same)
        selection.check_named_items(state.selected, [item.nodeid for item in items])
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
        state = item.config.stash[SESSION_KEY]
        result = outcomes.not_attempted(item.task, item.agent.name, item.attempt, item.not_attempted,
                                        records=state.records, backend=state.settings.backend,
                                        shard=state.trial_options.shard)
        state.trial_finished(result, item)
    elif report.when == "setup" and call.excinfo is not None:
        # A stage a conftest.py replaced broke before the trial began.
        state = item.config.stash[SESSION_KEY]
        result = outcomes.setup_error(item.task, item.agent.name, item.attempt, call.excinfo.value,
                                      run=state.records.run_id)
        state.trial_finished(result, item)
        if isinstance(call.excinfo.value, SandboxError):
            report.longrepr = describe_failure(result)  # an engine that is down, say
    if result is not None:
        item.user_properties.extend(result.properties())
        report.user_properties = list(item.user_properties)
    return report


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    if report.skipped and (result := result_of(report)) is not None \
            and result.verdict is Verdict.NOT_ATTEMPTED:
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
