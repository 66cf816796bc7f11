"""The verifier: artifact transfer, running test.sh, reading rewards and gates."""

from pytest_reactbench.verifier.artifacts import (
    SubmissionRefused,
    Transfer,
    collect,
    deliver,
    excluded,
    sanitize,
)
from pytest_reactbench.verifier.audit import Finding, audit, parse_index
from pytest_reactbench.verifier.grade import (
    Grade,
    RewardFileError,
    RewardFileNotFoundError,
    VerifierError,
    VerifierKilledError,
    VerifierTimeoutError,
    grade,
    read_reward,
)

__all__ = [
    "Finding",
    "Grade",
    "RewardFileError",
    "RewardFileNotFoundError",
    "SubmissionRefused",
    "Transfer",
    "VerifierError",
    "VerifierKilledError",
    "VerifierTimeoutError",
    "audit",
    "collect",
    "deliver",
    "excluded",
    "grade",
    "parse_index",
    "read_reward",
    "sanitize",
]
