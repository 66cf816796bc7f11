"""What long work (a bake, an agent at work, a grading) says while it runs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from pytest_reactbench.sandbox.base import Progress

#: How often long work (a bake, an agent at work, a grading) says it is still going.
HEARTBEAT_SEC = 30.0


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


@contextlib.contextmanager
def heartbeat(progress: Progress, what: Callable[[], str], every: float = HEARTBEAT_SEC) -> Any:
    """While the block runs, a progress line every `every` seconds: what runs (asked
    each time) and for how long. Plain lines, so that a CI log shows them as a terminal
    does, and nothing when the work is quicker than one beat."""
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            progress(f"{what()}, still running after {elapsed(time.monotonic() - started)}")

    thread = threading.Thread(target=beat, name="reactbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
