"""The one result of a trial. Workers write it (status.json, JUnit properties), the
controller and the `reactbench` commands read it back (summary, report, compare,
controls, replay), always through this model: no other code parses its forms."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_reactbench.results.failure import Failure

PROPERTY = "reactbench."
#: The JUnit property that carries a whole result, every field, as JSON.
RESULT = f"{PROPERTY}result"
#: The most list entries (findings, failing specs, files) a JUnit property carries.
MAX_LISTED = 20
#: The most characters of a message a JUnit property carries.
MAX_MESSAGE = 2000

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


def strip_ansi(text: str) -> str:
    """Terminal colour and cursor codes (Vitest's, pnpm's) out of what people read."""
    return _ANSI.sub("", text)


def retryable(failure: BaseException | type[BaseException]) -> bool:
    """Whether a fresh start may mend this failure: its class says, by a `retryable`
    attribute (an error is retried unless its class says no)."""
    return bool(getattr(failure, "retryable", True))


#: How a result's agent log tail starts when it is the CLI's own last word.
AGENT_SAID = "The agent said: "


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    NOT_ATTEMPTED = "not-attempted"

    @property
    def valid(self) -> bool:
        """Scored: only passes and fails count; errors and not-attempted are apart."""
        return self in (Verdict.PASSED, Verdict.FAILED)


class Gate(StrEnum):
    """The verifier's two gates: both must pass for reward 1."""

    TESTS = "tests"
    REACT_DOCTOR = "react_doctor"


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Finding(_Part):
    """A new React Doctor finding the change introduced."""

    rule: str = "?"
    file: str = "?"
    line: int | None = None
    message: str = ""

    def __str__(self) -> str:
        return f"{self.rule} {self.file}:{'' if self.line is None else self.line}"

    @classmethod
    def parse(cls, text: str) -> Finding:
        rule, _, where = text.strip().partition(" ")
        file, _, line = where.rpartition(":")
        return cls(rule=rule, file=file or where, line=int(line) if line.isdigit() else None)


class Refusal(_Part):
    """A file of the submission the clean room refused, and why."""

    path: str
    reason: str


class DiffStat(_Part):
    files: list[str] = Field(default_factory=list)
    added: int = 0
    removed: int = 0

    def __str__(self) -> str:
        return f"{len(self.files)} files, +{self.added} -{self.removed}"


class BaseImage(_Part):
    """Provenance of a base image a sandbox ran on: its name in the Dockerfile, the
    digest used for it, and whether that was the public image, a stand-in built here,
    or the system layer."""

    name: str
    digest: str = ""
    origin: Literal["public", "stand-in", "system"] = "public"

    def __str__(self) -> str:
        return f"{self.name}@{self.digest or '?'} ({self.origin})"

    @classmethod
    def parse(cls, text: str) -> BaseImage:
        match = re.fullmatch(r"(.+?)@(\S*) \((public|stand-in|system)\)", text.strip())
        if match is None:
            return cls(name=text.strip())
        digest = "" if match.group(2) == "?" else match.group(2)
        return cls.model_validate({"name": match.group(1), "digest": digest, "origin": match.group(3)})


def _nested(data: Mapping[str, Any]) -> dict[str, Any]:
    """A flat form's fields moved into their parts (a part given whole keeps its own)."""
    if not any(name in data for name in _FLAT):
        return dict(data)
    flat = dict(data)
    parts = {part: dict(flat.get(part) or {}) for part in _PARTS}
    for name, (part, field) in _FLAT.items():
        if name in flat:
            parts[part].setdefault(field, flat.pop(name))
    return {**flat, **parts}


def _gate_text(value: bool | None) -> str:
    return "" if value is None else str(int(value))


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _listed(values: Iterable[object]) -> str:
    return "; ".join(str(v) for v in list(values)[:MAX_LISTED])


def _unlisted(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split("; ") if part.strip()]


