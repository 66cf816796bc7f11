"""`Sandbox.get_archive` over an engine that loses a command's output: the bytes are
counted as they leave tar, so a stream that arrives empty or short is taken again,
and one that keeps arriving short is a SandboxError rather than an archive that reads
as fewer files. The count works with GNU's tools and with BusyBox's (an Alpine-style
task image)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import ARCHIVE_ATTEMPTS, ExecResult, Sandbox, SandboxError

TOOLS = ("sh", "tar", "tee", "wc")


class LossySandbox(Sandbox):
    """Runs the command on the host, its absolute paths under `root` and its tools from
    `bin`, and then loses what `cuts` say of its stdout (and, if told, all its stderr)."""

    backend = "lossy"

    def __init__(self, root: Path, bin: Path, cuts: list[slice], lose_stderr: bool = False) -> None:
        self.root, self.bin = root, bin
        self.cuts = cuts
        self.lose_stderr = lose_stderr
        self.calls = 0

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        self.calls += 1
        argv = [str(self.root) + a if a.startswith("/") else a for a in cmd]
        argv[0] = str(self.bin / argv[0])
        done = subprocess.run(argv, capture_output=True, env={"PATH": str(self.bin), **(env or {})})
        cut = self.cuts.pop(0) if self.cuts else slice(None)
        return ExecResult(done.returncode, done.stdout[cut], b"" if self.lose_stderr else done.stderr, 0.0)

    def put_archive(self, dest: str, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.fixture(params=["gnu", "busybox"])
def bin(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in TOOLS:
        found = shutil.which("busybox" if request.param == "busybox" else tool)
        assert found, f"{request.param}'s {tool} is not on this machine (.ci/setup installs both)"
        os.symlink(found, tools / tool)
    return tools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "blob.bin").write_bytes(bytes(range(256)) * 4000)
    return tmp_path


def whole(root: Path, bin: Path) -> bytes:
    return LossySandbox(root, bin, []).get_archive("/app")


def test_an_archive_is_the_whole_directory(root: Path, bin: Path) -> None:
    data = whole(root, bin)
    listed = subprocess.run(["tar", "-t", "-f", "-"], input=data, capture_output=True, check=True).stdout
    assert b"./blob.bin" in listed.splitlines()
    assert len(data) > 1_024_000


@pytest.mark.parametrize("lost", [slice(0, 0), slice(None, -10240), slice(512, None)],
                         ids=["all of it", "its tail", "its head"])
def test_an_archive_that_arrived_short_once_is_taken_again(root: Path, bin: Path, lost: slice) -> None:
    box = LossySandbox(root, bin, [lost])
    assert box.get_archive("/app") == whole(root, bin)
    assert box.calls == 2


def test_an_archive_short_every_time_is_an_error_naming_the_bytes(root: Path, bin: Path) -> None:
    box = LossySandbox(root, bin, [slice(None, -10240)] * ARCHIVE_ATTEMPTS)
    wrote = len(whole(root, bin))
    arrived = rf"\(the last time {wrote - 10240} bytes arrived of the {wrote} tar wrote\)"
    with pytest.raises(SandboxError, match=rf"could not archive /app: .*lost each time {arrived}"):
        box.get_archive("/app")
    assert box.calls == ARCHIVE_ATTEMPTS


def test_an_archive_whose_count_was_lost_is_not_trusted(root: Path, bin: Path) -> None:
    box = LossySandbox(root, bin, [], lose_stderr=True)
    with pytest.raises(SandboxError, match="the count of them was lost too"):
        box.get_archive("/app")


def test_a_directory_tar_cannot_read_is_tars_own_words_once(root: Path, bin: Path) -> None:
    box = LossySandbox(root, bin, [])
    with pytest.raises(SandboxError, match=r"could not archive /nowhere: .*nowhere") as caught:
        box.get_archive("/nowhere")
    assert "reactbench-tar" not in str(caught.value)
    assert box.calls == 1
