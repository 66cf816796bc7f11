"""Who failed: the two families of exceptions the verifier layer raises.

The trial maps classes to verdicts and nothing else:

- `SubmissionFailure` (and every subclass): the agent's work failed; verdict FAILED,
  `failure` names the class of failure, the message says why. Never retried.
- `VerifierError` (and every subclass): the harness or the grader broke before the
  submission was in play, or for reasons proven independent of it; verdict ERROR,
  no score, may be retried.
"""

from __future__ import annotations


class SubmissionFailure(Exception):
    """The submission failed, or broke the grading once its code or files were in
    play: the agent's fail, with the reason."""

    #: The failure class recorded with the verdict.
    failure = "submission"


class SubmissionRefused(SubmissionFailure):
    """The agent's submission cannot be graded as it is (too large, unreadable)."""


class GraderBrokenError(SubmissionFailure):
    """Our verifier died, timed out or left a result that does not hold together
    while the submission's code or files were in play."""

    failure = "grader-broken"


class VerifierError(Exception):
    """The verifier broke: no score, a harness error that may be retried."""


class VerifierTimeoutError(VerifierError):
    pass


class RewardFileNotFoundError(VerifierError):
    pass


class VerifierKilledError(VerifierError):
    """test.sh died by a signal (killed from outside, out of memory) before a reward."""


class RewardFileError(VerifierError):
    """A reward file that is empty, garbled or inconsistent."""
