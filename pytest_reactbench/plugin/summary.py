"""The end of a session, on the controller (xdist workers report to it): a tasks x
agents table with scores, errors apart, the leaderboard files in the run's record
directory, and the comparison with a baseline (a regression fails the session)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

# The JUnit writer's stash key: pytest's only public way to add a testsuite property is
# the record_testsuite_property fixture, which a plugin at sessionfinish has no test for.
from _pytest.junitxml import xml_key

from pytest_reactbench.plugin.report import result_of
from pytest_reactbench.plugin.settings import ini_records
from pytest_reactbench.results import TrialResult
from pytest_reactbench.results.aggregate import MAX_ERROR_RATE, AgentScore, score_agents
from pytest_reactbench.results.compare import INCONCLUSIVE_EXIT, Comparison, compare
from pytest_reactbench.results.load import ResultsError, load_run
from pytest_reactbench.results.records import RunRecords
from pytest_reactbench.results.render import markdown, provenance, usage_lines
from pytest_reactbench.results.site import CollectionError, RunInfo, write_collection_errors, write_site
from pytest_reactbench.results.trial_result import strip_ansi
from pytest_reactbench.trial import outcomes

SHORT = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "not-attempted": "n/a"}


def outcome_of(report: pytest.TestReport) -> TrialResult | None:
    # xdist reports with when "???", outside pytest's own literal type.
    if str(report.when) == "???" and "::" in report.nodeid:
        # xdist's report of an item whose worker died under it: a harness error.
        return outcomes.worker_crashed(report.nodeid)
    if not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return None
    return result_of(report)


@dataclass
class GateItem:
    """An item the baseline gate counts in pytest's last line (its stats hold reports;
    other plugins read their attributes, so this is an object too)."""

    task: str
    agent: str

    @property
    def nodeid(self) -> str:
        return f"{self.task}::{self.agent}"


@dataclass(frozen=True)
class NeverRan:
    """An item of an incomplete run that never ran, counted in pytest's last line."""

    nodeid: str


def _unranked(score: AgentScore) -> str:
    if score.missing:
        errored = [t for t in score.missing if t in score.errored]
        absent = [t for t in score.missing if t not in score.errored]
        said = ([f"no verdict on {', '.join(errored[:3])} (its trials errored)"] if errored else []) + \
               ([f"did not run {', '.join(absent[:3])}"] if absent else [])
        return "; ".join(said)
    return f"{score.errors}/{score.trials} trials ended in an error, over {100 * MAX_ERROR_RATE:.0f}%"


