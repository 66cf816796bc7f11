import json
import re
from pathlib import Path

import pytest

from pytest_reactbench.agents import AgentConfigError
from pytest_reactbench.agents.command import CommandAgent, load_presets, parse_commands
from pytest_reactbench.tasks import load_task
from tests.helpers import write_task

ENV = {"ANTHROPIC_API_KEY": "sk-ant-secret", "OPENAI_API_KEY": "sk-openai", "HOME": "/root",
       "AIDER_MODEL": "anthropic/claude-x"}


CLAUDE = ('claude --print --dangerously-skip-permissions --output-format stream-json --verbose '
          '"$(cat "$REACTBENCH_INSTRUCTION_FILE")"')
CODEX = ('CODEX_API_KEY="${CODEX_API_KEY:-$OPENAI_API_KEY}" codex exec '
         '--dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --json '
         '${OPENAI_BASE_URL:+-c "openai_base_url=$OPENAI_BASE_URL"} ${CODEX_MODEL:+--model "$CODEX_MODEL"} '
         '"$(cat "$REACTBENCH_INSTRUCTION_FILE")" </dev/null')
AIDER = ('aider --model "$AIDER_MODEL" --yes-always --no-auto-commits --no-dirty-commits --no-gitignore '
         '--no-check-update --no-analytics --no-show-model-warnings --no-pretty --no-fancy-input '
         '--no-show-release-notes --chat-history-file "$REACTBENCH_TRANSCRIPT_FILE" '
         '--input-history-file /tmp/reactbench-aider.input --message-file "$REACTBENCH_INSTRUCTION_FILE"')


