"""Run records: one directory per run, one immutable directory per trial.

A trial's `status.json` says `running` until the trial ends, so a crashed run
leaves records that are readable and plainly marked incomplete."""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_reactbench.host import pid_alive
from pytest_reactbench.results.errors import ResultsError
from pytest_reactbench.results.events import Event
from pytest_reactbench.results.gates import gate_report
from pytest_reactbench.results.manifest import MANIFEST, Resumption, RunManifest, TrialManifest
from pytest_reactbench.results.trial_result import TrialResult


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", part).strip("-") or "x"


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


class TrialRecord:
    def __init__(self, path: Path, run: RunRecords | None = None) -> None:
        self.path = path
        self.started = time.time()
        self._run = run

    def write_json(self, name: str, data: Any) -> None:
        write_json_atomic(self.path / name, data)

    def write_text(self, name: str, text: str | bytes) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text, encoding="utf-8")

    def event(self, kind: Event, **data: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), "event": kind, **data}, default=str)
        with (self.path / "events.jsonl").open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def finish(self, result: TrialResult) -> None:
        """The trial's verdict: status.json complete, and the gate-level junit.xml."""
        self.write_text("junit.xml", gate_report(result))
        self._write_status({**result.status(), "status": "complete"})

    def mark_incomplete(self, reason: str, status: dict[str, Any] | None = None) -> None:
        """The trial never reached a verdict (an interrupted session, a dead worker)."""
        self.event(Event.INCOMPLETE, reason=reason)
        self._write_status({**(status or {}), "reason": reason, "status": "incomplete"})

    def _write_status(self, status: dict[str, Any]) -> None:
        self.write_json("status.json", {**status, "finished_at": time.time()})
        if self._run is not None:
            self._run.open.discard(self)


#: The file a session holds locked (flock) in its run folder while it runs: the kernel
#: lets go of the lock when the process dies, so a held lock is a live session.
LIVE = ".live"


def live_session(run_dir: Path) -> int | None:
    """The pid of the session running `run_dir` now, or None when none is. A lock held
    by a dead process cannot be: its pid, if reused, does not make the run look live."""
    try:
        fd = os.open(run_dir / LIVE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.read(fd, 64).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)  # (releases the shared lock, if it was taken)
    return None


class RunRecords:
    """The records of one pytest session (all trials, all xdist workers)."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.root = root
        self.run_id = run_id
        self.run_dir = root / run_id
        #: Trials begun and not yet finished in this process.
        self.open: set[TrialRecord] = set()
        #: The run's lock, while this process's session holds it (see `hold`).
        self._live: int | None = None

    def hold(self) -> None:
        """This session runs the run: its folder's lock is held until `release` or the
        process's end (the xdist controller holds it for its workers). Raises
        ResultsError naming the session that runs it already."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LIVE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            raise ResultsError(f"run {self.run_id} is in progress, pid {text or '?'}: "
                               "let it end (or stop it) before resuming it") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._live = fd

    def release(self) -> None:
        if self._live is not None:
            (self.run_dir / LIVE).unlink(missing_ok=True)
            os.close(self._live)
            self._live = None

    def write_manifest(self, manifest: RunManifest) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.run_dir / MANIFEST, manifest.to_json())

    def add_resumption(self, args: list[str], kept: int) -> None:
        """A later session that resumes this run: the manifest keeps the first
        session's entries and lists each resumption."""
        manifest = RunManifest.read(self.run_dir)
        manifest.resumed.append(Resumption(at=time.time(), args=args, kept=kept))
        self.write_manifest(manifest)

    def set_incomplete(self, why: str | None) -> None:
        """Mark the run as lacking items (why, and how to resume), or as whole again."""
        manifest = RunManifest.read(self.run_dir)
        if manifest.incomplete != why:
            self.write_manifest(manifest.model_copy(update={"incomplete": why}))

    def remove_if_empty(self) -> None:
        """A run that began no trial (a usage error, --collect-only) leaves no folder."""
        if self.run_dir.is_dir() and all(p.name in (MANIFEST, LIVE) for p in self.run_dir.iterdir()):
            (self.run_dir / MANIFEST).unlink(missing_ok=True)
            (self.run_dir / LIVE).unlink(missing_ok=True)
            self.run_dir.rmdir()

    def open_trial(self, manifest: TrialManifest) -> TrialRecord:
        base = f"{_safe(manifest.task)}__{_safe(manifest.agent)}__{manifest.attempt}"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = self.run_dir / (base if n == 0 else f"{base}.{n}")
            try:
                path.mkdir()  # never reuse a directory: records are not overwritten
            except FileExistsError:
                continue
            record = TrialRecord(path, self)
            self.open.add(record)
            record.write_json(MANIFEST, manifest.to_json())
            record.write_json("status.json", {"status": "running", "started_at": record.started,
                                              "pid": os.getpid()})
            record.event(Event.TRIAL_START)
            return record
        raise RuntimeError(f"too many records named {base} in {self.run_dir}")

    def close(self, reason: str) -> None:
        """Mark every trial still open as incomplete (an interrupted session)."""
        for record in list(self.open):
            record.mark_incomplete(reason)

    def close_orphans(self) -> int:
        """Mark incomplete the trials of this run whose process died (a crashed xdist
        worker): their records stay readable and say so."""
        marked = 0
        for status_file in self.run_dir.glob("*/status.json") if self.run_dir.is_dir() else ():
            try:
                status = json.loads(status_file.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            pid = status.get("pid")
            if status.get("status") != "running" or not isinstance(pid, int) or pid_alive(pid):
                continue
            TrialRecord(status_file.parent).mark_incomplete(f"its process ({pid}) died", status)
            marked += 1
        return marked
