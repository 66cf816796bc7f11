"""A scripted model server for the agent tests: the Anthropic Messages API (streaming
SSE and plain JSON) and the OpenAI Responses and Chat Completions APIs (both, streaming
or not), answering every CLI with the same scripted change.

The "model" knows one change (files to write under /app). Asked with tools, it calls
the shell tool the request offers to write them, then (once a tool result is in the
conversation) ends with text, or with `submit` where that tool is offered. Asked
without tools (Aider, and a CLI's side questions), it answers with the files in
Aider's whole-file format. Every request is kept, for the tests to read.

A script may make the server fail as real gateways do (`Script.fault`): answer 500,
503 or 429 (with Retry-After), a 200 with an HTML page, a stream cut after its first
event, or refuse the key (401); or answer right, slowly ("slow": each response waits
before its headers and between its stream's events, as a loaded gateway does). A fault
may also be the script's for the requests that carry a marker only (`Script.faults`),
so that one server plays a different gateway to each task of a session. A server that
is not there at all is a port where nothing listens (`free_port`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INPUT_TOKENS = 1200
OUTPUT_TOKENS = 80
#: A slow gateway's pause before a response and between its stream's events.
SLOW_SECONDS = 1.5


@dataclass
class Script:
    #: A marker of the task (a word of its instruction) -> the files the model writes
    #: there (path under /app -> content). The first marker found in a request wins.
    answers: dict[str, dict[str, str]]
    #: The key the server accepts; any other is refused with 401.
    key: str = "sk-reactbench-test"
    final: str = "Done: the change is made."
    #: How every model request fails ("" for not at all): "500", "503", "429", "html", "cut",
    #: "401" (the key refused); or "slow" (the right answer, `SLOW_SECONDS` late and as
    #: slow between events).
    fault: str = ""
    #: A marker (a word of a task's instruction) -> the fault of the requests that carry
    #: it, in place of `fault`; the first marker found in a request wins.
    faults: dict[str, str] = field(default_factory=dict)

    def files_for(self, request: str) -> dict[str, str]:
        for marker, files in self.answers.items():
            if marker in request:
                return files
        return {}

    def fault_for(self, request: str) -> str:
        return next((fault for marker, fault in self.faults.items() if marker in request), self.fault)

    @staticmethod
    def command(files: dict[str, str]) -> str:
        parts = []
        for path, text in files.items():
            folder = path.rsplit("/", 1)[0] if "/" in path else "."
            parts.append(f"mkdir -p /app/{folder} && cat > /app/{path} <<'REACTBENCH_EOF'\n"
                         f"{text.rstrip()}\nREACTBENCH_EOF")
        return "\n".join(parts) or "true"

    @staticmethod
    def whole_files(files: dict[str, str]) -> str:
        """The change in Aider's whole-file edit format."""
        return "".join(f"{path}\n```\n{text.rstrip()}\n```\n\n" for path, text in files.items())


@dataclass
class Seen:
    api: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    #: The fault the server played on it ("" for none).
    fault: str = ""


def _shell_arguments(tool: Mapping[str, Any], command: str) -> dict[str, Any]:
    """Arguments for a shell tool, by the shape its schema asks for."""
    schema = tool.get("parameters") or tool.get("input_schema") or {}
    props = schema.get("properties") or {}
    if "cmd" in props:
        return {"cmd": command}
    if (props.get("command") or {}).get("type") == "array":
        return {"command": ["bash", "-lc", command]}
    args: dict[str, Any] = {"command": command}
    if "description" in (schema.get("required") or []):
        args["description"] = "Write the change"
    return args


SHELL_TOOLS = ("Bash", "bash", "shell", "shell_command", "exec_command", "container.exec")


def _tool_name(tool: Mapping[str, Any]) -> str:
    if "function" in tool and isinstance(tool["function"], dict):  # chat completions
        return str(tool["function"].get("name", ""))
    return str(tool.get("name", ""))