class AgentRun(_Part):
    """What the agent did, as its run and its CLI said."""

    #: How it ended ("completed", "timeout", "exited-nonzero"...), None when it never ran.
    ending: str | None = None
    #: Its pinned version (its CLI's), "" when it has none.
    version: str = ""
    #: Tokens and cost it reported (its CLI's output or the model API's usage).
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    #: The tail of its log, or (from a CLI that reports one) `AGENT_SAID` and its last word.
    log_tail: str = ""

    @field_validator("log_tail")
    @classmethod
    def _plain(cls, value: str) -> str:
        return strip_ansi(value)


class Grading(_Part):
    """What the verifier said of the submission: the reward and gates, and from our
    grader's grade.json the reasons behind them."""

    reward: float | None = None
    #: Gate -> passed (None when the verifier did not say).
    gates: dict[Gate, bool | None] = Field(default_factory=dict)
    failing_specs: list[str] = Field(default_factory=list)
    #: Failing spec (as `failing_specs` names it, before its status) -> the first lines
    #: of its assertion message, where the test reports gave one.
    spec_messages: dict[str, str] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    #: Health targets the change was to fix and did not.
    remaining_targets: list[str] = Field(default_factory=list)
    #: Changed files React Doctor did not analyse.
    unscanned: list[str] = Field(default_factory=list)
    refused: list[Refusal] = Field(default_factory=list)
    test_log_tail: str = ""

    @field_validator("test_log_tail")
    @classmethod
    def _plain(cls, value: str) -> str:
        return strip_ansi(value)

    @property
    def failed_gates(self) -> list[Gate]:
        return [gate for gate, ok in self.gates.items() if ok is False]

    def spec_message(self, spec: str) -> str:
        """The assertion message of one entry of `failing_specs` ("" when none was given)."""
        return self.spec_messages.get(spec.rsplit(" (", 1)[0], "")


class Submission(_Part):
    """The agent's work as it was collected: its diff, and what the audit found in it."""

    diff: DiffStat = Field(default_factory=DiffStat)
    #: Submission audit findings ("kind: path (detail)").
    audit: list[str] = Field(default_factory=list)


class Provenance(_Part):
    """Where the trial ran, on what, and where its record is."""

    #: The run this trial belongs to (its id), and the shard of it ("K/N") if sharded:
    #: reports rank one run (or the shards of one) at a time.
    run: str = ""
    shard: str = ""
    #: The trial's run record directory.
    record: str = ""
    backend: str = ""
    #: The engine the agent's sandbox ran on (a Docker engine's URL), when the backend says.
    engine: str = ""
    #: Whether the verdict counts as a formal result (docker on the public images).
    formal: bool = False
    #: Role ("agent", "verifier") -> digest of the image the sandbox was booted from.
    images: dict[str, str] = Field(default_factory=dict)
    #: The base images those were built on, with their provenance.
    bases: list[BaseImage] = Field(default_factory=list)


#: The parts of a result, and how a flat form (a record written before the parts, the
#: readable JUnit properties) names their fields: flat name -> (part, field).
_PARTS = ("agent_run", "grading", "submission", "provenance")
_FLAT: dict[str, tuple[str, str]] = {
    "agent_ending": ("agent_run", "ending"), "agent_version": ("agent_run", "version"),
    "agent_log_tail": ("agent_run", "log_tail"),
    **{name: ("agent_run", name) for name in ("input_tokens", "output_tokens", "cost_usd")},
    **{name: ("grading", name) for name in Grading.model_fields},
    **{name: ("submission", name) for name in Submission.model_fields},
    **{name: ("provenance", name) for name in Provenance.model_fields},
}


