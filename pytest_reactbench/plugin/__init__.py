"""pytest glue: options, collection, fixtures, reports and JUnit properties.

Registered through the `pytest11` entry point. Without --reactbench-agent the
plugin collects nothing and changes nothing."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench import __version__
from pytest_reactbench.agents import (
    Agent,
    AgentConfigError,
    NopAgent,
    OracleAgent,
    PatchAgent,
    PatchInputError,
    load_agent_class,
    load_predictions,
)
from pytest_reactbench.agents.command import load_presets
from pytest_reactbench.plugin import hookspecs
from pytest_reactbench.plugin.fixtures import (
    DURATIONS,
    IMAGES,
    reactbench_agent,
    reactbench_agent_image,
    reactbench_agent_sandbox,
    reactbench_backend,
    reactbench_record,
    reactbench_task,
    reactbench_trial,
    reactbench_verifier_image,
    reactbench_verifier_sandbox,
)
from pytest_reactbench.plugin.items import (
    AGENTS_KEY,
    NOT_ATTEMPTED,
    RECORD,
    TaskDirectory,
    TrialErrored,
    TrialFailed,
    TrialItem,
)
from pytest_reactbench.plugin.report import describe_failure, junit_properties
from pytest_reactbench.plugin.session import SESSION_KEY, ReactbenchSession, command_factory
from pytest_reactbench.plugin.settings import Settings, addoption, read_settings
from pytest_reactbench.plugin.summary import ResultsSummary
from pytest_reactbench.results import new_run_id
from pytest_reactbench.sandbox.base import Backend, SandboxError
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.tasks import find_tasks
from pytest_reactbench.trial import TrialResult, Verdict

__all__ = [
    "reactbench_agent",
    "reactbench_agent_image",
    "reactbench_agent_sandbox",
    "reactbench_backend",
    "reactbench_record",
    "reactbench_task",
    "reactbench_trial",
    "reactbench_verifier_image",
    "reactbench_verifier_sandbox",
]

ERROR_KEY = "reactbench_error"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    addoption(parser)


def _patch_agents(arg: str, settings: Settings) -> list[PatchAgent]:
    if settings.patch is None:
        raise pytest.UsageError("--reactbench-agent=patch needs --reactbench-patch=PATH")
    try:
        predictions = load_predictions(settings.patch)
    except PatchInputError as exc:
        raise pytest.UsageError(str(exc)) from None
    # An empty predictions file still makes an agent: every task is then not attempted.
    predictions = predictions or {"patch": {}}
    return [PatchAgent(name, by_task, settings.patch) for name, by_task in sorted(predictions.items())]


def _python_agent(arg: str, settings: Settings) -> Agent:
    try:
        return load_agent_class(arg)
    except AgentConfigError as exc:
        raise pytest.UsageError(f"--reactbench-agent: {exc}") from None


@pytest.hookimpl
def pytest_reactbench_agents() -> Mapping[str, Any]:
    return {
        "oracle": lambda arg, settings: OracleAgent(),
        "nop": lambda arg, settings: NopAgent(),
        "patch": _patch_agents,
        "python": _python_agent,
        **{name: command_factory(spec) for name, spec in load_presets().items()},
    }


@pytest.hookimpl
def pytest_reactbench_sandbox_backends() -> Mapping[str, Any]:
    def local(settings: Settings) -> LocalBackend:
        return LocalBackend(settings.cache, settings.image_map, ca_bundle=settings.ca_bundle,
                            git_mirrors=settings.git_mirrors)

    def docker(settings: Settings) -> Backend:
        from pytest_reactbench.sandbox.docker import DockerBackend

        return DockerBackend(settings.cache, settings.image_map, ca_bundle=settings.ca_bundle,
                             git_mirrors=settings.git_mirrors)

    return {"local": local, "docker": docker}


class XdistHooks:
    """Registered only when xdist is loaded: hands the run id to every worker."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["reactbench_run_id"] = self.run_id


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    settings = read_settings(config)
    if not settings.active:
        return
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["reactbench_run_id"] if workerinput else new_run_id()
    session = ReactbenchSession(config, settings, run_id)
    config.stash[SESSION_KEY] = session
    config.stash[AGENTS_KEY] = session.agents
    # A malformed task is a collection error, and the other tasks still run.
    config.option.continue_on_collection_errors = True
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # No path given: collect the task roots rather than testpaths or the cwd.
        # config.args is read by the session's collection right after configure.
        config.args[:] = [str(root) for root in settings.task_roots]
    if workerinput is None:
        session.records.write_manifest({
            "plugin_version": __version__,
            "backend": settings.backend,
            "agents": list(settings.agents),
            "task_roots": [str(r) for r in settings.task_roots],
            "args": list(config.invocation_params.args),
        })
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(XdistHooks(run_id), "reactbench-xdist")
        config.pluginmanager.register(
            ResultsSummary(session.records, settings.baseline, lambda: session.backend().sweep()),
            "reactbench-summary")


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
        if isinstance(agent, PatchAgent):
            unknown = sorted(set(agent.predictions) - known - {"*"})
            if unknown:
                first = agent.predictions[unknown[0]].source
                more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
                raise pytest.UsageError(f"{first}: task_id {unknown[0]!r} is not a task here{more}")


