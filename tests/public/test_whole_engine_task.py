"""A task that asks for the whole engine (`cpus = 2` on a 2-CPU engine, as many public
tasks do on a small machine) shares the engine with the small trials of other workers
and runs. Room goes in the order it was asked for: once the large sandbox waits, a
small one that would fit beside what runs waits behind it, so the large one boots when
the trials before it end instead of waiting for a moment when none is running."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.docker.ledger import Ledger, Room


def waiting(ledger: Ledger) -> int:
    with ledger._open() as data:
        return len(data.get("waiting", {}))


def test_a_sandbox_that_asks_for_the_whole_engine_is_not_overtaken(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "engine.json", Room(2, 8192))
    order: list[str] = []
    holders: dict[str, str] = {}

    def boot(name: str, group: str, cpus: float, memory_mb: int) -> threading.Thread:
        def run() -> None:
            holders[name], _ = ledger.reserve(group, cpus, memory_mb)
            order.append(name)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    first, _ = ledger.reserve("run-a/gw0/small-1", 1, 2048)  # another run's trial
    whole = boot("whole", "run-b/gw0/whole-engine", 2, 8192)
    time.sleep(1.0)
    assert order == []  # it waits for the first to end

    # The next small trial would fit beside the first; it waits behind the large one.
    small = boot("small-2", "run-a/gw1/small-2", 1, 2048)
    time.sleep(1.5)
    assert order == []
    # The second sandbox of a running trial (its verifier) still joins at once.
    joined, waited = ledger.reserve("run-a/gw0/small-1", 1, 1024)
    assert waited < 1

    ledger.release(joined)
    ledger.release(first)
    whole.join(timeout=10)
    assert order == ["whole"]
    time.sleep(1.0)
    assert order == ["whole"]  # the engine is the large sandbox's until it ends
    ledger.release(holders["whole"])
    small.join(timeout=10)
    assert order == ["whole", "small-2"]
    ledger.release(holders["small-2"])
    assert ledger.free() == Room(2, 8192) and waiting(ledger) == 0


def test_a_sandbox_that_stops_waiting_leaves_the_queue(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_reactbench.sandbox.docker.ledger.ROOM_WAIT_NOTICE_SECONDS", 0.2)
    ledger = Ledger(tmp_path / "engine.json", Room(2, 8192))
    first, _ = ledger.reserve("run-a/gw0/small-1", 2, 2048)

    def give_up(message: str) -> None:
        raise KeyboardInterrupt  # the session was stopped while it waited

    with contextlib.suppress(KeyboardInterrupt):
        ledger.reserve("run-b/gw0/whole-engine", 2, 8192, notice=give_up)
    assert waiting(ledger) == 0
    ledger.release(first)
    assert ledger.reserve("run-c/gw0/next", 1, 2048)[1] < 1
