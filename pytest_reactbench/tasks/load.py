"""Reading a task directory: one clear error naming the file and the field."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from pytest_reactbench.tasks.models import TaskConfig, TestsConfig

M = TypeVar("M", bound=BaseModel)

TASK_FILE = "task.toml"
REQUIRED_FILES = ("instruction.md", "environment/Dockerfile", "tests/Dockerfile", "tests/test.sh")


class TaskError(Exception):
    """A task directory that cannot be used, with the file and field at fault."""

    def __init__(self, path: Path, message: str, field: str | None = None) -> None:
        self.path = path
        self.field = field
        where = f"{path}: {field}: " if field else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Task:
    """One task directory in the Harbor format, with its parsed configuration."""

    path: Path
    config: TaskConfig

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def instruction(self) -> str:
        return (self.path / "instruction.md").read_text(encoding="utf-8")

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    def tests_config(self) -> TestsConfig | None:
        """tests/config.json where the task has one (our verifier and the public grader read it)."""
        path = self.tests_dir / "config.json"
        if not path.exists():
            return None
        return parse_json(path, TestsConfig)

    @property
    def markers(self) -> list[str]:
        meta = self.config.metadata
        names = [meta.difficulty, meta.category, *meta.tags]
        return list(dict.fromkeys(n for n in names if n))


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_validation(error: ValidationError) -> tuple[str, str]:
    """The first problem of a pydantic error as (field, what was expected)."""
    first = error.errors()[0]
    field = _field_path(tuple(first["loc"])) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] not in ("missing",) and "input" in first and not isinstance(
        first["input"], dict | list
    ):
        message += f" (got {first['input']!r})"
    more = len(error.errors()) - 1
    if more:
        message += f"; and {more} more problem{'s' if more > 1 else ''}"
    return field, message


def validate(path: Path, model: type[M], raw: object) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        field, message = describe_validation(exc)
        raise TaskError(path, message, field) from None


def parse_json(path: Path, model: type[M]) -> M:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(path, "file is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(path, f"is not valid JSON: {exc}") from None
    return validate(path, model, raw)


def load_task(path: Path) -> Task:
    """Read and check one task directory (the folder that holds task.toml)."""
    toml_path = path / TASK_FILE
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(toml_path, "file is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(toml_path, f"is not valid TOML: {exc}") from None
    config = validate(toml_path, TaskConfig, raw)
    for name in REQUIRED_FILES:
        if not (path / name).is_file():
            raise TaskError(path / name, "file is missing (every task needs it)")
    for i, artifact in enumerate(config.artifacts):
        if artifact.source != "/app" and not artifact.source.startswith("/app/"):
            raise TaskError(
                toml_path,
                f"{artifact.source!r} is outside the agent workspace /app",
                f"artifacts[{i}].source",
            )
    task = Task(path=path, config=config)
    task.tests_config()  # tests/config.json, where there is one, is checked as task.toml is
    return task


def find_tasks(root: Path) -> Iterator[Path]:
    """Every directory under root that holds a task.toml, in a stable order."""
    if (root / TASK_FILE).is_file():
        yield root
        return
    for toml in sorted(root.rglob(TASK_FILE)):
        if "node_modules" not in toml.parts:
            yield toml.parent
