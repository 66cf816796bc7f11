"""The verifier: artifact transfer, running test.sh, reading rewards and gates, and
who failed (`failures`: the submission's or the harness's)."""

from pytest_reactbench.sandbox.archives import excluded
from pytest_reactbench.verifier.artifacts import (
    Transfer,
    collect,
    deliver,
    sanitize,
)
from pytest_reactbench.verifier.audit import AuditFinding, audit, parse_index
from pytest_reactbench.verifier.failures import (
    GraderBrokenError,
    RewardFileError,
    RewardFileNotFoundError,
    SubmissionFailure,
    SubmissionRefused,
    VerifierError,
    VerifierKilledError,
    VerifierTimeoutError,
)
from pytest_reactbench.verifier.grade import (
    Grade,
    check_grade,
    grade,
    read_progress,
    read_reward,
)

__all__ = [
    "AuditFinding",
    "Grade",
    "GraderBrokenError",
    "RewardFileError",
    "RewardFileNotFoundError",
    "SubmissionFailure",
    "SubmissionRefused",
    "Transfer",
    "VerifierError",
    "VerifierKilledError",
    "VerifierTimeoutError",
    "audit",
    "check_grade",
    "collect",
    "deliver",
    "excluded",
    "grade",
    "parse_index",
    "read_progress",
    "read_reward",
    "sanitize",
]
