"""A trial's trajectory in ATIF, the Agent Trajectory Interchange Format (Harbor's RFC
0001): `agent/trajectory.json` in the trial's record, what Harbor's viewer shows and
what fine-tuning and RL pipelines read.

It is made from what the agent did, as its record holds it:

- Claude Code's `--output-format stream-json` (the record's agent.log): one step per
  model message (its text, thinking, tool calls and their tokens), each tool call's
  result as that step's observation; the session's id, model, cost and tokens;
- Codex's `exec --json` events: one step per completed item (a message, a command with
  its output and exit code, a file change...), the turns' tokens summed;
- anything else from the record's `events.jsonl`: a `message` event is a step of the
  agent's text, a `tool` event (the tools API, Aider's edits and commands) a step with
  that call, its arguments, its output and exit code (as the events keep them: long
  arguments and outputs cut); a command agent that recorded none is one step, its
  command and its output.

The first step is the task's instruction (the user's). The models are this package's
own (`results/atif.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_reactbench.agents.output import json_lines
from pytest_reactbench.results.atif import AtifAgent, FinalMetrics, Step, Trajectory
from pytest_reactbench.results.events import Event
from pytest_reactbench.results.manifest import TrialManifest

#: Where a trial's record holds it (Harbor's trial folders have it at the same place).
TRAJECTORY = "agent/trajectory.json"
#: The most of one observation (a tool's output) a trajectory keeps.
MAX_OBSERVATION = 100_000
#: The most of a command agent's log its one step keeps.
MAX_LOG = 200_000


# -- reading ------------------------------------------------------------------------


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cut(text: str, limit: int = MAX_OBSERVATION) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[… cut: {len(text)} characters in all]"


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)
    return ""


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class _Draft:
    """Steps as they are read (numbered at the end), and what the whole says."""

    def __init__(self, reader: str) -> None:
        self.reader = reader
        self.steps: list[dict[str, Any]] = []
        self.session_id: str | None = None
        self.model: str | None = None
        self.totals: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.agent_extra: dict[str, Any] = {}

    def add(self, **step: Any) -> dict[str, Any]:
        self.steps.append(step)
        return step


def _claude(log: str) -> _Draft | None:
    """Claude Code's stream-json: a step per model message, its tool calls answered by the
    tool_result blocks of the user messages that follow."""
    draft = _Draft("claude-stream-json")
    by_message: dict[str, dict[str, Any]] = {}
    by_call: dict[str, dict[str, Any]] = {}
    seen = False
    for event in json_lines(log):
        kind = event.get("type")
        message = event.get("message") if isinstance(event.get("message"), dict) else None
        if kind == "system" and event.get("subtype") == "init":
            seen = True
            draft.session_id = str(event.get("session_id") or "") or None
            draft.model = str(event.get("model") or "") or None
            if isinstance(event.get("tools"), list):
                draft.agent_extra["tools"] = event["tools"]
            if event.get("claude_code_version"):
                draft.agent_extra["claude_code_version"] = event["claude_code_version"]
        elif kind == "system" and event.get("subtype") == "api_retry":
            draft.add(source="system", message=(
                f"model API retry {event.get('attempt')} of {event.get('max_retries')}: HTTP "
                f"{event.get('error_status') or 'none'}: {event.get('error')}"))
        elif kind == "assistant" and message is not None:
            seen = True
            key = str(message.get("id") or f"message-{len(draft.steps)}")
            step = by_message.get(key)
            if step is None:
                step = by_message[key] = draft.add(source="agent", message="", llm_call_count=1)
                if message.get("model"):
                    step["model_name"] = str(message["model"])
            blocks = message.get("content") if isinstance(message.get("content"), list) else []
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    step["message"] = "\n\n".join(filter(None, [step["message"], str(block["text"])]))
                elif block.get("type") == "thinking" and block.get("thinking"):
                    step["reasoning_content"] = "\n\n".join(
                        filter(None, [step.get("reasoning_content"), str(block["thinking"])]))
                elif block.get("type") == "tool_use":
                    call_id = str(block.get("id") or f"call-{len(by_call) + 1}")
                    given = block.get("input")
                    step.setdefault("tool_calls", []).append(
                        {"tool_call_id": call_id, "function_name": str(block.get("name") or "?"),
                         "arguments": given if isinstance(given, dict) else {"input": given}})
                    by_call[call_id] = step
            usage = message.get("usage")
            if isinstance(usage, dict):
                step["metrics"] = _claude_metrics(usage)
        elif kind == "user" and message is not None:
            blocks = message.get("content") if isinstance(message.get("content"), list) else []
            for block in blocks:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                call_id = str(block.get("tool_use_id"))
                owner = by_call.get(call_id)
                result: dict[str, Any] = {"content": _cut(_text_of(block.get("content")))}
                if owner is None:
                    draft.add(source="system", message="", observation={"results": [result]})
                    continue
                result["source_call_id"] = call_id
                if block.get("is_error"):
                    result["extra"] = {"is_error": True}
                owner.setdefault("observation", {"results": []})["results"].append(result)
        elif kind == "result":
            seen = True
            given = event.get("usage")
            metrics = _claude_metrics(given if isinstance(given, dict) else {})
            draft.totals = {"total_prompt_tokens": metrics.get("prompt_tokens"),
                            "total_completion_tokens": metrics.get("completion_tokens"),
                            "total_cached_tokens": metrics.get("cached_tokens")}
            if isinstance(event.get("total_cost_usd"), int | float):
                draft.totals["total_cost_usd"] = float(event["total_cost_usd"])
            draft.extra["result"] = {k: event[k] for k in ("subtype", "is_error", "result", "num_turns",
                                                           "duration_ms", "terminal_reason") if k in event}
    return draft if seen else None


def _claude_metrics(usage: Mapping[str, Any]) -> dict[str, Any]:
    fresh = _int(usage.get("input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens")) or 0
    cached = _int(usage.get("cache_read_input_tokens")) or 0
    metrics: dict[str, Any] = {"completion_tokens": _int(usage.get("output_tokens"))}
    if fresh is not None:
        metrics["prompt_tokens"] = fresh + written + cached
        metrics["cached_tokens"] = cached
    return {k: v for k, v in metrics.items() if v is not None}


def _codex(log: str) -> _Draft | None:
    """Codex's `exec --json` events: a step per completed item; the turns' usage summed."""
    draft = _Draft("codex-jsonl")
    seen = False
    totals = {"total_prompt_tokens": 0, "total_completion_tokens": 0, "total_cached_tokens": 0}
    turns = 0
    for event in json_lines(log):
        kind = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else None
        if kind == "thread.started":
            seen = True
            draft.session_id = str(event.get("thread_id") or "") or None
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            seen = True
            turns += 1
            usage = event["usage"]
            totals["total_prompt_tokens"] += _int(usage.get("input_tokens")) or 0
            totals["total_cached_tokens"] += _int(usage.get("cached_input_tokens")) or 0
            totals["total_completion_tokens"] += _int(usage.get("output_tokens")) or 0
        elif kind == "turn.failed":
            seen = True
            error = event.get("error")
            said = error.get("message") if isinstance(error, dict) else None
            draft.add(source="system", message=f"the turn failed: {said or 'no reason given'}")
        elif kind == "error" and event.get("message"):
            draft.add(source="system", message=str(event["message"]))
        elif kind == "item.completed" and item is not None:
            seen = True
            _codex_item(draft, item)
    if turns:
        draft.totals = totals
        draft.extra["turns"] = turns
    return draft if seen else None


def _codex_item(draft: _Draft, item: Mapping[str, Any]) -> None:
    kind = str(item.get("type") or "?")
    call_id = str(item.get("id") or f"item-{len(draft.steps)}")

    def call(name: str, arguments: dict[str, Any], output: str, **extra: Any) -> None:
        result: dict[str, Any] = {"source_call_id": call_id, "content": _cut(output)}
        shown = {k: v for k, v in extra.items() if v is not None}
        if shown:
            result["extra"] = shown
        draft.add(source="agent", message="",
                  tool_calls=[{"tool_call_id": call_id, "function_name": name, "arguments": arguments}],
                  observation={"results": [result]})

    if kind == "agent_message":
        draft.add(source="agent", message=str(item.get("text") or ""))
    elif kind == "reasoning":
        draft.add(source="agent", message="", reasoning_content=str(item.get("text") or ""))
    elif kind == "command_execution":
        call("command_execution", {"command": str(item.get("command") or "")},
             str(item.get("aggregated_output") or ""), exit_code=item.get("exit_code"),
             status=item.get("status"))
    elif kind == "file_change":
        given = item.get("changes")
        changes: list[Any] = given if isinstance(given, list) else []
        said = "\n".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict))
        call("file_change", {"changes": changes}, said, status=item.get("status"))
    elif kind == "mcp_tool_call":
        arguments = item.get("arguments")
        result = item.get("result") if item.get("result") is not None else item.get("error")
        call(f"{item.get('server', 'mcp')}.{item.get('tool', '?')}",
             arguments if isinstance(arguments, dict) else {"arguments": arguments},
             result if isinstance(result, str) else json.dumps(result, ensure_ascii=False),
             status=item.get("status"))
    elif kind == "web_search":
        call("web_search", {"query": str(item.get("query") or "")}, "")
    elif kind == "todo_list":
        listed = item.get("items")
        items: list[Any] = listed if isinstance(listed, list) else []
        draft.add(source="agent", message="\n".join(
            f"[{'x' if i.get('completed') else ' '}] {i.get('text', '')}"
            for i in items if isinstance(i, dict)))
    elif kind == "error":
        draft.add(source="system", message=str(item.get("message") or ""))


def _from_events(events: list[dict[str, Any]], log: str) -> _Draft | None:
    """The record's own events: a step per `model` call the agent reported, holding the
    `message` and `tool` events that follow it; without them a step per `message` and
    `tool` event (the tools API, a CLI's transcript read by its preset); else one step
    for a command agent's command."""
    draft = _Draft("events")
    calls = 0
    tokens: dict[str, float] = {}
    #: The step of the model call the agent reported last (`Tools.model_replied`): what
    #: the model said and the tool calls that follow are that step's.
    reply: dict[str, Any] | None = None
    for event in events:
        kind = event.get("event")
        when = event.get("t") if isinstance(event.get("t"), int | float) else None
        for key in ("input_tokens", "output_tokens", "cost_usd"):
            if isinstance(event.get(key), int | float) and not isinstance(event.get(key), bool):
                tokens[key] = tokens.get(key, 0) + event[key]
        if kind == Event.MODEL:
            reply = draft.add(source="agent", message="", llm_call_count=1)
            metrics = {"prompt_tokens": _int(event.get("input_tokens")),
                       "completion_tokens": _int(event.get("output_tokens")),
                       "cached_tokens": _int(event.get("cached_tokens")),
                       "cost_usd": event.get("cost_usd") if isinstance(event.get("cost_usd"), int | float)
                       else None}
            if any(v is not None for v in metrics.values()):
                reply["metrics"] = {k: v for k, v in metrics.items() if v is not None}
            if event.get("model"):
                reply["model_name"] = str(event["model"])
            took = event.get("seconds") if isinstance(event.get("seconds"), int | float) else None
            if took is not None:
                reply["extra"] = {"seconds": took}
            if when is not None:
                reply["timestamp"] = _iso(when - (took or 0))
        elif kind == Event.MESSAGE and event.get("text"):
            if reply is not None and not reply["message"] and "tool_calls" not in reply:
                reply["message"] = str(event["text"])
                continue
            reply = None
            step = draft.add(source="agent", message=str(event["text"]))
            if when is not None:
                step["timestamp"] = _iso(when)
        elif kind == Event.TOOL:
            calls += 1
            call_id = f"call-{calls}"
            args = event.get("args")
            seconds = event.get("seconds") if isinstance(event.get("seconds"), int | float) else None
            output = str(event.get("output") or "")
            extra = {k: event[k] for k in ("exit_code", "timed_out", "error", "seconds", "result_bytes")
                     if event.get(k) is not None}
            if isinstance(event.get("result_bytes"), int) and event["result_bytes"] > len(output.encode()):
                extra["cut"] = True  # the event keeps the start of the output only
            # What the agent was told of a refused call, when the call gave no output.
            told = output or (f"error: {event['error']}" if event.get("error") else "")
            result: dict[str, Any] = {"source_call_id": call_id, "content": told}
            if extra:
                result["extra"] = extra
            tool = {"tool_call_id": call_id, "function_name": str(event.get("tool") or "?"),
                    "arguments": args if isinstance(args, dict) else {}}
            if reply is not None:
                reply.setdefault("tool_calls", []).append(tool)
                reply.setdefault("observation", {"results": []})["results"].append(result)
                continue
            step = draft.add(source="agent", message="", tool_calls=[tool],
                             observation={"results": [result]})
            if when is not None:
                step["timestamp"] = _iso(when - (seconds or 0))
    if not draft.steps:
        command = next((e for e in events if e.get("event") == Event.COMMAND and e.get("command")), None)
        ended = next((e for e in events if e.get("event") == Event.AGENT_ENDED), {})
        start = next((e.get("t") for e in events if e.get("event") == Event.AGENT_START), None)
        if command is None and not log.strip():
            return None
        result = {"content": _cut(log, MAX_LOG)}
        extra = {"exit_code": ended.get("exit_code"), "ending": ended.get("ending")}
        step = draft.add(source="agent", message="")
        if command is not None:
            result["source_call_id"] = "call-1"
            step["tool_calls"] = [{"tool_call_id": "call-1", "function_name": "command",
                                   "arguments": {"command": str(command["command"])}}]
        shown = {k: v for k, v in extra.items() if v is not None}
        if shown:
            result["extra"] = shown
        step["observation"] = {"results": [result]}
        if isinstance(start, int | float):
            step["timestamp"] = _iso(start)
        draft.reader = "command" if command is not None else "log"
    if tokens:
        draft.totals = {"total_prompt_tokens": _int(tokens.get("input_tokens")),
                        "total_completion_tokens": _int(tokens.get("output_tokens")),
                        "total_cost_usd": tokens.get("cost_usd")}
    return draft


def _events(record: Path) -> list[dict[str, Any]]:
    try:
        return list(json_lines((record / "events.jsonl").read_text(encoding="utf-8")))
    except OSError:
        return []


def build_trajectory(record: Path, instruction: str | None = None, *, input_tokens: int | None = None,
                     output_tokens: int | None = None, cost_usd: float | None = None) -> Trajectory | None:
    """The trajectory of the trial whose record is `record`, or None when its agent did
    nothing to show (it never ran, or ran without a word or an action). `instruction`
    is the task's (read from the task's folder when not given); the tokens and cost
    are the run's totals where the agent's own output does not say them."""
    manifest = TrialManifest.read(record)
    try:
        log = (record / "agent.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        log = ""
    events = _events(record)
    if not any(e.get("event") == Event.AGENT_START for e in events) and not log:
        return None
    draft = _claude(log) or _codex(log) or _from_events(events, log)
    if draft is None or not any(step["source"] == "agent" for step in draft.steps):
        return None
    if instruction is None and manifest.task_path:
        try:
            instruction = (Path(manifest.task_path) / "instruction.md").read_text(encoding="utf-8")
        except OSError:
            instruction = None
    started = next((e.get("t") for e in events if e.get("event") == Event.AGENT_START), None)
    first: list[dict[str, Any]] = []
    if instruction:
        first = [{"source": "user", "message": instruction}]
        if isinstance(started, int | float):
            first[0]["timestamp"] = _iso(started)
    steps = [Step(step_id=n, **step) for n, step in enumerate(first + draft.steps, 1)]
    totals = {k: v for k, v in draft.totals.items() if v is not None}
    fallback = {"total_prompt_tokens": input_tokens, "total_completion_tokens": output_tokens,
                "total_cost_usd": cost_usd}
    for key, value in fallback.items():
        if key not in totals and value is not None:
            totals[key] = value
    spec = manifest.agent_spec or ""
    model = draft.model or (spec.partition(":")[2] if spec.startswith("tools:") else None) or None
    return Trajectory(
        session_id=draft.session_id or f"{manifest.run_id or record.parent.name}/{record.name}",
        agent=AtifAgent(name=manifest.agent, version=manifest.agent_version or "unknown", model_name=model,
                        extra=draft.agent_extra or None),
        steps=steps,
        final_metrics=FinalMetrics(total_steps=len(steps), **totals),
        extra={"task": manifest.task, "attempt": manifest.attempt, "read_from": draft.reader, **draft.extra},
    )


def write_trajectory(record: Path, instruction: str | None = None, **totals: Any) -> Path | None:
    """`agent/trajectory.json` in the record, when the agent did something to show."""
    trajectory = build_trajectory(record, instruction, **totals)
    if trajectory is None:
        return None
    target = record / TRAJECTORY
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(trajectory.to_json(), encoding="utf-8")
    return target
