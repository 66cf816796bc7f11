"""What a trial's record lists as it happens (events.jsonl, one JSON object a line with
the event's name under "event"). The names are a published format: each member is
the exact text it writes, and readers tell events apart through this type."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    TRIAL_START = "trial-start"
    #: An image of the trial baked (or found baked): `image`, then `digest`, `cached`.
    BAKE_START = "bake-start"
    BAKE_END = "bake-end"
    #: The agent's sandbox waited for room on a full engine (`seconds`).
    ROOM_WAIT = "room-wait"
    #: The engine the agent's sandbox runs on.
    ENGINE = "engine"
    #: What the agent's CLI answered to its version command.
    AGENT_VERSION = "agent-version"
    AGENT_START = "agent-start"
    AGENT_END = "agent-end"
    #: How the agent's run ended (`ending`, `exit_code`).
    AGENT_ENDED = "agent-ended"
    #: What the agent left running could not be ended (its doing, not an error).
    LEFTOVERS_NOT_ENDED = "leftovers-not-ended"
    TRAJECTORY_NOT_WRITTEN = "trajectory-not-written"
    ARTIFACTS_START = "artifacts-start"
    ARTIFACTS_END = "artifacts-end"
    VERIFY_START = "verify-start"
    VERIFY_END = "verify-end"
    TEARDOWN = "teardown"
    TEARDOWN_FAILED = "teardown-failed"
    #: The trial ended in an error and starts again in a fresh record.
    RETRIED = "retried"
    #: The trial never reached a verdict.
    INCOMPLETE = "incomplete"
    # What an agent reports of its own work.
    COMMAND = "command"
    COMMAND_NOT_STARTED = "command-not-started"
    MODEL = "model"
    TOOL = "tool"
    MESSAGE = "message"

    @classmethod
    def start(cls, phase: str) -> Event:
        """The event that opens a timed phase of the trial ("agent", "verify"...)."""
        return cls(f"{phase}-start")

    @classmethod
    def end(cls, phase: str) -> Event:
        """The event that closes a timed phase of the trial."""
        return cls(f"{phase}-end")
