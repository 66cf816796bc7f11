from pathlib import Path

import pytest

from pytest_reactbench.agents import AgentConfigError
from pytest_reactbench.agents.command import CommandAgent, load_presets, parse_commands
from pytest_reactbench.tasks import load_task
from tests.conftest import write_task

ENV = {"ANTHROPIC_API_KEY": "sk-ant-secret", "OPENAI_API_KEY": "sk-openai", "HOME": "/root",
       "AIDER_MODEL": "anthropic/claude-x"}


@pytest.mark.parametrize(
    ("preset", "command", "env", "hosts"),
    [
        ("claude-code",
         'claude --print --dangerously-skip-permissions --output-format stream-json --verbose '
         '"$(cat "$REACTBENCH_INSTRUCTION_FILE")"',
         {"ANTHROPIC_API_KEY": "sk-ant-secret"}, ("api.anthropic.com",)),
        ("codex", 'codex exec --full-auto --skip-git-repo-check "$(cat "$REACTBENCH_INSTRUCTION_FILE")"',
         {"OPENAI_API_KEY": "sk-openai"}, ("api.openai.com",)),
        ("aider", 'aider --yes-always --no-auto-commits --no-gitignore --no-check-update '
                  '--message-file "$REACTBENCH_INSTRUCTION_FILE"',
         {"AIDER_MODEL": "anthropic/claude-x", "OPENAI_API_KEY": "sk-openai",
          "ANTHROPIC_API_KEY": "sk-ant-secret"},
         ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")),
    ],
)
def test_presets_produce_the_exact_invocation(tmp_path: Path, preset: str, command: str,
                                              env: dict[str, str], hosts: tuple[str, ...]) -> None:
    task = load_task(write_task(tmp_path, "alpha"))
    agent = CommandAgent(load_presets()[preset], environ=ENV)
    got_command, got_env = agent.invocation(task)
    assert got_command == command
    assert got_env == {**env, "REACTBENCH_INSTRUCTION_FILE": "/logs/agent/input/instruction.md",
                       "REACTBENCH_INSTRUCTION": "Write hello to /app/out.txt\n",
                       "REACTBENCH_TASK_ID": "alpha"}
    assert agent.model_hosts == hosts and agent.name == preset


def test_extra_env_and_hosts_add_to_a_preset() -> None:
    agent = CommandAgent(load_presets()["codex"], ("HOME",), ("proxy.example",), environ=ENV)
    assert agent.passed_env == ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_MODEL", "HOME")
    assert agent.model_hosts == ("api.openai.com", "proxy.example")


def test_command_entries() -> None:
    assert parse_commands(["fix = ./fix.sh --all"], "ini")["fix"].command == "./fix.sh --all"
    with pytest.raises(AgentConfigError, match="'nothing' must be NAME=COMMAND"):
        parse_commands(["nothing"], "ini")


def test_preset_runs_for_real_without_its_cli(suite: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """No key and no CLI here: the preset runs, the shell says so, the trial is graded."""
    write_task(suite.path / "tasks", "alpha")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-logged")
    result = suite.runpytest("--reactbench-agent=claude-code")
    result.stdout.fnmatch_lines(["*The agent ended: exited-nonzero.*", "*claude: command not found*"])
    result.assert_outcomes(failed=1)
    record = next((suite.path / "records").glob("*/alpha__claude-code__1"))
    assert "sk-ant-never-logged" not in "".join(p.read_text(errors="replace")
                                                 for p in record.rglob("*") if p.is_file())
    events = (record / "events.jsonl").read_text()
    assert '"env": ["ANTHROPIC_API_KEY", "REACTBENCH_INSTRUCTION"' in events
