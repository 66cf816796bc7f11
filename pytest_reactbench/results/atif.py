"""The models of ATIF, the Agent Trajectory Interchange Format (Harbor's RFC 0001), as
this package writes it (`results/trajectory.py` makes one from a trial's record): our
own models, written at `SCHEMA_VERSION`, a version Harbor's models read."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION: Literal["ATIF-v1.7"] = "ATIF-v1.7"


class _Atif(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(_Atif):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class ToolCall(_Atif):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] | None = None


class ObservationResult(_Atif):
    source_call_id: str | None = None
    content: str | None = None
    extra: dict[str, Any] | None = None


class Observation(_Atif):
    results: list[ObservationResult] = Field(default_factory=list)


class Metrics(_Atif):
    #: Every input token, cached ones included.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    extra: dict[str, Any] | None = None


class Step(_Atif):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str = ""
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    llm_call_count: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_fields(self) -> Step:
        if self.source != "agent":
            for name in ("model_name", "reasoning_content", "tool_calls", "metrics"):
                if getattr(self, name) is not None:
                    raise ValueError(f"step {self.step_id}: {name} belongs to agent steps only")
        if self.observation is not None:
            ids = {call.tool_call_id for call in self.tool_calls or ()}
            for result in self.observation.results:
                if result.source_call_id is not None and result.source_call_id not in ids:
                    raise ValueError(f"step {self.step_id}: an observation answers "
                                     f"{result.source_call_id!r}, no tool call of the step")
        return self


class FinalMetrics(_Atif):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class Trajectory(_Atif):
    schema_version: Literal["ATIF-v1.7"] = SCHEMA_VERSION
    session_id: str | None = None
    agent: AtifAgent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _numbered(self) -> Trajectory:
        for at, step in enumerate(self.steps, 1):
            if step.step_id != at:
                raise ValueError(f"steps[{at - 1}].step_id is {step.step_id}, not {at}")
        return self

    def to_json(self) -> str:
        data = self.model_dump(mode="json", exclude_none=True)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
