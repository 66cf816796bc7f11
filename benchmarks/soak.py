"""The test suite under load, on purpose: the README's test command (as `.ci/run` runs
it) on a clean clone of this checkout's HEAD (the commit it was at the start, for every
run), N times in a row, with a load generator of its own beside it: busy CPUs, a disk
writer and memory held. Each run's failed tests are printed with their errors; the exit
status is 0 only if every run passed.

    python benchmarks/soak.py [--runs 3] [--cpu-hogs N] [--disk-mb 512] [--memory-gb 4]
                              [--no-load] [--out soak.json] [--keep]

The load runs in a process group of its own and is stopped on every exit path (the
end, an error, Ctrl-C, SIGTERM); so is a run of the suite still under way, as Ctrl-C
stops it (its trials end and their sandboxes go), killed after a minute. The clone
gets the repository's own npm packages (`npm ci`, as .ci/setup installs them) and its
own package shadows the installed one (PYTHONPATH), so what runs is HEAD as committed,
nothing uncommitted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ROOT

#: Where .ci/run writes the README's test command: the line after this comment.
COMMAND_MARK = "# The README's test command:"

CPU_HOG = "while True: pass"
DISK_WRITER = """
import os, sys, time
folder, size = sys.argv[1], int(sys.argv[2]) * 1024 * 1024
block = os.urandom(1 << 20)
while True:
    path = os.path.join(folder, "soak-%d" % time.time_ns())
    with open(path, "wb") as out:
        for _ in range(size >> 20):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    os.unlink(path)
"""
MEMORY_HOLDER = """
import sys, time
held = bytearray(int(float(sys.argv[1]) * (1 << 30)))
while True:
    for i in range(0, len(held), 4096):  # touched again and again: resident, not just reserved
        held[i] = (held[i] + 1) & 0xFF
    time.sleep(1)
"""


def readme_command() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return lines[lines.index(COMMAND_MARK) + 1].strip()


@contextlib.contextmanager
def load(cpu_hogs: int, disk_mb: int, memory_gb: float, scratch: Path) -> Iterator[None]:
    """The load generator: one process group, killed however the block ends."""
    if cpu_hogs == 0 and disk_mb == 0 and memory_gb == 0:
        yield
        return
    script = [f"{sys.executable} -c {shlex.quote(CPU_HOG)} &"] * cpu_hogs
    if disk_mb:
        script.append(f"{sys.executable} -c {shlex.quote(DISK_WRITER)} {scratch} {disk_mb} &")
    if memory_gb:
        script.append(f"{sys.executable} -c {shlex.quote(MEMORY_HOLDER)} {memory_gb} &")
    group = subprocess.Popen(["sh", "-c", "\n".join([*script, "wait"])], start_new_session=True)

    def stop(*_: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGKILL)

    previous = {sig: signal.signal(sig, lambda s, f: (stop(), sys.exit(128 + s)))
                for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        stop()
        group.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def failures(junit: Path) -> list[tuple[str, str]]:
    """(test id, first line of its error) for each failed or errored test case."""
    if not junit.is_file():
        return [("(no JUnit XML)", "the test command stopped before pytest wrote its report")]
    found = []
    for case in ET.parse(junit).iter("testcase"):
        for kind in ("failure", "error"):
            for node in case.iter(kind):
                said = (node.get("message") or node.text or "").strip().splitlines()
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                found.append((name, f"{kind}: {said[0][:300] if said else '(no message)'}"))
    return found


#: How long a suite stopped as Ctrl-C stops it has to end its trials before it is killed.
STOP_GRACE_SECONDS = 60


@contextlib.contextmanager
def suite(args: list[str], **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """The suite in a process group of its own; however the block ends before the suite
    did (Ctrl-C, SIGTERM, an error), the group gets Ctrl-C, so that its trials end and
    take their sandboxes with them, and is killed if it has not ended in time. What is
    left of the group once the suite has ended is killed."""
    proc = subprocess.Popen(args, start_new_session=True, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(STOP_GRACE_SECONDS)
        # Whatever of the group outlived it (or the grace) is an orphan.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def one_run(number: int, command: str, commit: str, scratch: Path, keep: bool) -> dict[str, object]:
    clone = Path(tempfile.mkdtemp(prefix=f"soak-{number}-", dir=scratch))
    clone.chmod(0o755)  # a checkout as CI has it: the grader's room user reads its files
    junit = clone / "soak-junit.xml"
    started = time.monotonic()
    try:
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", "--detach", commit], cwd=clone, check=True)
        subprocess.run(["npm", "ci", "--no-fund", "--no-audit", "--silent"], cwd=clone, check=True)
        env = {**os.environ, "PYTHONPATH": str(clone)}
        log = clone / "soak-output.txt"
        with log.open("w") as out, suite(["bash", "-c", f"{command} --junitxml={junit}"], cwd=clone, env=env,
                                         stdout=out, stderr=subprocess.STDOUT) as proc:
            proc.wait()
        tail = log.read_text(errors="replace").splitlines()[-3:]
        failed = failures(junit) if proc.returncode else []
        if proc.returncode and not failed:
            failed = [("(before pytest)", " / ".join(tail))]
        return {"run": number, "seconds": round(time.monotonic() - started), "exit": proc.returncode,
                "failed": failed, "last_lines": tail}
    finally:
        if not keep:
            subprocess.run(["rm", "-rf", str(clone)], check=False)


def main() -> int:
    # Started in the background of a shell without job control, this process ignores
    # SIGINT, and so would every process of the suite: the tests that press Ctrl-C on a
    # session would see it ignored. The suite gets Ctrl-C as a terminal gives it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpu-hogs", type=int, default=os.cpu_count() or 2,
                        help="busy loops beside the suite (default: one per CPU)")
    parser.add_argument("--disk-mb", type=int, default=512, help="size of each file the disk writer fsyncs")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="memory held and touched")
    parser.add_argument("--no-load", action="store_true", help="the same runs without the load")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--out", type=Path, help="write every run's figures and failures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep each run's clone (with its output)")
    args = parser.parse_args()
    command = readme_command()
    # Every run tests the commit that was HEAD when the soak started, whatever is
    # committed while it runs.
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()
    hogs, disk, memory = (0, 0, 0.0) if args.no_load else (args.cpu_hogs, args.disk_mb, args.memory_gb)
    print(f"command: {command}\nload: {hogs} CPU hog(s), a disk writer of {disk} MB files, "
          f"{memory:g} GiB held; {args.runs} run(s) on clean clones of {ROOT} at {commit}", flush=True)
    runs = []
    with load(hogs, disk, memory, args.scratch):
        for number in range(1, args.runs + 1):
            result = one_run(number, command, commit, args.scratch, args.keep)
            runs.append(result)
            status = "passed" if result["exit"] == 0 else f"FAILED (exit {result['exit']})"
            print(f"run {number}: {status} in {result['seconds']} s", flush=True)
            for name, error in result["failed"]:  # type: ignore[attr-defined]
                print(f"  {name}\n    {error}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"command": command, "commit": commit, "load": [hogs, disk, memory],
                                        "runs": runs}, indent=2))
    passed = sum(1 for r in runs if r["exit"] == 0)
    print(f"{passed} of {len(runs)} run(s) passed")
    return 0 if passed == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
