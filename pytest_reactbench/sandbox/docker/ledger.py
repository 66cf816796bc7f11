"""Room on a Docker engine: `Ledger`, what our sandboxes hold of one engine (CPUs and
memory, by the task's limits), shared by every process of this machine through a file
lock, so that xdist workers wait for room instead of asking the engine for more than
it has. The two sandboxes of one trial (agent and verifier) are one group: they never
work at once, so the group holds the larger of their limits, and the second one is
admitted at once (waiting for it could deadlock two trials that each hold their first).

Room is given in the order it was asked for: a sandbox that waits is queued in the
ledger, and no later one is admitted before it, though the later one would fit. Else a
task that asks for the whole engine (`cpus` = its CPU count) waits for as long as
smaller trials of other workers or runs keep coming, each admitted into the room the
last one left.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_reactbench.host import pid_alive
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.locks import locked_json

if TYPE_CHECKING:
    pass


#: How often a worker waiting for room looks again.
ROOM_POLL_SECONDS = 0.5
#: A worker that waits this long for room says so (once).
ROOM_WAIT_NOTICE_SECONDS = 10.0

_HOST = socket.gethostname()


@dataclass(frozen=True)
class Room:
    cpus: float
    memory_mb: int

    def fits(self, cpus: float, memory_mb: int) -> bool:
        # A hair of slack: CPU shares are floats summed in any order.
        return cpus <= self.cpus + 1e-9 and memory_mb <= self.memory_mb

    def __str__(self) -> str:
        return f"{self.cpus:g} CPU(s), {self.memory_mb} MiB"


def trial_of(labels: Mapping[str, str]) -> str:
    """The sandboxes of one trial: one xdist worker of one run runs one trial at a time."""
    if "run" in labels and "worker" in labels:
        return f"{labels['run']}/{labels['worker']}/{labels.get('task', '')}"
    return f"own-{uuid.uuid4().hex}"


class Ledger:
    """The reservations of one engine, in a JSON file under a lock of its own. Entries
    of processes of this machine that died are dropped when read: a killed worker's
    room comes back."""

    def __init__(self, path: Path, capacity: Room) -> None:
        self.path = path
        self.capacity = capacity
        self._lock = path.with_suffix(".lock")

    @contextlib.contextmanager
    def _open(self) -> Iterator[dict[str, Any]]:
        with locked_json(self.path, self._lock) as data:
            for entries in (data.setdefault("holders", {}), data.setdefault("waiting", {})):
                for key, entry in list(entries.items()):
                    if entry.get("host") == _HOST and not pid_alive(int(entry.get("pid", 0))):
                        del entries[key]
            yield data

    @staticmethod
    def _held(holders: Mapping[str, Mapping[str, Any]]) -> Room:
        """What the groups hold: each group the larger of its members' limits."""
        groups: dict[str, tuple[float, int]] = {}
        for entry in holders.values():
            cpus, memory = groups.get(entry["group"], (0.0, 0))
            groups[entry["group"]] = (max(cpus, float(entry["cpus"])), max(memory, int(entry["memory_mb"])))
        return Room(sum(c for c, _ in groups.values()), sum(m for _, m in groups.values()))

    def free(self) -> Room:
        with self._open() as data:
            held = self._held(data["holders"])
        return Room(self.capacity.cpus - held.cpus, self.capacity.memory_mb - held.memory_mb)

    def load(self) -> tuple[int, float]:
        """(trials placed on the engine now, when the last one was placed, 0 for never):
        how busy it is, and whose turn it is among the engines as busy."""
        with self._open() as data:
            claims = sum(1 for e in data["holders"].values() if e.get("claim"))
            return claims, float(data.get("last_placed", 0.0))

    def claim(self) -> str:
        """A trial placed on this engine, until `release`: it holds no room (its
        sandboxes reserve that when they boot) but counts in `load`."""
        holder = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        with self._open() as data:
            data["last_placed"] = time.time()
            data["holders"][holder] = {"group": f"claim-{holder}", "cpus": 0.0, "memory_mb": 0, "claim": True,
                                       "pid": os.getpid(), "host": _HOST}
        return holder

    def try_reserve(self, holder: str, group: str, cpus: float, memory_mb: int,
                    queued: float | None = None) -> bool:
        """Take room for `holder` if there is room and no sandbox asked for room before
        it (`queued`: when it was queued, None for not yet) is waiting still."""
        if not self.capacity.fits(cpus, memory_mb):
            raise SandboxError(
                f"a sandbox asks for {cpus:g} CPU(s) and {memory_mb} MiB; the engine has "
                f"{self.capacity} in all: lower the task's [environment] limits or use a larger engine")
        with self._open() as data:
            holders = data["holders"]
            joining = any(e["group"] == group for e in holders.values())
            entry = {"group": group, "cpus": cpus, "memory_mb": memory_mb, "pid": os.getpid(), "host": _HOST}
            if not joining:
                earlier = [w for key, w in data["waiting"].items()
                           if key != holder and (queued is None or float(w["since"]) < queued)]
                if earlier:
                    return False
                held = self._held(holders)
                if not Room(self.capacity.cpus - held.cpus,
                            self.capacity.memory_mb - held.memory_mb).fits(cpus, memory_mb):
                    return False
            holders[holder] = entry
            data["waiting"].pop(holder, None)
            return True

    def _queue(self, holder: str, group: str, cpus: float, memory_mb: int) -> float:
        """`holder` waits for room: no later request is admitted before it."""
        with self._open() as data:
            since = max([time.time(), *(float(w["since"]) + 1e-6 for w in data["waiting"].values())])
            data["waiting"][holder] = {"group": group, "cpus": cpus, "memory_mb": memory_mb, "since": since,
                                       "pid": os.getpid(), "host": _HOST}
        return since

    def _unqueue(self, holder: str) -> None:
        with self._open() as data:
            data["waiting"].pop(holder, None)

    def reserve(self, group: str, cpus: float, memory_mb: int,
                notice: Callable[[str], None] | None = None) -> tuple[str, float]:
        """Wait for room and take it; returns the holder id to release and the seconds
        it waited."""
        holder = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        started = time.monotonic()
        noticed = False
        queued: float | None = None
        try:
            while not self.try_reserve(holder, group, cpus, memory_mb, queued):
                if queued is None:
                    queued = self._queue(holder, group, cpus, memory_mb)
                    continue  # queued: look again at once, as the first in line may be this one
                if notice and not noticed and time.monotonic() - started > ROOM_WAIT_NOTICE_SECONDS:
                    noticed = True
                    notice(f"waiting for room ({cpus:g} CPU(s), {memory_mb} MiB) on the engine")
                time.sleep(ROOM_POLL_SECONDS)
        except BaseException:
            if queued is not None:
                self._unqueue(holder)
            raise
        return holder, time.monotonic() - started

    def release(self, holder: str) -> None:
        with self._open() as data:
            data["holders"].pop(holder, None)


def ledger_path(cache: Path, identity: str) -> Path:
    return cache / "docker" / "engines" / f"{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"
