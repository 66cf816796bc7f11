"""The environment's tools on a real local sandbox, with their error contracts."""

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_reactbench.agents import ToolAgent, ToolError, Tools
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend
from tests.sandbox.helpers import recipe


@pytest.fixture
def tools(tmp_path: Path, bake_cache: Path):  # type: ignore[no-untyped-def]
    backend = LocalBackend(environment_sandbox_options(cache=bake_cache, image_map={}))
    image = backend.bake(recipe(tmp_path, "FROM reactbench/system\nWORKDIR /app\n"
                                "RUN printf 'one\\ntwo\\nthree\\n' > notes.txt && mkdir -p src\n"),
                         lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={})
    events: list[dict[str, Any]] = []
    def record(kind: str, **data: Any) -> None:
        events.append({"kind": kind, **data})

    yield Tools(box, time.monotonic() + 60, record), events
    box.close()


def test_view_numbers_lines_and_ranges(tools) -> None:  # type: ignore[no-untyped-def]
    t, events = tools
    assert t.view("notes.txt") == "     1\tone\n     2\ttwo\n     3\tthree"
    assert t.view("notes.txt", (2, -1)) == "     2\ttwo\n     3\tthree"
    assert "/app/notes.txt" in t.view(".")
    with pytest.raises(ToolError, match=r"view_range \[2, 9\] is outside 1..3"):
        t.view("notes.txt", (2, 9))
    with pytest.raises(ToolError, match=r"/app/missing\.txt does not exist"):
        t.view("missing.txt")
    assert events[0]["tool"] == "view" and events[0]["result_bytes"] > 0
    assert events[-1]["error"] == "/app/missing.txt does not exist"


def test_str_replace_needs_exactly_one_match(tools) -> None:  # type: ignore[no-untyped-def]
    t, _ = tools
    t.str_replace("notes.txt", "two", "TWO")
    assert t.bash("cat notes.txt").stdout == "one\nTWO\nthree\n"
    t.create("src/dup.txt", "x\nx\n")
    with pytest.raises(ToolError, match=r"occurs 2 times in /app/src/dup\.txt; it must be unique"):
        t.str_replace("src/dup.txt", "x", "y")
    with pytest.raises(ToolError, match="old_str does not occur"):
        t.str_replace("notes.txt", "four", "4")
    with pytest.raises(ToolError, match="does not exist"):
        t.str_replace("nope.txt", "a", "b")


def test_insert_and_create(tools) -> None:  # type: ignore[no-untyped-def]
    t, events = tools
    t.insert("notes.txt", 0, "zero")
    t.insert("notes.txt", 4, "four")
    assert t.bash("cat notes.txt").stdout == "zero\none\ntwo\nthree\nfour\n"
    with pytest.raises(ToolError, match=r"insert_line 9 is outside 0\.\.5"):
        t.insert("notes.txt", 9, "x")
    assert t.create("src/new/App.tsx", "export {};\n") == "created /app/src/new/App.tsx"
    with pytest.raises(ToolError, match="already exists"):
        t.create("src/new/App.tsx", "again")
    result = t.bash("exit 3")
    assert result.exit_code == 3
    assert events[-1]["tool"] == "bash" and events[-1]["exit_code"] == 3
    t.submit()
    assert t.submitted and [e["tool"] for e in events][-2:] == ["bash", "submit"]


def test_what_a_tool_agent_prints_is_kept_for_its_record(tools, capsys) -> None:  # type: ignore[no-untyped-def]
    t, _ = tools

    class Printing(ToolAgent):
        name = "printing"

        def solve(self, instruction: str, tools: Tools) -> None:
            print("thinking about", instruction)
            tools.submit()

    ctx = SimpleNamespace(sandbox=t.sandbox, timeout=30, event=lambda *a, **k: None,
                          task=SimpleNamespace(instruction="the task"))
    outcome = Printing().run(ctx)  # type: ignore[arg-type]
    assert outcome.log.splitlines() == ["thinking about the task", "submitted"]
    assert "thinking about the task" in capsys.readouterr().out
