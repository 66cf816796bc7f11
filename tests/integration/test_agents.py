"""Agents on a shipped task, for real: a scripted command agent that solves it and one
that breaks it, and a Python agent built only on the environment's tools."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import junit_results

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "counter-reset"

TOOL_AGENT = textwrap.dedent('''\
    from pytest_reactbench.agents import ToolAgent, ToolError


    class ResetAgent(ToolAgent):
        name = "tool-agent"

        def solve(self, instruction, tools):
            assert "Reset" in instruction
            source = tools.view("src/Counter.tsx")
            assert "Increment" in source
            try:
                tools.str_replace("src/Counter.tsx", "</button>", "</button>!")
            except ToolError as exc:  # two buttons? no: one, so this must not happen
                raise AssertionError(exc)
            tools.str_replace("src/Counter.tsx", "</button>!", """</button>
          <button type="button" onClick={() => setCount(0)} disabled={count === 0}>
            Reset
          </button>""")
            check = tools.bash("grep -c Reset src/Counter.tsx")
            assert check.exit_code == 0, check
            tools.submit()
    ''')


def test_command_and_python_agents(tmp_path: Path) -> None:
    solve = (TASK / "solution" / "solve.sh").read_bytes()
    scripted = ('test -s "$REACTBENCH_INSTRUCTION_FILE" && echo '
                + base64.b64encode(solve).decode() + " | base64 -d | bash")
    (tmp_path / "myagents.py").write_text(TOOL_AGENT)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         f"--reactbench-agent-command=scripted={scripted}",
         "--reactbench-agent-command=breaker=rm src/Counter.tsx",
         "--reactbench-agent=scripted,breaker,python:myagents:ResetAgent",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}",
         f"--rootdir={tmp_path}", str(TASK)],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert xml.exists(), proc.stdout + proc.stderr
    results = {r.agent: r for r in junit_results(xml)}
    assert results["scripted"].verdict == "passed", proc.stdout[-4000:]
    assert results["breaker"].verdict == "failed"
    assert results["breaker"].submission.diff.files == ["src/Counter.tsx"]
    assert results["tool-agent"].verdict == "passed", proc.stdout[-4000:]
    assert str(results["tool-agent"].submission.diff) == "1 files, +3 -0"
    (record,) = (tmp_path / "records").glob("*/counter-reset__tool-agent__1")
    events = [json.loads(line) for line in (record / "events.jsonl").read_text().splitlines()]
    tools = [e["tool"] for e in events if e["event"] == "tool"]
    assert tools == ["view", "str_replace", "str_replace", "bash", "submit"]
    assert all("t" in e and "result_bytes" in e for e in events if e["event"] == "tool")


def test_the_readme_example_agent_in_the_root_conftest(tmp_path: Path) -> None:
    conftest = (ROOT / "conftest.py").read_text()
    readme = (ROOT / "README.md").read_text()
    example = conftest[conftest.index("import pytest\n"):conftest.index("# -- end of the README")]
    assert example.strip() in readme  # the README shows the code that runs here
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=add-reset-button",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", str(TASK)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert xml.exists(), proc.stdout + proc.stderr
    (outcome,) = junit_results(xml)
    assert outcome.agent == "add-reset-button"
    assert outcome.verdict == "passed", proc.stdout[-4000:]
    assert outcome.submission.diff.files == ["src/Counter.tsx"]
