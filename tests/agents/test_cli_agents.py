"""The real coding-agent CLIs (Claude Code, Codex, Aider), installed by the plugin as a
layer on the task's image, run against a scripted model server through their egress
allowlist: the server is their only model host. The built-in tools agent (a raw model
through the environment's tools, with the provider's SDK) runs against the same server.
The right answer passes a shipped task; the wrong one fails a public-style task of our
own; tokens and versions are recorded."""

from __future__ import annotations

import ipaddress
import json
import re
import textwrap
from pathlib import Path

import docker
import pytest

from pytest_reactbench.agents.command import load_presets
from pytest_reactbench.results import Gate
from tests.agents.model_server import INPUT_TOKENS, ModelServer, Script
from tests.helpers import junit_results, write_task
from tests.results.test_report import _browser, _text
from tests.results.test_trajectory import harbor, harbor_reads  # noqa: F401 (harbor: a fixture)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "tasks" / "counter-reset"
KEY = "sk-reactbench-test"

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: Each CLI's variables, pointed at the scripted server (`{url}`).
CLI_ENV = {
    "claude-code": {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "{url}",
                    "ANTHROPIC_MODEL": "claude-scripted"},
    # An unknown model: Codex then offers its plain shell tool (exec_command).
    "codex": {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "{url}/v1", "CODEX_MODEL": "scripted"},
    "aider": {"OPENAI_API_KEY": KEY, "OPENAI_API_BASE": "{url}/v1", "AIDER_MODEL": "openai/scripted"},
    # The built-in agent for raw models, through the environment's tools (official SDK).
    "tools:anthropic/scripted": {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "{url}"},
}
API = {"claude-code": "messages", "codex": "responses", "aider": "chat",
       "tools:anthropic/scripted": "messages"}
