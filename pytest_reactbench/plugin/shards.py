"""CI shards: `--reactbench-shard=K/N` keeps the items of the tasks that hash to shard
K of N. A task's shard depends on its id alone, so adding a task never moves another
one, and every agent and attempt of a task stays in one shard (one shard's run holds
whole tasks; the merged shards are one run)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import pytest

#: (K, N): the K-th of N shards, K counted from 1.
Shard = tuple[int, int]


def parse_shard(text: str, source: str = "--reactbench-shard") -> Shard:
    k, sep, n = text.strip().partition("/")
    if not sep or not k.isdigit() or not n.isdigit() or not 1 <= int(k) <= int(n):
        raise ValueError(f"{source}: {text!r} must be K/N with 1 <= K <= N, e.g. 2/3")
    return int(k), int(n)


def shard_text(shard: Shard | None) -> str:
    """`K/N`, as the option takes it ("" for an unsharded run)."""
    return f"{shard[0]}/{shard[1]}" if shard else ""


def shard_of(task_id: str, shards: int) -> int:
    """The shard (1..shards) a task belongs to: a hash of its id, not its position."""
    digest = hashlib.sha256(task_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


def select(items: Sequence[pytest.Item], shard: Shard, task_of: Callable[[pytest.Item], str | None]) \
        -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) of the items; an item that is no task's (None) stays."""
    k, n = shard
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        task = task_of(item)
        (kept if task is None or shard_of(task, n) == k else dropped).append(item)
    return kept, dropped
