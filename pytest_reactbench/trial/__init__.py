"""The trial: one agent attempt at one task, from bake to verdict."""

from pytest_reactbench.trial.trial import (
    Stages,
    Trial,
    TrialOptions,
    UnsupportedTaskError,
    limits_of,
    stat_of,
    unsupported,
)

__all__ = ["Stages", "Trial", "TrialOptions", "UnsupportedTaskError", "limits_of", "stat_of",
           "unsupported"]
