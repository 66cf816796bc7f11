"""What the host says of its processes, as the backends and the run records ask it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from pytest_reactbench.host import pid_alive
from pytest_reactbench.results import pid_alive as record_owner_alive


def test_a_zombie_is_not_alive() -> None:
    # A killed xdist worker stays a zombie until its parent reaps it: its room on an
    # engine, its sandboxes and its records must count as a dead process's.
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    stat = Path(f"/proc/{child.pid}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        assert not pid_alive(child.pid) and not record_owner_alive(child.pid)
        assert pid_alive(os.getpid()) and record_owner_alive(os.getpid())
    finally:
        child.wait()
    assert not pid_alive(child.pid)
