"""benchmarks/soak.py stops the suite it started on every exit path: a run of the suite
under way when the soak is stopped (Ctrl-C, SIGTERM, an error) gets Ctrl-C, as a
terminal gives it, so that its trials end and take their sandboxes with them; one that
does not end in time is killed with everything it started."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: A suite of two processes, the second started by the first; on Ctrl-C each says so,
#: and the first ends once the second has. With `ignore`, the first ignores Ctrl-C.
SUITE = textwrap.dedent("""\
    import signal, subprocess, sys, time
    said, ignore = sys.argv[1], sys.argv[2] == "ignore"
    def saying(word):
        def handler(signum, frame):
            with open(said, "a") as out:
                out.write(word + "\\n")
            if word == "interrupted":
                child.wait()
            sys.exit(130)
        return handler
    if sys.argv[2] == "child":
        signal.signal(signal.SIGINT, saying("child"))
    else:
        child = subprocess.Popen([sys.executable, __file__, said, "child"])
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignore else saying("interrupted"))
        with open(said + ".child", "w") as out:
            out.write(str(child.pid))
    time.sleep(60)
    """)


@pytest.fixture()
def soak(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import soak

    return soak


def _suite(tmp_path: Path, mode: str) -> tuple[list[str], Path]:
    script = tmp_path / "suite.py"
    script.write_text(SUITE)
    said = tmp_path / "said"
    return [sys.executable, str(script), str(said), mode], said


def _started(said: Path) -> None:
    child = Path(f"{said}.child")
    while not child.exists() or not child.read_text():
        time.sleep(0.05)
    time.sleep(0.3)  # the child's handler in place


def _left(session: int) -> list[str]:
    """The processes of the suite's session still there, once an orphan killed with
    the group has had its time to be reaped by init."""
    deadline = time.monotonic() + 5
    while True:
        left = subprocess.run(["pgrep", "-s", str(session)], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_a_suite_under_way_gets_ctrl_c_when_the_soak_stops(soak: ModuleType, tmp_path: Path) -> None:
    args, said = _suite(tmp_path, "heed")
    with pytest.raises(KeyboardInterrupt), soak.suite(args) as proc:
        _started(said)
        raise KeyboardInterrupt
    assert proc.returncode == 130
    # Both heard Ctrl-C (in either order: the group gets it at once); nothing of the
    # suite is left.
    assert sorted(said.read_text().split()) == ["child", "interrupted"]
    assert _left(proc.pid) == []


def test_a_suite_that_ignores_ctrl_c_is_killed_after_its_grace(
        soak: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(soak, "STOP_GRACE_SECONDS", 0.5)
    args, said = _suite(tmp_path, "ignore")
    started = time.monotonic()
    with pytest.raises(RuntimeError), soak.suite(args) as proc:
        _started(said)
        raise RuntimeError("the soak broke")
    assert proc.returncode == -9
    assert time.monotonic() - started < 10
    # Its child heard Ctrl-C and ended; the suite itself was killed.
    assert said.read_text().split() == ["child"]
    assert _left(proc.pid) == []
