"""`--reactbench-agent=tools:<provider>/<model>`: a raw model driving the environment's
own tools (bash, view, str_replace, insert, create, submit) through its provider's
official Python SDK, so a model can be evaluated without any coding-agent CLI.

Providers: `anthropic` (the `anthropic` SDK, Messages API; ANTHROPIC_API_KEY, and
ANTHROPIC_BASE_URL if set) and `openai` (the `openai` SDK, Chat Completions;
OPENAI_API_KEY, and OPENAI_BASE_URL if set). The SDKs are the optional extra
`pytest-reactbench[models]`. The model runs in this process; the sandbox stays offline.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from pytest_reactbench.agents.base import AgentConfigError, AgentContext, AgentOutcome, Usage
from pytest_reactbench.agents.tools import TimeUp, ToolAgent, ToolError, Tools

#: The most model turns of one trial (the time limit bounds it too).
MAX_TURNS = 60
MAX_TOKENS = 8192
SYSTEM = ("You are a coding agent working on a React repository at /app. Use the tools to read "
          "and change the code; relative paths are under /app. Call submit when the task is done.")

_STRING = {"type": "string"}
#: The environment's tools, as JSON schemas both providers take.
TOOL_SCHEMAS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "bash": ("Run a shell command in /app.", {"command": _STRING}, ["command"]),
    "view": ("Show a file with numbered lines (or lines view_range [start, end], end -1 for the "
             "end), or list a directory.",
             {"path": _STRING, "view_range": {"type": "array", "items": {"type": "integer"}}}, ["path"]),
    "str_replace": ("Replace the one occurrence of old_str in a file with new_str.",
                    {"path": _STRING, "old_str": _STRING, "new_str": _STRING},
                    ["path", "old_str", "new_str"]),
    "insert": ("Insert text after line insert_line (0: at the top) of a file.",
               {"path": _STRING, "insert_line": {"type": "integer"}, "text": _STRING},
               ["path", "insert_line", "text"]),
    "create": ("Create a new file with file_text.", {"path": _STRING, "file_text": _STRING},
               ["path", "file_text"]),
    "submit": ("End the task: the current tree is graded.", {}, []),
}

PROVIDERS = {"anthropic": ("anthropic", ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")),
             "openai": ("openai", ("OPENAI_API_KEY",))}


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def call_tool(tools: Tools, name: str, args: Mapping[str, Any]) -> str:
    """One tool call of the model: its result, or the environment's refusal, as text."""
    try:
        if name == "bash":
            result = tools.bash(str(args["command"]))
            return f"exit code {result.exit_code}\n{result}"
        if name == "view":
            given = args.get("view_range")
            span = (int(given[0]), int(given[1])) if isinstance(given, list) and len(given) == 2 else None
            return tools.view(str(args["path"]), span)
        if name == "str_replace":
            return tools.str_replace(str(args["path"]), str(args["old_str"]), str(args["new_str"]))
        if name == "insert":
            return tools.insert(str(args["path"]), int(args["insert_line"]), str(args["text"]))
        if name == "create":
            return tools.create(str(args["path"]), str(args["file_text"]))
        if name == "submit":
            return tools.submit()
    except ToolError as exc:
        return f"error: {exc}"
    except (KeyError, ValueError, TypeError) as exc:
        return f"error: bad arguments for {name}: {exc}"
    return f"error: no tool named {name!r}"


