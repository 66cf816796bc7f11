"""pydantic models of the files a task is made of: task.toml, tests/config.json, and the
reward.json every grader writes (what our own grader writes beside it: `grade`)."""

from __future__ import annotations

import difflib
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

KNOWN_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3")

# Bounds that catch typos (a timeout in milliseconds, a memory size in bytes) without
# getting in the way of a real task.
MAX_TIMEOUT_SEC = 7 * 24 * 3600.0
MAX_CPUS = 256
MAX_MEMORY_MB = 1024 * 1024


class _Model(BaseModel):
    # Unknown keys are tolerated: the Harbor format grows, and a field we do not
    # use must not stop a task from running.
    model_config = ConfigDict(extra="allow", frozen=True)


class _KnownKeys(BaseModel):
    """A table whose unknown keys are refused, each named with the nearest known key: a
    typo such as `timout_sec` or `sourcez` would otherwise leave a default in force
    unnoticed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = sorted(cls.model_fields)
        for key in data:
            if key not in cls.model_fields:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean {near[0]!r}?" if near else f"; known keys: {', '.join(known)}"
                raise ValueError(f"unknown key {key!r}{hint}")
        return data


class _TomlModel(_KnownKeys):
    """A table of task.toml. Every key the public suite writes is declared."""


def _timeout(default: float) -> float:
    return Field(default=default, gt=0, le=MAX_TIMEOUT_SEC)


class TaskInfo(_TomlModel):
    name: str | None = None
    description: str | None = None
    authors: list[str | dict[str, str]] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class Metadata(_Model):
    """Free-form in the Harbor format (the public suite keeps origin, base_sha... here):
    its keys are descriptive, so unknown ones are kept, not refused."""

    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class AgentConfig(_TomlModel):
    timeout_sec: float = _timeout(600.0)


class EnvironmentConfig(_TomlModel):
    build_timeout_sec: float = _timeout(600.0)
    cpus: float = Field(default=1, gt=0, le=MAX_CPUS)
    memory_mb: int = Field(default=2048, ge=64, le=MAX_MEMORY_MB)
    storage_mb: int = Field(default=10240, ge=64, le=64 * MAX_MEMORY_MB)
    gpus: int = Field(default=0, ge=0, le=64)
    allow_internet: bool = False
    #: Written by a few public tasks ("no-network"); grading is offline here anyway.
    network_mode: str | None = None
    #: A prebuilt image in place of the Dockerfile (Harbor); the Dockerfile is baked here.
    docker_image: str | None = None

    @field_validator("cpus")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class VerifierConfig(_TomlModel):
    timeout_sec: float = _timeout(600.0)
    environment_mode: Literal["separate", "shared"] = "separate"
    environment: EnvironmentConfig | None = None
    #: Variables Harbor passes to the verifier.
    env: dict[str, str] = Field(default_factory=dict)


class Artifact(_TomlModel):
    source: str
    #: Where the run record keeps a copy of what crossed: `artifacts/<destination>.tar`.
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)

    @field_validator("destination")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip("/") or value.startswith("/")
                                  or ".." in value.split("/")):
            raise ValueError("must be a relative name inside the run record, e.g. workspace")
        return value

    @field_validator("source")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path inside the agent sandbox, e.g. /app")
        if ".." in value.split("/"):
            raise ValueError("must not contain '..'")
        return value.rstrip("/") or "/"


class SolutionConfig(_TomlModel):
    #: Variables Harbor passes to the reference solution.
    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_TomlModel):
    """task.toml, in both forms of the public suite: `version = "1.0"` and
    `schema_version = "1.3"` with a `[task]` table."""

    version: str | None = None
    schema_version: str | None = None
    task: TaskInfo | None = None
    metadata: Metadata = Field(default_factory=Metadata)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    artifacts: list[Artifact] = Field(default_factory=list)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    #: Where a task was adapted from (Harbor).
    source: str | None = None

    @model_validator(mode="after")
    def _known_version(self) -> TaskConfig:
        declared = self.schema_version or self.version
        if declared is None:
            raise ValueError(
                'declares no format version: add `version = "1.0"` or `schema_version = "1.3"`'
            )
        if declared not in KNOWN_SCHEMA_VERSIONS:
            raise ValueError(
                f"format version {declared!r} is not one of {', '.join(KNOWN_SCHEMA_VERSIONS)}"
            )
        return self

    @property
    def verifier_environment(self) -> EnvironmentConfig:
        return self.verifier.environment or self.environment


class _Strict(_KnownKeys):
    """A table of tests/config.json, which has one reader per task (our verifier or the
    public grader) and no room to grow silently: a key neither reads is a typo."""


class NamedFinding(_Strict):
    """A React Doctor finding as the public grader names it: rule, file and title."""

    rule: str = Field(min_length=1)
    filePath: str = Field(min_length=1)
    title: str = Field(min_length=1)


class ReactDoctorConfig(_Strict):
    scan_root: str = "/app"
    mode: Literal["gate", "health"] = "gate"
    #: Health mode: findings the change must remove; `rule@file` (our verifier) or a
    #: Finding (the public grader).
    targets: list[NamedFinding | str] = Field(default_factory=list)
    #: New findings that do not count against the change (rule, file and title), as the
    #: public grader reads them; our verifier too (a mined task lists the reference's own).
    ignored_new_footguns: list[NamedFinding] = Field(default_factory=list)
    ignored_titles: list[str] = Field(default_factory=list)
    exclude_rules: list[str] = Field(default_factory=list)
    #: The scan is reported but does not gate the reward.
    telemetry_only: bool = False
    #: The scan of the submission's own limit: outlasting it is the agent's fail.
    timeout_sec: float = _timeout(120.0)

    @field_validator("targets")
    @classmethod
    def _rule_at_file(cls, targets: list[NamedFinding | str]) -> list[NamedFinding | str]:
        for target in targets:
            if isinstance(target, str) and "@" not in target:
                raise ValueError(f"{target!r} must be rule@file or {{rule, filePath, title}}")
        return targets


class TestCommand(_Strict):
    __test__ = False  # not a pytest test class
    cmd: str = Field(min_length=1)
    cwd: str | None = None
    timeout_sec: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SEC)
    #: Run after `cmd`, in a fresh room, with the e2e specs copied in only then.
    e2e_cmd: str | None = None
    #: The folder of tests/specs that holds the e2e specs.
    e2e_specs: str = "e2e"
    #: Every hidden test the gate expects, by spec file (relative to /app) and
    #: title path ("describe > test"); a skipped or missing one fails.
    expected: dict[str, list[str]] = Field(default_factory=dict)
    #: Without `expected`, a test the runner skipped on purpose (it.skip, it.todo) is
    #: not held against the submission: a mined draft, whose list comes from its first run.
    allow_skipped: bool = False
    timeout_ms: int | None = Field(default=None, gt=0)
    #: The public grader: `jest_json` reads `json_file` instead of the exit code.
    mode: Literal["jest_json"] | None = None
    json_file: str | None = None

    @model_validator(mode="after")
    def _json_file(self) -> TestCommand:
        if self.mode == "jest_json" and not self.json_file:
            raise ValueError("mode jest_json needs json_file, the report jest writes")
        return self


class PreTest(_Strict):
    cmd: str = Field(min_length=1)
    #: A failing pre-test step fails the trial (the default) or is only logged.
    fail_closed: bool = True


class TestsConfig(_Strict):
    """tests/config.json: what the verifier runs and how React Doctor is scanned. Every
    key our verifier or the public suite's grader reads; no other."""

    __test__ = False  # not a pytest test class

    rd: ReactDoctorConfig = Field(default_factory=ReactDoctorConfig)
    test: TestCommand
    verifier_timeout_sec: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SEC)
    #: Our verifier: the source directories the agent's change may touch.
    sources: list[str] = Field(default_factory=lambda: ["src"])
    #: Test-like folders under the source roots the submission may change.
    test_like_allowed: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    pre_test: PreTest | None = None
    pre_test_cleanup: list[str] = Field(default_factory=list)
    post_restore_cmd: str | None = None
    reset_globs: list[str] = Field(default_factory=list)
    reset_spec_surface: bool = False


class Reward(_Model):
    """/logs/verifier/reward.json. `reward` is the verdict; the gates say why."""

    reward: float = Field(ge=0, le=1)
    tests: float | None = Field(default=None, ge=0, le=1)
    react_doctor: float | None = Field(default=None, ge=0, le=1)

    @model_validator(mode="after")
    def _consistent(self) -> Reward:
        # A grader may run React Doctor as telemetry only, saying so with
        # `react_doctor_gates_reward = 0`; its gate then does not bear on the reward.
        rd_counts = (self.model_extra or {}).get("react_doctor_gates_reward", 1) != 0
        gates = [g for g in (self.tests, self.react_doctor if rd_counts else None) if g is not None]
        if self.reward >= 1 and any(g < 1 for g in gates):
            raise ValueError("reward is 1 while a gate failed (tests or react_doctor is 0)")
        return self


