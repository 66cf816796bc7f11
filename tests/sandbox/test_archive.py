"""`Sandbox.get_archive` over an engine that loses a command's output: the bytes are
counted as they leave tar, so a stream that arrives empty or short is taken again,
and one that keeps arriving short is a SandboxError rather than an archive that reads
as fewer files. The count works with GNU's tools and with BusyBox's (an Alpine-style
task image). And `repack`, what `Sandbox.collect` makes of an engine's archive stream:
the excludes, the limit and bounded memory, with no engine."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.archives import ARCHIVE_ATTEMPTS, ChunkReader, repack
from pytest_reactbench.sandbox.base import ExecResult, Sandbox
from pytest_reactbench.sandbox.errors import ArchiveTooLarge, SandboxError
from tests.helpers import tree_tar

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


# ------------------------------------------------------------------------------------
# `repack`: an engine's archive of a tree (its top entry named after the directory),
# re-packed as it streams by, as `tar -C src .` with the excludes would have made it.

EXCLUDES = ["**/node_modules/**", "**/.git/**", "dist"]


def engine_tar(files: dict[str, bytes | None], top: str = "app") -> bytes:
    """A tar as the engine's archive API makes it: `top` first, then `top/...`
    (None: a directory)."""
    return tree_tar({top: None, **{f"{top}/{k}": v for k, v in files.items()}})


def members(data: bytes) -> dict[str, bytes | None]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
                for m in tar}


def test_repack_strips_the_top_entry_and_leaves_out_the_excludes_as_gnu_tar() -> None:
    deep = "src/" + "/".join(["d" * 200] * 25) + "/x.ts"  # a name only a PAX header holds
    raw = engine_tar({"src": None, "src/a.ts": b"a", "node_modules": None, "node_modules/r.js": b"r",
                      "src/node_modules": None, "src/node_modules/q/q.js": b"q", ".git": None,
                      ".git/HEAD": b"h", "dist": None, "dist/deep": None, "dist/deep/out.js": b"o",
                      "src/dist.ts": b"d", deep: b"x"})
    kept = members(repack(io.BytesIO(raw), "/app", EXCLUDES, 1024))
    # `dist` (a plain name) prunes the whole folder, as GNU tar does not descend into it;
    # `**/x/**` keeps the folder itself and drops what is in it.
    assert kept == {"src": None, "src/a.ts": b"a", "node_modules": None, "src/node_modules": None,
                    ".git": None, "src/dist.ts": b"d", deep: b"x"}
    # The names of `tar -C /app .` (`./` or none) come out the same.
    dotted = engine_tar({"src": None, "src/a.ts": b"a"}, top=".")
    assert members(repack(io.BytesIO(dotted), "/app", [], 10)) == {"src": None, "src/a.ts": b"a"}


def test_repack_refuses_more_than_the_limit_of_kept_contents() -> None:
    raw = engine_tar({"a": b"x" * 600, "b": b"y" * 424, "node_modules": None,
                      "node_modules/big": b"z" * 5000})
    assert set(members(repack(io.BytesIO(raw), "/app", EXCLUDES, 1024))) == {"a", "b", "node_modules"}
    with pytest.raises(ArchiveTooLarge, match=r"^/app holds more than"):
        repack(io.BytesIO(raw), "/app", EXCLUDES, 1023)
    # Headers count too, past twice the limit and a slack: empty files hold no bytes.
    empty = engine_tar({f"f{i}": b"" for i in range(3000)})
    assert len(members(repack(io.BytesIO(empty), "/app", [], 1024 * 1024))) == 3000
    with pytest.raises(ArchiveTooLarge):
        repack(io.BytesIO(empty), "/app", [], 1024)


def test_a_huge_file_is_refused_from_its_header_never_read() -> None:
    # The engine sends a 2 GiB (sparse) file whole: zeros, after its header.
    header = tarfile.TarInfo("app/sparse")
    header.size = 2 * 1024**3
    top = tarfile.TarInfo("app")
    top.type = tarfile.DIRTYPE
    head = top.tobuf() + header.tobuf()
    sent = [0]

    def stream() -> Iterator[bytes]:
        yield head
        while sent[0] < header.size:
            sent[0] += 1024 * 1024
            yield bytes(1024 * 1024)

    with pytest.raises(ArchiveTooLarge):
        repack(ChunkReader(stream()), "/app", [], 128 * 1024 * 1024)
    assert sent[0] <= 1024 * 1024


def test_an_empty_stream_or_a_top_entry_not_a_directory_is_an_empty_tree() -> None:
    assert members(repack(io.BytesIO(b""), "/app", [], 10)) == {}
    link = tarfile.TarInfo("app")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc"
    assert members(repack(io.BytesIO(link.tobuf() + bytes(1024)), "/app", [], 10)) == {}
    with pytest.raises(SandboxError, match="unreadable"):
        repack(io.BytesIO(b"garbage" * 200), "/app", [], 10)
