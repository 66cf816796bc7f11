"""Results: run records and the properties that go into JUnit XML."""

from pytest_reactbench.results.records import RunRecords, TrialRecord, new_run_id, pid_alive

__all__ = ["RunRecords", "TrialRecord", "new_run_id", "pid_alive"]
