"""Resource limits for the local backend: one control group per sandbox.

The docker backend gets its limits from the engine. The local backend makes the
group itself, under the cgroup v1 memory, pids and cpu controllers the current
process already belongs to, and every command of the sandbox enters it before it
execs bubblewrap. A memory hog is then killed by the kernel inside the group, a
fork bomb stops at the pids limit, CPUs are shared by weight, and teardown kills
whatever is left in the group.

Where those controllers are not writable (a cgroup v2-only host, no root), the
sandbox runs without limits and says so once: the limits are recorded, not enforced.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from pytest_reactbench.host import pid_alive
from pytest_reactbench.sandbox.base import PIDS_LIMIT, Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "reactbench-"
#: The kernel's weight of one CPU's worth of a cgroup v1 `cpu.shares`.
CPU_SHARES = 1024
#: Enters every group given before `--`, then execs the rest.
ENTER = (
    'p=$$; while [ "$1" != -- ]; do echo "$p" > "$1/cgroup.procs" || exit 125; shift; done; '
    'shift; exec "$@"'
)


class UnenforcedLimits(UserWarning):
    """The host gives no way to enforce a sandbox's limits."""


@functools.cache
def own_parents(root: Path = CGROUP_ROOT) -> dict[str, Path] | None:
    """The cgroup v1 directory of each controller this process is in, when writable
    (read once: a process does not move between groups on its own)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found: dict[str, Path] = {}
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            if name in CONTROLLERS:
                found[name] = root / name / path.lstrip("/")
    if set(found) != set(CONTROLLERS):
        return None
    if not all(p.is_dir() and os.access(p, os.W_OK) for p in found.values()):
        return None
    return found


class ResourceGroup:
    """The group of one sandbox: a directory per controller."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, name: str, limits: Limits) -> ResourceGroup | None:
        parents = own_parents()
        if parents is None:
            return None
        group = cls([parent / f"{PREFIX}{os.getpid()}-{name}" for parent in parents.values()])
        try:
            for path in group.dirs:
                path.mkdir()
            memory, pids, cpu = (parents[c] / group.dirs[0].name for c in CONTROLLERS)
            limit = str(limits.memory_mb * 1024 * 1024)
            (memory / "memory.limit_in_bytes").write_text(limit)
            # Without swap accounting the file is absent; with it, swap is no way out.
            with contextlib.suppress(FileNotFoundError):
                (memory / "memory.memsw.limit_in_bytes").write_text(limit)
            (pids / "pids.max").write_text(str(PIDS_LIMIT))
            # A weight, not a quota: under contention each sandbox gets its `cpus`
            # share, and cores nobody uses are not left idle. A hard quota throttled a
            # React build's bursts so that one trial took 1.2x as long alone and two
            # side by side left a quarter of the machine idle (benchmarks/scaling.py).
            (cpu / "cpu.shares").write_text(str(max(2, int(limits.cpus * CPU_SHARES))))
        except OSError:
            group.remove()
            return None
        return group

    def wrap(self, argv: list[str]) -> list[str]:
        return ["sh", "-c", ENTER, "enter", *(str(d) for d in self.dirs), "--", *argv]

    def members(self) -> list[int]:
        out: set[int] = set()
        for path in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                out.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(out)

    def remove(self, wait: float = 10.0) -> None:
        """Kill every process left in the group, then remove it."""
        deadline = time.monotonic() + wait
        while (members := self.members()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for path in self.dirs:
            # A process still exiting keeps the group busy for a moment.
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        warnings.warn(f"reactbench: could not remove the cgroup {path}", stacklevel=2)
                        break
                    time.sleep(0.05)


def _groups() -> dict[str, list[Path]]:
    by_name: dict[str, list[Path]] = {}
    for parent in (own_parents() or {}).values():
        for path in parent.glob(f"{PREFIX}*"):
            by_name.setdefault(path.name, []).append(path)
    return by_name


def resource_group_of(sandbox: str) -> ResourceGroup | None:
    """The group made for the sandbox directory named `sandbox`, by any process."""
    dirs = [d for name, found in _groups().items() if name.endswith(f"-{sandbox}") for d in found]
    return ResourceGroup(dirs) if dirs else None


def stale_groups() -> Iterator[ResourceGroup]:
    """Groups left by processes that are gone (a killed run)."""
    for name, dirs in _groups().items():
        try:
            pid = int(name[len(PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            yield ResourceGroup(dirs)
