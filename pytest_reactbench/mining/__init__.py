"""Mining: a change from a repository's own history made into a task.

`changes` reads and classifies a commit range, `runners` detects how the repository
installs and tests, `writer` lays out the task, `mine` runs the stages of one change
(`request` its Request and Outcome, `description` the instruction's title and text,
`survey` the stages before any sandbox, `proof` the controls, `record` mining.json),
`batch` mines many changes at once. Like the CLI, it sits above the plugin and drives
it from the outside.
"""

from pytest_reactbench.mining.batch import BatchResult, mine_many, write_summary
from pytest_reactbench.mining.changes import Change, Kind, MiningError, classify, commits_in
from pytest_reactbench.mining.mine import mine
from pytest_reactbench.mining.refusals import Reason
from pytest_reactbench.mining.request import Outcome, Request

__all__ = ["BatchResult", "Change", "Kind", "MiningError", "Outcome", "Reason", "Request", "classify",
           "commits_in", "mine", "mine_many", "write_summary"]
