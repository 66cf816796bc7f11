"""Reading a coding-agent CLI's own output: the tokens and cost it reports, and whether
its model API refused its credentials (an error of its own class, never a fail).

Each preset names its reader (`output` in presets.toml):

- `claude-stream-json`: Claude Code's `--output-format stream-json` lines; the last
  `{"type": "result"}` carries `usage` and `total_cost_usd`; an `api_retry` event with
  status 401 is a refused key (it goes on retrying it).
- `codex-jsonl`: `codex exec --json` events; each `turn.completed` carries `usage`
  (Codex reports no cost).
- `aider-text`: Aider's `Tokens: 1.2k sent, 45 received. Cost: $0.01 message, $0.02
  session.` lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pytest_reactbench.agents.base import Usage

#: What model APIs and CLIs say when a key is refused.
_AUTH_REFUSED = re.compile(
    r"invalid[ _-]?(?:x-)?api[ _-]?key|authentication_error|AuthenticationError|"
    r"incorrect api key|\b401\b[^\n]{0,40}unauthori[sz]ed|not logged in|please run /login",
    re.I,
)


@dataclass(frozen=True)
class Reading:
    usage: Usage | None = None
    #: The line that says the credentials were refused ("" when they were not).
    auth_failure: str = ""


def _json_lines(text: str) -> Iterator[dict[str, Any]]:
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


def _refused(text: str, pattern: re.Pattern[str] = _AUTH_REFUSED) -> str:
    match = pattern.search(text)
    if match is None:
        return ""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start:end if end >= 0 else None].strip()[:500]


def claude_stream_json(stdout: str, stderr: str) -> Reading:
    result: dict[str, Any] | None = None
    retried = ""
    for event in _json_lines(stdout):
        if event.get("type") == "result":
            result = event
        elif (event.get("subtype") == "api_retry" and not retried
              and (event.get("error_status") == 401 or event.get("error") == "authentication_failed")):
            # Claude Code retries a refused key for minutes; the first refusal says it all.
            retried = ("the model API refused the key "
                       f"(HTTP {event.get('error_status')}: {event.get('error')})")
    if result is None:
        return Reading(None, retried or _refused(stderr))
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    tokens_in = sum(_int(usage.get(k)) for k in
                    ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    cost = result.get("total_cost_usd")
    reading = Usage(tokens_in, _int(usage.get("output_tokens")),
                    float(cost) if isinstance(cost, int | float) else None)
    refused = retried
    if result.get("is_error"):
        refused = refused or _refused(str(result.get("result", "")))
    return Reading(reading, refused)


def codex_jsonl(stdout: str, stderr: str) -> Reading:
    tokens_in = tokens_out = 0
    seen = False
    refused = ""
    for event in _json_lines(stdout):
        kind = event.get("type")
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            seen = True
            tokens_in += _int(event["usage"].get("input_tokens"))
            tokens_out += _int(event["usage"].get("output_tokens"))
        elif kind in ("error", "turn.failed"):
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else event.get("message")
            refused = refused or _refused(str(message or ""))
    return Reading(Usage(tokens_in, tokens_out, None) if seen else None, refused or _refused(stderr))


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
    return Reading(Usage(tokens_in, tokens_out, session_cost) if seen else None,
                   _refused(stdout + "\n" + stderr, _AIDER_REFUSED))


READERS: dict[str, Callable[[str, str], Reading]] = {
    "claude-stream-json": claude_stream_json,
    "codex-jsonl": codex_jsonl,
    "aider-text": aider_text,
}


def read_output(kind: str, stdout: str, stderr: str) -> Reading:
    reader = READERS.get(kind)
    return reader(stdout, stderr) if reader else Reading()
