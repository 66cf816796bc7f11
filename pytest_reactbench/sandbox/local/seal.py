"""The seal of a baked layer: every entry it held when its bake ended (kind, mode,
owner, size and a content hash), checked before each use so that a layer changed
since, by anything, is refused and never used.

The check is quick: an entry whose inode and change time are as sealed is unchanged
(no write, chmod, chown, link or rename leaves a change time as it was, and setting it
back needs the host's clock), and only an entry whose change time moved is hashed
again. The seal lives beside the layer, owned by the host's root, where no sandbox's
ids can write.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pytest_reactbench.sandbox.errors import SandboxError

SEAL = "seal.json"


class LayerChanged(SandboxError):
    """A baked layer is not as its bake left it: refused."""


def _entries(layer: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under `layer` (itself as "."), symbolic links not followed."""
    yield ".", os.lstat(layer)
    stack = [(layer, "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as found:
            for entry in found:
                rel = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                yield rel, info
                if stat.S_ISDIR(info.st_mode):
                    stack.append((Path(entry.path), rel + "/"))


def _content(path: Path, info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(info.st_mode):
        return ""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_mode, info.st_uid, info.st_gid, info.st_size if not stat.S_ISDIR(info.st_mode) else 0]


def seal(layer: Path, into: Path) -> None:
    """Write the seal of `layer` to `into`."""
    record = {rel: [*_identity(info), info.st_ino, info.st_ctime_ns, _content(layer / rel, info)]
              for rel, info in _entries(layer)}
    into.write_text(json.dumps(record, separators=(",", ":")))


def verify(layer: Path, sealed: Path) -> None:
    """Raise LayerChanged unless `layer` holds just what `sealed` says it did."""
    image = layer.parent

    def refused(what: str) -> LayerChanged:
        return LayerChanged(f"the baked layer {layer} is refused: {what} since its bake; remove {image} "
                            "(or run `reactbench images --sandbox local --prune 0`) to bake it again")

    try:
        record: dict[str, list[int | str]] = json.loads(sealed.read_text())
    except (OSError, ValueError) as exc:
        raise refused(f"its seal {sealed.name} cannot be read ({exc})") from None
    seen = 0
    for rel, info in _entries(layer):
        want = record.get(rel)
        if want is None:
            raise refused(f"{rel} was added")
        seen += 1
        if _identity(info) != want[:4]:
            raise refused(f"{rel} changed its kind, mode, owner or size")
        if [info.st_ino, info.st_ctime_ns] != want[4:6] and _content(layer / rel, info) != want[6]:
            raise refused(f"{rel} changed")
    if seen != len(record):
        missing = next(rel for rel in record if not os.path.lexists(layer / rel))
        raise refused(f"{missing} was removed")
