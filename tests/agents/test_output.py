"""Reading each CLI's own output for tokens, cost and refused credentials (the shapes
the pinned CLIs print, as seen against the scripted model server)."""

import json

from pytest_reactbench.agents import Usage
from pytest_reactbench.agents.output import read_output


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