class TrialResult(BaseModel):
    """One agent attempt at one task, from boot to verdict: who and what (task, agent,
    attempt), the verdict and why (failure, message), and its parts: what the agent
    did, what the grading said, the work collected, where it ran. Immutable; made only
    in `trial/` (the Trial part by part, and the trials that end without one), read
    back here from its forms (status.json, JUnit properties), and read by every report
    from this one object."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    task: str
    agent: str
    attempt: int = 1
    verdict: Verdict
    #: For errors the failure class (e.g. "VerifierTimeoutError"); for fails the gates.
    failure: Failure = Failure.NONE
    message: str = ""
    #: How many times an error made this trial start again before this result.
    retries: int = 0
    #: For an error: whether a fresh start may end otherwise (its failure class says).
    retryable: bool = True
    #: Phase -> seconds.
    durations: dict[str, float] = Field(default_factory=dict)
    agent_run: AgentRun = Field(default_factory=AgentRun)
    grading: Grading = Field(default_factory=Grading)
    submission: Submission = Field(default_factory=Submission)
    provenance: Provenance = Field(default_factory=Provenance)

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        return _nested(data) if isinstance(data, Mapping) else data

    @field_validator("message")
    @classmethod
    def _plain(cls, value: str) -> str:
        return strip_ansi(value)

    @field_validator("durations")
    @classmethod
    def _milliseconds(cls, value: dict[str, float]) -> dict[str, float]:
        return {phase: round(seconds, 3) for phase, seconds in value.items()}

    @property
    def valid(self) -> bool:
        return self.verdict.valid

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    @property
    def record(self) -> str:
        """The trial's run record directory ("" when none)."""
        return self.provenance.record

    def retried(self, retries: int) -> TrialResult:
        """This result, as the one reached after `retries` fresh starts."""
        return self.model_copy(update={"retries": retries})

    # -- status.json -------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The form written to a record's status.json."""
        return self.model_dump(mode="json")

    @classmethod
    def from_status(cls, status: Mapping[str, Any], manifest: Mapping[str, Any] | None = None,
                    record: str = "") -> TrialResult:
        """A record's status.json (and manifest.json, for what older records kept only
        there). A record still `running` or `incomplete` is an error: no score. (The
        reader says so, not a trial: such a record has no verdict, and the reports
        read records with no trial at hand.)"""
        manifest = manifest or {}
        data = {**{k: manifest[k] for k in ("task", "agent", "attempt", "backend") if k in manifest},
                **status}
        data.setdefault("record", record)
        if isinstance(data.get("diff"), dict) is False:
            data.pop("diff", None)
        if status.get("status") != "complete":
            reason = str(status.get("reason") or "the trial never finished")
            where = Provenance.model_validate(_nested(data).get("provenance") or {})
            return cls(task=str(data.get("task")), agent=str(data.get("agent")),
                       attempt=int(data.get("attempt") or 1), verdict=Verdict.ERROR,
                       failure=Failure.INCOMPLETE_RECORD, message=reason,
                       provenance=Provenance(record=where.record, backend=where.backend))
        return cls.model_validate(data)

    # -- JUnit properties ----------------------------------------------------------------

    def properties(self) -> list[tuple[str, str]]:
        """The testcase properties of this trial in JUnit XML."""
        p = PROPERTY
        run, grading, work, where = self.agent_run, self.grading, self.submission, self.provenance
        props = [
            (f"{p}task", self.task),
            (f"{p}agent", self.agent),
            (f"{p}attempt", str(self.attempt)),
            (f"{p}verdict", self.verdict.value),
            (f"{p}reward", "" if grading.reward is None else f"{grading.reward:g}"),
            *((f"{p}gate.{gate.value}", _gate_text(grading.gates.get(gate))) for gate in Gate),
            (f"{p}failure", str(self.failure)),  # (plain: xdist sends only built-in types)
            (f"{p}agent_ending", run.ending or ""),
            (f"{p}backend", where.backend),
            (f"{p}formal", str(int(where.formal))),
        ]
        if where.engine:
            props.append((f"{p}engine", where.engine))
        if run.version:
            props.append((f"{p}agent_version", run.version))
        for name in ("input_tokens", "output_tokens"):
            if (count := getattr(run, name)) is not None:
                props.append((f"{p}{name}", str(count)))
        if run.cost_usd is not None:
            props.append((f"{p}cost_usd", f"{run.cost_usd:.6f}"))
        if self.message:
            props.append((f"{p}message", self.message[:MAX_MESSAGE]))
        props += [(f"{p}duration.{phase}", f"{seconds:.3f}") for phase, seconds in self.durations.items()]
        if self.retries:
            props.append((f"{p}retries", str(self.retries)))
        if work.diff.files or work.diff.added or work.diff.removed:
            props.append((f"{p}diff.stat", str(work.diff)))
            props.append((f"{p}diff.files", " ".join(work.diff.files[:MAX_LISTED])))
        if work.audit:
            props.append((f"{p}audit", _listed(work.audit)))
        props += [(f"{p}image.{role}", digest) for role, digest in sorted(where.images.items())]
        if where.bases:
            props.append((f"{p}bases", _listed(where.bases)))
        if grading.failing_specs:
            props.append((f"{p}tests.failing", _listed(grading.failing_specs)))
        if grading.findings:
            props.append((f"{p}react_doctor.new", _listed(grading.findings)))
        if grading.unscanned:
            props.append((f"{p}react_doctor.unscanned", _listed(grading.unscanned)))
        if where.record:
            props.append((f"{p}record", where.record))
        # The whole result, for the readers: the properties above are for people and for
        # tools that read JUnit, and they cut long lists and messages. ASCII JSON: no
        # character of it is one that XML cannot carry or that its parsers normalise.
        props.append((RESULT, json.dumps(self.model_dump(mode="json", exclude_defaults=True),
                                         ensure_ascii=True, separators=(",", ":"))))
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TrialResult | None:
        """Back from a testcase's properties; None when they are not a trial's."""
        p = PROPERTY
        if RESULT in props:
            try:
                return cls.model_validate_json(props[RESULT])
            except ValueError:
                pass  # spoiled in transit: the readable properties still say most of it
        if f"{p}task" not in props or f"{p}verdict" not in props:
            return None
        stat = re.fullmatch(r"(\d+) files, \+(\d+) -(\d+)", props.get(f"{p}diff.stat", ""))
        try:
            verdict = Verdict(props[f"{p}verdict"])
        except ValueError:
            verdict = Verdict.ERROR
        return cls.model_validate(dict(  # flat: each field goes into its part
            task=props[f"{p}task"],
            agent=props.get(f"{p}agent", ""),
            attempt=int(props.get(f"{p}attempt") or 1),
            verdict=verdict,
            reward=_float(props.get(f"{p}reward")),
            gates={gate: (None if (v := props.get(f"{p}gate.{gate.value}", "")) == "" else v == "1")
                   for gate in Gate if f"{p}gate.{gate.value}" in props},
            failure=props.get(f"{p}failure", ""),
            message=props.get(f"{p}message", ""),
            agent_ending=props.get(f"{p}agent_ending") or None,
            agent_version=props.get(f"{p}agent_version", ""),
            input_tokens=_int(props.get(f"{p}input_tokens")),
            output_tokens=_int(props.get(f"{p}output_tokens")),
            cost_usd=_float(props.get(f"{p}cost_usd")),
            durations={k.removeprefix(f"{p}duration."): float(v) for k, v in props.items()
                       if k.startswith(f"{p}duration.") and _float(v) is not None},
            record=props.get(f"{p}record", ""),
            backend=props.get(f"{p}backend", ""),
            engine=props.get(f"{p}engine", ""),
            formal=props.get(f"{p}formal") == "1",
            images={k.removeprefix(f"{p}image."): v for k, v in props.items()
                    if k.startswith(f"{p}image.")},
            bases=[BaseImage.parse(b) for b in _unlisted(props.get(f"{p}bases"))],
            retries=int(props.get(f"{p}retries") or 0),
            diff=DiffStat(files=props.get(f"{p}diff.files", "").split(),
                          added=int(stat.group(2)), removed=int(stat.group(3))) if stat else DiffStat(),
            audit=_unlisted(props.get(f"{p}audit")),
            failing_specs=_unlisted(props.get(f"{p}tests.failing")),
            findings=[Finding.parse(f) for f in _unlisted(props.get(f"{p}react_doctor.new"))],
            unscanned=_unlisted(props.get(f"{p}react_doctor.unscanned")),
        ))
