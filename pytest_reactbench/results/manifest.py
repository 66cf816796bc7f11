"""A run's manifest.json: what the session that made the run decided for all its
trials, and each session that resumed it. Written by RunRecords, read here alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_reactbench.results.errors import ResultsError

MANIFEST = "manifest.json"


class _Manifest(BaseModel):
    """A manifest.json: read with one error naming the file and the field, written
    without the fields it leaves unset (None)."""

    model_config = ConfigDict(extra="allow")
    #: Whose manifest it is, for the error of one that is not.
    whose: ClassVar[str]

    @classmethod
    def read(cls, folder: Path) -> Self:
        path = folder / MANIFEST
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(top)"
            raise ResultsError(f"{path}: {where}: {first['msg']}") from None
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{path}: not {cls.whose} manifest ({exc})") from None

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)


class Resumption(BaseModel):
    """A later session that resumed the run."""

    model_config = ConfigDict(extra="allow")

    at: float | None = None
    args: list[str] = Field(default_factory=list)
    #: How many scored trials it kept from the records.
    kept: int = 0


class RunManifest(_Manifest):
    """The run's own decisions. A field that is None was not recorded (a run made by an
    older version), and a resumed run decides it anew."""

    whose: ClassVar[str] = "a run's"

    run_id: str
    started_at: float | None = None
    plugin_version: str = ""
    #: The pytest command line's arguments.
    args: list[str] = Field(default_factory=list)
    task_roots: list[str] = Field(default_factory=list)
    #: The tasks the run is of: the paths its session collected (absolute; the task
    #: roots when none was given), the item ids named (`tasks/x::oracle`), and its
    #: `-k` and `-m` expressions. None: not recorded (an older version).
    selection: list[str] | None = None
    items: list[str] = Field(default_factory=list)
    keyword: str = ""
    markexpr: str = ""
    backend: str | None = None
    agents: list[str] | None = None
    agent_versions: dict[str, str] = Field(default_factory=dict)
    attempts: int | None = None
    retries: int | None = None
    strict: bool | None = None
    images: str | None = None
    #: Whether bakes and sandboxes accepted a registry without npm signatures.
    unsigned_registry: bool | None = None
    timeout_multiplier: float | None = None
    #: "K/N" when the run is one shard of a sharded run.
    shard: str | None = None
    engines: list[str] = Field(default_factory=list)
    resumed: list[Resumption] = Field(default_factory=list)
    #: Set while the run lacks items its last session was to run (it was interrupted
    #: or stopped early): what never ran, and how to resume it.
    incomplete: str | None = None


class TrialManifest(_Manifest):
    """A trial record's manifest.json: which trial, how it was set up, and how to make
    it again (`reactbench replay`). Keys it does not know (a conftest's, a newer
    version's) are kept."""

    whose: ClassVar[str] = "a trial's"

    task: str
    agent: str
    attempt: int = 1
    #: The task's directory, where its instruction and files are.
    task_path: str = ""
    backend: str = ""
    agent_version: str = ""
    #: The --reactbench-agent entry that made the agent (e.g. "tools:anthropic/x").
    agent_spec: str | None = None
    run_id: str = ""
    plugin_version: str = ""
    nodeid: str = ""
    #: The command-line options a replay repeats (env variables named, never valued).
    options: list[str] = Field(default_factory=list)
    limits: dict[str, dict[str, object]] = Field(default_factory=dict)
    timeouts: dict[str, float] = Field(default_factory=dict)
    timeout_multiplier: float = 1.0
    #: The record of the errored try this one started again after.
    retry_of: str | None = None
