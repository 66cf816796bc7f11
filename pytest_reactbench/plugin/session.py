"""State of one pytest session (per xdist worker): settings, records, backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_reactbench import __version__
from pytest_reactbench.agents import Agent
from pytest_reactbench.agents.base import AgentConfigError
from pytest_reactbench.agents.registry import make_agents
from pytest_reactbench.plugin import bakes
from pytest_reactbench.plugin.extensions import Registered, registered
from pytest_reactbench.plugin.options import REPLAYED
from pytest_reactbench.plugin.progress import OncePerSession, progress_printer
from pytest_reactbench.plugin.settings import Settings, UsageError
from pytest_reactbench.plugin.shards import shard_text
from pytest_reactbench.results import RunRecords, TrialResult
from pytest_reactbench.results.load import ResultsError
from pytest_reactbench.results.resume import kept_trials
from pytest_reactbench.sandbox.base import Backend
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.prebake import BakePool
from pytest_reactbench.sandbox.relay import egress_refusals, loopback_port
from pytest_reactbench.tasks import Task
from pytest_reactbench.trial import AgentUnavailable, Stages, TrialOptions, preflight


def replay_options(settings: Settings) -> list[str]:
    """The command-line options that make a trial's agent and sandbox again (the
    option table's replayed rows; no secrets: env variables are named, never valued)."""
    return [arg for row in REPLAYED for arg in row.as_args(getattr(settings, row.field))]


class ReactbenchSession:
    def __init__(self, config: pytest.Config, settings: Settings, run_id: str) -> None:
        self.config = config
        self.settings = settings
        self.records = RunRecords(settings.records, run_id)
        #: Filters progress lines to one per bake decision for the whole session.
        self.once = OncePerSession(self.records.run_dir / ".progress")
        self.worker: str = getattr(config, "workerinput", {}).get("workerid", "controller")
        #: The xdist session this process is a worker of (None without xdist): what its
        #: workers share is kept under it (bakes.session_folder, the prebake's claim).
        self.xdist_session: str | None = getattr(config, "workerinput", {}).get("testrunuid")
        #: Ids of the task directories collected in this session.
        self.collected_tasks: set[str] = set()
        #: Item ids named on the command line (`tasks/x::oracle`).
        self.selected: list[str] = []
        #: In a resumed run, the paths and item ids this session was given: it runs only
        #: the run's items among them (None: all of the run's).
        self.narrowed: tuple[list[Path], list[str]] | None = None
        #: agent name -> the --reactbench-agent spec that made it (for replay)
        self.agent_specs: dict[str, str] = {}
        self.trial_options = TrialOptions(
            strict=settings.strict,
            retries=settings.retries,
            timeout_multiplier=settings.timeout_multiplier,
            labels={"run": run_id, "worker": self.worker},
            shard=shard_text(settings.shard),
            manifest={"plugin_version": __version__, "run_id": run_id,
                      # What a replay of one of this session's trials repeats.
                      "options": replay_options(settings)},
        )
        #: The scored trials a resumed run keeps from its records.
        try:
            self.kept = kept_trials(self.records.run_dir) if settings.resume else {}
        except ResultsError as exc:
            raise UsageError(f"--reactbench-resume: {exc}") from None
        self._backend: Backend | None = None
        #: The bakes ahead of the trials, baking on beside them (the process that claimed them).
        self.prebake: BakePool | None = None
        extensions = registered(self.config.hook)
        self.agents = self._make_agents(extensions)
        self._backend_factory = extensions.backend(settings.backend, "--reactbench-sandbox")

    def _make_agents(self, extensions: Registered) -> dict[str, Agent]:
        try:
            made = make_agents(extensions.agents, self.settings.agents, self.settings.agent_options())
        except AgentConfigError as exc:
            raise UsageError(str(exc)) from None
        self.agent_specs.update({name: spec for name, (_, spec) in made.items()})
        return {name: agent for name, (agent, _) in made.items()}

    def backend(self) -> Backend:
        if self._backend is None:
            options = replace(self.settings.sandbox_options(),
                              session_dir=bakes.session_folder(self.records.run_dir, self.xdist_session))
            self._backend = self._backend_factory(options)
            removed = self._backend.sweep()
            if removed:
                progress_printer(self.config, self.once)(
                    f"removed {removed} leftover sandbox(es) of a run that died"
                )
        return self._backend

    def check_agents(self, first_tasks: Mapping[str, Task]) -> None:
        """Before any trial: each agent with a CLI gets its layer baked on the image of
        the first task it will run, and must answer its version command there. One that
        does not is a usage error; a task whose own image does not bake is left to its
        trials to report."""
        say = progress_printer(self.config, self.once)
        for name, task in first_tasks.items():
            agent = self.agents[name]
            if not agent.trusted and (why := self.backend().capabilities.untrusted_refusal):
                raise UsageError(f"--reactbench-agent: agent {name!r} is not a control agent, and {why}: "
                                 "run it with --reactbench-sandbox=docker")
            refused = egress_refusals(agent.model_hosts, getattr(agent, "model_targets", ()))
            if refused:
                raise UsageError(
                    f"--reactbench-agent: agent {name!r}: its egress gate (model hosts "
                    f"{', '.join(agent.model_hosts)}) would refuse {', '.join(refused)}, which its base "
                    "URL names: every call to its model would fail. Name the host with "
                    "--reactbench-model-host (docs/agents.md)")
            loopback = [h for h in agent.model_hosts if loopback_port(h) is not None]
            if loopback and not self.backend().capabilities.reaches_host_loopback:
                raise UsageError(
                    f"--reactbench-agent: agent {name!r}: its model host {loopback[0]} is this host's "
                    f"loopback, which this {self.backend().name} backend's sandboxes cannot reach "
                    f"(its engine, {self.backend().engine or 'remote'}, is not on this host); "
                    "run the gateway where it can be reached, on an address the sandboxes reach, "
                    "and name that address in the base URL (docs/agents.md)")
            if (agent.install is not None and agent.install.user
                    and not self.backend().capabilities.adds_users):
                raise UsageError(
                    f"--reactbench-agent: agent {name!r} runs its CLI as the user "
                    f"{agent.install.user!r}, which its layer adds to the image; the "
                    f"{self.backend().name} backend cannot add users (its /etc is the host's): "
                    "use --reactbench-sandbox=docker")
            if agent.install is None or not agent.install.version_command:
                continue
            stages = Stages(self.backend(), say, self.trial_options.labels)  # made only when needed
            try:
                answer = preflight(stages, task, agent)
            except AgentUnavailable as exc:
                raise UsageError(f"--reactbench-agent: {exc}") from None
            except SandboxError as exc:
                say(f"agent {name}: not checked before the trials ({task.id}'s image: {exc})")
                continue
            say(f"agent {name} {agent.version}: `{agent.install.version_command}` answers "
                + (answer.splitlines()[-1] if answer else "(exit 0)"))

    @property
    def made_backend(self) -> Backend | None:
        """The backend, if this process made one (it is made on first use)."""
        return self._backend

    def trial_finished(self, result: TrialResult, item: pytest.Item) -> None:
        """Every verdict of this session's items (not attempted and setup errors
        included) passes here, once, and goes to the `trial_finished` hook."""
        self.config.hook.pytest_reactbench_trial_finished(result=result, item=item)

    def close(self) -> None:
        self.records.close("the session ended before the trial finished (interrupted?)")
        if self.worker == "controller":
            self.once.remove()
            self.records.remove_if_empty()
        try:
            if self._backend is not None:
                self._backend.close()
        finally:
            self.records.release()


SESSION_KEY = pytest.StashKey[ReactbenchSession]()
