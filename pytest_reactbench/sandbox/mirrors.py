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
serves it with `git daemon` on the loopback (builds use the host's network).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import time
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


def with_build_args(dockerfile: str, names: Sequence[str]) -> str:
    """The Dockerfile with `ARG name...` after each FROM, so the build's RUN steps see
    the build arguments of those names in their environment (a Docker build passes
    no other variables to RUN). Values never reach the image's own environment."""
    if not names:
        return dockerfile
    declare = "ARG " + " ".join(names)
    out: list[str] = []
    continued = False
    in_from = False
    for line in dockerfile.splitlines():
        out.append(line)
        stripped = line.strip()
        if not continued:
            in_from = stripped.upper().startswith("FROM ")
        continued = stripped.endswith("\\") and not stripped.startswith("#")
        if in_from and not continued:
            out.append(declare)
            in_from = False
    return "\n".join(out) + "\n"


def original_step(dockerfile: str, number: int) -> int:
    """The engine's step `number` of `with_build_args(dockerfile, ...)`, counted in the
    original Dockerfile (each FROM before it was followed by one added step)."""
    added = 0
    for step, line in enumerate(_instructions(dockerfile), start=1):
        if step + added == number:
            return step
        if line.upper().startswith("FROM "):
            added += 1
            if step + added == number:
                return step  # the added ARG: report its FROM
    return number - added


def _instructions(dockerfile: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in dockerfile.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def _die_with_parent() -> None:
    """A session killed before close() (Ctrl-C of an xdist worker) takes its daemon
    with it: the kernel sends SIGTERM when the parent goes (Linux's PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


class MirrorDaemon:
    """`git daemon` serving directory mirrors on 127.0.0.1 for Docker builds (which use
    the host's network): one process per directory, started on first use, stopped
    by close()."""

    def __init__(self, mirrors: Sequence[GitMirror]) -> None:
        self.mirrors = tuple(mirrors)
        self._processes: dict[str, tuple[subprocess.Popen[bytes], int]] = {}

    def rewrites(self, mirrors: Sequence[GitMirror]) -> dict[str, str]:
        """{base: prefix} for these mirrors, starting the daemons they need."""
        rewrites: dict[str, str] = {}
        for mirror in mirrors:
            if mirror.is_directory:
                port = self._serve(mirror.location)
                rewrites[f"git://127.0.0.1:{port}/"] = mirror.prefix
            else:
                rewrites[mirror.location] = mirror.prefix
        return rewrites

    def _serve(self, directory: str) -> int:
        running = self._processes.get(directory)
        if running and running[0].poll() is None:
            return running[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        # Partial clones (`git clone --filter=blob:none`) need the server's consent.
        process = subprocess.Popen(
            ["git", "-c", "uploadpack.allowFilter=true", "-c", "uploadpack.allowAnySHA1InWant=true",
             "daemon", "--reuseaddr", "--export-all", "--informative-errors",
             "--listen=127.0.0.1", f"--port={port}", f"--base-path={directory}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if process.poll() is not None:
                error = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise GitMirrorError(f"git daemon for the mirror {directory} stopped: {error.strip()}")
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    self._processes[directory] = (process, port)
                    return port
            time.sleep(0.05)
        process.kill()
        raise GitMirrorError(f"git daemon for the mirror {directory} did not listen on port {port}")

    def close(self) -> None:
        for process, _ in self._processes.values():
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr:
                process.stderr.close()
        self._processes.clear()
