"""Command agents: a shell command run in the agent sandbox.

Ad hoc (`--reactbench-agent-command NAME=CMD`, ini `reactbench_agent_commands`), or a
preset for a widely used coding-agent CLI (`presets.toml`: Claude Code, Codex, Aider).
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pytest_reactbench.agents.base import (
    Agent,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
    Install,
    shell_outcome,
)
from pytest_reactbench.agents.output import read_output
from pytest_reactbench.agents.tools import MAX_SHOWN_OUTPUT, shown_args
from pytest_reactbench.results.events import Event
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.relay import LOOPBACK_HOSTS
from pytest_reactbench.tasks import Task

#: Variables whose values are secrets, by their names (API keys, tokens, passwords).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|AUTH|CREDENTIAL|COOKIE|SESSION|PRIVATE", re.I)

INSTRUCTION_FILE = "/logs/agent/input/instruction.md"
PRESETS_FILE = Path(__file__).with_name("presets.toml")


#: The user a preset with `user` runs as: made by its layer, owner of /app.
AGENT_USER_STEPS = """
RUN (id -u {user} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {user}) \\
 && chown -R {user} /app \\
 && git config --system --add safe.directory '*'
"""


@dataclass(frozen=True)
class CommandSpec:
    name: str
    command: str
    env: tuple[str, ...] = ()
    model_hosts: tuple[str, ...] = ()
    description: str = ""
    version: str = ""
    install: str = ""
    version_command: str = ""
    user: str = ""
    #: Each entry: host variables of which at least one must be set.
    credentials: tuple[tuple[str, ...], ...] = ()
    fixed_env: tuple[tuple[str, str], ...] = ()
    #: How the CLI's output is read (agents/output.py).
    output: str = ""
    #: A file the CLI writes its conversation to (outside /app, so never part of the
    #: work), given to it as $REACTBENCH_TRANSCRIPT_FILE and read after it ends.
    transcript: str = ""

    def layer(self) -> Install | None:
        if not self.install:
            return None
        steps = self.install.replace("{version}", self.version)
        if self.user:
            steps += AGENT_USER_STEPS.replace("{user}", self.user)
        return Install(self.name, self.version, steps.strip(), self.version_command, self.user)


def load_presets(path: Path = PRESETS_FILE) -> dict[str, CommandSpec]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {
        name: CommandSpec(
            name, str(entry["command"]), tuple(entry.get("env", ())),
            tuple(entry.get("model_hosts", ())), str(entry.get("description", "")),
            version=str(entry.get("version", "")), install=str(entry.get("install", "")),
            version_command=str(entry.get("version_command", "")), user=str(entry.get("user", "")),
            credentials=tuple(tuple(group) for group in entry.get("credentials", ())),
            fixed_env=tuple((str(k), str(v)) for k, v in entry.get("fixed_env", {}).items()),
            output=str(entry.get("output", "")), transcript=str(entry.get("transcript", "")),
        )
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


def base_url_hosts(env: Mapping[str, str]) -> tuple[str, ...]:
    """Hosts of the model API base URLs the agent is given (`ANTHROPIC_BASE_URL`,
    `OPENAI_BASE_URL`, `OPENAI_API_BASE`...): then they, not the public APIs, are its
    model hosts. A loopback host is given with its port (`127.0.0.1:8080`)."""
    hosts = []
    for key, value in env.items():
        if key.endswith(("_BASE_URL", "_API_BASE")) and value:
            url = urlsplit(value)
            if url.hostname in LOOPBACK_HOSTS:
                # A gateway on this host's loopback: that port of it, and no other.
                hosts.append(f"{url.hostname}:{url.port or (443 if url.scheme == 'https' else 80)}")
            elif url.hostname:
                hosts.append(url.hostname)
    return tuple(dict.fromkeys(hosts))


def base_url_targets(env: Mapping[str, str]) -> tuple[str, ...]:
    """What the agent's client will ask the egress gate for: host:port of each model
    API base URL it is given (an IPv6 address in brackets)."""
    targets = []
    for key, value in env.items():
        if key.endswith(("_BASE_URL", "_API_BASE")) and value and (url := urlsplit(value)).hostname:
            host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
            targets.append(f"{host}:{url.port or (443 if url.scheme == 'https' else 80)}")
    return tuple(dict.fromkeys(targets))


class AgentCommandNotFound(SandboxError):
    """The agent's command could not start in its sandbox (not found, not executable):
    nothing of the agent's ran, so the trial is an error, not its 0; a retry would meet
    the same, so it is not retried."""

    retryable = False


#: What a shell says of a command it cannot start (exit 127: not found; 126: not executable).
_CANNOT_START = ("not found", "No such file or directory", "Permission denied", "cannot execute")


def cannot_start(command: str, exit_code: int, stderr: str) -> str | None:
    """The shell's complaint when `command` itself could not start, or None: exit 127 or
    126, and the first thing said is that a word of the command is not found, not
    there or not executable (a command that ran and failed on something of its own
    names that, not itself)."""
    if exit_code not in (126, 127):
        return None
    first = next((line.strip() for line in stderr.splitlines() if line.strip()), "")
    if not any(said in first for said in _CANNOT_START):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    complaint = "(?:[^:]*: bad interpreter: )?(?:command )?(?:" + "|".join(_CANNOT_START) + ")"
    named = [w for w in words if len(w) > 1 and not w.startswith("-")
             and re.search(rf"(?:^|[\s:']){re.escape(w)}'?: {complaint}", first)]
    return first if named else None


@dataclass
class CommandAgent(Agent):
    spec: CommandSpec
    #: Host variables passed through on top of the spec's own.
    extra_env: tuple[str, ...] = ()
    extra_hosts: tuple[str, ...] = ()
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def __post_init__(self) -> None:
        self.name = self.spec.name
        self.install = self.spec.layer()
        passed = {k: self.environ[k] for k in self.passed_env if k in self.environ}
        own = base_url_hosts(passed) or self.spec.model_hosts
        self.model_hosts = tuple(dict.fromkeys(own + self.extra_hosts))
        self.model_targets = base_url_targets(passed)

    @property
    def passed_env(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.spec.env + self.extra_env))

    def preflight(self, environ: Mapping[str, str]) -> None:
        missing = [group for group in self.spec.credentials if not any(environ.get(k) for k in group)]
        if missing:
            wanted = "; ".join(" or ".join(group) for group in missing)
            raise AgentConfigError(
                f"agent {self.name!r}: {wanted} is not set in the environment (the "
                f"{self.name} CLI needs it to reach its model; docs/agents.md)")

    def invocation(self, task: Task) -> tuple[str, dict[str, str]]:
        """The exact command and environment the agent runs with."""
        env = dict(self.spec.fixed_env)
        env.update({k: self.environ[k] for k in self.passed_env if k in self.environ})
        if self.spec.user:
            env["HOME"] = f"/home/{self.spec.user}"
        env.update({
            "REACTBENCH_INSTRUCTION_FILE": INSTRUCTION_FILE,
            "REACTBENCH_INSTRUCTION": task.instruction,
            "REACTBENCH_TASK_ID": task.id,
        })
        if self.spec.transcript:
            env["REACTBENCH_TRANSCRIPT_FILE"] = self.spec.transcript
        return self.spec.command, env

    def run(self, ctx: AgentContext) -> AgentOutcome:
        command, env = self.invocation(ctx.task)
        ctx.sandbox.write_file(INSTRUCTION_FILE, ctx.task.instruction)
        ctx.event(Event.COMMAND, command=command, env=sorted(env), user=self.spec.user or "root",
                  version=self.spec.version)  # names only, never values
        result = ctx.sandbox.exec(command, cwd="/app", env=env, timeout=ctx.timeout,
                                  user=self.spec.user or None)
        stdout, stderr = self._redacted(result.text), self._redacted(result.error_text)
        if not result.timed_out and (why := cannot_start(command, result.exit_code, stderr)):
            ctx.event(Event.COMMAND_NOT_STARTED, exit_code=result.exit_code, said=why)
            raise AgentCommandNotFound(
                f"agent {self.name!r}: its command `{command}` could not start in the sandbox "
                f"(exit {result.exit_code}: {why}); it runs in /app of the task's image, where only what "
                "the image holds is: see docs/agents.md, how an agent's own files reach the sandbox")
        outcome = shell_outcome(result.exit_code, result.timed_out, stdout + stderr)
        reading = read_output(self.spec.output, stdout, stderr, self._transcript(ctx))
        outcome.usage = reading.usage
        outcome.auth_failure = reading.auth_failure
        outcome.api_failure = reading.api_failure
        outcome.said = reading.said
        # The CLI's conversation, as the tools agents record theirs.
        for turn in reading.turns:
            if turn.tool:
                ctx.event(Event.TOOL, tool=turn.tool, args=shown_args(turn.args),
                          result_bytes=len(turn.output.encode()), output=turn.output[:MAX_SHOWN_OUTPUT],
                          **({"error": turn.error} if turn.error else {}))
            else:
                ctx.event(Event.MESSAGE, role="assistant", text=turn.text[:MAX_SHOWN_OUTPUT])
        return outcome

    def _transcript(self, ctx: AgentContext) -> str | None:
        """The CLI's own transcript file ("" when it wrote none), or None for a CLI
        whose stream is its transcript."""
        if not self.spec.transcript:
            return None
        written = ctx.sandbox.exec(["cat", self.spec.transcript], timeout=60)
        return self._redacted(written.text) if written.ok else ""

    def _redacted(self, text: str) -> str:
        """`text` with the secrets passed to the CLI replaced by their variables' names:
        the values of variables named like secrets, and the credentials in a URL. What
        debugging a gateway needs (a model's name, a base URL) is kept."""
        for key in self.passed_env:
            value = self.environ.get(key)
            if not value:
                continue
            if SECRET_NAME.search(key):
                if len(value) >= 6:
                    text = text.replace(value, f"${key}")
            elif credentials := urlsplit(value).netloc.rpartition("@")[0] if "://" in value else "":
                text = text.replace(f"{credentials}@", f"${key}_CREDENTIALS@")
        return text
