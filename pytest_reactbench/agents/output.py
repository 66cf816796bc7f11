"""Reading a coding-agent CLI's own output: the tokens and cost it reports, whether its
model API refused its credentials, and whether the model API failed it (refused the
connection, answered 5xx or 429 past the CLI's own retries, sent a stream it could not
read). Both are errors of their own class, never the agent's fail, and both are read
from what the CLI itself reports, never guessed from the model's text.

Each preset names its reader (`output` in presets.toml):

- `claude-stream-json`: Claude Code's `--output-format stream-json` lines; the last
  `{"type": "result"}` carries `usage` and `total_cost_usd`; an `api_retry` event with
  status 401 is a refused key (it goes on retrying it); a result with `is_error` and
  `terminal_reason: "api_error"` (or an `api_error_status`) is a failed model API, and
  so is a run that ended (killed at its time limit) while it was still retrying one.
- `codex-jsonl`: `codex exec --json` events; each `turn.completed` carries `usage`
  (Codex reports no cost); a `turn.failed` is a failed model API (Codex has retried
  the request and the stream by then), and so is a run that ended while it was
  still "Reconnecting..." (against a server that refuses connections it waits for
  one until its time limit).
- `aider-text`: Aider's `Tokens: 1.2k sent, 45 received. Cost: $0.01 message, $0.02
  session.` lines; LiteLLM's own error lines (`litellm.InternalServerError: ...`).

The conversation comes from the same stream for Claude Code and Codex, and for Aider
from its chat history file (the preset's `transcript`), whose markdown tells the
user's messages (`#### `), Aider's own lines (`> `) and the model's text apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_reactbench.agents.base import Usage

#: What model APIs and CLIs say when a key is refused.
_AUTH_REFUSED = re.compile(
    r"invalid[ _-]?(?:x-)?api[ _-]?key|authentication_error|AuthenticationError|"
    r"incorrect api key|\b401\b[^\n]{0,40}unauthori[sz]ed|not logged in|please run /login",
    re.I,
)


@dataclass(frozen=True)
class Turn:
    """One step of the agent's conversation as its CLI streamed it: an assistant
    message (`tool` empty), or a tool call with its input, output and error."""

    text: str = ""
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Reading:
    usage: Usage | None = None
    #: The line that says the credentials were refused ("" when they were not).
    auth_failure: str = ""
    #: What the CLI said of a model API that failed it ("" when none did).
    api_failure: str = ""
    #: The conversation, in order (CLIs whose stream carries it).
    turns: tuple[Turn, ...] = ()
    #: The CLI's last word: its result text, or the agent's last message.
    said: str = ""


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a stream printed one per line (other lines skipped)."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                yield value


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


#: Aider echoes the model's text: only LiteLLM's own error line counts there.
_AIDER_REFUSED = re.compile(r"^litellm\.AuthenticationError\b", re.M)
_AIDER_API_FAILED = re.compile(
    r"^litellm\.(?:InternalServerError|ServiceUnavailableError|APIConnectionError|RateLimitError|"
    r"APIError|Timeout|BadGatewayError)\b", re.M)


def _refused(text: str, pattern: re.Pattern[str] = _AUTH_REFUSED) -> str:
    match = pattern.search(text)
    if match is None:
        return ""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:end if end >= 0 else None].strip()[:500]


def _first_line(text: object, limit: int = 300) -> str:
    return str(text or "").strip().split("\n", 1)[0][:limit]


def claude_stream_json(stdout: str, stderr: str) -> Reading:
    result: dict[str, Any] | None = None
    retried = ""
    last_retry: dict[str, Any] | None = None
    for event in json_lines(stdout):
        if event.get("type") == "result":
            result = event
        elif event.get("subtype") == "api_retry":
            last_retry = event
            if not retried and (event.get("error_status") == 401
                                or event.get("error") == "authentication_failed"):
                # Claude Code retries a refused key for minutes; the first refusal says it all.
                retried = ("the model API refused the key "
                           f"(HTTP {event.get('error_status')}: {event.get('error')})")
    if result is None:
        # Ended (its time limit, say) while it was still retrying the model API.
        failed = "" if retried or last_retry is None else (
            f"the model API was still failing when the CLI ended (HTTP "
            f"{last_retry.get('error_status') or 'none'}: {last_retry.get('error')}, "
            f"retry {last_retry.get('attempt')} of {last_retry.get('max_retries')})")
        return Reading(None, retried or _refused(stderr), failed)
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    tokens_in = sum(_int(usage.get(k)) for k in
                    ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    cost = result.get("total_cost_usd")
    reading = Usage(tokens_in, _int(usage.get("output_tokens")),
                    float(cost) if isinstance(cost, int | float) else None)
    refused = retried
    failed = ""
    if result.get("is_error"):
        refused = refused or _refused(str(result.get("result", "")))
        status = result.get("api_error_status")
        if not refused and (result.get("terminal_reason") == "api_error" or isinstance(status, int)):
            failed = f"the model API failed: {_first_line(result.get('result')) or f'HTTP {status}'}"
    return Reading(reading, refused, failed)


def codex_jsonl(stdout: str, stderr: str) -> Reading:
    tokens_in = tokens_out = 0
    seen = False
    refused = failed = reconnecting = ""
    for event in json_lines(stdout):
        kind = event.get("type")
        # Still reconnecting when it ended: a server that refuses connections makes
        # Codex wait "for network" until its time limit.
        message_of = str(event.get("message") or "")
        reconnecting = message_of if kind == "error" and message_of.startswith("Reconnecting") else ""
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            seen = True
            tokens_in += _int(event["usage"].get("input_tokens"))
            tokens_out += _int(event["usage"].get("output_tokens"))
        elif kind in ("error", "turn.failed"):
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else event.get("message")
            refused = refused or _refused(str(message or ""))
            if kind == "turn.failed":
                # Codex has retried the request and the stream before it gives up a turn.
                failed = f"the model API failed: {_first_line(message) or 'the turn failed'}"
    refused = refused or _refused(stderr)
    if reconnecting and not failed:
        failed = f"the model API was still failing when the CLI ended: {_first_line(reconnecting)}"
    return Reading(Usage(tokens_in, tokens_out, None) if seen else None, refused,
                   "" if refused else failed)


_AIDER_TOKENS = re.compile(r"Tokens: ([\d.]+)(k?) sent(?:, [\d.]+k? cache \w+)*, ([\d.]+)(k?) received\."
                           r"(?: Cost: \$([\d.]+) message, \$([\d.]+) session\.)?")


def _count(number: str, k: str) -> int:
    return round(float(number) * (1000 if k else 1))


def aider_text(stdout: str, stderr: str) -> Reading:
    tokens_in = tokens_out = 0
    session_cost: float | None = None
    seen = False
    for match in _AIDER_TOKENS.finditer(stdout):
        seen = True
        tokens_in += _count(match.group(1), match.group(2))
        tokens_out += _count(match.group(3), match.group(4))
        if match.group(6):
            session_cost = float(match.group(6))
    refused = _refused(stdout + "\n" + stderr, _AIDER_REFUSED)
    failed = "" if refused else _refused(stdout + "\n" + stderr, _AIDER_API_FAILED)
    return Reading(Usage(tokens_in, tokens_out, session_cost) if seen else None, refused,
                   f"the model API failed: {failed}" if failed else "")


#: The most of a tool's output a transcript keeps.
MAX_TOOL_OUTPUT = 4000


def _text_of(content: object) -> str:
    """A tool result's or message's text (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def claude_turns(stdout: str) -> tuple[tuple[Turn, ...], str]:
    """Claude Code's stream: assistant text and tool_use blocks, each tool_use paired
    with the tool_result the next user message carries; the result line's text."""
    turns: list[Turn] = []
    pending: dict[str, int] = {}
    said = ""
    for event in json_lines(stdout):
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks: list[Any] = content if isinstance(content, list) else []
        if event.get("type") == "assistant":
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    turns.append(Turn(text=str(block["text"])))
                elif block.get("type") == "tool_use":
                    given = block.get("input")
                    args: dict[str, Any] = given if isinstance(given, dict) else {}
                    pending[str(block.get("id"))] = len(turns)
                    turns.append(Turn(tool=str(block.get("name", "?")), args=args))
        elif event.get("type") == "user":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    at = pending.pop(str(block.get("tool_use_id")), None)
                    if at is not None:
                        output = _text_of(block.get("content"))[:MAX_TOOL_OUTPUT]
                        turns[at] = replace(turns[at], output=output,
                                            error=output[:300] if block.get("is_error") else None)
        elif event.get("type") == "result":
            said = str(event.get("result") or "")
    return tuple(turns), said


def codex_turns(stdout: str) -> tuple[tuple[Turn, ...], str]:
    """Codex's events: each completed command (its output and exit code), file change
    and agent message, in order."""
    turns: list[Turn] = []
    said = ""
    for event in json_lines(stdout):
        item = event.get("item") if isinstance(event.get("item"), dict) else None
        if event.get("type") != "item.completed" or item is None:
            if event.get("type") == "turn.failed" and isinstance(event.get("error"), dict):
                said = str(event["error"].get("message") or said)
            continue
        kind = item.get("type")
        if kind == "agent_message":
            said = str(item.get("text") or "")
            turns.append(Turn(text=said))
        elif kind == "command_execution":
            code = item.get("exit_code")
            turns.append(Turn(tool="command", args={"command": str(item.get("command", ""))},
                              output=str(item.get("aggregated_output") or "")[:MAX_TOOL_OUTPUT],
                              error=None if code in (0, None) else f"exit code {code}"))
        elif kind == "file_change":
            changes = item.get("changes") if isinstance(item.get("changes"), list) else []
            turns.append(Turn(tool="file_change", args={"changes": changes}))
    return tuple(turns), said


_AIDER_EDIT = re.compile(r"^Applied edit to (.+)$")
_AIDER_RUN = re.compile(r"^Running (.+)$")


def aider_turns(history: str) -> tuple[tuple[Turn, ...], str]:
    """Aider's chat history: the model's text between the user's messages and Aider's
    own lines, each applied edit (a file) and each shell command Aider ran; the last
    model text, or LiteLLM's last error line when the model never answered."""
    turns: list[Turn] = []
    said = error = ""
    text: list[str] = []

    def flush() -> None:
        nonlocal said
        message = "\n".join(text).strip()
        text.clear()
        if message:
            said = message
            turns.append(Turn(text=message))

    for line in history.splitlines():
        if line.startswith("#### ") or line.startswith("# aider chat started"):
            flush()
        elif line.startswith(">"):
            flush()
            own = line[1:].strip()
            if edit := _AIDER_EDIT.match(own):
                turns.append(Turn(tool="edit", args={"path": edit.group(1)}, output=own))
            elif run := _AIDER_RUN.match(own):
                turns.append(Turn(tool="command", args={"command": run.group(1)}))
            elif _AIDER_API_FAILED.match(own) or _AIDER_REFUSED.match(own):
                error = own
        else:
            text.append(line)
    flush()
    return tuple(turns), said or error


def _event_line(event: Mapping[str, Any]) -> str:
    """One line saying what a CLI's stream event (Claude Code's or Codex's) holds."""
    kind, sub = str(event.get("type") or "?"), event.get("subtype")
    message = event.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    given = event.get("item")
    item: Mapping[str, Any] = given if isinstance(given, dict) else {}
    if sub == "api_retry":
        return (f"model API retry {event.get('attempt')} of {event.get('max_retries')}: "
                f"HTTP {event.get('error_status') or 'none'}: {event.get('error')}")
    if kind == "system":
        return f"[{sub or kind}]" + (f" model {event['model']}" if event.get("model") else "")
    if kind in ("assistant", "user") and isinstance(blocks, list):
        parts = []
        for block in (b for b in blocks if isinstance(b, dict)):
            if block.get("type") == "text":
                parts.append(f"{kind}: {_first_line(block.get('text'), 200)}")
            elif block.get("type") == "tool_use":
                parts.append(f"tool {block.get('name')}: {_first_line(json.dumps(block.get('input')), 200)}")
            elif block.get("type") == "tool_result":
                failed = " (error)" if block.get("is_error") else ""
                parts.append(f"tool result{failed}: {_first_line(_text_of(block.get('content')), 200)}")
        return "\n".join(parts) or f"[{kind}]"
    if kind == "result":
        return f"result ({sub or 'done'}): {_first_line(event.get('result'), 300)}"
    if item.get("type") == "agent_message":
        return f"assistant: {_first_line(item.get('text'), 200)}"
    if item.get("type") == "command_execution":
        return f"command: {_first_line(item.get('command'), 200)} (exit {item.get('exit_code')})"
    error = event.get("error")
    text = error.get("message") if isinstance(error, dict) else event.get("message")
    return f"[{kind}]" + (f" {_first_line(text, 300)}" if isinstance(text, str) and text else "")


def readable_log(text: str) -> str:
    """A CLI's log with each JSON event line as one line of what it holds (the other
    lines as they are): what a failure shows of an agent that ended without a word."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        event = None
        if stripped.startswith("{"):
            try:
                event = json.loads(stripped)
            except json.JSONDecodeError:
                event = None
        lines.append(_event_line(event) if isinstance(event, dict) else line)
    return "\n".join(lines)


READERS: dict[str, Callable[[str, str], Reading]] = {
    "claude-stream-json": claude_stream_json,
    "codex-jsonl": codex_jsonl,
    "aider-text": aider_text,
}


def failed_by_egress(requests: Sequence[Mapping[str, Any]]) -> str:
    """What the agent's egress proxy saw, when it says the model API failed the agent:
    requests it let through, at least one of which failed (a 5xx, a 429, a connection
    that could not be made) and none of which succeeded. For any CLI, a reader of its
    own or not; over HTTPS the proxy sees the connections only, not the statuses."""
    through = [r for r in requests if not r.get("refused")]
    failed = [r for r in through if r.get("error") or r.get("status") == 429
              or (isinstance(r.get("status"), int) and r["status"] >= 500)]
    if not failed or any(isinstance(r.get("status"), int) and r["status"] < 400 for r in through):
        return ""
    counts: dict[str, int] = {}
    for r in failed:
        what = f"HTTP {r['status']}" if r.get("status") else str(r.get("error"))
        counts[what] = counts.get(what, 0) + 1
    hosts = sorted({f"{r.get('host')}:{r.get('port')}" for r in failed})
    return (f"the model API failed: the egress proxy saw {len(failed)} request(s) to {', '.join(hosts)} "
            f"fail ({', '.join(f'{k} x{n}' for k, n in counts.items())}) and none succeed")


#: Each reader's conversation, from its stream (or, for a CLI that writes it to a file
#: of its own, from that file: `read_output`'s `transcript`).
TRANSCRIPTS: dict[str, Callable[[str], tuple[tuple[Turn, ...], str]]] = {
    "claude-stream-json": claude_turns,
    "codex-jsonl": codex_turns,
    "aider-text": aider_turns,
}


def read_output(kind: str, stdout: str, stderr: str, transcript: str | None = None) -> Reading:
    """What the CLI's output says; `transcript` is the text of the CLI's own transcript
    file where it writes one (else its stdout is read for the conversation)."""
    reader = READERS.get(kind)
    reading = reader(stdout, stderr) if reader else Reading()
    conversation = TRANSCRIPTS.get(kind)
    if conversation is None:
        return reading
    turns, said = conversation(stdout if transcript is None else transcript)
    return replace(reading, turns=turns, said=said)
