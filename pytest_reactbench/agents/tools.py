"""The tools of the ReactBench environment, as a Python API over a sandbox.

An agent built on any LLM SDK subclasses `ToolAgent` and implements `solve`, calling
`bash`, `view`, `str_replace`, `insert`, `create` and `submit` with the same contracts
as the environment's tools. Every call is recorded in the run record as an event
(time, tool, arguments, result size).

    class MyAgent(ToolAgent):
        name = "my-agent"

        def solve(self, instruction: str, tools: Tools) -> None:
            print(tools.view("src/App.tsx"))
            tools.str_replace("src/App.tsx", "Placeholder", "Hello")
            tools.submit()
"""

from __future__ import annotations

import contextlib
import importlib
import io
import posixpath
import sys
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from pytest_reactbench.agents.base import Agent, AgentConfigError, AgentContext, AgentOutcome
from pytest_reactbench.results.events import Event
from pytest_reactbench.sandbox.base import Sandbox

MAX_ARG_CHARS = 200
#: The most of a tool's output (or a message) an event keeps.
MAX_SHOWN_OUTPUT = 2000


def shown_args(args: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as an event keeps them: long strings cut."""
    return {k: (v[:MAX_ARG_CHARS] + "…" if isinstance(v, str) and len(v) > MAX_ARG_CHARS else v)
            for k, v in args.items()}


class ToolError(Exception):
    """A tool call the environment refuses (a missing file, a non-unique match...).
    The agent sees the message and may go on."""


class TimeUp(Exception):
    """The agent's time limit ran out during a tool call."""


@dataclass(frozen=True)
class BashResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    def __str__(self) -> str:
        return self.stdout + self.stderr


class Tools:
    """Tools bound to one agent sandbox and its deadline. Relative paths are under /app."""

    def __init__(self, sandbox: Sandbox, deadline: float,
                 event: Callable[..., None] | None = None, workdir: str = "/app") -> None:
        self.sandbox = sandbox
        self.deadline = deadline
        self.workdir = workdir
        self.submitted = False
        self._event = event or (lambda *args, **kwargs: None)

    # -- plumbing ------------------------------------------------------------------

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeUp("the agent's time limit ran out")
        return left

    def _record(self, tool: str, args: dict[str, Any], started: float, result: str,
                error: str | None = None, **extra: Any) -> None:
        self._event(Event.TOOL, tool=tool, args=shown_args(args), result_bytes=len(result.encode()),
                    output=result[:MAX_SHOWN_OUTPUT],
                    seconds=round(time.monotonic() - started, 3), **({"error": error} if error else {}),
                    **extra)

    def said(self, text: str) -> None:
        """Records what the model said (its text between tool calls) in the transcript."""
        if text.strip():
            self._event(Event.MESSAGE, role="assistant", text=text[:MAX_SHOWN_OUTPUT])

    def model_replied(self, input_tokens: int | None = None, output_tokens: int | None = None, *,
                      seconds: float | None = None, model: str | None = None,
                      cached_tokens: int | None = None, cost_usd: float | None = None) -> None:
        """Records one call of the agent's model, with its tokens, cost and time where
        known (they count toward the trial's totals): the trial's trajectory makes it a
        step holding what the model said and the tool calls that follow it."""
        known = {"model": model, "input_tokens": input_tokens, "output_tokens": output_tokens,
                 "cached_tokens": cached_tokens, "cost_usd": cost_usd,
                 "seconds": None if seconds is None else round(seconds, 3)}
        self._event(Event.MODEL, **{k: v for k, v in known.items() if v is not None})

    def _read(self, path: str) -> str:
        result = self.sandbox.exec(["cat", "--", path], cwd="/", timeout=self._remaining())
        if result.exit_code != 0:
            kind = "is a directory" if "Is a directory" in result.error_text else "does not exist"
            raise ToolError(f"{path} {kind}")
        return result.stdout.decode("utf-8", "replace")

    def _call(self, tool: str, args: dict[str, Any], body: Callable[[], str]) -> str:
        started = time.monotonic()
        try:
            out = body()
        except ToolError as exc:
            self._record(tool, args, started, "", str(exc))
            raise
        self._record(tool, args, started, out)
        return out

    # -- the tools -------------------------------------------------------------------

    def bash(self, command: str, timeout: float | None = None) -> BashResult:
        """Run a shell command in /app; the agent's deadline bounds it."""
        started = time.monotonic()
        limit = min(timeout or float("inf"), self._remaining())
        result = self.sandbox.exec(command, cwd=self.workdir, timeout=limit)
        out = BashResult(result.exit_code, result.text, result.error_text, result.timed_out)
        ending: dict[str, Any] = {"exit_code": result.exit_code}
        if result.timed_out:
            ending["timed_out"] = True
        self._record("bash", {"command": command}, started, str(out), **ending)
        if result.timed_out and time.monotonic() >= self.deadline:
            raise TimeUp("the agent's time limit ran out during bash")
        return out

    def view(self, path: str, view_range: tuple[int, int] | None = None) -> str:
        """A file with numbered lines (optionally lines `start`..`end`, 1-based,
        `end` = -1 for the end), or a directory's listing."""
        target = self._path(path)

        def body() -> str:
            listing = self.sandbox.exec(["sh", "-c", 'test -d "$1" && find "$1" -maxdepth 2 '
                                         '-not -path "*/node_modules*" -not -path "*/.git*" | sort',
                                         "view", target], cwd="/", timeout=self._remaining())
            if listing.exit_code == 0 and listing.text:
                return listing.text
            lines = self._read(target).splitlines()
            start, end = 1, len(lines)
            if view_range is not None:
                start, end = view_range
                end = len(lines) if end == -1 else end
                if not (1 <= start <= max(end, 1)) or end > len(lines):
                    raise ToolError(f"view_range {list(view_range)} is outside 1..{len(lines)} of {target}")
            return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(start, end + 1))

        return self._call("view", {"path": target, "view_range": view_range}, body)

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the one occurrence of `old_str`; it must occur exactly once."""
        target = self._path(path)

        def body() -> str:
            text = self._read(target)
            count = text.count(old_str)
            if count == 0:
                raise ToolError(f"old_str does not occur in {target}")
            if count > 1:
                raise ToolError(f"old_str occurs {count} times in {target}; it must be unique")
            self.sandbox.write_file(target, text.replace(old_str, new_str, 1))
            return f"edited {target}"

        return self._call("str_replace", {"path": target, "old_str": old_str, "new_str": new_str}, body)

    def insert(self, path: str, insert_line: int, text: str) -> str:
        """Insert `text` after line `insert_line` (0: at the top)."""
        target = self._path(path)

        def body() -> str:
            lines = self._read(target).splitlines(keepends=True)
            if not 0 <= insert_line <= len(lines):
                raise ToolError(f"insert_line {insert_line} is outside 0..{len(lines)} of {target}")
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            chunk = text if text.endswith("\n") else text + "\n"
            self.sandbox.write_file(target, "".join(lines[:insert_line]) + chunk
                                    + "".join(lines[insert_line:]))
            return f"inserted {len(chunk.splitlines())} line(s) into {target}"

        return self._call("insert", {"path": target, "insert_line": insert_line, "text": text}, body)

    def create(self, path: str, file_text: str) -> str:
        """Create a new file (its folders too); an existing file is an error."""
        target = self._path(path)

        def body() -> str:
            exists = self.sandbox.exec(["test", "-e", target], cwd="/", timeout=self._remaining())
            if exists.exit_code == 0:
                raise ToolError(f"{target} already exists; edit it with str_replace or insert")
            self.sandbox.write_file(target, file_text)
            return f"created {target}"

        return self._call("create", {"path": target, "file_text": file_text}, body)

    def submit(self) -> str:
        """End the episode: the current tree is graded."""
        self.submitted = True
        started = time.monotonic()
        self._record("submit", {}, started, "")
        return "submitted"


class ToolAgent(Agent):
    """An agent that works through the environment's tools."""

    @abstractmethod
    def solve(self, instruction: str, tools: Tools) -> None:
        """Work on the task; call `tools.submit()` when done (returning also ends it)."""

    def run(self, ctx: AgentContext) -> AgentOutcome:
        """`solve`, with what it prints kept for the record's agent.log (and still
        printed), then how it ended."""
        tools = Tools(ctx.sandbox, time.monotonic() + ctx.timeout, ctx.event)
        printed = _Tee(sys.stdout)
        try:
            with contextlib.redirect_stdout(printed):
                self.solve(ctx.task.instruction, tools)
        except TimeUp as exc:
            return AgentOutcome("timeout", None, printed.getvalue() + str(exc))
        return AgentOutcome("completed", 0, printed.getvalue()
                            + ("submitted" if tools.submitted else "returned without submit"))


