"""A model API that fails the agent, as real gateways do, is an error of its own class,
never the agent's fail: the real CLIs (Claude Code, Codex) and the tools agent (the
official SDK) on docker, against the scripted model server made to answer 500, 503 or
429 (with Retry-After), a page of HTML, a stream cut after its first event, to refuse
the key (401), or not to be there at all. A failed API is an AgentAPIError, retried
(`--reactbench-retries`), and `reactbench compare` of a passing baseline against the
run says inconclusive (exit 3), not regression; a refused key is an AgentAuthError
(no retry can mend it). A slow gateway is no fault: the right answer still passes.

The faults the server plays are independent of each other, so one pytest session
holds all of them: one copy of the shipped task per fault, told apart by a marker in
its instruction that the server reads from each request (`Script.faults`), the three
agents on each (and, for 500, a command agent with no reader of its own, told by its
egress proxy). The trials mostly wait on the CLIs' own retries, so the session runs
them on four workers. A server that is not there is a session of its own: its URL is
the session's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
# It posts the instruction, so that the server knows which gateway to play.
CURLER = ("curler=curl -sS -X POST -H 'content-type: application/json' -H \"x-api-key: $ANTHROPIC_API_KEY\" "
          "--data-binary \"@$REACTBENCH_INSTRUCTION_FILE\" \"$ANTHROPIC_BASE_URL/v1/messages\"; true")
#: fault -> (the failure class, what the egress proxy saw answer the CLIs' model requests).
FAULTS: dict[str, tuple[str, int | None]] = {
    "500": ("AgentAPIError", 500), "503": ("AgentAPIError", 503), "429": ("AgentAPIError", 429),
    "html": ("AgentAPIError", 200), "cut": ("AgentAPIError", 200), "refused": ("AgentAPIError", None),
    "401": ("AgentAuthError", 401), "slow": ("", 200),
}
#: The faults the server plays, each on a task of its own in one session.
SERVED = [fault for fault in FAULTS if fault != "refused"]


def _right_answer() -> dict[str, str]:
    solve = (SHIPPED / "solution" / "solve.sh").read_text()
    return {"src/Counter.tsx": solve.split("<<'TSX'\n", 1)[1].rsplit("TSX\n", 1)[0]}


def _marker(fault: str) -> str:
    return f"(gateway case {fault})"


def _task(root: Path, fault: str) -> Path:
    """The shipped task under a name of the fault's, its instruction marked for the
    server (the images are the same: bakes are keyed by content, not by name)."""
    task = root / f"counter-reset-{fault}"
    shutil.copytree(SHIPPED, task)
    instruction = task / "instruction.md"
    instruction.write_text(f"{instruction.read_text().rstrip()}\n\n{_marker(fault)}\n")
    return task


def _session(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, faults: list[str],
             *extra: str) -> tuple[ModelServer, dict[tuple[str, str], dict[str, str]]]:
    """Runs the agents on one task per fault in one session: the server, and each
    item's JUnit properties by (fault, agent name)."""
    # Claude Code's own retries (ten, over three minutes) are the CLI's business.
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    script = Script(answers={"Add a **Reset** button": _right_answer()}, key=KEY,
                    faults={_marker(fault): fault for fault in faults if fault != "refused"})
    tasks = [_task(suite.path / "tasks", fault) for fault in faults]
    with ModelServer(script, host=bridge_gateway()) as server:
        # Nothing listens there: the connection is refused.
        url = f"http://{bridge_gateway()}:{free_port()}" if faults == ["refused"] else server.url
        for cli in AGENTS:
            for name, value in CLI_ENV[cli].items():
                monkeypatch.setenv(name, value.format(url=url))
        result = suite.runpytest_subprocess(
            f"--reactbench-agent={','.join([*AGENTS, 'curler'])}", "--reactbench-sandbox=docker",
            "--reactbench-retries=1", "--reactbench-agent-env=CLAUDE_CODE_MAX_RETRIES",
            f"--reactbench-agent-command={CURLER}", "-k", "not curler or 500",
            "--reactbench-agent-env=ANTHROPIC_BASE_URL", "--reactbench-agent-env=ANTHROPIC_API_KEY",
            "-p", "no:cacheprovider", f"--rootdir={suite.path}", *extra,
            f"--reactbench-records={suite.path / 'records'}", "--junitxml=out.xml", *map(str, tasks))
    print(result.stdout.str()[-8000:])
    outcomes = {(props["reactbench.task"].removeprefix("counter-reset-"), props["reactbench.agent"]): props
                for _, props in junit_testcases(suite.path / "out.xml")}
    return server, outcomes


def _check(suite: pytest.Pytester, server: ModelServer, outcomes: dict[tuple[str, str], dict[str, str]],
           faults: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    expected = {(fault, NAME.get(cli, cli)) for fault in faults
                for cli in AGENTS + (["curler"] if fault == "500" else [])}
    assert sorted(outcomes) == sorted(expected)
    for fault in faults:
        failure, status = FAULTS[fault]
        task = f"counter-reset-{fault}"
        if fault not in ("refused", "slow"):
            apis = {seen.api for seen in server.requests if seen.fault == fault}
            assert apis >= {"messages", "responses"}, (fault, server.requests)
        for cli in AGENTS + (["curler"] if fault == "500" else []):
            name = NAME.get(cli, cli)
            props = outcomes[fault, name]
            said = f"{fault}, {name}: {props.get('reactbench.message')}"
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
            assert len(list((suite.path / "records").glob(f"*/{task}__{name}__1*/status.json"))) == 2, said
            if not cli.startswith("tools:"):  # (a tools agent's model calls are the harness's)
                seen = json.loads(next((suite.path / "records").glob(f"*/{task}__{name}__1/egress.json"))
                                  .read_text())
                answers = {r.get("status") or r.get("error") for r in seen if not r.get("refused")}
                assert (status in answers) if status else answers and all(
                    isinstance(a, str) for a in answers), (fault, name, seen)
    # Against a run where they passed, the gate has no verdict for them: inconclusive.
    failed_api = [key for key in expected if FAULTS[key[0]][0] == "AgentAPIError"]
    base = _junit(suite.path / "base.xml", [TrialResult(task=f"counter-reset-{fault}", agent=name, attempt=1,
                                                        verdict=Verdict.PASSED, reward=1.0)
                                            for fault, name in failed_api])
    capsys.readouterr()
    assert main(["compare", str(base), str(suite.path / "out.xml")]) == 3
    said = capsys.readouterr().out
    for fault, name in failed_api:
        assert f"counter-reset-{fault} [{name}]: no verdict (errors)" in said, said
    assert "inconclusive" in said and "regression(s)" not in said, said


def test_a_failing_model_api_is_an_error_retried_and_inconclusive(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    server, outcomes = _session(suite, monkeypatch, SERVED, "-n", "4")
    _check(suite, server, outcomes, SERVED, capsys)


def test_a_model_api_that_is_not_there_is_an_error_retried_and_inconclusive(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    server, outcomes = _session(suite, monkeypatch, ["refused"], "-n", "3")
    _check(suite, server, outcomes, ["refused"], capsys)
