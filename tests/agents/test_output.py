"""Reading each CLI's own output for tokens, cost, refused credentials and a model API
that failed (the shapes the pinned CLIs print, as seen against the scripted model
server; faults/ holds what Claude Code 2.1.332 and Codex 0.171.0 printed against a
server that answered 500, 503, 429, an HTML page, a cut stream, or was not there)."""

import json
from pathlib import Path

import pytest

from pytest_reactbench.agents import Usage
from pytest_reactbench.agents.output import Turn, failed_by_egress, read_output, readable_log


def test_claude_code_result_line_gives_tokens_and_cost() -> None:
    lines = [
        json.dumps({"type": "system", "subtype": "init"}),
        json.dumps({"type": "result", "is_error": False, "total_cost_usd": 0.0128, "result": "Done",
                    "usage": {"input_tokens": 2000, "cache_read_input_tokens": 300,
                              "cache_creation_input_tokens": 100, "output_tokens": 160}}),
    ]
    reading = read_output("claude-stream-json", "\n".join(lines), "")
    assert reading.usage == Usage(2400, 160, 0.0128) and reading.auth_failure == ""


def test_claude_code_refused_key() -> None:
    def result(text: str) -> str:
        return json.dumps({"type": "result", "is_error": True, "result": text,
                           "usage": {"input_tokens": 0, "output_tokens": 0}, "total_cost_usd": 0})

    reading = read_output("claude-stream-json", result("Invalid API key · Please run /login"), "")
    assert reading.auth_failure == "Invalid API key · Please run /login"
    # An error that is not about the key is the agent's own ending, graded as usual.
    assert read_output("claude-stream-json", result("Reached max turns"), "").auth_failure == ""


def test_claude_code_retrying_a_refused_key_is_an_auth_failure() -> None:
    # What 2.1.332 prints against a server that answers 401 (it retries, then times out).
    retry = json.dumps({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
                        "error_status": 401, "error": "authentication_failed"})
    reading = read_output("claude-stream-json", "\n".join([retry] * 3), "")
    assert reading.auth_failure == "the model API refused the key (HTTP 401: authentication_failed)"
    overloaded = retry.replace("401", "529").replace("authentication_failed", "overloaded")
    assert read_output("claude-stream-json", overloaded, "").auth_failure == ""


def test_codex_turns_add_up_and_a_401_is_an_auth_failure() -> None:
    turn = {"type": "turn.completed", "usage": {"input_tokens": 1200, "cached_input_tokens": 0,
                                                "output_tokens": 80}}
    reading = read_output("codex-jsonl", "\n".join([json.dumps(turn)] * 2), "")
    assert reading.usage == Usage(2400, 160, None) and not reading.auth_failure
    failed = json.dumps({"type": "turn.failed", "error": {
        "message": "unexpected status 401 Unauthorized: Incorrect API key provided, url: http://h/v1/responses"}})
    assert "401 Unauthorized" in read_output("codex-jsonl", failed, "").auth_failure


def test_aider_token_lines() -> None:
    out = ("Tokens: 769 sent, 21 received.\n"
           "Applied edit to src/Hello.txt\n"
           "Tokens: 1.2k sent, 45 received. Cost: $0.01 message, $0.02 session.\n")
    assert read_output("aider-text", out, "").usage == Usage(1969, 66, 0.02)
    # The model's own words never count as a refused key; LiteLLM's error line does.
    words = "the API returns 401 Unauthorized when the key is invalid"
    assert read_output("aider-text", words, "").auth_failure == ""
    refused = "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided"
    assert read_output("aider-text", refused, "").auth_failure == refused


def test_unknown_reader_reads_nothing() -> None:
    assert read_output("", "Tokens: 1 sent, 1 received.", "").usage is None


