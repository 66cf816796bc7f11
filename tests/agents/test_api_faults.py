"""A model API that fails the agent, as real gateways do, is an error of its own class,
never the agent's fail: the real CLIs (Claude Code, Codex) and the tools agent (the
official SDK) on docker, against the scripted model server made to answer 500, 503 or
429 (with Retry-After), a page of HTML, a stream cut after its first event, to refuse
the key (401), or not to be there at all. A failed API is an AgentAPIError, retried
(`--reactbench-retries`), and `reactbench compare` of a passing baseline against the
run says inconclusive (exit 3), not regression; a refused key is an AgentAuthError
(no retry can mend it). A slow gateway is no fault: the right answer still passes.

One pytest session per fault, the three agents in it (and, for 500, a command agent
with no reader of its own, told by its egress proxy)."""

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

AGENTS = ["claude-code", "codex", "tools:anthropic/scripted"]
CURLER = ("curler=curl -sS -X POST -H 'content-type: application/json' -H \"x-api-key: $ANTHROPIC_API_KEY\" "
          "-d '{}' \"$ANTHROPIC_BASE_URL/v1/messages\"; true")
#: fault -> (the failure class, what the egress proxy saw answer the CLIs' model requests).
FAULTS: dict[str, tuple[str, int | None]] = {
    "500": ("AgentAPIError", 500), "503": ("AgentAPIError", 503), "429": ("AgentAPIError", 429),
    "html": ("AgentAPIError", 200), "cut": ("AgentAPIError", 200), "refused": ("AgentAPIError", None),
    "401": ("AgentAuthError", 401), "slow": ("", 200),
}


def _right_answer() -> dict[str, str]:
    solve = (SHIPPED / "solution" / "solve.sh").read_text()
    return {"src/Counter.tsx": solve.split("<<'TSX'\n", 1)[1].rsplit("TSX\n", 1)[0]}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failing_model_api_is_an_error_retried_and_inconclusive(
        fault: str, suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    failure, status = FAULTS[fault]
    # Claude Code's own retries (ten, over three minutes) are the CLI's business.
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    script = Script(answers={"Add a **Reset** button": _right_answer()},
                    key="sk-another-key" if fault == "401" else KEY,
                    fault="" if fault in ("refused", "401") else fault)
    agents = AGENTS + (["curler"] if fault == "500" else [])
    with ModelServer(script, host=bridge_gateway()) as server:
        # Nothing listens there: the connection is refused.
        url = f"http://{bridge_gateway()}:{free_port()}" if fault == "refused" else server.url
        for cli in AGENTS:
            for name, value in CLI_ENV[cli].items():
                monkeypatch.setenv(name, value.format(url=url))
        result = suite.runpytest_subprocess(
            f"--reactbench-agent={','.join(agents)}", "--reactbench-sandbox=docker", "--reactbench-retries=1",
            "--reactbench-agent-env=CLAUDE_CODE_MAX_RETRIES", f"--reactbench-agent-command={CURLER}",
            "--reactbench-agent-env=ANTHROPIC_BASE_URL", "--reactbench-agent-env=ANTHROPIC_API_KEY",
            "-p", "no:cacheprovider", f"--rootdir={suite.path}",
            f"--reactbench-records={suite.path / 'records'}", "--junitxml=out.xml", str(SHIPPED))
    print(result.stdout.str()[-8000:])
    outcomes = {props["reactbench.agent"]: props for _, props in junit_testcases(suite.path / "out.xml")}
    names = [NAME.get(cli, cli) for cli in agents]
    assert sorted(outcomes) == sorted(names)
    if fault not in ("refused", "slow"):
        assert {seen.api for seen in server.requests} >= {"messages", "responses"}, server.requests
    for cli, name in zip(agents, names, strict=True):
        props = outcomes[name]
        said = f"{name}: {props.get('reactbench.message')}"
        if not failure:
            # Slow is not broken: the right answer passes, first time.
            assert props["reactbench.verdict"] == "passed", said
            assert props.get("reactbench.retries", "0") == "0", said
            continue
        assert props["reactbench.verdict"] == "error", said
        assert props["reactbench.failure"] == failure, said
        if failure == "AgentAuthError":
            assert props.get("reactbench.retries", "0") == "0", said  # no retry can mend a refused key
            continue
        assert props["reactbench.message"].startswith("the model API "), said
        assert props["reactbench.retries"] == "1", said  # an error: tried again
        # The trial and its retry, each recorded, with what the proxy saw of the model API.
        assert len(list((suite.path / "records").glob(f"*/counter-reset__{name}__1*/status.json"))) == 2
        if not cli.startswith("tools:"):  # (a tools agent's model calls are the harness's)
            seen = json.loads(next((suite.path / "records").glob(f"*/counter-reset__{name}__1/egress.json"))
                              .read_text())
            answers = {r.get("status") or r.get("error") for r in seen if not r.get("refused")}
            assert (status in answers) if status else answers and all(
                isinstance(a, str) for a in answers), (name, seen)
    if failure != "AgentAPIError":
        return
    # Against a run where they passed, the gate has no verdict for them: inconclusive.
    base = _junit(suite.path / "base.xml", [TrialResult(task="counter-reset", agent=name, attempt=1,
                                                        verdict=Verdict.PASSED, reward=1.0)
                                            for name in names])
    capsys.readouterr()
    assert main(["compare", str(base), str(suite.path / "out.xml")]) == 3
    said = capsys.readouterr().out
    for name in names:
        assert f"counter-reset [{name}]: no verdict (errors)" in said, said
    assert "inconclusive" in said and "regression(s)" not in said, said
