"""What a trial's run record holds beyond its TrialResult, read for the report: the
instruction, the diff, the agent's log and tool calls, the cost, and the record's files
worth a link. Everything here is optional: a record may be gone (a report from JUnit XML
of another machine) or from an older version."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_reactbench.results.errors import ResultsError
from pytest_reactbench.results.events import Event
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.results.trajectory import TRAJECTORY
from pytest_reactbench.results.trial_result import TrialResult, strip_ansi

#: The most of a diff or log a page shows (the full file is linked).
MAX_SHOWN = 200_000
LOG_TAIL_LINES = 80
#: Record files a report links to (the artifacts' tarballs stay in the record).
LINKED = ("diff.patch", "agent.log", TRAJECTORY, "events.jsonl", "status.json", "manifest.json",
          "audit.json", "artifacts.json", "egress.json")
LINKED_DIRS = ("verifier",)


@dataclass
class ToolCall:
    """One step of the agent's transcript: a tool call, or (tool "assistant") what the
    agent said between them."""

    tool: str
    args: dict[str, Any]
    seconds: float | None
    error: str | None
    result_bytes: int | None
    #: The start of the tool's output, or the assistant's text.
    output: str = ""
    #: Seconds from the agent's start to the step, where the trajectory says.
    at: float | None = None
    #: The model call's tokens, where the trajectory says ("" otherwise).
    tokens: str = ""


@dataclass(frozen=True)
class Retry:
    """A try of the trial that ended in an error and was started again."""

    record: Path
    failure: str
    message: str


@dataclass
class Evidence:
    record: Path | None
    instruction: str = ""
    diff: str = ""
    agent_log_tail: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: Summed over the record's events that carry `cost_usd` (an agent's usage events).
    cost_usd: float | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    #: Files of the record worth a link, relative to the record.
    files: list[str] = field(default_factory=list)
    #: The tries this trial is the retry of, first first.
    retries: list[Retry] = field(default_factory=list)


def _read(path: Path, limit: int = MAX_SHOWN) -> str:
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return ""
    text = data[:limit].decode("utf-8", "replace")
    return strip_ansi(text) + ("\n[… cut here; the whole file is linked]\n" if len(data) > limit else "")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tool_calls_and_cost(events: Path) -> tuple[list[ToolCall], float | None, dict[str, int]]:
    calls: list[ToolCall] = []
    cost: float | None = None
    tokens: dict[str, int] = {}
    try:
        lines = events.read_text(encoding="utf-8").splitlines()
    except OSError:
        return calls, cost, tokens
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("event") == Event.TOOL:
            args = event.get("args")
            code = event.get("exit_code")
            error = event.get("error") or (f"exited {code}" if isinstance(code, int) and code else None)
            calls.append(ToolCall(str(event.get("tool", "?")), args if isinstance(args, dict) else {},
                                  event.get("seconds"), error, event.get("result_bytes"),
                                  str(event.get("output") or "")))
        elif event.get("event") == Event.MESSAGE and event.get("text"):
            calls.append(ToolCall("assistant", {}, None, None, None, str(event["text"])))
        if isinstance(event.get("cost_usd"), int | float):
            cost = (cost or 0.0) + float(event["cost_usd"])
        for key in ("input_tokens", "output_tokens"):
            if isinstance(event.get(key), int):
                tokens[key] = tokens.get(key, 0) + event[key]
    return calls, cost, tokens


def _when(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _tokens(metrics: object) -> str:
    if not isinstance(metrics, dict):
        return ""
    sent, cached, got = (metrics.get(k) for k in ("prompt_tokens", "cached_tokens", "completion_tokens"))
    parts = [f"{sent} tokens in" + (f" ({cached} cached)" if cached else "") if isinstance(sent, int) else "",
             f"{got} out" if isinstance(got, int) else ""]
    return ", ".join(p for p in parts if p)


def _from_trajectory(path: Path) -> list[ToolCall]:
    """The agent's steps from its trajectory (ATIF): its text, each tool call with its
    arguments as given and its observation, the time from the agent's start and each
    model call's tokens."""
    data = _json(path)
    steps = data.get("steps") if isinstance(data, dict) else None
    calls: list[ToolCall] = []
    steps = [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []
    times = [t for t in (_when(step.get("timestamp")) for step in steps) if t is not None]
    start = min(times) if times else None
    for step in steps:
        when = _when(step.get("timestamp"))
        at = None if when is None or start is None else when - start
        if step.get("source") == "system" and str(step.get("message") or "").strip():
            # What the harness or the CLI said between the agent's steps (a model API retry).
            calls.append(ToolCall("system", {}, None, None, None, str(step["message"]), at=at))
        if step.get("source") != "agent":
            continue
        tokens = _tokens(step.get("metrics"))
        seen = step.get("observation")
        observation: dict[str, Any] = seen if isinstance(seen, dict) else {}
        results = [r for r in observation.get("results", []) if isinstance(r, dict)]
        for kind, text in (("thinking", step.get("reasoning_content")), ("assistant", step.get("message"))):
            if isinstance(text, str) and text.strip():
                calls.append(ToolCall(kind, {}, None, None, None, text, at=at, tokens=tokens))
                tokens = ""
        for call in step.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            answer = next((r for r in results if r.get("source_call_id") == call.get("tool_call_id")), {})
            kept = answer.get("extra")
            extra: dict[str, Any] = kept if isinstance(kept, dict) else {}
            code = extra.get("exit_code")
            error = (extra.get("error") or ("error" if extra.get("is_error") else None)
                     or (f"exited {code}" if isinstance(code, int) and code else None))
            given = call.get("arguments")
            args: dict[str, Any] = given if isinstance(given, dict) else {}
            calls.append(ToolCall(str(call.get("function_name") or "?"), args,
                                  extra.get("seconds"), error, extra.get("result_bytes"),
                                  str(answer.get("content") or ""), at=at, tokens=tokens))
            tokens = ""
        for answer in results:
            if answer.get("source_call_id") is None and answer.get("content"):
                calls.append(ToolCall("output", {}, None, None, None, str(answer["content"]), at=at))
    return calls


def _retries(record: Path) -> list[Retry]:
    """The tries before this one (each manifest's `retry_of`), with how each ended."""
    found: list[Retry] = []
    seen = {record}
    while len(found) < 50:
        try:
            before = TrialManifest.read(record).retry_of
        except ResultsError:
            break
        if not before or Path(before) in seen:
            break
        record = Path(before)
        seen.add(record)
        status = _json(record / "status.json")
        status = status if isinstance(status, dict) else {}
        found.append(Retry(record, str(status.get("failure") or status.get("status") or "?"),
                           str(status.get("message") or status.get("reason") or "")))
    return found[::-1]


def gather(result: TrialResult) -> Evidence:
    """The evidence of one trial, from its record when the record is at hand."""
    record = Path(result.record) if result.record else None
    if record is None or not record.is_dir():
        return Evidence(record=None, agent_log_tail=result.agent_run.log_tail)
    instruction = ""
    with contextlib.suppress(ResultsError):
        if task_path := TrialManifest.read(record).task_path:
            instruction = _read(Path(task_path) / "instruction.md")
    log = _read(record / "agent.log", limit=10 * MAX_SHOWN)
    tail = "\n".join(log.rstrip().splitlines()[-LOG_TAIL_LINES:]) if log else result.agent_run.log_tail
    calls, cost, tokens = _tool_calls_and_cost(record / "events.jsonl")
    # The trajectory, where the record has one, keeps more: arguments whole, times, tokens.
    calls = _from_trajectory(record / TRAJECTORY) or calls
    files = [name for name in LINKED if (record / name).is_file()]
    for folder in LINKED_DIRS:
        if (record / folder).is_dir():
            files += sorted(p.relative_to(record).as_posix() for p in (record / folder).rglob("*")
                            if p.is_file())
    return Evidence(record=record, instruction=instruction, diff=_read(record / "diff.patch"),
                    agent_log_tail=tail, tool_calls=calls,
                    cost_usd=cost, tokens=tokens,
                    files=files, retries=_retries(record))
