"""A run's manifest.json: what the session that made the run decided for all its
trials, and each session that resumed it. Written by RunRecords, read here alone."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_reactbench.results.load import ResultsError

MANIFEST = "manifest.json"


class Resumption(BaseModel):
    """A later session that resumed the run."""

    model_config = ConfigDict(extra="allow")

    at: float | None = None
    args: list[str] = Field(default_factory=list)
    #: How many scored trials it kept from the records.
    kept: int = 0


class RunManifest(BaseModel):
    """The run's own decisions. A field that is None was not recorded (a run made by an
    older version), and a resumed run decides it anew."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    started_at: float | None = None
    plugin_version: str = ""
    #: The pytest command line's arguments.
    args: list[str] = Field(default_factory=list)
    task_roots: list[str] = Field(default_factory=list)
    backend: str | None = None
    agents: list[str] | None = None
    agent_versions: dict[str, str] = Field(default_factory=dict)
    attempts: int | None = None
    retries: int | None = None
    strict: bool | None = None
    images: str | None = None
    timeout_multiplier: float | None = None
    #: "K/N" when the run is one shard of a sharded run.
    shard: str | None = None
    engines: list[str] = Field(default_factory=list)
    resumed: list[Resumption] = Field(default_factory=list)
    #: Set while the run lacks items its last session was to run (it was interrupted
    #: or stopped early): what never ran, and how to resume it.
    incomplete: str | None = None

    @classmethod
    def read(cls, run_dir: Path) -> RunManifest:
        path = run_dir / MANIFEST
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "(top)"
                raise ResultsError(f"{path}: {where}: {first['msg']}") from None
            raise ResultsError(f"{path}: not a run's manifest ({exc})") from None

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)