def _setup_error_result(item: TrialItem, exc: BaseException) -> TrialResult:
    record = item.stash.get(RECORD, None)
    result = TrialResult(
        task_id=item.task.id,
        agent=item.agent.name,
        verdict=Verdict.ERROR,
        reward=None,
        gates={},
        failure=type(exc).__name__,
        message=str(exc),
        agent_ending=None,
        durations=item.stash.get(DURATIONS, {}),
        record=record.path if record else None,
        images=item.stash.get(IMAGES, {}),
    )
    if record is not None:
        record.finish(result.status())
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not isinstance(item, TrialItem):
        return report
    session = item.config.stash[SESSION_KEY]
    result: TrialResult | None = None
    if call.excinfo is not None and isinstance(call.excinfo.value, TrialFailed | TrialErrored):
        result = call.excinfo.value.result
    elif report.when == "call" and report.passed:
        result = item.funcargs.get("reactbench_trial")  # type: ignore[assignment]
    elif report.when == "setup" and report.skipped:
        item.user_properties.extend([
            ("reactbench.task", item.task.id), ("reactbench.agent", item.agent.name),
            ("reactbench.attempt", str(item.attempt)),
            ("reactbench.verdict", "not-attempted" if _not_attempted(report) else "skipped"),
        ])
        report.user_properties = list(item.user_properties)
    elif report.when == "setup" and call.excinfo is not None:
        result = _setup_error_result(item, call.excinfo.value)
        session.trial_finished(result, item)
        if isinstance(call.excinfo.value, SandboxError):
            # A bake or boot failure is explained, not traced back through fixtures.
            report.longrepr = describe_failure(result)
    if result is not None:
        item.user_properties.extend(junit_properties(result, session.settings.backend, item.attempt))
        report.user_properties = list(item.user_properties)
        if result.verdict is Verdict.ERROR:
            report.user_properties.append((ERROR_KEY, "1"))
    return report


def _not_attempted(report: pytest.TestReport) -> bool:
    return isinstance(report.longrepr, tuple) and NOT_ATTEMPTED in str(report.longrepr[2])


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    if report.when == "call" and (ERROR_KEY, "1") in report.user_properties:
        return "error", "E", "ERROR"
    if report.skipped and _not_attempted(report):
        return "not attempted", "N", "NOT ATTEMPTED"
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("not attempted", [])
    if skipped:
        terminalreporter.section("not attempted (no score)")
        for report in skipped:
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            terminalreporter.line(f"{report.nodeid}: {reason}")
