"""The verifier: artifact transfer, running test.sh, reading rewards and gates."""

from pytest_reactbench.verifier.artifacts import Transfer, collect, deliver, excluded, sanitize
from pytest_reactbench.verifier.grade import (
    Grade,
    RewardFileError,
    RewardFileNotFoundError,
    VerifierError,
    VerifierTimeoutError,
    grade,
    read_reward,
)

__all__ = [
    "Grade",
    "RewardFileError",
    "RewardFileNotFoundError",
    "Transfer",
    "VerifierError",
    "VerifierTimeoutError",
    "collect",
    "deliver",
    "excluded",
    "grade",
    "read_reward",
    "sanitize",
]
