"""What our grader writes beside reward.json, and the contract it and the harness
share: `grader/contract.json` beside this module, read by both (the grader
reads it beside itself in the verifier image), and `schema.json` beside it, the JSON
Schema of these models, which the grader's own tests hold its documents to. The
models forbid keys they do not declare: the grader ships with this package, so a
key on one side only is a mistake, and a fast test (tests/verifier/test_contract.py)
fails on it.

Changing the contract: edit these models, rewrite schema.json (`python -c 'from
pytest_reactbench.verifier.contract import write_schema; write_schema()'`), change the
grader to match, and bump `grade_version` in contract.json when a harness of the old
version could not read the new grade.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import models_json_schema

from pytest_reactbench.tasks.models import Reward

#: The grader's folder (the verifier layer copies it into the image as it is).
GRADER_FILES = Path(__file__).resolve().parent / "grader"
CONTRACT_FILE = GRADER_FILES / "contract.json"
SCHEMA_FILE = GRADER_FILES / "schema.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GraderContract(_Strict):
    """contract.json: the constants both sides read."""

    #: progress.json's `grader`: a grader that writes it is ours.
    grader: str
    #: The grade.json (and progress.json) version this harness and the grader speak.
    grade_version: int
    #: The grader's exit code for a harness error (harness-error.txt says which).
    harness_error_exit: int
    #: Phases before the submission is touched: a grading stopped in one is an error.
    before_submission: tuple[str, ...]
    #: The React Doctor the gate is pinned to (the verifier layer installs it).
    react_doctor: str
    #: Where the verifier layer puts the grader in the image.
    home: str


CONTRACT = GraderContract.model_validate_json(CONTRACT_FILE.read_text())
GRADE_VERSION = CONTRACT.grade_version


class TestPhase(_Strict):
    __test__ = False  # not a pytest test class
    name: str
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float | None = None
    #: Canaries the grader planted in this phase's specs (some must fail, some pass).
    planted: int = 0
    #: Its exit 1 came from the canaries planted to fail alone (no unhandled error, no
    #: other failure), so the phase counts as exiting cleanly.
    exit_explained: bool = False
    #: The kernel killed a process of the verifier for want of memory while it ran (the
    #: sandbox's /tmp, a tmpfs, counts against the same limit).
    out_of_memory: bool = False


class SpecResult(_Strict):
    """One test the runners reported, as the gate judged it."""

    #: The spec file, relative to /app ("playwright" for a run-level Playwright error).
    file: str
    #: Its title path, joined by " > " (as tests/config.json lists expected tests).
    name: str
    #: The runner's status: passed, failed, skipped, pending, todo, missing...
    status: str
    #: The first lines of its failure message, if the runner gave one.
    message: str = ""


class TestRoom(_Strict):
    """Who ran the test commands: the unprivileged uid, and whether in a PID namespace."""

    __test__ = False  # not a pytest test class
    uid: int
    pid_namespace: bool


class TestsGate(_Strict):
    """grade.json `tests`: the hidden tests' gate."""

    __test__ = False  # not a pytest test class
    ok: bool
    exit_code: int | None = None
    timed_out: bool = False
    expected: int = 0
    phases: list[TestPhase] = Field(default_factory=list)
    failing: list[str] = Field(default_factory=list)
    #: What the canaries caught: results the tested code rewrote (also heading `failing`).
    tampered: list[str] = Field(default_factory=list)
    #: Every test the runners reported, in the order they ran.
    specs: list[SpecResult] = Field(default_factory=list)
    room: TestRoom | None = None


class DoctorFinding(_Strict):
    rule: str
    file: str
    line: int | None = None
    title: str = ""
    message: str = ""
    category: str = ""
    count: str = ""


class DoctorGate(_Strict):
    """grade.json `react_doctor`: new findings against the baseline, targets left."""

    ok: bool
    new: list[DoctorFinding] = Field(default_factory=list)
    #: New findings the task tolerates (`rd.ignored_new_footguns`).
    ignored: list[DoctorFinding] = Field(default_factory=list)
    fixed_targets: list[str] = Field(default_factory=list)
    remaining_targets: list[str] = Field(default_factory=list)
    unscanned: list[str] = Field(default_factory=list)
    #: Whether the scan ran beside the test commands (it does where it has a CPU).
    alongside_tests: bool | None = None


class RefusedPath(_Strict):
    path: str
    reason: str


class GradedSubmission(_Strict):
    refused: list[RefusedPath] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)


class GradeFailure(_Strict):
    """Why grading stopped early: the submission broke it during `phase`."""

    phase: str
    reason: str


class GradeDetails(_Strict):
    """/logs/verifier/grade.json, written by our verifier beside reward.json."""

    version: int
    reward: float = Field(ge=0, le=1)
    tests: TestsGate
    react_doctor: DoctorGate
    submission: GradedSubmission = Field(default_factory=GradedSubmission)
    timings: dict[str, float] = Field(default_factory=dict)
    failure: GradeFailure | None = None

    @field_validator("version")
    @classmethod
    def _known(cls, value: int) -> int:
        if value != GRADE_VERSION:
            raise ValueError(f"is {value}; this harness reads version {GRADE_VERSION}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GradeDetails:
        if self.reward >= 1 and not (self.tests.ok and self.react_doctor.ok and self.failure is None):
            raise ValueError("reward is 1 while a gate failed or grading stopped early")
        return self


class GraderProgress(_Strict):
    """/logs/verifier/progress.json: how far our verifier got (`phase`)."""

    grader: str
    version: int
    phase: str

    @field_validator("grader")
    @classmethod
    def _ours(cls, value: str) -> str:
        if value != CONTRACT.grader:
            raise ValueError(f"is {value!r}, not {CONTRACT.grader!r}")
        return value


def read_grade(verifier_logs: Path) -> GradeDetails | None:
    """The grade.json of a grading's logs (a run record's `verifier/`), or None when
    there is none that this harness reads (a task's own grader, an older version)."""
    try:
        return GradeDetails.model_validate_json((verifier_logs / "grade.json").read_bytes())
    except (OSError, ValueError):
        return None


def schema() -> dict[str, object]:
    """The JSON Schema of what the grader writes: grade.json, progress.json and
    reward.json, each a definition."""
    _, document = models_json_schema(
        [(GradeDetails, "validation"), (GraderProgress, "validation"), (Reward, "validation")],
        title="What our grader writes in /logs/verifier")
    return document


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def write_schema() -> None:
    """Rewrite schema.json from these models."""
    SCHEMA_FILE.write_text(schema_text())
    print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
