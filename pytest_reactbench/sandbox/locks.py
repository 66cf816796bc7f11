"""File locks shared by every process of this machine, JSON kept under one, and files
written whole for the processes reading them. Imports nothing of pytest_reactbench."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


@contextmanager
def locked_json(path: Path, lock: Path) -> Iterator[dict[str, Any]]:
    """A JSON object kept in `path` for every process of the machine: read under `lock`
    (an unreadable file reads as empty), written back atomically if changed."""
    with file_lock(lock):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        before = json.dumps(data, sort_keys=True)
        yield data
        if json.dumps(data, sort_keys=True) != before:
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(data, sort_keys=True))
            os.replace(tmp, path)


def replace_if_changed(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole (others may be reading it), and only if it differs."""
    if path.exists() and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
