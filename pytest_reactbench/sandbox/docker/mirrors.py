"""Git mirrors as a Docker build sees them (`--reactbench-git-mirror`, `mirrors.py`): a
build cannot see the host's files, so a directory mirror is served with `git daemon`
on the loopback (builds use the host's network), one daemon per mirror folder on the
machine, at a port of the folder's own; the rewrites reach the build as build
arguments, declared in a copy of its Dockerfile whose step numbers are mapped back to
the original's for messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from pytest_reactbench.sandbox.locks import file_lock
from pytest_reactbench.sandbox.mirrors import GitMirror, GitMirrorError


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


#: Where the daemons serving directory mirrors are recorded, for every process of the
#: machine: per mirror folder a record (who serves it, on which port), a lock that
#: starts and stops it, and a lease each process using it holds (shared) while it does.
def daemons_dir() -> Path:
    return Path(tempfile.gettempdir()) / "reactbench-git-mirrors"


def preferred_port(directory: str) -> int:
    """The port the daemon of `directory` serves on (while it is free): the same for
    every bake and session, so the build arguments that name it, and with them the
    engine's cache of the steps after it, stay the same. Below Linux's ephemeral range,
    and apart from the download cache's (20000-29999)."""
    digest = hashlib.sha256(directory.encode()).digest()
    return 10000 + int.from_bytes(digest[:4], "big") % 10000


