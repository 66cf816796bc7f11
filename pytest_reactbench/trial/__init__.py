"""The trial: one agent attempt at one task, from boot to verdict."""

from pytest_reactbench.trial.lifecycle import run_trial
from pytest_reactbench.trial.outcome import TrialResult, Verdict

__all__ = ["TrialResult", "Verdict", "run_trial"]
