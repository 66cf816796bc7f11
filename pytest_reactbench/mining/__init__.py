"""Mining: a change from a repository's own history made into a task.

`changes` reads and classifies a commit range, `runners` detects how the repository
installs and tests, `writer` lays out the task, `mine` decides and runs the controls,
`batch` mines many changes at once. Like the CLI, it sits above the plugin and drives
it from the outside.
"""

from pytest_reactbench.mining.batch import BatchResult, mine_many, write_summary
from pytest_reactbench.mining.changes import Change, Kind, MiningError, classify, commits_in
from pytest_reactbench.mining.mine import Outcome, Request, mine
from pytest_reactbench.mining.refusals import Reason

__all__ = ["BatchResult", "Change", "Kind", "MiningError", "Outcome", "Reason", "Request", "classify",
           "commits_in", "mine", "mine_many", "write_summary"]
