"""The results of trials that end without their lifecycle (`Trial.run` makes all the
others): a trial its agent does not attempt, one whose setup broke before it began,
and one whose xdist worker died under it. Made here so that the Trial's package stays
the only maker of a TrialResult; `results/` only reads results back from the forms a
trial wrote."""

from __future__ import annotations

from pytest_reactbench import __version__
from pytest_reactbench.results import Failure, Provenance, RunRecords, TrialResult, Verdict, retryable
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.tasks import Task


def not_attempted(task: Task, agent: str, attempt: int, reason: str, *, records: RunRecords,
                  backend: str, shard: str = "") -> TrialResult:
    """A trial its agent does not attempt (no prediction for the task), with a record of
    its own: a report made later from the records keeps it, and the agent stays
    unranked there as in the session's own report."""
    record = records.open_trial(TrialManifest(
        task=task.id, task_path=str(task.path), agent=agent, attempt=attempt,
        backend=backend, run_id=records.run_id, plugin_version=__version__))
    result = TrialResult(task=task.id, agent=agent, attempt=attempt, verdict=Verdict.NOT_ATTEMPTED,
                         message=reason, provenance=Provenance(
                             run=records.run_id, shard=shard, record=str(record.path), backend=backend))
    record.finish(result)
    return result


def setup_error(task: Task, agent: str, attempt: int, error: BaseException, *, run: str) -> TrialResult:
    """A trial whose setup broke before it began (a stage a conftest.py replaced, an
    engine that is down while its fixtures are made): a harness error, no score."""
    return TrialResult(task=task.id, agent=agent, attempt=attempt, verdict=Verdict.ERROR,
                       failure=Failure.of(error), message=str(error), retryable=retryable(error),
                       provenance=Provenance(run=run))


def worker_crashed(nodeid: str) -> TrialResult:
    """The item `nodeid` (`tasks/x::agent#2`), whose xdist worker died under it: a
    harness error, known on the controller by its node id alone."""
    task, _, name = nodeid.rpartition("::")
    agent, _, attempt = name.partition("#")
    return TrialResult(task=task.rsplit("/", 1)[-1], agent=agent, attempt=int(attempt or 1),
                       verdict=Verdict.ERROR, failure=Failure.WORKER_CRASHED)
