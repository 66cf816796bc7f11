"""Command agents: a shell command run in the agent sandbox.

Ad hoc (`--reactbench-agent-command NAME=CMD`, ini `reactbench_agent_commands`), or a
preset for a widely used coding-agent CLI (`presets.toml`: Claude Code, Codex, Aider).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_reactbench.agents.base import Agent, AgentConfigError, AgentContext, AgentOutcome, shell_outcome
from pytest_reactbench.tasks import Task

INSTRUCTION_FILE = "/logs/agent/input/instruction.md"
PRESETS_FILE = Path(__file__).with_name("presets.toml")


@dataclass(frozen=True)
class CommandSpec:
    name: str
    command: str
    env: tuple[str, ...] = ()
    model_hosts: tuple[str, ...] = ()
    description: str = ""


def load_presets(path: Path = PRESETS_FILE) -> dict[str, CommandSpec]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {
        name: CommandSpec(name, str(entry["command"]), tuple(entry.get("env", ())),
                          tuple(entry.get("model_hosts", ())), str(entry.get("description", "")))
        for name, entry in data.items()
    }


def parse_commands(entries: Sequence[str], source: str) -> dict[str, CommandSpec]:
    """`NAME=COMMAND` entries (ini lines or options)."""
    specs = {}
    for entry in entries:
        name, sep, command = entry.partition("=")
        name, command = name.strip(), command.strip()
        if not sep or not name or not command:
            raise AgentConfigError(f"{source}: {entry!r} must be NAME=COMMAND")
        specs[name] = CommandSpec(name, command)
    return specs


@dataclass
class CommandAgent(Agent):
    spec: CommandSpec
    #: Host variables passed through on top of the spec's own.
    extra_env: tuple[str, ...] = ()
    extra_hosts: tuple[str, ...] = ()
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def __post_init__(self) -> None:
        self.name = self.spec.name
        self.model_hosts = tuple(dict.fromkeys(self.spec.model_hosts + self.extra_hosts))

    @property
    def passed_env(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.spec.env + self.extra_env))

    def invocation(self, task: Task) -> tuple[str, dict[str, str]]:
        """The exact command and environment the agent runs with."""
        env = {k: self.environ[k] for k in self.passed_env if k in self.environ}
        env.update({
            "REACTBENCH_INSTRUCTION_FILE": INSTRUCTION_FILE,
            "REACTBENCH_INSTRUCTION": task.instruction,
            "REACTBENCH_TASK_ID": task.id,
        })
        return self.spec.command, env

    def run(self, ctx: AgentContext) -> AgentOutcome:
        command, env = self.invocation(ctx.task)
        ctx.sandbox.write_file(INSTRUCTION_FILE, ctx.task.instruction)
        ctx.event("command", command=command, env=sorted(env))  # names only, never values
        result = ctx.sandbox.exec(command, cwd="/app", env=env, timeout=ctx.timeout)
        log = result.text + result.error_text
        for key in self.passed_env:
            secret = self.environ.get(key)
            if secret and len(secret) >= 6:
                log = log.replace(secret, f"${key}")
        return shell_outcome(result.exit_code, result.timed_out, log)
