"""A Dockerfile reader for the steps the local backend replays.

The local backend bakes images without a daemon by replaying ARG, ENV, WORKDIR,
COPY/ADD, RUN and LABEL; it parses just enough of the Dockerfile grammar for that
(line continuations, comments, JSON and shell forms, `${VAR}` substitution).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

IGNORED = {"CMD", "ENTRYPOINT", "EXPOSE", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"}
SUPPORTED = {"FROM", "ARG", "ENV", "WORKDIR", "COPY", "ADD", "RUN", "LABEL", "USER", "SHELL"}
#: Every instruction of Docker's Dockerfile reference.
INSTRUCTIONS = IGNORED | SUPPORTED | {"ONBUILD"}


class DockerfileError(Exception):
    def __init__(self, path: Path, line: int, message: str) -> None:
        self.path = path
        self.line = line
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int
    flags: dict[str, str] = field(default_factory=dict)
    exec_form: tuple[str, ...] | None = None


_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-+])?(?P<word>[^}]*)\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """Docker's variable substitution: $VAR, ${VAR}, ${VAR:-default}, ${VAR:+alt}."""

    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("plain")
        value = variables.get(name)
        op = match.group("op")
        if op and op.endswith("-"):
            return value if value else match.group("word")
        if op and op.endswith("+"):
            return match.group("word") if value else ""
        return value or ""

    return _VAR.sub(replace, text.replace("\\$", "\x00")).replace("\x00", "$")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped
        if not current:
            start = number
        if raw.rstrip().endswith("\\"):
            current.append(raw.rstrip()[:-1])
            continue
        current.append(raw)
        lines.append((start, " ".join(part.strip() for part in current if part.strip())))
        current = []
    if current:
        lines.append((start, " ".join(part.strip() for part in current)))
    return lines


def parse(path: Path) -> list[Instruction]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DockerfileError(path, 0, "file is missing") from None
    out: list[Instruction] = []
    for number, line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword in IGNORED:
            continue
        if keyword not in INSTRUCTIONS:
            raise DockerfileError(path, number, unknown_instruction(keyword))
        if keyword == "ONBUILD" or keyword not in SUPPORTED:
            raise DockerfileError(path, number, f"{keyword} is not supported by the local backend")
        if "<<" in rest and keyword in {"RUN", "COPY"}:
            raise DockerfileError(
                path, number, "heredocs are not supported by the local backend; use a script file"
            )
        flags: dict[str, str] = {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        exec_form = None
        if rest.startswith("[") and keyword in {"RUN", "COPY", "ADD", "SHELL"}:
            try:
                parsed = json.loads(rest)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list) and all(isinstance(p, str) for p in parsed):
                exec_form = tuple(parsed)
        out.append(Instruction(keyword, rest, number, flags, exec_form))
    if not any(i.keyword == "FROM" for i in out):
        raise DockerfileError(path, 1, "has no FROM instruction")
    return out


def unknown_instruction(keyword: str) -> str:
    near = difflib.get_close_matches(keyword, sorted(INSTRUCTIONS), n=1, cutoff=0.6)
    return f"unknown instruction {keyword}" + (f" (did you mean {near[0]}?)" if near else "")


#: A heredoc's start in an instruction (`RUN <<EOF`, `COPY <<-"END" /x`): its terminator.
_HEREDOC = re.compile(r"<<-?\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")


def check_instructions(path: Path) -> None:
    """Every instruction of the Dockerfile is one of Docker's, whichever backend will
    bake it (a typo is the task's error, found when it is collected or validated, not a
    backend's refusal at bake time). Heredoc bodies are not instructions. A missing file
    is left to whoever needs it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return
    awaited: list[str] = []  # the terminators of the heredocs open
    continued = False
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if awaited:
            if stripped == awaited[0]:
                awaited.pop(0)
            continue
        if not continued and stripped and not stripped.startswith("#"):
            keyword = stripped.split()[0].upper()
            if keyword not in INSTRUCTIONS:
                raise DockerfileError(path, number, unknown_instruction(keyword))
        if not stripped.startswith("#"):
            awaited += _HEREDOC.findall(stripped)
            continued = raw.rstrip().endswith("\\")


def expand_pairs(args: str, variables: Mapping[str, str], path: Path, line: int) -> list[tuple[str, str]]:
    """The pairs of an ENV or LABEL instruction, each value expanded as Docker does.

    `variables` is what the instruction sees: the inherited environment (so
    `ENV PATH=/x:$PATH` keeps the inherited PATH), the ARGs, and earlier ENVs. All
    pairs of one instruction see the values from before it, as in Docker. Expansion
    happens word by word, after quotes are read: a value that expands to spaces stays
    one value; single quotes and `\\$` keep a `$` literal.
    """
    words = _words(args, variables, path, line)
    if words and "=" not in words[0]:
        # The legacy `KEY value with spaces` form: the rest of the line is the value.
        key, _, rest = args.strip().partition(" ")
        value = " ".join(_words(rest, variables, path, line))
        return [(key, value)]
    pairs = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise DockerfileError(path, line, f"expected KEY=VALUE, got {word!r}")
        pairs.append((key, value))
    return pairs


def _words(text: str, variables: Mapping[str, str], path: Path, line: int) -> list[str]:
    """Shell-like words: quotes removed, `$VAR` expanded outside single quotes."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0

    def expand(start: int) -> int:
        match = _VAR.match(text, start)
        if not match:
            current.append("$")
            return start + 1
        current.append(substitute(match.group(0), variables))
        return match.end()

    while i < len(text):
        char = text[i]
        if char.isspace():
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        in_word = True
        if char == "\\" and i + 1 < len(text):
            current.append(text[i + 1])
            i += 2
        elif char == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise DockerfileError(path, line, f"unterminated quote in {text!r}")
            current.append(text[i + 1 : end])
            i = end + 1
        elif char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$':
                    current.append(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    i = expand(i)
                else:
                    current.append(text[i])
                    i += 1
            if i >= len(text):
                raise DockerfileError(path, line, f"unterminated quote in {text!r}")
            i += 1
        elif char == "$":
            i = expand(i)
        else:
            current.append(char)
            i += 1
    if in_word:
        words.append("".join(current))
    return words


def copy_operands(instr: Instruction, path: Path) -> tuple[list[str], str]:
    words = list(instr.exec_form) if instr.exec_form else shlex.split(instr.args)
    if len(words) < 2:
        raise DockerfileError(path, instr.line, f"{instr.keyword} needs a source and a destination")
    return words[:-1], words[-1]