#: The process that runs one `git daemon` for as long as a process of the machine holds
#: the mirror's lease: it checks every half second, and stops the daemon (and ends) when
#: no one does, so a session killed before it could close leaves nothing behind. Its own
#: thread never ends before it, so the daemon's death signal (PR_SET_PDEATHSIG, which
#: follows the thread that started a child) is tied to it alone. Imports nothing of ours.
_SUPERVISOR = r"""
import ctypes, fcntl, os, signal, subprocess, sys, time
lock, lease, record, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
daemon = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          preexec_fn=die_with_parent)
def stop(*_):
    # Stopped (by the last user's close, or a sweep): it goes only once its daemon is
    # gone, so that whoever waits for it finds no daemon left. os.waitpid, not Popen's
    # wait, which the loop below may be in when the signal comes.
    try:
        os.kill(daemon.pid, signal.SIGTERM)
        for _ in range(100):
            if os.waitpid(daemon.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            os.kill(daemon.pid, signal.SIGKILL)
            os.waitpid(daemon.pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
while daemon.poll() is None:
    time.sleep(0.5)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with open(lease, "a") as users:
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
        daemon.terminate()
        daemon.wait()
        try:
            os.unlink(record)
        except OSError:
            pass
        break
sys.exit(daemon.returncode or 0)
"""


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _is_supervisor(pid: int, directory: str) -> bool:
    """Whether `pid` is the supervisor of the daemon of `directory` (a recorded pid
    may have been reused by another process since)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _alive(pid) and f"--base-path={directory}".encode() in argv


def _listens(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) == 0


def _stop(pid: int, directory: str) -> None:
    """Ends a recorded supervisor (its daemon goes with it) and waits for it."""
    if not _is_supervisor(pid, directory):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)  # a stopped one too
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our own child: reaped, not left a zombie
        time.sleep(0.02)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class _Mirror:
    """The files of one mirror folder's daemon in daemons_dir()."""

    def __init__(self, directory: str, root: Path) -> None:
        self.directory = directory
        name = hashlib.sha256(directory.encode()).hexdigest()[:16]
        self.lock = root / f"{name}.lock"
        self.lease = root / f"{name}.lease"
        self.record = root / f"{name}.json"
        self.log = root / f"{name}.log"

    def recorded(self) -> dict[str, int] | None:
        try:
            data = json.loads(self.record.read_text())
            return {"pid": int(data["pid"]), "port": int(data["port"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def unused(self) -> bool:
        """Whether no process holds the lease (to be called under the lock)."""
        with self.lease.open("a") as users:
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

    def stop_if_unused(self) -> bool:
        """Under the lock: the daemon no process uses is stopped, its record removed;
        whether one was running."""
        with file_lock(self.lock):
            found = self.recorded()
            if found is None or not self.unused():
                return False
            running = _is_supervisor(found["pid"], self.directory)
            _stop(found["pid"], self.directory)
            self.record.unlink(missing_ok=True)
            return running


class MirrorDaemon:
    """`git daemon` serving directory mirrors on 127.0.0.1 for Docker builds (which use
    the host's network): one per mirror folder on the machine, whichever thread, bake,
    worker or session asks, at an address of the folder's own (preferred_port), so the
    builds' arguments stay the same from one bake and session to the next. Started on
    first use under a lock; each MirrorDaemon that uses it holds a lease, and the last
    to close() stops it; one whose process died without closing is stopped by the
    daemon's supervisor within a second, and a record left by anything else is swept."""

    def __init__(self, mirrors: Sequence[GitMirror], root: Path | None = None) -> None:
        self.mirrors = tuple(mirrors)
        self.root = root or daemons_dir()
        self._lock = threading.Lock()
        #: Folder -> (the port it is served on, the lease this object holds on it).
        self._leases: dict[str, tuple[int, IO[str]]] = {}
        self._children: list[subprocess.Popen[bytes]] = []

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
        with self._lock:
            held = self._leases.get(directory)
            if held is not None and _listens(held[0]):
                return held[0]
            mirror = _Mirror(directory, self.root)
            self.root.mkdir(parents=True, exist_ok=True)
            with file_lock(mirror.lock):
                found = mirror.recorded()
                if found is not None and not (_is_supervisor(found["pid"], directory)
                                              and _listens(found["port"])):
                    _stop(found["pid"], directory)
                    mirror.record.unlink(missing_ok=True)
                    found = None
                # The lease before the daemon: its supervisor stops it when no one holds one.
                lease = held[1] if held is not None else mirror.lease.open("a")
                try:
                    fcntl.flock(lease, fcntl.LOCK_SH)
                    if found is None:
                        found = self._start(mirror)
                except BaseException:
                    if held is None:
                        lease.close()
                    raise
                self._leases[directory] = (found["port"], lease)
                return found["port"]

    def _start(self, mirror: _Mirror) -> dict[str, int]:
        directory = mirror.directory
        port = preferred_port(directory)
        if _listens(port):  # taken by something else: any free port serves (this once)
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
        # Partial clones (`git clone --filter=blob:none`) need the server's consent.
        argv = ["git", "-c", "uploadpack.allowFilter=true", "-c", "uploadpack.allowAnySHA1InWant=true",
                "daemon", "--reuseaddr", "--export-all", "--informative-errors",
                "--listen=127.0.0.1", f"--port={port}", f"--base-path={directory}"]
        # Its own session: a Ctrl-C of the terminal is for the session, which stops it
        # when it closes (or the supervisor does, when no one holds a lease any more).
        # What it and the daemon say goes to a file: no pipe to a reader that goes away.
        with mirror.log.open("w") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", _SUPERVISOR, str(mirror.lock), str(mirror.lease),
                 str(mirror.record), *argv],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            )
        self._children.append(process)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if process.poll() is not None:
                error = mirror.log.read_text(errors="replace")
                raise GitMirrorError(f"git daemon for the mirror {directory} stopped: {error.strip()}")
            if _listens(port):
                found = {"pid": process.pid, "port": port}
                replace_whole(mirror.record, json.dumps({**found, "folder": directory}))
                return found
            time.sleep(0.05)
        process.kill()
        process.wait()
        raise GitMirrorError(f"git daemon for the mirror {directory} did not listen on port {port}")

    def close(self) -> None:
        """Gives up this object's leases; a daemon no one else uses is stopped."""
        with self._lock:
            leases, self._leases = self._leases, {}
            for directory, (_, lease) in leases.items():
                lease.close()
                _Mirror(directory, self.root).stop_if_unused()
            for child in self._children:
                child.poll()  # reaped if it ended
            self._children = [child for child in self._children if child.returncode is None]

    @staticmethod
    def sweep(root: Path | None = None) -> int:
        """Stops the daemons no process uses any more (their users died without closing
        and their supervisor is gone or stuck), and removes their records; how many."""
        root = root or daemons_dir()
        stopped = 0
        for record in sorted(root.glob("*.json")) if root.is_dir() else []:
            try:
                directory = str(json.loads(record.read_text())["folder"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if _Mirror(directory, root).stop_if_unused():
                stopped += 1
        return stopped


def replace_whole(path: Path, text: str) -> None:
    """`path` written whole (others may be reading it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)
