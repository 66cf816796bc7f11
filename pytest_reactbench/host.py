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


def children_in_group(pid: int) -> list[int]:
    """The processes `pid` started that are in its process group still: those a
    terminal's Ctrl-C reaches with it (none where /proc is not there to say)."""
    group = os.getpgid(pid)
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[1]) == pid and int(fields[2]) == group:
            found.append(int(entry))
    return found
