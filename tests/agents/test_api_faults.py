"""A model API that fails the agent, as real gateways do, is an error of its own class
(AgentAPIError), never the agent's fail: the real CLIs on docker against the scripted
model server made to answer 500, a page of HTML, 503, or not to be there at all. The
error is retried (`--reactbench-retries`), and `reactbench compare` of a passing
baseline against the run says inconclusive (exit 3), not regression."""

from __future__ import annotations

import json

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results.load import junit_testcases
from pytest_reactbench.results.trial_result import TrialResult, Verdict
from tests.agents.model_server import ModelServer, Script
from tests.agents.test_cli_agents import CLI_ENV, KEY, NAME, SHIPPED, bridge_gateway
from tests.results.test_shards import _junit
from tests.sandbox.helpers import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: One fault each, so that every reader and the SDK agent meet one: (agent, fault).
#: `curler` is a command agent with no reader of its own: its egress proxy tells.
CASES = [("claude-code", "500"), ("claude-code", "html"), ("codex", "503"),
         ("tools:anthropic/scripted", "refused"), ("curler", "500")]
CURLER = ("curler=curl -sS -X POST -H 'content-type: application/json' -H \"x-api-key: $ANTHROPIC_API_KEY\" "
          "-d '{}' \"$ANTHROPIC_BASE_URL/v1/messages\"; true")


@pytest.mark.parametrize(("cli", "fault"), CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_a_failing_model_api_is_an_error_retried_and_inconclusive(
        cli: str, fault: str, suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Claude Code's own retries (ten, over three minutes) are the CLI's business.
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    script = Script(answers={}, key=KEY, fault="" if fault == "refused" else fault)
    with ModelServer(script, host=bridge_gateway()) as server:
        # Nothing listens there: the connection is refused.
        url = f"http://{bridge_gateway()}:{free_port()}" if fault == "refused" else server.url
        for name, value in CLI_ENV.get(cli, CLI_ENV["claude-code"]).items():
            monkeypatch.setenv(name, value.format(url=url))
        result = suite.runpytest_subprocess(
            f"--reactbench-agent={cli}", "--reactbench-sandbox=docker", "--reactbench-retries=1",
            "--reactbench-agent-env=CLAUDE_CODE_MAX_RETRIES", f"--reactbench-agent-command={CURLER}",
            "--reactbench-agent-env=ANTHROPIC_BASE_URL", "--reactbench-agent-env=ANTHROPIC_API_KEY",
            "-p", "no:cacheprovider", f"--rootdir={suite.path}",
            f"--reactbench-records={suite.path / 'records'}", "--junitxml=out.xml", str(SHIPPED))
    out = result.stdout.str()
    print(out[-6000:])
    (props,) = [p for _, p in junit_testcases(suite.path / "out.xml")]
    assert props["reactbench.verdict"] == "error", props.get("reactbench.message")
    assert props["reactbench.failure"] == "AgentAPIError", props.get("reactbench.message")
    assert props["reactbench.message"].startswith("the model API "), props["reactbench.message"]
    assert props["reactbench.retries"] == "1"  # an error: tried again
    if fault != "refused":
        assert any(seen.api != "other" for seen in server.requests)
    name = NAME.get(cli, cli)
    # The trial and its retry, each recorded, with what the proxy saw of the model API.
    assert len(list((suite.path / "records").glob(f"*/counter-reset__{name}__1*/status.json"))) == 2
    if not cli.startswith("tools:"):  # (a tools agent's model calls are the harness's, not the sandbox's)
        seen = json.loads(next((suite.path / "records").glob(f"*/counter-reset__{name}__1/egress.json"))
                          .read_text())
        answers = {r.get("status") or r.get("error") for r in seen if not r.get("refused")}
        assert {"500": 500, "503": 503, "html": 200}[fault] in answers, seen

    # Against a run where it passed, the gate has no verdict for it: inconclusive.
    base = _junit(suite.path / "base.xml", [TrialResult(task="counter-reset", agent=name, attempt=1,
                                                        verdict=Verdict.PASSED, reward=1.0)])
    capsys.readouterr()
    assert main(["compare", str(base), str(suite.path / "out.xml")]) == 3
    said = capsys.readouterr().out
    assert f"counter-reset [{name}]: no verdict (errors)" in said, said
    assert "inconclusive" in said and "regression(s)" not in said, said

