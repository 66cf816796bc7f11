"""Why a trial did not pass: the failure class a result carries. It is written as text
(status.json, the `reactbench.failure` JUnit property: a published format), so the type
is that text itself, and code tells failures apart through it, never by a literal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema


class Failure(str):
    """The failure class of a result, "" when it has none (a pass, a trial not
    attempted). An error's is the class of what broke: an exception's class name
    (`Failure.of`), `WORKER_CRASHED`, `INCOMPLETE_RECORD`. A fail's is the gates that
    failed joined with "+" (`Failure.of_gates`, `REWARD` when none did and the reward
    is below 1), `AUDIT`, `TAMPERED`, or the class a submission's failure names.

    The set is open (any exception of the harness names its own), so this is a `str`
    with the known classes as constants rather than a closed enum."""

    NONE: ClassVar[Failure]
    #: The reward is below 1 and no gate says it failed.
    REWARD: ClassVar[Failure]
    #: --reactbench-strict: the submission touches files that can fool a grader.
    AUDIT: ClassVar[Failure]
    #: The grader's canaries were reported otherwise than planted: the code under test
    #: rewrote the test results.
    TAMPERED: ClassVar[Failure]
    #: A record that never reached a verdict (an interrupted session, a dead worker).
    INCOMPLETE_RECORD: ClassVar[Failure]
    #: xdist lost the worker that ran the item.
    WORKER_CRASHED: ClassVar[Failure]

    #: What joins the gates of a fail.
    GATE_JOINER: ClassVar[str] = "+"

    __slots__ = ()

    @classmethod
    def of(cls, error: BaseException | type[BaseException]) -> Failure:
        """The failure of an error: its class's name."""
        kind = error if isinstance(error, type) else type(error)
        return cls(kind.__name__)

    @classmethod
    def of_gates(cls, failed: Iterable[str]) -> Failure:
        """The failure of a fail: the gates that failed, or `REWARD` when none did."""
        return cls(cls.GATE_JOINER.join(failed) or cls.REWARD)

    def is_(self, kind: type[BaseException]) -> bool:
        """Whether this is the failure of an error of class `kind`."""
        return self == kind.__name__

    def __repr__(self) -> str:
        return f"Failure({str.__repr__(self)})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        # Validated from its text, serialised as that text.
        return core_schema.no_info_after_validator_function(
            cls, core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str))


Failure.NONE = Failure("")
Failure.REWARD = Failure("reward")
Failure.AUDIT = Failure("audit")
Failure.TAMPERED = Failure("tampered")
Failure.INCOMPLETE_RECORD = Failure("incomplete record")
Failure.WORKER_CRASHED = Failure("WorkerCrashed")
