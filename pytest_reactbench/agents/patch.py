"""The `patch` agent: applies a prepared change instead of acting.

`--reactbench-patch=PATH` is one of:

- a unified diff, applied to every selected task;
- a directory of `<task id>.patch` files;
- a predictions file (`.json` list or `.jsonl` lines) of
  `{"task_id", "model_patch", "agent_name"}` records, the shape SWE-bench users have.

A prediction's `agent_name` names the agent in item ids and records; a task without a
patch is reported as not attempted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_reactbench.agents.base import (
    Agent,
    AgentConfigError,
    AgentContext,
    AgentOutcome,
    shell_outcome,
)
from pytest_reactbench.tasks import Task

PATCH_PATH = "/logs/agent/input/agent.patch"
# `git apply` refuses what does not apply cleanly and says why; that message is the
# agent's failure.
APPLY = f"cd /app && git apply --verbose --whitespace=nowarn {PATCH_PATH}"
_HEADER = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|--- (?:a/)?(\S+)|\+\+\+ (?:b/)?(\S+))", re.M)


class PatchInputError(ValueError):
    """A patch input that cannot be used, naming the file and the record or path."""


def unsafe_paths(diff: str) -> list[str]:
    """Paths of a diff that would leave /app (absolute, or climbing with `..`)."""
    bad = []
    for match in _HEADER.finditer(diff):
        for path in filter(None, match.groups()):
            if path == "/dev/null":
                continue
            if path.startswith("/") or ".." in path.split("/"):
                bad.append(path)
    return sorted(set(bad))


@dataclass(frozen=True)
class Prediction:
    task_id: str
    patch: str
    agent_name: str
    source: str  # where it came from, for messages: "preds.jsonl:3"


def _check(prediction: Prediction) -> Prediction:
    bad = unsafe_paths(prediction.patch)
    if bad:
        raise PatchInputError(
            f"{prediction.source}: model_patch for {prediction.task_id!r} touches paths outside "
            f"/app: {', '.join(bad)}"
        )
    return prediction


def _records(path: Path) -> list[tuple[str, object]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        out = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    out.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise PatchInputError(f"{path}:{number}: not valid JSON ({exc})") from None
        return out
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PatchInputError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(loaded, dict):  # {"task_id": {...}} as some tools write it
        loaded = [{"task_id": k, **v} if isinstance(v, dict) else v for k, v in loaded.items()]
    if not isinstance(loaded, list):
        raise PatchInputError(f"{path}: expected a list of predictions")
    return [(f"{path}[{i}]", record) for i, record in enumerate(loaded)]


def load_predictions(path: Path) -> dict[str, dict[str, Prediction]]:
    """agent name -> task id -> prediction, from any of the three input forms."""
    if not path.exists():
        raise PatchInputError(f"--reactbench-patch: {path} does not exist")
    found: dict[str, dict[str, Prediction]] = {}

    def add(prediction: Prediction) -> None:
        per_agent = found.setdefault(prediction.agent_name, {})
        if prediction.task_id in per_agent:
            raise PatchInputError(
                f"{prediction.source}: task_id {prediction.task_id!r} is predicted twice for "
                f"{prediction.agent_name!r} (first at {per_agent[prediction.task_id].source})"
            )
        per_agent[prediction.task_id] = _check(prediction)

    if path.is_dir():
        for file in sorted(path.glob("*.patch")):
            add(Prediction(file.stem, file.read_text(encoding="utf-8"), "patch", str(file)))
    elif path.suffix in (".json", ".jsonl"):
        for source, record in _records(path):
            if not isinstance(record, dict):
                raise PatchInputError(f"{source}: expected an object with task_id and model_patch")
            for key in ("task_id", "model_patch"):
                if not isinstance(record.get(key), str):
                    raise PatchInputError(f"{source}: {key}: expected a string")
            name = record.get("agent_name") or record.get("model_name_or_path") or "patch"
            add(Prediction(str(record["task_id"]), str(record["model_patch"]), str(name), source))
    else:
        diff = path.read_text(encoding="utf-8")
        bad = unsafe_paths(diff)
        if bad:
            raise PatchInputError(f"{path}: touches paths outside /app: {', '.join(bad)}")
        found["patch"] = {"*": Prediction("*", diff, "patch", str(path))}
    return found


class PatchAgent(Agent):
    def __init__(self, name: str, predictions: dict[str, Prediction], source: Path) -> None:
        self.name = name
        self.predictions = predictions
        self.source = source

    def prediction(self, task: Task) -> Prediction | None:
        return self.predictions.get(task.id) or self.predictions.get("*")

    def not_attempted(self, task: Task) -> str | None:
        if self.prediction(task) is None:
            return f"no patch for task {task.id!r} in {self.source}"
        return None

    def check_tasks(self, task_ids: set[str]) -> None:
        unknown = sorted(set(self.predictions) - task_ids - {"*"})
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise AgentConfigError(
                f"{self.predictions[unknown[0]].source}: task_id {unknown[0]!r} is not a task here{more}")

    def run(self, ctx: AgentContext) -> AgentOutcome:
        prediction = self.prediction(ctx.task)
        assert prediction is not None  # not-attempted tasks never run
        if not prediction.patch.strip():
            return AgentOutcome("completed", 0, "the prediction is an empty patch: nothing to apply")
        ctx.sandbox.write_file(PATCH_PATH, prediction.patch)
        result = ctx.sandbox.exec(APPLY, timeout=ctx.timeout)
        log = f"$ git apply {prediction.source}\n{result.text}{result.error_text}"
        outcome = shell_outcome(result.exit_code, result.timed_out, log)
        if result.exit_code != 0 and not result.timed_out:
            errors = [line for line in f"{result.text}\n{result.error_text}".splitlines()
                      # (not --verbose's "error: while searching for:", the hunk's preamble)
                      if line.startswith(("error:", "fatal:")) and not line.endswith(":")]
            outcome.headline = (f"the patch from {prediction.source} did not apply"
                                + (f" ({'; '.join(errors[:3])})" if errors else ""))
        return outcome