@pytest.mark.parametrize(
    ("preset", "command", "env", "hosts"),
    [
        ("claude-code", CLAUDE,
         {"ANTHROPIC_API_KEY": "sk-ant-secret", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
          "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
         ("api.anthropic.com",)),
        ("codex", CODEX, {"OPENAI_API_KEY": "sk-openai"}, ("api.openai.com",)),
        ("aider", AIDER,
         {"AIDER_MODEL": "anthropic/claude-x", "OPENAI_API_KEY": "sk-openai",
          "ANTHROPIC_API_KEY": "sk-ant-secret", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
          "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
          "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
          # Aider writes its chat there, outside /app, for its transcript.
          "REACTBENCH_TRANSCRIPT_FILE": "/tmp/reactbench-aider.chat.md"},
         ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")),
    ],
)
def test_presets_produce_the_exact_invocation(tmp_path: Path, preset: str, command: str,
                                              env: dict[str, str], hosts: tuple[str, ...]) -> None:
    task = load_task(write_task(tmp_path, "alpha"))
    agent = CommandAgent(load_presets()[preset], environ=ENV)
    got_command, got_env = agent.invocation(task)
    assert got_command == command
    # Every preset runs as the non-root user its layer makes, with its home.
    assert got_env == {**env, "HOME": "/home/agent",
                       "REACTBENCH_INSTRUCTION_FILE": "/logs/agent/input/instruction.md",
                       "REACTBENCH_INSTRUCTION": "Write hello to /app/out.txt\n",
                       "REACTBENCH_TASK_ID": "alpha"}
    assert agent.model_hosts == hosts and agent.name == preset


@pytest.mark.parametrize(("preset", "package"), [
    ("claude-code", "npm install -g --no-fund --no-audit @anthropic-ai/claude-code@"),
    ("codex", "npm install -g --no-fund --no-audit @openai/codex@"),
    ("aider", "pip install -q --no-cache-dir aider-chat=="),
])
def test_each_preset_installs_its_pinned_cli_as_a_layer(preset: str, package: str) -> None:
    spec = load_presets()[preset]
    install = CommandAgent(spec, environ={}).install
    assert install is not None and install.version == spec.version and spec.version[0].isdigit()
    assert package + spec.version in install.steps
    assert install.user == "agent" and "useradd" in install.steps and "chown -R agent /app" in install.steps
    assert install.version_command.endswith("--version")
    assert CommandAgent(spec, environ={}).version == spec.version


def test_a_base_url_makes_its_host_the_only_model_host() -> None:
    agent = CommandAgent(load_presets()["claude-code"],
                         environ={"ANTHROPIC_BASE_URL": "http://172.17.0.1:8123", "ANTHROPIC_API_KEY": "k"})
    assert agent.model_hosts == ("172.17.0.1",)
    codex = CommandAgent(load_presets()["codex"], (), ("proxy.example",),
                         environ={"OPENAI_BASE_URL": "https://llm.internal/v1"})
    assert codex.model_hosts == ("llm.internal", "proxy.example")


@pytest.mark.parametrize(("preset", "environ", "message"), [
    ("claude-code", {}, "agent 'claude-code': ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is not set"),
    ("codex", {"OPENAI_BASE_URL": "http://x"}, "agent 'codex': OPENAI_API_KEY or CODEX_API_KEY is not set"),
    ("aider", {"OPENAI_API_KEY": "k"}, "agent 'aider': AIDER_MODEL is not set"),
    ("aider", {"AIDER_MODEL": "openai/x"},
     "agent 'aider': OPENAI_API_KEY or ANTHROPIC_API_KEY or GEMINI_API_KEY is not set"),
])
def test_preflight_names_the_missing_credentials(preset: str, environ: dict[str, str], message: str) -> None:
    agent = CommandAgent(load_presets()[preset], environ=environ)
    with pytest.raises(AgentConfigError, match=re.escape(message)):
        agent.preflight(environ)
    agent.preflight({**environ, "ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "AIDER_MODEL": "m"})


def test_extra_env_and_hosts_add_to_a_preset() -> None:
    agent = CommandAgent(load_presets()["codex"], ("HOME",), ("proxy.example",), environ=ENV)
    assert agent.passed_env == ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_MODEL", "HOME")
    assert agent.model_hosts == ("api.openai.com", "proxy.example")


def test_command_entries() -> None:
    assert parse_commands(["fix = ./fix.sh --all"], "ini")["fix"].command == "./fix.sh --all"
    with pytest.raises(AgentConfigError, match="'nothing' must be NAME=COMMAND"):
        parse_commands(["nothing"], "ini")


def test_a_preset_without_its_key_is_a_usage_error_before_any_trial(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_task(suite.path / "tasks", "alpha")
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    result = suite.runpytest("--reactbench-agent=claude-code")
    result.stderr.fnmatch_lines(["*--reactbench-agent: agent 'claude-code': ANTHROPIC_API_KEY or "
                                 "ANTHROPIC_AUTH_TOKEN is not set in the environment*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not list((suite.path / "records").glob("*/alpha__*"))


def test_a_cli_that_runs_as_its_own_user_is_a_usage_error_on_local(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_task(suite.path / "tasks", "alpha")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    result = suite.runpytest("--reactbench-agent=claude-code", "--reactbench-sandbox=local")
    result.stderr.fnmatch_lines(["*agent 'claude-code' runs its CLI as the user 'agent', which its layer "
                                 "adds to the image; the local backend cannot add users*"
                                 "--reactbench-sandbox=docker*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not list((suite.path / "records").glob("*/alpha__*"))


def test_an_agent_the_local_backend_cannot_hold_is_a_usage_error_and_the_controls_still_run(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_reactbench.sandbox.local import backend

    # As a user other than root: the sandbox's ids cannot be mapped onto nobody's.
    monkeypatch.setattr(backend, "maps_ids", lambda: False)
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=fix", "--reactbench-agent-command=fix=true",
                             "--reactbench-sandbox=local")
    result.stderr.fnmatch_lines(["*--reactbench-agent: agent 'fix' is not a control agent, and the local "
                                 "backend holds an agent only when it runs as root*"
                                 "run it with --reactbench-sandbox=docker*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not list((suite.path / "records").glob("*/alpha__*"))


@pytest.mark.parametrize("script", [None, "#!/bin/bash\necho hello > /app/out.txt\n"])
def test_a_command_that_cannot_start_is_an_error_naming_it_not_the_agent_s_0(
        suite: pytest.Pytester, script: str | None) -> None:
    write_task(suite.path / "tasks", "alpha")
    if script is not None:  # on the host, where the sandbox does not see it
        (suite.path / "agent").mkdir()
        (suite.path / "agent" / "run.sh").write_text(script)
        (suite.path / "agent" / "run.sh").chmod(0o755)
    result = suite.runpytest("--reactbench-agent-command=my-agent=./agent/run.sh",
                             "--reactbench-agent=my-agent", "--reactbench-sandbox=local")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*AgentCommandNotFound*agent 'my-agent': its command `./agent/run.sh` could "
                                 "not start in the sandbox (exit 127: *./agent/run.sh: *No such file*"])
    (status,) = (suite.path / "records").glob("*/alpha__my-agent__1/status.json")
    recorded = json.loads(status.read_text())
    assert recorded["verdict"] == "error" and recorded["failure"] == "AgentCommandNotFound"
    assert recorded["retryable"] is False


def test_only_the_command_s_own_start_is_told_apart() -> None:
    from pytest_reactbench.agents.command import cannot_start

    said = "bash: line 1: ./agent/run.sh: No such file or directory"
    assert cannot_start("./agent/run.sh --fast", 127, said + "\n") == said
    assert cannot_start("my-agent go", 127, "sh: 1: my-agent: not found") == "sh: 1: my-agent: not found"
    assert cannot_start("./run.sh", 126, "bash: line 1: ./run.sh: Permission denied")
    assert cannot_start("./run.sh", 126, "bash: ./run.sh: /usr/bin/python9: bad interpreter: No such file or "
                        "directory")
    # It ran, and something of its own was not found: that is the agent's doing.
    assert cannot_start("./run.sh", 127, "starting\nbash: npx: command not found") is None
    assert cannot_start("./run.sh", 127, "./run.sh: line 3: npx: command not found") is None
    assert cannot_start("./run.sh", 1, "bash: line 1: ./run.sh: No such file or directory") is None


def test_records_redact_secrets_and_keep_what_debugging_a_gateway_needs() -> None:
    environ = {"OPENAI_API_KEY": "sk-live-123456", "OPENAI_BASE_URL": "https://user:pw-9876@gw.example/v1",
               "CODEX_MODEL": "gpt-test-mini"}
    agent = CommandAgent(load_presets()["codex"], environ=environ)
    said = ("401 for key sk-live-123456, model gpt-test-mini, "
            "url: https://user:pw-9876@gw.example/v1/responses")
    assert agent._redacted(said) == ("401 for key $OPENAI_API_KEY, model gpt-test-mini, "
                                     "url: https://$OPENAI_BASE_URL_CREDENTIALS@gw.example/v1/responses")
