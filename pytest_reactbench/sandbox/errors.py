"""The sandbox's failures, one class each, so that a failure's class says who failed:
the harness (`SandboxError` and its kinds) or the agent (`ArchiveTooLarge`)."""

from __future__ import annotations


class SandboxError(Exception):
    """The sandbox or its engine broke: a harness error, never the agent's fault."""


class ArchiveTooLarge(Exception):
    """A tree being collected holds more than its limit after its excludes: what the
    agent left, so the agent's fail, never a harness error."""

    def __init__(self, src: str, limit: int) -> None:
        super().__init__(f"{src} holds more than {limit // (1024 * 1024)} MiB after the excludes "
                         "of [[artifacts]]")
        self.src = src
        self.limit = limit


class BakeError(SandboxError):
    """An image could not be built from its recipe."""


class EngineLost(SandboxError):
    """The engine a sandbox ran on stopped answering mid-trial: an error, retried on
    another engine of the pool."""

    def __init__(self, message: str, engine: str = "") -> None:
        super().__init__(message)
        #: The lost engine: a trial lost while its sandbox booted knows it from here.
        self.engine = engine
