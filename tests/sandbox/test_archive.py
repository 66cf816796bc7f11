"""`Sandbox.get_archive` over an engine that loses a command's output: tar counts the
bytes it wrote (`--totals`), so a stream that arrives empty or short is taken again,
and one that keeps arriving short is a SandboxError rather than an archive that reads
as fewer files."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import ARCHIVE_ATTEMPTS, ExecResult, Sandbox, SandboxError


class LossySandbox(Sandbox):
    """Runs the real tar on the host and then loses what `cut` says of its stdout."""

    backend = "lossy"

    def __init__(self, root: Path, cuts: list[slice], lose_count: bool = False) -> None:
        self.root = root
        self.cuts = cuts
        self.lose_count = lose_count
        self.calls = 0

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        self.calls += 1
        argv = [str(self.root) + a if a.startswith("/") and a != "-" else a for a in cmd]
        done = subprocess.run(argv, capture_output=True, env=dict(env or {}), check=True)
        cut = self.cuts.pop(0) if self.cuts else slice(None)
        return ExecResult(0, done.stdout[cut], b"" if self.lose_count else done.stderr, 0.0)

    def put_archive(self, dest: str, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "blob.bin").write_bytes(bytes(range(256)) * 4000)
    return tmp_path


def whole(root: Path) -> bytes:
    tar = ["tar", "-c", "-f", "-", "-C", root / "app", "."]
    return subprocess.run(tar, capture_output=True, check=True).stdout


@pytest.mark.parametrize("lost", [slice(0, 0), slice(None, -10240), slice(512, None)],
                         ids=["all of it", "its tail", "its head"])
def test_an_archive_that_arrived_short_once_is_taken_again(root: Path, lost: slice) -> None:
    box = LossySandbox(root, [lost])
    assert box.get_archive("/app") == whole(root)
    assert box.calls == 2


def test_an_archive_short_every_time_is_an_error_naming_the_directory_and_the_bytes(root: Path) -> None:
    box = LossySandbox(root, [slice(None, -10240)] * ARCHIVE_ATTEMPTS)
    wrote = len(whole(root))
    arrived = rf"\(the last time {wrote - 10240} bytes arrived of the {wrote} tar wrote\)"
    with pytest.raises(SandboxError, match=rf"could not archive /app: .*lost each time {arrived}"):
        box.get_archive("/app")
    assert box.calls == ARCHIVE_ATTEMPTS


def test_an_archive_whose_count_was_lost_is_not_trusted(root: Path) -> None:
    box = LossySandbox(root, [], lose_count=True)
    with pytest.raises(SandboxError, match="tar's count of them was lost too"):
        box.get_archive("/app")
