"""The transcript the trial page shows, read from a record's events.jsonl."""

import json
from pathlib import Path

from pytest_reactbench.results.evidence import _tool_calls_and_cost


def test_a_bash_call_that_failed_shows_its_exit_code(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(json.dumps(e) for e in [
        {"event": "tool", "tool": "bash", "args": {"command": "pnpm test"}, "exit_code": 1,
         "output": "1 failed"},
        {"event": "tool", "tool": "bash", "args": {"command": "ls"}, "exit_code": 0, "output": "src"},
        {"event": "tool", "tool": "view", "args": {"path": "/app/x"}, "error": "/app/x does not exist"},
    ]) + "\n")
    calls, _, _ = _tool_calls_and_cost(events)
    assert [c.error for c in calls] == ["exited 1", None, "/app/x does not exist"]