class ModelToolAgent(ToolAgent):
    """A model of `provider` working through the environment's tools."""

    def __init__(self, provider: str, model: str) -> None:
        if provider not in PROVIDERS or not model:
            raise AgentConfigError(
                f"tools:{provider}/{model}: expected tools:<provider>/<model> with provider "
                f"{' or '.join(PROVIDERS)}, e.g. tools:anthropic/claude-sonnet-4-5")
        self.provider = provider
        self.model = model
        # Item ids and record folders take the name: no slashes or colons in it.
        self.name = "tools-" + re.sub(r"[^A-Za-z0-9._-]+", "-", f"{provider}-{model}")
        self.usage = Usage()
        self.auth_failure = self.api_failure = ""

    @property
    def version(self) -> str:
        try:
            module = importlib.import_module(PROVIDERS[self.provider][0])
        except ImportError:
            return ""
        return f"{self.provider} {getattr(module, '__version__', '?')}"

    def preflight(self, environ: Mapping[str, str]) -> None:
        package, keys = PROVIDERS[self.provider]
        try:
            importlib.import_module(package)
        except ImportError:
            raise AgentConfigError(
                f"agent {self.name!r}: the {package!r} Python package is not installed "
                "(pip install 'pytest-reactbench[models]')") from None
        if not any(environ.get(key) for key in keys):
            raise AgentConfigError(f"agent {self.name!r}: {' or '.join(keys)} is not set in the environment")

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.usage, self.auth_failure, self.api_failure = Usage(), "", ""
        outcome = super().run(ctx)
        outcome.usage = self.usage
        outcome.auth_failure = self.auth_failure
        outcome.api_failure = self.api_failure
        return outcome

    def _add(self, tokens_in: int, tokens_out: int) -> None:
        self.usage = Usage(self.usage.input_tokens + tokens_in, self.usage.output_tokens + tokens_out)

    def solve(self, instruction: str, tools: Tools) -> None:
        turn = self._anthropic if self.provider == "anthropic" else self._openai
        module = importlib.import_module(PROVIDERS[self.provider][0])
        try:
            turn(module, instruction, tools)
        except module.AuthenticationError as exc:
            self.auth_failure = f"{self.provider}: {exc}"
        except (module.APIConnectionError, module.InternalServerError, module.RateLimitError,
                module.APIResponseValidationError, MalformedReply) as exc:
            # The SDK has retried (max_retries) by then; a timeout is a connection error.
            self.api_failure = f"the model API failed: {self.provider}: {type(exc).__name__}: {exc}"

    def _deadline_left(self, tools: Tools) -> float:
        left = tools.deadline - time.monotonic()
        if left <= 0:
            raise TimeUp("the agent's time limit ran out")
        return left

    def _anthropic(self, sdk: Any, instruction: str, tools: Tools) -> None:
        client = sdk.Anthropic(max_retries=2)
        specs = [{"name": n, "description": d, "input_schema": _schema(p, r)}
                 for n, (d, p, r) in TOOL_SCHEMAS.items()]
        messages: list[dict[str, Any]] = [{"role": "user", "content": instruction}]
        for _ in range(MAX_TURNS):
            started = time.monotonic()
            reply = _checked(client.messages.create(model=self.model, max_tokens=MAX_TOKENS, system=SYSTEM,
                                                    tools=specs, messages=messages,
                                                    timeout=self._deadline_left(tools)), sdk.types.Message)
            self._add(reply.usage.input_tokens, reply.usage.output_tokens)
            tools.model_replied(reply.usage.input_tokens, reply.usage.output_tokens, model=self.model,
                                seconds=time.monotonic() - started)
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                               for b in reply.content]})
            tools.said("\n".join(b.text for b in reply.content if b.type == "text"))
            calls = [b for b in reply.content if b.type == "tool_use"]
            if not calls:
                return
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": call_tool(tools, c.name, c.input)}
                for c in calls]})
            if tools.submitted:
                return

    def _openai(self, sdk: Any, instruction: str, tools: Tools) -> None:
        client = sdk.OpenAI(max_retries=2)
        specs = [{"type": "function", "function": {"name": n, "description": d, "parameters": _schema(p, r)}}
                 for n, (d, p, r) in TOOL_SCHEMAS.items()]
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": instruction}]
        for _ in range(MAX_TURNS):
            started = time.monotonic()
            reply = _checked(client.chat.completions.create(model=self.model, tools=specs, messages=messages,
                                                            timeout=self._deadline_left(tools)),
                             sdk.types.chat.ChatCompletion)
            if not reply.choices:
                raise MalformedReply("the model API's completion has no choices")
            if reply.usage is not None:
                self._add(reply.usage.prompt_tokens, reply.usage.completion_tokens)
            used = reply.usage
            tools.model_replied(used.prompt_tokens if used else None,
                                used.completion_tokens if used else None,
                                model=self.model, seconds=time.monotonic() - started)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            tools.said(message.content or "")
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                try:
                    args = json.loads(call.function.arguments or "{}")
                except json.JSONDecodeError:
                    args = {}
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": call_tool(tools, call.function.name, args)})
            if tools.submitted:
                return


class MalformedReply(Exception):
    """The model API answered with something that is not a model's reply (a gateway's
    HTML page with status 200, say): the API's fault, not the agent's."""


def _checked(reply: object, expected: type) -> Any:
    """`reply` if it is the SDK's `expected` reply type, else MalformedReply (the SDK
    hands back a gateway's non-JSON body as a plain string)."""
    if not isinstance(reply, expected):
        shown = reply if isinstance(reply, str) else type(reply).__name__
        raise MalformedReply(f"the answer is not a {expected.__name__}: {str(shown).strip()[:120]!r}")
    return reply


def tools_agent(arg: str) -> ModelToolAgent:
    """`<provider>/<model>` (the part after `tools:`)."""
    provider, _, model = arg.partition("/")
    return ModelToolAgent(provider.strip(), model.strip())
