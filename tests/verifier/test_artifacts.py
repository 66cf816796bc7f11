import io
import tarfile
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import SandboxError
from pytest_reactbench.verifier import (
    RewardFileError,
    RewardFileNotFoundError,
    excluded,
    read_reward,
    sanitize,
)

EXCLUDES = ["**/node_modules/**", "**/.git/**", "**/*.tsbuildinfo"]


@pytest.mark.parametrize(
    ("name", "dropped"),
    [
        ("node_modules/react/index.js", True),
        ("packages/a/node_modules/x/y.js", True),
        ("src/node_modules.ts", False),
        (".git/HEAD", True),
        ("tsconfig.tsbuildinfo", True),
        ("src/App.tsx", False),
    ],
)
def test_exclude_matches_like_gnu_tar(name: str, dropped: bool) -> None:
    assert excluded(name, EXCLUDES) is dropped


def tar_of(entries: list[tarfile.TarInfo], payload: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in entries:
            if info.isfile():
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def test_sanitize_keeps_files_and_inner_links_and_drops_the_rest() -> None:
    raw = tar_of([
        entry("./", tarfile.DIRTYPE),
        entry("./src", tarfile.DIRTYPE),
        entry("./src/App.tsx"),
        entry("./src/alias.tsx", tarfile.SYMTYPE, "App.tsx"),
        entry("./src/escape", tarfile.SYMTYPE, "/etc/passwd"),
        entry("./src/up", tarfile.SYMTYPE, "../../outside"),
        entry("../evil.txt"),
        entry("./dev", tarfile.CHRTYPE),
        entry("./node_modules/x.js"),
    ])
    data, files, size, dropped = sanitize(raw, EXCLUDES)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = sorted(tar.getnames())
    assert names == ["src", "src/App.tsx", "src/alias.tsx"]
    assert files == 1 and size == 1
    assert dict(dropped) == {
        "src/escape": "symlink to /etc/passwd points outside",
        "src/up": "symlink to ../../outside points outside",
        "../evil.txt": "path leaves the artifact root",
        "dev": "special file is not transferred",
    }


def test_members_the_verifier_cannot_write_are_dropped_by_name_and_the_rest_kept() -> None:
    deep = "src/" + "/".join(["d" * 200] * 26) + "/x.ts"  # 5,233 bytes under /app
    raw = tar_of([entry("./src", tarfile.DIRTYPE), entry("./src/App.tsx"), entry(f"./{deep}"),
                  entry("./src/" + "n" * 256 + ".ts"), entry("./src/" + "é" * 126 + ".ts")])
    data, files, _, dropped = sanitize(raw, EXCLUDES)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert sorted(tar.getnames()) == ["src", "src/App.tsx", "src/" + "é" * 126 + ".ts"]
    reasons = dict(dropped)
    assert reasons[deep[:200] + "…"].startswith("the path is longer than PATH_MAX (4096 bytes)")
    assert reasons[("src/" + "n" * 256)[:200] + "…"].startswith("a name in the path is longer than NAME_MAX")
    assert files == 2


def test_sanitize_refuses_garbage() -> None:
    with pytest.raises(SandboxError, match="unreadable archive"):
        sanitize(b"not a tar" * 100, [])


def test_reward_json_wins_over_txt(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0\n")
    (tmp_path / "reward.json").write_text('{"reward": 1, "tests": 1, "react_doctor": 1}')
    assert read_reward(tmp_path).reward == 1


def test_reward_txt(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("1\n")
    assert read_reward(tmp_path).reward == 1


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("reward.json", "", "reward.json: file is empty"),
        ("reward.json", "{reward: 1", "reward.json: is not valid JSON"),
        ("reward.json", "[1]", "reward.json: expected an object"),
        ("reward.json", '{"reward": "yes"}', "reward.json: reward: Input should be a valid number"),
        ("reward.json", '{"reward": 1, "tests": 0}', "reward is 1 while a gate failed"),
        ("reward.txt", "passed", "reward.txt: expected a number between 0 and 1, got 'passed'"),
        ("reward.txt", "7", "expected a number between 0 and 1"),
    ],
)
def test_garbled_reward_is_an_error(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(RewardFileError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_reward(tmp_path)


def test_missing_reward(tmp_path: Path) -> None:
    with pytest.raises(RewardFileNotFoundError, match=r"neither /logs/verifier/reward\.json"):
        read_reward(tmp_path)


class _Listing:
    """A sandbox whose find prints these paths (the archive-independent listing)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.asked: list[list[str]] = []

    def exec(self, cmd: list[str], **_: object) -> object:
        from pytest_reactbench.sandbox.base import ExecResult

        self.asked.append(cmd)
        return ExecResult(0, "\0".join(self.paths).encode() + b"\0", b"", 0.0)


def test_paths_an_archive_left_out_are_refused_by_name_once() -> None:
    from pytest_reactbench.verifier.artifacts import _left_out

    deep = "/app/src/" + "/".join(["d" * 200] * 21) + "/x.ts"
    kept_out = "/app/node_modules/" + "/".join(["m" * 200] * 21) + "/y.js"
    named_already = "/app/src/" + "/".join(["e" * 200] * 21) + "/z.ts"
    sandbox = _Listing([deep, kept_out, named_already])
    already = {named_already.removeprefix("/app/")[:200] + "…"}
    left = _left_out(sandbox, "/app", EXCLUDES, already)  # type: ignore[arg-type]
    assert [(name[:20], "PATH_MAX" in why) for name, why in left] == [("src/" + "d" * 16, True)]
    assert "-regex" in sandbox.asked[0]
