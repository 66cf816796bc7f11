"""The images bound for one engine of a pool, in a list every process of this machine
shares (beside the engine's ledger), so that one save brings them all."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pytest_reactbench.sandbox.locks import locked_json

#: An image wanted on an engine that no engine of a pool has after this long is
#: forgotten (the run that wanted it died before it was baked).
WANTED_SECONDS = 3600.0
#: A copy waits until the list of images wanted on its engine has not changed for
#: this long (the prebake lists a session's images one recipe at a time), at most
#: WANTED_SETTLE_MAX_SECONDS.
WANTED_SETTLE_SECONDS = 3.0
WANTED_SETTLE_MAX_SECONDS = 60.0


class Wanted:
    """The images bound for one engine, listed by every process of this machine that
    knows one is needed there (the prebake lists all of a session's), so that whichever
    process copies images to the engine next copies them all in one save."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = path.with_suffix(".lock")

    @contextlib.contextmanager
    def _open(self) -> Iterator[dict[str, float]]:
        with locked_json(self.path, self._lock) as data:
            try:
                wanted = {str(k): float(v) for k, v in data.items()}
            except (ValueError, TypeError):
                wanted = {}
            yield wanted
            data.clear()
            data.update(wanted)

    def settle(self) -> None:
        """Wait until the list has been still for WANTED_SETTLE_SECONDS: a copy that
        starts while the prebake is listing would send the rest in a second save,
        with every layer they share again."""
        deadline = time.monotonic() + WANTED_SETTLE_MAX_SECONDS
        while time.monotonic() < deadline:
            try:
                still = time.time() - self.path.stat().st_mtime
            except OSError:
                return
            if still >= WANTED_SETTLE_SECONDS:
                return
            time.sleep(WANTED_SETTLE_SECONDS - still)

    def add(self, refs: Sequence[str]) -> None:
        if refs:
            with self._open() as data:
                for ref in refs:
                    data.setdefault(ref, time.time())

    def listed(self) -> list[str]:
        with self._open() as data:
            for ref, since in list(data.items()):
                if time.time() - since > WANTED_SECONDS:
                    del data[ref]
            return sorted(data)

    def done(self, refs: Sequence[str]) -> None:
        with self._open() as data:
            for ref in refs:
                data.pop(ref, None)
