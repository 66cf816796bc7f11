"""File locks shared by every process of this machine. Imports nothing of
pytest_reactbench."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path, *, blocking: bool = True) -> Iterator[None]:
    """An exclusive lock held while the block runs, shared by every process of the
    machine (xdist workers, concurrent sessions). The kernel drops it when its holder
    dies, so a lock file is never stale. Not `blocking`: BlockingIOError when another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
