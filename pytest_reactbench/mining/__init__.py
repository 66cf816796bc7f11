"""Mining: a change from a repository's own history made into a task.

`changes` reads and classifies a commit range, `runners` detects how the repository
installs and tests, `writer` lays out the task, `mine` decides and runs the controls.
Like the CLI, it sits above the plugin and drives it from the outside.
"""

from pytest_reactbench.mining.changes import Change, Kind, MiningError, classify
from pytest_reactbench.mining.mine import Outcome, Request, mine

__all__ = ["Change", "Kind", "MiningError", "Outcome", "Request", "classify", "mine"]