class ResultsSummary:
    """Registered on the controller only."""

    def __init__(self, records: RunRecords, baselines: Sequence[Path],
                 sweep: Callable[[], int], allow_missing: bool = False,
                 kept: set[str] | None = None) -> None:
        self.records = records
        #: In a resumed run, the records of the scored trials it keeps.
        self.kept = kept
        self.sweep = sweep
        #: The baseline run (its shards, if it was sharded).
        self.baselines = list(baselines)
        self.allow_missing = allow_missing
        self.outcomes: list[TrialResult] = []
        #: Collectors that failed (a malformed task), by node id; xdist workers each
        #: report the same one.
        self.collection_errors: dict[str, CollectionError] = {}
        self.comparison: Comparison | None = None
        self.baseline_error: str | None = None
        #: The items the session was to run (its own, or its xdist workers'), and those
        #: that reported: the difference never ran.
        self.expected: list[str] = []
        self.reported: set[str] = set()
        #: Said when items never ran (an interrupt, -x): how many, and how to resume.
        self.incomplete: str | None = None
        self.unrun: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.expected:  # (under xdist, the workers' ids: see `expect`)
            self.expected = [item.nodeid for item in session.items]

    def expect(self, ids: Sequence[str]) -> None:
        self.expected = list(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reported.add(report.nodeid)
        outcome = outcome_of(report)
        if outcome is not None:
            self.outcomes.append(outcome)

    def _resume_command(self, config: pytest.Config) -> str:
        command = f"pytest --reactbench-resume={self.records.run_id}"
        if self.records.root.resolve() != ini_records(config).resolve():
            command += f" --reactbench-records={self.records.root}"
        return command

    def _whole_run(self) -> list[TrialResult]:
        """What the run's report covers: this session's trials, and for a resumed run
        every other trial its records hold (a resumption of some of its tasks never
        makes the report of the whole run smaller)."""
        if self.kept is None:
            return self.outcomes
        try:
            recorded = load_run([self.records.run_dir])
        except ResultsError:
            return self.outcomes
        mine = {(o.task, o.agent, o.attempt) for o in self.outcomes}
        return [*self.outcomes, *(o for o in recorded if (o.task, o.agent, o.attempt) not in mine)]

    def _mark_incomplete(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.records.run_dir.is_dir():
            return
        unrun = self.unrun = [nodeid for nodeid in self.expected if nodeid not in self.reported]
        if unrun:
            why = ("interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED
                   else "the session stopped early")
            self.incomplete = (f"{len(unrun)} of {len(self.expected)} item(s) never ran ({why}); "
                               f"resume the run with: {self._resume_command(session.config)}")
            xml = session.config.stash.get(xml_key, None)
            if xml is not None:
                xml.add_global_property("reactbench.incomplete", self.incomplete)
        self.records.set_incomplete(self.incomplete)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors[report.nodeid] = CollectionError(
                report.nodeid or ".", strip_ansi(report.longreprtext))

    @pytest.hookimpl(tryfirst=True)  # before the JUnit file is written
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # A worker that died left its trials' records running and its sandboxes behind.
        if self.records.close_orphans():
            self.sweep()
        if not self.outcomes:
            return
        self._mark_incomplete(session, exitstatus)
        run_dir = self.records.run_dir
        if self.collection_errors:
            write_collection_errors(run_dir, list(self.collection_errors.values()))
        whole = self._whole_run()
        incomplete = [self.incomplete] if self.incomplete else []
        (run_dir / "report.md").write_text(markdown(whole, incomplete=incomplete))
        info = RunInfo.read(run_dir)
        write_site(whole, run_dir, runs=[info] if info else [])
        if not self.baselines:
            return
        try:
            self.comparison = compare(load_run(self.baselines), self.outcomes,
                                      allow_missing=self.allow_missing)
        except ResultsError as exc:
            self.baseline_error = str(exc)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if self.comparison.failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif self.comparison.inconclusive and session.exitstatus in (pytest.ExitCode.OK,
                                                                     pytest.ExitCode.TESTS_FAILED):
            # No regression, but items without a verdict (their errors would make it 1):
            # exit as `reactbench compare` does, so that a CI step tells it apart.
            session.exitstatus = INCONCLUSIVE_EXIT

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.outcomes:
            return
        tasks = sorted({o.task for o in self.outcomes})
        scores = score_agents(self.outcomes, tasks)
        tr = terminalreporter
        tr.section(f"reactbench: {len(tasks)} task(s) x {len(scores)} agent(s)")
        tr.line(provenance(self.outcomes))
        if self.kept is not None:
            kept = sum(1 for o in self.outcomes if o.record in self.kept)
            tr.line(f"resumed run {self.records.run_id}: {kept} scored trial(s) kept from its "
                    f"records, {len(self.outcomes) - kept} run in this session")
        width = max(len(s.agent) for s in scores) + 2
        tr.line(f"{'agent':<{width}}{'score':>7}{'95% CI':>12}{'pass@1':>8}{'pass@k':>12}"
                f"{'tasks':>8}{'errors':>8}")
        for s in scores:
            ci = "-" if s.ci is None else f"{100 * s.ci[0]:.0f}-{100 * s.ci[1]:.0f}%"
            score = "-" if s.score is None else f"{100 * s.score:.0f}%"
            p1 = "-" if s.pass_at_1 is None else f"{100 * s.pass_at_1:.0f}%"
            pk = "-" if s.pass_at_k is None else f"{100 * s.pass_at_k:.0f}% k={s.k}"
            tr.line(f"{s.agent:<{width}}{score:>7}{ci:>12}{p1:>8}{pk:>12}"
                    f"{f'{len(s.per_task)}/{len(tasks)}':>8}{f'{s.errors}/{s.trials}':>8}"
                    + ("" if s.ranked else f"  (unranked: {_unranked(s)})"))
        for line in usage_lines(self.outcomes):
            tr.line(line)
        twidth = max(len(t) for t in tasks) + 2
        agents = [s.agent for s in scores]
        tr.line("")
        tr.line(f"{'task':<{twidth}}" + "".join(f"{a[:14]:>16}" for a in agents))
        for task in tasks:
            cells = []
            for agent in agents:
                rows = [o for o in self.outcomes if o.task == task and o.agent == agent]
                if not rows:
                    cells.append(f"{'':>16}")
                    continue
                verdicts = sorted({SHORT[o.verdict.value] for o in rows})
                mean = next((s.per_task.get(task) for s in scores if s.agent == agent), None)
                text = "/".join(verdicts) + ("" if mean is None else f" {mean:.2f}")
                # Retries leave no row of their own: the cell says they happened.
                if retried := sum(o.retries for o in rows):
                    text += f" r{retried}"
                cells.append(f"{text:>16}")
            tr.line(f"{task:<{twidth}}" + "".join(cells))
        if any(o.retries for o in self.outcomes):
            tr.line("rN: that many retries after errors led to the cell's verdicts (each retry's "
                    "record is beside its trial's, named <trial>.1, .2...)")
        tr.line("")
        tr.line(f"records and leaderboard: {self.records.run_dir} (report.md, report.html)")
        if self.incomplete:
            tr.line(f"reactbench: INCOMPLETE run: {self.incomplete}", red=True)
            # pytest's last line says it too, and is not green over an unfinished run.
            tr.stats.setdefault("never ran", []).extend(NeverRan(nodeid) for nodeid in self.unrun)
            # pytest keeps the kinds its last line counts from its own additions.
            getattr(tr, "_set_main_color", lambda: None)()
        if self.baseline_error:
            tr.line(f"reactbench baseline: {self.baseline_error}", red=True)
        elif self.comparison is not None:
            tr.line(self.comparison.summary("--reactbench-allow-missing"), red=self.comparison.failed,
                    yellow=self.comparison.inconclusive,
                    green=not (self.comparison.failed or self.comparison.inconclusive))
            # pytest's last line counts what the gate found too, so that it does not read
            # "2 passed" in green over a session that exits 1 (or 3).
            if self.comparison.failed:
                tr.stats.setdefault("failed the baseline gate", []).extend(
                    GateItem(task, agent) for task, agent in
                    [*((c.task, c.agent) for c in self.comparison.regressions), *self.comparison.missing])
            elif self.comparison.inconclusive:
                tr.stats.setdefault("without a verdict for the baseline gate", []).extend(
                    GateItem(task, agent) for task, agent in self.comparison.errored)