FAULTS = Path(__file__).with_name("faults")
#: What each fault's sample (the pinned CLI's own output against a server that
#: failed that way) must be read as: the start of the failure the trial reports.
FAULT_READINGS = {
    ("claude", "500"): "the model API failed: API Error: 500",
    ("claude", "503"): "the model API failed: API Error: 503 Overloaded",
    ("claude", "429"): "the model API failed: API Error: Request rejected (429)",
    ("claude", "html"): "the model API failed: API Error: API returned an empty or malformed response",
    ("claude", "cut"): "the model API failed: API Error: API returned an empty or malformed response",
    ("claude", "refused"): "the model API failed: API Error: Connection refused",
    ("codex", "500"): "the model API failed: ",
    ("codex", "503"): "the model API failed: unexpected status 503",
    ("codex", "429"): "the model API failed: exceeded retry limit, last status: 429",
    ("codex", "html"): "the model API failed: stream disconnected before completion",
    ("codex", "cut"): "the model API failed: stream disconnected before completion",
    ("codex", "refused"): "the model API was still failing when the CLI ended: Reconnecting",
}
READERS = {"claude": "claude-stream-json", "codex": "codex-jsonl"}


@pytest.mark.parametrize(("cli", "fault"), sorted(FAULT_READINGS),
                         ids=[f"{c}-{f}" for c, f in sorted(FAULT_READINGS)])
def test_a_model_api_that_failed_is_read_from_the_cli_as_an_api_failure(cli: str, fault: str) -> None:
    reading = read_output(READERS[cli], (FAULTS / f"{cli}-{fault}.jsonl").read_text(), "")
    assert reading.api_failure.startswith(FAULT_READINGS[(cli, fault)]), reading.api_failure
    assert len(reading.api_failure) > len(FAULT_READINGS[(cli, fault)])
    assert reading.auth_failure == ""


def test_claude_code_ended_while_retrying_the_api_is_an_api_failure() -> None:
    # Killed at its time limit in the middle of its retries: no result line.
    retry = json.dumps({"type": "system", "subtype": "api_retry", "attempt": 4, "max_retries": 10,
                        "error_status": 503, "error": "server_error"})
    reading = read_output("claude-stream-json", "\n".join([retry] * 4), "")
    assert reading.api_failure == ("the model API was still failing when the CLI ended "
                                   "(HTTP 503: server_error, retry 4 of 10)")
    # A run that recovered from a retry and ended well has no failure.
    done = json.dumps({"type": "result", "is_error": False, "result": "Done",
                       "usage": {"input_tokens": 10, "output_tokens": 5}})
    assert read_output("claude-stream-json", f"{retry}\n{done}", "").api_failure == ""
    # Nor does an agent that ended with an error of its own (its turns ran out).
    own = done.replace('"is_error": false', '"is_error": true').replace("Done", "Reached max turns")
    assert read_output("claude-stream-json", own, "").api_failure == ""


def test_aider_and_litellm_errors() -> None:
    out = "Tokens: 1k sent, 10 received.\nlitellm.InternalServerError: OpenAIException - 500 boom\n"
    assert read_output("aider-text", out, "").api_failure == (
        "the model API failed: litellm.InternalServerError: OpenAIException - 500 boom")
    # The model's own text mentioning an error is not LiteLLM's.
    assert read_output("aider-text", "I fixed the InternalServerError handling\n", "").api_failure == ""


TRANSCRIPTS = Path(__file__).with_name("transcripts")


def test_claude_code_stream_becomes_its_transcript() -> None:
    # What 2.1.332 streamed solving counter-reset against the scripted server.
    reading = read_output("claude-stream-json", (TRANSCRIPTS / "claude-code.jsonl").read_text(), "")
    bash, done = reading.turns
    assert bash.tool == "Bash"
    assert bash.args["command"].startswith("mkdir -p /app/src && cat > /app/src/Counter.tsx")
    assert bash.output == "(Bash completed with no output)" and bash.error is None
    assert done == Turn(text="Done: the change is made.")
    assert reading.said == "Done: the change is made."
    assert reading.usage is not None and reading.usage.input_tokens == 2400


def test_a_failed_tool_call_keeps_its_error() -> None:
    lines = [
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/app/x.ts"}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
             "content": [{"type": "text", "text": "File does not exist."}]}]}},
        {"type": "result", "is_error": True, "result": "I could not find x.ts", "usage": {}},
    ]
    reading = read_output("claude-stream-json", "\n".join(json.dumps(x) for x in lines), "")
    assert reading.turns == (Turn(text="Let me look."),
                             Turn(tool="Read", args={"file_path": "/app/x.ts"}, output="File does not exist.",
                                  error="File does not exist."))
    assert reading.said == "I could not find x.ts"


