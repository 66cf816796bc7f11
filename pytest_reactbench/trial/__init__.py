"""The trial: one agent attempt at one task, from bake to verdict."""

from pytest_reactbench.trial.trial import (
    AgentUnavailable,
    Stages,
    Trial,
    TrialOptions,
    UnsupportedTaskError,
    limits_of,
    preflight,
    stat_of,
    unsupported,
)

__all__ = ["AgentUnavailable", "Stages", "Trial", "TrialOptions", "UnsupportedTaskError",
           "limits_of", "preflight", "stat_of", "unsupported"]
