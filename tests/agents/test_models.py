"""`tools:<provider>/<model>`: a raw model through the environment's tools, with the
provider's official SDK, against the scripted model server on loopback."""

from __future__ import annotations

import json

import pytest

from tests.agents.model_server import INPUT_TOKENS, OUTPUT_TOKENS, ModelServer, Script
from tests.helpers import run_folder, write_task

KEY = "sk-reactbench-test"
PROVIDERS = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "", "messages"),
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1", "chat"),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_model_solves_through_the_tools_and_a_wrong_key_is_an_error(
        provider: str, suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip(provider)
    key_var, url_var, suffix, api = PROVIDERS[provider]
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta").joinpath("instruction.md").write_text(
        "Write hello to /app/out.txt (beta)\n")
    script = Script(answers={"(beta)": {"out.txt": "goodbye"}, "/app/out.txt": {"out.txt": "hello"}},
                    key=KEY)
    agent = f"tools:{provider}/scripted-model"
    with ModelServer(script) as server:
        monkeypatch.setenv(key_var, KEY)
        monkeypatch.setenv(url_var, server.url + suffix)
        result = suite.runpytest(f"--reactbench-agent={agent}")
        assert {seen.api for seen in server.requests} == {api}
        monkeypatch.setenv(key_var, "sk-wrong")
        refused = suite.runpytest(f"--reactbench-agent={agent}", "-k", "alpha")
    result.assert_outcomes(passed=1, failed=1)
    name = f"tools-{provider}-scripted-model"
    first = run_folder(result) / f"alpha__{name}__1"
    status = json.loads((first / "status.json").read_text())
    assert status["verdict"] == "passed"
    # One turn with the write, one with submit.
    run = status["agent_run"]
    assert (run["input_tokens"], run["output_tokens"]) == (2 * INPUT_TOKENS, 2 * OUTPUT_TOKENS)
    assert status["agent_run"]["version"].startswith(provider + " ")
    events = [json.loads(line) for line in (first / "events.jsonl").read_text().splitlines()]
    assert [e["tool"] for e in events if e["event"] == "tool"] == ["bash", "submit"]
    # What the model said is the transcript's message.
    assert [e["text"] for e in events if e["event"] == "message"] == [script.final]
    # A refused key: an error of its own class, no score, never a fail.
    refused.assert_outcomes(errors=1)
    refused.stdout.fnmatch_lines(["*AgentAuthError*"])


@pytest.mark.parametrize("fault", ["html", "cut", "500"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_gateway_that_answers_no_reply_is_the_model_apis_error(
        provider: str, fault: str, suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 whose body is a gateway's HTML page (the SDK hands it back as a string), a
    stream where a reply was asked for, a 500: the model API failed, not the agent."""
    pytest.importorskip(provider)
    key_var, url_var, suffix, _ = PROVIDERS[provider]
    write_task(suite.path / "tasks", "alpha")
    with ModelServer(Script(answers={"/app/out.txt": {"out.txt": "hello"}}, key=KEY, fault=fault)) as server:
        monkeypatch.setenv(key_var, KEY)
        monkeypatch.setenv(url_var, server.url + suffix)
        result = suite.runpytest(f"--reactbench-agent=tools:{provider}/scripted-model")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*ERROR (AgentAPIError): the model API failed: {provider}: *"])


def test_preflight_of_the_tools_agent(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_task(suite.path / "tasks", "alpha")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = suite.runpytest("--reactbench-agent=tools:openai/gpt-x")
    result.stderr.fnmatch_lines(["*agent 'tools-openai-gpt-x': OPENAI_API_KEY is not set in the "
                                 "environment*"])
    result = suite.runpytest("--reactbench-agent=tools:mistral/x")
    result.stderr.fnmatch_lines(["*tools:mistral/x: expected tools:<provider>/<model> with provider "
                                 "anthropic or openai*"])
