"""Git mirrors for bakes: `--reactbench-git-mirror=PREFIX=LOCATION`.

A task's Dockerfile may clone from the network (`git clone https://github.com/o/r
/app`). A mirror rewrites such URLs while the image is baked, through git's own
`url.<base>.insteadOf` set in the build's environment (GIT_CONFIG_COUNT/KEY/VALUE),
so the Dockerfile builds unchanged from a local copy: air-gapped machines, pinned
snapshots, or repositories that are gone from their host.

LOCATION is a git URL, or a directory whose layout follows the prefix: with
`https://github.com/=/srv/git`, `https://github.com/o/r` is `/srv/git/o/r` (or
`/srv/git/o/r.git`), a bare repository. The local backend binds such a directory
into the bake; a Docker build cannot see the host's files, so the docker backend
serves it with `git daemon` on the loopback (`docker/mirrors.py`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Where the local backend binds the directory of mirror number N.
LOCAL_MOUNT = "/run/reactbench/git-mirrors"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/\s]+@[^/\s]+:")
# Context files larger than this are not searched for a prefix (archives, lockfiles).
_SCAN_LIMIT = 1 << 20


class GitMirrorError(ValueError):
    pass


@dataclass(frozen=True)
class GitMirror:
    """URLs starting with `prefix` are fetched from `location` instead."""

    prefix: str
    location: str

    @property
    def is_directory(self) -> bool:
        return not _URL.match(self.location)

    def __str__(self) -> str:
        return f"{self.prefix}={self.location}"


def parse_git_mirrors(entries: Iterable[str], source: str) -> tuple[GitMirror, ...]:
    """`PREFIX=LOCATION` entries; a later entry for the same prefix wins."""
    mirrors: dict[str, GitMirror] = {}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        prefix, sep, location = entry.partition("=")
        prefix, location = prefix.strip(), location.strip()
        if not sep or not prefix or not location:
            raise GitMirrorError(
                f"{source}: git mirror {entry!r} must be PREFIX=LOCATION, e.g. "
                "https://github.com/=/srv/git-mirrors"
            )
        if not _URL.match(location):
            path = Path(os.path.expanduser(location))
            if not path.is_dir():
                raise GitMirrorError(
                    f"{source}: git mirror {entry!r}: {location} is neither a directory "
                    "nor a git URL"
                )
            location = str(path.resolve())
        mirrors[prefix] = GitMirror(prefix, location)
    return tuple(mirrors.values())


def relevant(mirrors: Sequence[GitMirror], dockerfile: Path, context: Path | None) -> tuple[GitMirror, ...]:
    """The mirrors whose prefix a bake can use: named in the Dockerfile or in a file of
    its build context (a clone script). Only these join the recipe key, so a mirror
    does not rebuild images that never clone."""
    if not mirrors:
        return ()
    texts = [dockerfile.read_bytes()]
    if context is not None:
        for dirpath, dirnames, filenames in os.walk(context):
            dirnames[:] = [d for d in dirnames if d not in {".git", "node_modules"}]
            for name in filenames:
                path = Path(dirpath, name)
                with contextlib.suppress(OSError):
                    if path.is_file() and path.stat().st_size <= _SCAN_LIMIT:
                        texts.append(path.read_bytes())
    return tuple(m for m in mirrors if any(m.prefix.encode() in text for text in texts))


def key_of(mirrors: Sequence[GitMirror]) -> str:
    """The part of a recipe key that names the mirrors a bake used."""
    return "git-mirrors:" + ";".join(sorted(str(m) for m in mirrors))


def git_env(rewrites: Mapping[str, str]) -> dict[str, str]:
    """Environment that makes git fetch `prefix...` from `base...` ({base: prefix}).

    The mirrors' owner is not the bake's user on every backend: they are trusted
    explicitly (safe.directory), as is the file transport for a directory mirror."""
    pairs = [(f"url.{base}.insteadOf", prefix) for base, prefix in rewrites.items()]
    pairs += [("safe.directory", "*"), ("protocol.file.allow", "always")]
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def local_binds(mirrors: Sequence[GitMirror]) -> tuple[dict[str, Path], dict[str, str]]:
    """For the local backend: read-only binds of directory mirrors and the rewrites
    ({base: prefix}) that point into them."""
    binds: dict[str, Path] = {}
    rewrites: dict[str, str] = {}
    for index, mirror in enumerate(mirrors):
        if mirror.is_directory:
            target = f"{LOCAL_MOUNT}/{index}"
            binds[target] = Path(mirror.location)
            rewrites[_joinable(target)] = mirror.prefix
        else:
            rewrites[mirror.location] = mirror.prefix
    return binds, rewrites


def _joinable(base: str) -> str:
    # insteadOf replaces the prefix textually: a prefix ending in "/" needs a base
    # ending in "/" too.
    return base.rstrip("/") + "/"
