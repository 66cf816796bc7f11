"""What the fault suite checks after every case: the trial's record and JUnit
properties, and that nothing of the run is left on the machine."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker

from pytest_reactbench.results.load import junit_testcases
from pytest_reactbench.sandbox.local.cgroups import PREFIX, own_parents, stale_groups


def junit_properties(xml: Path) -> dict[str, dict[str, str]]:
    """Testcase name -> its reactbench properties."""
    return dict(junit_testcases(xml))


def trial_records(records: Path) -> dict[str, dict[str, object]]:
    """Trial directory name -> its status.json."""
    return {p.parent.name: json.loads(p.read_text()) for p in records.glob("*/*/status.json")}


def _processes() -> Iterator[tuple[int, str]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                yield int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    "utf-8", "replace")


def pids_with(marker: str) -> list[int]:
    return [pid for pid, cmdline in _processes() if marker in cmdline and pid != os.getpid()]


def process_tree(pid: int) -> list[int]:
    """`pid` and every process under it."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            for child in (task / "children").read_text().split():
                out += process_tree(int(child))
    return out


def kill_tree_when_seen(marker: str, settle: float = 0.5) -> threading.Thread:
    """From outside the sandbox: once a process whose command line holds `marker`
    runs, SIGKILL it with every descendant."""

    def watch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if found := pids_with(marker):
                time.sleep(settle)
                # Parents before children: a shell whose child died first could run
                # its next command and exit 0 before its own kill (on a loaded machine).
                for pid in dict.fromkeys(p for root in found for p in process_tree(root)):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def remove_container_when_seen(marker: str) -> threading.Thread:
    """From outside: `docker rm -f` the container running a process with `marker`."""

    def watch() -> None:
        client = docker.from_env()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for container in client.containers.list(filters={"label": "reactbench.role=agent"}):
                with contextlib.suppress(docker.errors.DockerException):
                    if any(marker in " ".join(p) for p in container.top()["Processes"]):
                        time.sleep(0.5)
                        container.remove(force=True)
                        return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def leftovers(records: Path, cache: Path) -> list[str]:
    """Everything a finished run still holds on this machine: its containers and
    networks (by run label), sandbox directories, cgroups, sandbox processes."""
    found: list[str] = []
    runs = [p for p in records.iterdir() if p.is_dir()] if records.is_dir() else []
    # Only runs on the engine look at it: `-m "not docker"` passes without one.
    on_engine = [run.name for run in runs if '"docker"' in _text(run / "manifest.json")]
    client = docker.from_env() if on_engine else None
    for run in on_engine:
        label = {"label": f"reactbench.run={run}"}
        assert client is not None
        found += [f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
        found += [f"network {n.name}" for n in client.networks.list(filters=label)]
    sandboxes = cache / "local" / "sandboxes"
    if sandboxes.is_dir():
        found += [f"sandbox dir {p}" for p in sandboxes.iterdir()]
    found += [f"process {pid}" for pid in pids_with(str(sandboxes))]
    for parent in (own_parents() or {}).values():
        found += [f"cgroup {p}" for p in parent.glob(f"{PREFIX}{os.getpid()}-*")]
    found += [f"cgroup {d}" for group in stale_groups() for d in group.dirs]
    return found