#: The name each agent's items and records carry.
NAME = {"tools:anthropic/scripted": "tools-anthropic-scripted"}


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: where the egress proxy (a
    container there) reaches a server on this host."""
    client = docker.from_env()
    try:
        config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    finally:
        client.close()
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


def public_style_task(root: Path) -> Path:
    """A task in the public suite's shape: built FROM the public base image (its
    stand-in here), graded by a plain script."""
    task = root / "write-greeting"
    for folder in ("environment", "tests", "solution"):
        (task / folder).mkdir(parents=True)
    (task / "task.toml").write_text(textwrap.dedent("""\
        version = "1.0"
        [[artifacts]]
        source = "/app"
        exclude = ["**/node_modules/**", "**/.git/**"]
        [agent]
        timeout_sec = 300
        [verifier]
        timeout_sec = 60
        """))
    (task / "instruction.md").write_text("Write hello to /app/greeting.txt\n")
    (task / "environment" / "Dockerfile").write_text(textwrap.dedent("""\
        ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest
        FROM ${BASE_IMAGE}
        WORKDIR /app
        RUN echo draft > /app/greeting.txt && git add -A \\
         && git -c user.email=base@reactbench -c user.name=base commit -qm base
        """))
    (task / "tests" / "Dockerfile").write_text("FROM reactbench/system\nCOPY test.sh /tests/test.sh\n")
    (task / "tests" / "test.sh").write_text(textwrap.dedent("""\
        #!/bin/bash
        if [ "$(cat /app/greeting.txt 2>/dev/null)" = hello ]; then t=1; else t=0; fi
        echo "{\\"reward\\": $t, \\"tests\\": $t, \\"react_doctor\\": 1}" > /logs/verifier/reward.json
        """))
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > /app/greeting.txt\n")
    return task


@pytest.mark.parametrize("cli", list(CLI_ENV))
def test_cli_solves_a_shipped_task_and_fails_a_wrong_answer(
        cli: str, suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        harbor: Path) -> None:  # noqa: F811 (the fixture imported above)
    right = (SHIPPED / "solution" / "solve.sh").read_text()
    counter = right.split("<<'TSX'\n", 1)[1].rsplit("TSX\n", 1)[0]
    script = Script(answers={"Add a **Reset** button": {"src/Counter.tsx": counter},
                             "/app/greeting.txt": {"greeting.txt": "goodbye"}}, key=KEY)
    task = public_style_task(suite.path / "tasks")
    with ModelServer(script, host=bridge_gateway()) as server:
        for name, value in CLI_ENV[cli].items():
            monkeypatch.setenv(name, value.format(url=server.url))
        result = suite.runpytest_subprocess(
            f"--reactbench-agent={cli}", "--reactbench-sandbox=docker", "-p", "no:cacheprovider",
            f"--rootdir={suite.path}", f"--reactbench-records={suite.path / 'records'}",
            "--junitxml=out.xml", str(SHIPPED), str(task))
    print(result.stdout.str()[-6000:])
    outcomes = {r.task: r for r in junit_results(suite.path / "out.xml")}
    shipped, public = outcomes["counter-reset"], outcomes["write-greeting"]
    assert shipped.verdict == "passed", shipped.message
    assert public.verdict == "failed" and public.grading.gates.get(Gate.TESTS) is False
    presets = load_presets()
    version = presets[cli].version if cli in presets else "anthropic "
    for outcome in (shipped, public):
        assert outcome.agent_run.version.startswith(version)
        assert (outcome.agent_run.input_tokens or 0) >= (INPUT_TOKENS if cli != "aider" else 1)
        assert (outcome.agent_run.output_tokens or 0) > 0
    assert API[cli] in server.apis()
    # Every model request carried the key, and came through the egress gate.
    assert all(seen.headers.get("x-api-key") == KEY or KEY in seen.headers.get("authorization", "")
               for seen in server.requests if seen.api != "other")
    name = NAME.get(cli, cli)
    status = json.loads(next((suite.path / "records").glob(f"*/counter-reset__{name}__1/status.json"))
                        .read_text())
    assert status["agent_run"]["version"] == shipped.agent_run.version
    # Its transcript: the scripted shell call that wrote the change (Aider's: the edit
    # its chat history says it applied), in the record and on the trial's page as a
    # browser shows it.
    wrote = "Applied edit to src/Counter.tsx" if cli == "aider" else "cat > /app/src/Counter.tsx"
    record = next((suite.path / "records").glob(f"*/counter-reset__{name}__1"))
    events = [json.loads(line) for line in (record / "events.jsonl").read_text().splitlines()]
    tools = [e for e in events if e["event"] == "tool"]
    assert any(wrote in json.dumps(e) for e in tools), tools
    assert any(e["event"] == "message" and e["text"].strip() for e in events), events
    # Its trajectory in ATIF, as Harbor's own models read it: the instruction, then the call.
    trajectory = record / "agent" / "trajectory.json"
    steps = json.loads(trajectory.read_text())["steps"]
    assert steps[0]["source"] == "user" and "Reset" in steps[0]["message"]
    assert any(wrote in json.dumps([s.get("tool_calls"), s.get("observation")]) for s in steps), steps
    assert harbor_reads(harbor, [("trajectory", trajectory)]) == {str(trajectory): len(steps)}
    page = record.parent / "trials" / f"counter-reset__{name}__1.html"
    profile = suite.path / "chromium" / "profile"
    profile.mkdir(parents=True)
    shown = _text(_browser(page, profile, "--dump-dom"))
    assert re.search(r"Transcript \(\d+ tool call\(s\)\)", shown), shown[-3000:]
    assert wrote in shown, shown[-3000:]


def test_the_model_server_is_the_only_host_an_agent_reaches(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through its egress gate an agent reaches the scripted server and is refused any
    other host."""
    write_task(suite.path / "tasks", "alpha")
    probe = ('ask() { exec 3<>/dev/tcp/egress/3128; printf "GET $1 HTTP/1.1\\r\\nHost: x\\r\\n'
             'Connection: close\\r\\n\\r\\n" >&3; echo "$1 -> $(head -1 <&3)"; exec 3<&-; }; '
             'ask "$ANTHROPIC_BASE_URL/v1/models"; ask http://example.com/')
    with ModelServer(Script(answers={}, key=KEY), host=bridge_gateway()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        result = suite.runpytest_subprocess(
            f"--reactbench-agent-command=probe={probe}", "--reactbench-agent-env=ANTHROPIC_BASE_URL",
            "--reactbench-agent=probe", "--reactbench-sandbox=docker", "-p", "no:cacheprovider",
            f"--rootdir={suite.path}", f"--reactbench-records={suite.path / 'records'}",
            "--reactbench-model-host=" + server.host)
        url = server.url
    log = next((suite.path / "records").glob("*/alpha__probe__1/agent.log")).read_text()
    print(result.stdout.str()[-3000:], log)
    # (A base URL is no secret: the log keeps it, for debugging a gateway.)
    assert f"{url}/v1/models -> HTTP/1.1 200 OK" in log
    assert "http://example.com/ -> HTTP/1.1 403 Forbidden" in log


def test_a_gateway_on_the_host_loopback_serves_claude_code_on_docker(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`, the natural value for a gateway on
    this host (LiteLLM, say): the proxy reaches that port, and only it."""
    right = (SHIPPED / "solution" / "solve.sh").read_text()
    counter = right.split("<<'TSX'\n", 1)[1].rsplit("TSX\n", 1)[0]
    script = Script(answers={"Add a **Reset** button": {"src/Counter.tsx": counter}}, key=KEY)
    with ModelServer(script, host="127.0.0.1") as server:
        for name, value in CLI_ENV["claude-code"].items():
            monkeypatch.setenv(name, value.format(url=server.url))
        result = suite.runpytest_subprocess(
            "--reactbench-agent=claude-code", "--reactbench-sandbox=docker", "-p", "no:cacheprovider",
            f"--rootdir={suite.path}", f"--reactbench-records={suite.path / 'records'}",
            "--junitxml=out.xml", str(SHIPPED))
    print(result.stdout.str()[-4000:])
    (outcome,) = junit_results(suite.path / "out.xml")
    assert outcome.verdict == "passed", outcome.message
    assert "messages" in server.apis()