class _Tee(io.StringIO):
    """What an agent prints: kept, and passed on to where it went before."""

    def __init__(self, passed_to: TextIO) -> None:
        super().__init__()
        self._passed_to = passed_to

    def write(self, text: str) -> int:
        self._passed_to.write(text)
        return super().write(text)


def load_agent_class(spec: str) -> Agent:
    """`package.module:ClassName` -> an instance of that Agent subclass."""
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise AgentConfigError(f"python agent {spec!r}: expected python:package.module:ClassName")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name and module_name.startswith(exc.name):
            hint = (f" (no module {exc.name} on the import path: run pytest from the folder that "
                    "holds it, or add that folder with pytest's `pythonpath` setting or PYTHONPATH)")
        raise AgentConfigError(f"python agent {spec!r}: cannot import {module_name}: {exc}{hint}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        found = sorted(name for name, value in vars(module).items()
                       if isinstance(value, type) and issubclass(value, Agent)
                       and value.__module__ == module.__name__)
        raise AgentConfigError(
            f"python agent {spec!r}: {module_name} has no {class_name}"
            + (f" (its agent classes: {', '.join(found)})" if found else " (it defines no Agent subclass)"))
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise AgentConfigError(
            f"python agent {spec!r}: {module_name}.{class_name} is not a subclass of "
            "pytest_reactbench.agents.Agent (or ToolAgent)"
        )
    agent = cls()
    if not getattr(agent, "name", None):
        agent.name = class_name.lower()
    return agent
