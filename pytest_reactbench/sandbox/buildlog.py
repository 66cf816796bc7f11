"""What a failed bake step says, whichever backend ran it: the step's own output (not
the last lines of the whole build, which an earlier step's noise may fill), and the
cause when the output shows one that the exit code hides.

A RUN step that chains commands fails at its last one: `curl ... | sh && bun install`
exits 127 (`bun: not found`) when the real failure was curl's `Could not resolve
host`, printed lines before. So a host that could not be resolved, anywhere in the
build's output, and a missing command, on exit code 127, are named in the error's
first line, with the output line that said so and the step that printed it.

A step's last lines may be a package manager's progress alone (yarn berry prints a
line per package it fetches, after the one that failed): the first lines that say an
error (`npm error`, `ERR_PNPM_...`, yarn's `error` and its `YN0035`-style codes, git's
`fatal:`), each with a few indented lines after it, are kept too and shown before the last ones
when those no longer show them.

Backends feed it as they go: `step(where)` when a step starts, `add(text)` with its
output, and `failure(where, exit_code, what)` for the BakeError's text. The local
backend's `_step`, which has a step's whole output at once, calls `step_failure`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

#: Lines of the failed step's output the error keeps.
TAIL = 15
#: Lines of the step's first errors the error keeps besides (each error line and up to
#: `ERROR_CONTEXT` indented lines after it, its details).
ERROR_LINES = 8
ERROR_CONTEXT = 3
#: A line that says an error: npm's, pnpm's, yarn 1's, yarn berry's (an exception, a
#: failed build, a checksum mismatch, a lockfile it would modify, a remote that failed to
#: provide a package), git's.
_ERROR = re.compile(
    r"\bnpm (?:ERR!|error)\b|\bERR_PNPM_[A-Z0-9_]+|^\s*error\b|\bYN0(?:001|009|018|028|035)\b"
    r"|^(?:fatal|error): ")

_HOST = re.compile(
    r"Could not resolve host:? '?(?P<curl>[^\s'\";]+)"               # curl
    r"|unable to resolve host address '?(?P<wget>[^\s'\";]+)"        # wget
    r"|getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (?P<node>[^\s'\";]+)"     # node, npm, pnpm, yarn
    r"|Could not resolve hostname (?P<ssh>[^\s:'\";]+)"              # ssh (git over ssh)
    r"|Failed to resolve '(?P<py>[^\s'\";()]+)' \(\[Errno"          # python's urllib3
    r"|(?P<bare>Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname)",
    re.IGNORECASE,
)
#: `/bin/sh: 1: bun: not found`, `bash: line 1: bun: command not found`, `env: 'bun': No
#: such file or directory`.
_MISSING = re.compile(
    r"(?:^|[\s:])'?(?P<command>[^\s:']+)'?: (?:command )?not found\s*$"
    r"|^env: '(?P<env>[^']+)': No such file or directory\s*$"
)
#: Terminal colours (the engine paints a step's stderr red).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: The engine's own lines between a step's output.
_ENGINE = re.compile(r"^\s*(---> |Removing intermediate container |Running in )")


@dataclass(frozen=True)
class Finding:
    """A line of the build's output that names a cause."""

    #: What it means, as the error's first line says it.
    what: str
    #: The output line itself.
    line: str
    #: The step that printed it (`Dockerfile:line`).
    where: str


def host_finding(line: str, where: str) -> Finding | None:
    """The host `line` says could not be resolved, if it says so."""
    found = _HOST.search(line)
    if found is None:
        return None
    host = next((v for k, v in found.groupdict().items() if v and k != "bare"), None)
    what = f"a host could not be resolved ({host.rstrip('.,')})" if host else "a host could not be resolved"
    return Finding(what, line.strip(), where)


def missing_command(line: str, where: str) -> Finding | None:
    """The command `line` says was not found, if it says so."""
    found = _MISSING.search(line.strip())
    if found is None:
        return None
    command = found.group("command") or found.group("env")
    return Finding(f"a command was not found ({command})", line.strip(), where)


class BuildLog:
    """A build's output as it streams: each step's own tail, and the causes seen."""

    def __init__(self, where: str = "") -> None:
        self.where = where
        self.tail: deque[str] = deque(maxlen=TAIL)
        #: Hosts that could not be resolved, the first line for each, in build order.
        self.hosts: list[Finding] = []
        #: The last line of the current step that says a command was not found.
        self.missing: Finding | None = None
        #: The current step's first error lines, each with its indented details.
        self.errors: list[str] = []
        self._context = 0
        self._partial = ""

    def step(self, where: str) -> None:
        """A new step starts: its output replaces the tail."""
        self._flush()
        self.where = where
        self.tail.clear()
        self.missing = None
        self.errors = []
        self._context = 0

    def add(self, text: str) -> None:
        """Output of the current step (whole lines or pieces of them)."""
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._line(line)

    def _flush(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = ""

    def _line(self, line: str) -> None:
        line = _ANSI.sub("", line).rstrip("\r")
        if not line.strip() or _ENGINE.match(line):
            return
        self.tail.append(line)
        if len(self.errors) < ERROR_LINES:
            if _ERROR.search(line):
                self.errors.append(line)
                self._context = ERROR_CONTEXT
            elif self._context and line[:1].isspace():  # its details (a stack trace)
                self.errors.append(line)
                self._context -= 1
            else:
                self._context = 0
        host = host_finding(line, self.where)
        if host is not None and all(host.what != known.what for known in self.hosts):
            self.hosts.append(host)
        missing = missing_command(line, self.where)
        if missing is not None:
            self.missing = missing

    def failure(self, where: str, exit_code: int | None, what: str = "") -> str:
        """The text of the BakeError of a step at `where` that failed with `exit_code`
        (None: the engine said `what` instead): the causes in the first line, then the
        step's own last lines, and each cause's line when they do not show it."""
        self._flush()
        said = f"step failed with exit code {exit_code}" if exit_code is not None else what
        causes = list(self.hosts)
        if exit_code == 127 and self.missing is not None:
            causes.append(self.missing)
        first = f"{where}: {said}"
        if causes:
            first += ": " + "; ".join(
                f"{c.what}: {c.line!r}" + ("" if c.where in ("", where) else f" (printed by {c.where})")
                for c in causes)
        body = list(self.tail)
        shown = {line.strip() for line in body}
        earlier = [c.line for c in causes if c.line not in shown]
        errors = [line for line in self.errors
                  if line.strip() not in shown and line.strip() not in earlier]
        if earlier or errors:
            body = [*earlier, *errors, "...", *body]
        return first + ("\n  " + "\n  ".join(body) if body else "")


def step_failure(where: str, exit_code: int, output: str | Iterable[str]) -> str:
    """The BakeError text of one step that failed with `exit_code` after printing
    `output` (its whole output): for a backend that runs a step at a time."""
    log = BuildLog(where)
    log.add(output if isinstance(output, str) else "\n".join(output))
    return log.failure(where, exit_code)
