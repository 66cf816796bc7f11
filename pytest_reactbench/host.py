"""What this host says of its processes, asked by every layer: the sandbox backends
(whose leftovers, rooms and cgroups belong to a process that may have died) and the
run records (whose trials' processes may have). It imports nothing of the package,
so any layer may import it without reaching up."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether the process runs. A zombie does not: a killed xdist worker stays one
    until its parent reaps it, which may be never while the parent waits on it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