def _tool_spec(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool["function"] if isinstance(tool.get("function"), dict) else tool


class ModelServer:
    """`with ModelServer(script, host) as server:`; `server.url` is its base URL."""

    def __init__(self, script: Script, host: str = "127.0.0.1") -> None:
        self.script = script
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._count = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            files: dict[str, str]
            fault: str

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                if self.path.split("?", 1)[0].endswith("/responses"):
                    # A WebSocket upgrade (Codex tries one first): refused, so it uses HTTP.
                    self._json(404, {"error": {"message": "no WebSocket transport here"}})
                    return
                # Model lists and health checks some CLIs make first.
                self._json(200, {"object": "list", "data": [], "models": []})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {}
                path = self.path.split("?", 1)[0]
                headers = {k.lower(): v for k, v in self.headers.items()}
                api = ("messages" if path.endswith("/messages") else
                       "count_tokens" if path.endswith("/count_tokens") else
                       "responses" if path.endswith("/responses") else
                       "chat" if path.endswith("/chat/completions") else "other")
                text = raw.decode("utf-8", "replace")
                self.fault = server.script.fault_for(text)
                with server._lock:
                    server.requests.append(Seen(api, path, body, headers, self.fault))
                self.files = server.script.files_for(text)
                key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
                if key != server.script.key or self.fault == "401":
                    self._refuse(api)
                    return
                if self.fault == "slow":
                    time.sleep(SLOW_SECONDS)
                elif self.fault and api in ("messages", "responses", "chat"):
                    self._fail(self.fault)
                    return
                if api == "messages":
                    self._messages(body)
                elif api == "count_tokens":
                    self._json(200, {"input_tokens": INPUT_TOKENS})
                elif api == "responses":
                    self._responses(body)
                elif api == "chat":
                    self._chat(body)
                else:
                    self._json(404, {"error": {"type": "not_found_error", "message": path}})

            # -- plumbing ---------------------------------------------------------------

            def _json(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: Iterator[tuple[str | None, object]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for at, (name, data) in enumerate(events):
                    if at and self.fault == "slow":
                        time.sleep(SLOW_SECONDS / 4)
                    text = data if isinstance(data, str) else json.dumps(data)
                    chunk = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                    self.wfile.write(chunk.encode())
                    self.wfile.flush()
                self.close_connection = True

            def _fail(self, fault: str) -> None:
                if fault in ("500", "503", "429"):
                    kind = {"500": "api_error", "503": "overloaded_error", "429": "rate_limit_error"}[fault]
                    data = json.dumps({"type": "error", "error": {"type": kind, "message": kind}}).encode()
                    self.send_response(int(fault))
                    self.send_header("Content-Type", "application/json")
                    if fault != "500":
                        self.send_header("Retry-After", "1")
                elif fault == "html":
                    data = b"<html><body><h1>Sign in to the gateway</h1></body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                elif fault == "cut":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b'event: message_start\ndata: {"type": "message_start", "message": '
                                     b'{"id": "msg_cut", "type": "message", "role": "assistant", '
                                     b'"content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}}\n\n')
                    self.close_connection = True
                    return
                else:
                    raise ValueError(f"unknown fault {fault!r}")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _refuse(self, api: str) -> None:
                if api in ("messages", "count_tokens"):
                    self._json(401, {"type": "error", "error": {
                        "type": "authentication_error", "message": "invalid x-api-key"}})
                else:
                    self._json(401, {"error": {
                        "message": "Incorrect API key provided", "type": "invalid_request_error",
                        "param": None, "code": "invalid_api_key"}})

            # -- Anthropic Messages -----------------------------------------------------

            def _messages(self, body: dict[str, Any]) -> None:
                tools = {_tool_name(t): t for t in body.get("tools") or []}
                answered = any(
                    isinstance(block, dict) and block.get("type") == "tool_result"
                    for message in body.get("messages") or []
                    for block in (message.get("content") if isinstance(message.get("content"), list) else [])
                )
                content: list[dict[str, Any]]
                shell = next((n for n in SHELL_TOOLS if n in tools), None)
                if shell and not answered:
                    args = _shell_arguments(_tool_spec(tools[shell]), server.script.command(self.files))
                    content = [{"type": "tool_use", "id": server.next_id("toolu"), "name": shell,
                                "input": args}]
                elif answered and "submit" in tools:
                    # As models do: a word on what was done, with the call that ends the work.
                    content = [{"type": "text", "text": server.script.final},
                               {"type": "tool_use", "id": server.next_id("toolu"), "name": "submit",
                                "input": {}}]
                else:
                    content = [{"type": "text", "text": server.script.final if tools else "OK"}]
                stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
                usage = {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                message = {"id": server.next_id("msg"), "type": "message", "role": "assistant",
                           "model": body.get("model", "scripted"), "content": content,
                           "stop_reason": stop, "stop_sequence": None, "usage": usage}
                if not body.get("stream"):
                    self._json(200, message)
                    return

                def events() -> Iterator[tuple[str | None, object]]:
                    start = {**message, "content": [], "stop_reason": None,
                             "usage": {**usage, "output_tokens": 1}}
                    yield "message_start", {"type": "message_start", "message": start}
                    for index, block in enumerate(content):
                        if block["type"] == "text":
                            yield "content_block_start", {"type": "content_block_start", "index": index,
                                                          "content_block": {"type": "text", "text": ""}}
                            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
                        else:
                            yield "content_block_start", {"type": "content_block_start", "index": index,
                                                          "content_block": {**block, "input": {}}}
                            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                                      "delta": delta}
                        yield "content_block_stop", {"type": "content_block_stop", "index": index}
                    yield "message_delta", {"type": "message_delta",
                                            "delta": {"stop_reason": stop, "stop_sequence": None},
                                            "usage": {"output_tokens": OUTPUT_TOKENS}}
                    yield "message_stop", {"type": "message_stop"}

                self._sse(events())

            # -- OpenAI Responses -------------------------------------------------------

            def _responses(self, body: dict[str, Any]) -> None:
                tools = {_tool_name(t): t for t in body.get("tools") or [] if isinstance(t, dict)}
                given = body.get("input")
                items: list[Any] = given if isinstance(given, list) else []
                answered = any(isinstance(i, dict) and str(i.get("type", "")).endswith("_output")
                               for i in items)
                shell = next((n for n in SHELL_TOOLS if n in tools), None)
                output: dict[str, Any]
                if shell and not answered:
                    args = _shell_arguments(tools[shell], server.script.command(self.files))
                    output = {"type": "function_call", "id": server.next_id("fc"),
                              "call_id": server.next_id("call"), "name": shell,
                              "arguments": json.dumps(args), "status": "completed"}
                elif answered and "submit" in tools:
                    output = {"type": "function_call", "id": server.next_id("fc"),
                              "call_id": server.next_id("call"), "name": "submit", "arguments": "{}",
                              "status": "completed"}
                else:
                    output = {"type": "message", "id": server.next_id("msg"), "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": server.script.final,
                                           "annotations": []}]}
                usage = {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}
                response = {"id": server.next_id("resp"), "object": "response",
                            "created_at": int(time.time()), "status": "completed",
                            "model": body.get("model", "scripted"),
                            "output": [output], "usage": usage}
                if not body.get("stream"):
                    self._json(200, response)
                    return

                def events() -> Iterator[tuple[str | None, object]]:
                    sequence = iter(range(1000))
                    pending = {**response, "status": "in_progress", "output": [], "usage": None}
                    yield "response.created", {"type": "response.created", "sequence_number": next(sequence),
                                               "response": pending}
                    yield "response.output_item.added", {"type": "response.output_item.added",
                                                         "sequence_number": next(sequence), "output_index": 0,
                                                         "item": output}
                    if output["type"] == "message":
                        yield "response.output_text.delta", {
                            "type": "response.output_text.delta", "sequence_number": next(sequence),
                            "item_id": output["id"], "output_index": 0, "content_index": 0,
                            "delta": server.script.final}
                    yield "response.output_item.done", {"type": "response.output_item.done",
                                                        "sequence_number": next(sequence), "output_index": 0,
                                                        "item": output}
                    yield "response.completed", {"type": "response.completed",
                                                 "sequence_number": next(sequence), "response": response}

                self._sse(events())

            # -- OpenAI Chat Completions ------------------------------------------------

            def _chat(self, body: dict[str, Any]) -> None:
                tools = {_tool_name(t): t for t in body.get("tools") or [] if isinstance(t, dict)}
                messages = body.get("messages") or []
                answered = any(m.get("role") == "tool" for m in messages if isinstance(m, dict))
                shell = next((n for n in SHELL_TOOLS if n in tools), None)
                message: dict[str, Any] = {"role": "assistant", "content": None}
                if shell and not answered:
                    args = _shell_arguments(_tool_spec(tools[shell]), server.script.command(self.files))
                    message["tool_calls"] = [{"id": server.next_id("call"), "type": "function",
                                              "function": {"name": shell, "arguments": json.dumps(args)}}]
                elif answered and "submit" in tools:
                    message["content"] = server.script.final
                    message["tool_calls"] = [{"id": server.next_id("call"), "type": "function",
                                              "function": {"name": "submit", "arguments": "{}"}}]
                elif tools:
                    message["content"] = server.script.final
                else:
                    # Aider: the change as whole files (it asks again once it has added them to
                    # its chat, and ends when an answer's edits apply).
                    message["content"] = server.script.whole_files(self.files) + server.script.final
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                usage = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                         "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}
                ident, created = server.next_id("chatcmpl"), int(time.time())
                model = body.get("model", "scripted")
                if not body.get("stream"):
                    self._json(200, {"id": ident, "object": "chat.completion", "created": created,
                                     "model": model, "usage": usage,
                                     "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
                    return

                def chunk(delta: dict[str, Any], reason: str | None, **more: Any) -> tuple[None, object]:
                    return None, {"id": ident, "object": "chat.completion.chunk", "created": created,
                                  "model": model, "choices": [{"index": 0, "delta": delta,
                                                               "finish_reason": reason}], **more}

                def events() -> Iterator[tuple[str | None, object]]:
                    yield chunk({"role": "assistant", "content": ""}, None)
                    if message["content"]:
                        yield chunk({"content": message["content"]}, None)
                    if message.get("tool_calls"):
                        calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
                        yield chunk({"tool_calls": calls}, None)
                    yield chunk({}, finish, usage=usage)
                    yield None, "[DONE]"

                self._sse(events())

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def next_id(self, prefix: str) -> str:
        with self._lock:
            self._count += 1
            return f"{prefix}_{self._count:04d}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def apis(self) -> set[str]:
        return {seen.api for seen in self.requests}