def test_codex_events_become_its_transcript() -> None:
    # What 0.171.0 printed solving counter-reset against the scripted server.
    reading = read_output("codex-jsonl", (TRANSCRIPTS / "codex.jsonl").read_text(), "")
    command, done = reading.turns
    assert command.tool == "command" and "cat > /app/src/Counter.tsx" in command.args["command"]
    assert command.error is None
    assert done == Turn(text="Done: the change is made.") and reading.said == done.text
    failed = json.dumps({"type": "item.completed", "item": {
        "type": "command_execution", "command": "pnpm test", "aggregated_output": "1 failed",
        "exit_code": 1}})
    (turn,) = read_output("codex-jsonl", failed, "").turns
    assert turn.error == "exit code 1" and turn.output == "1 failed"


def test_aider_chat_history_becomes_its_transcript() -> None:
    # The chat history 0.86.2 wrote solving a task against the scripted server, and one
    # against a server that answered 500 to every request.
    history = (TRANSCRIPTS / "aider.chat.md").read_text()
    reading = read_output("aider-text", "Tokens: 780 sent, 23 received.\n", "", history)
    answer, edit = reading.turns
    assert answer.text.startswith("src/greeting.ts\n```\nexport const greeting")
    assert answer.text.endswith("Done: the change is made.") and reading.said == answer.text
    assert edit == Turn(tool="edit", args={"path": "src/greeting.ts"},
                        output="Applied edit to src/greeting.ts")
    # Aider's own lines (its banner, its questions) and the user's message are not the model's.
    assert not any("Aider v0.86.2" in t.text or "greeting module" in t.text for t in reading.turns)
    failed = read_output("aider-text", "", "", (TRANSCRIPTS / "aider-500.chat.md").read_text())
    assert failed.turns == ()
    assert failed.said == "litellm.InternalServerError: InternalServerError: OpenAIException - api_error"
    # A CLI that wrote no transcript has none (its stdout is not read as one).
    assert read_output("aider-text", "src/x.ts\nsome text\n", "", "").turns == ()


def test_what_the_egress_proxy_saw_says_whether_the_model_api_failed() -> None:
    def seen(**fields: object) -> dict[str, object]:
        return {"t": 1, "method": "POST", "host": "gw", "port": 8080, **fields}

    assert failed_by_egress([seen(status=500), seen(status=503), seen(error="ECONNREFUSED")]) == (
        "the model API failed: the egress proxy saw 3 request(s) to gw:8080 fail "
        "(HTTP 500 x1, HTTP 503 x1, ECONNREFUSED x1) and none succeed")
    assert failed_by_egress([seen(status=429)]).startswith("the model API failed:")
    # One that got through: the API worked, whatever else failed.
    assert failed_by_egress([seen(status=500), seen(status=200)]) == ""
    # A refused host is the allowlist's doing, a 404 the client's: no API failure.
    assert failed_by_egress([seen(refused=True), seen(status=404)]) == ""
    assert failed_by_egress([]) == ""


def test_a_cli_that_ended_without_a_word_shows_its_stream_as_lines_not_json() -> None:
    stream = "\n".join([
        json.dumps({"type": "system", "subtype": "init", "model": "claude-x", "tools": ["Bash"] * 200,
                    "mcp_servers": [], "cwd": "/app"}),
        json.dumps({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "I will look first."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls src"}}]}}),
        json.dumps({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Counter.tsx\nmain.tsx"}]}}),
        *(json.dumps({"type": "system", "subtype": "api_retry", "attempt": n, "max_retries": 10,
                      "error_status": 500, "error": "server_error"}) for n in (1, 2)),
        "a plain line the CLI printed",
    ])
    shown = readable_log(stream).splitlines()
    assert shown == [
        "[init] model claude-x",
        "assistant: I will look first.",
        'tool Bash: {"command": "ls src"}',
        "tool result: Counter.tsx",
        "model API retry 1 of 10: HTTP 500: server_error",
        "model API retry 2 of 10: HTTP 500: server_error",
        "a plain line the CLI printed",
    ]
    # Codex's events, from a server that failed it.
    codex = readable_log((FAULTS / "codex-500.jsonl").read_text())
    assert not any(line.startswith("{") for line in codex.splitlines())
    assert "[turn.failed] " in codex
