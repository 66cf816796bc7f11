"""The trial: one agent attempt at one task, from bake to verdict, and the only maker of
its result. `stages` bakes and boots through the backend and checks an agent before
any trial, `lifecycle` runs one trial (with its retries), `judge` turns a grade into a
verdict, and `outcomes` makes the results of trials that end without a lifecycle."""

from pytest_reactbench.trial.diff import stat_of
from pytest_reactbench.trial.lifecycle import Trial, TrialOptions
from pytest_reactbench.trial.stages import (
    AgentUnavailable,
    Role,
    Stages,
    UnsupportedTaskError,
    limits_of,
    preflight,
    unsupported,
)

__all__ = ["AgentUnavailable", "Role", "Stages", "Trial", "TrialOptions", "UnsupportedTaskError",
           "limits_of", "preflight", "stat_of", "unsupported"]
