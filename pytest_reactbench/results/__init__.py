"""Results: the one TrialResult model, run records, scores, reports and comparisons."""

from pytest_reactbench.host import pid_alive
from pytest_reactbench.results.events import Event
from pytest_reactbench.results.failure import Failure
from pytest_reactbench.results.records import RunRecords, TrialRecord, new_run_id
from pytest_reactbench.results.trial_result import (
    AGENT_SAID,
    AgentRun,
    BaseImage,
    DiffStat,
    Finding,
    Gate,
    Grading,
    Provenance,
    Refusal,
    Submission,
    TrialResult,
    Verdict,
    retryable,
    strip_ansi,
)

__all__ = [
    "AGENT_SAID",
    "AgentRun",
    "BaseImage",
    "DiffStat",
    "Event",
    "Failure",
    "Finding",
    "Gate",
    "Grading",
    "Provenance",
    "Refusal",
    "RunRecords",
    "Submission",
    "TrialRecord",
    "TrialResult",
    "Verdict",
    "new_run_id",
    "pid_alive",
    "retryable",
    "strip_ansi",
]
