import io
import tarfile
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.errors import SandboxError
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
    with pytest.raises(RewardFileNotFoundError, match=r"neither /logs/verifier/reward\.json.*"
                       r"tests/test\.sh must grade the submission and write one of them"):
        read_reward(tmp_path)


class _AtRest:
    """A sandbox whose `collect` hands out these trees (or refuses one as too large),
    and records the limits it was asked for; it runs nothing."""

    def __init__(self, trees: dict[str, bytes | None]) -> None:
        self.trees = trees
        self.asked: list[tuple[str, list[str], int]] = []

    def collect(self, src: str, exclude: list[str], limit: int) -> bytes:
        from pytest_reactbench.sandbox.errors import ArchiveTooLarge

        self.asked.append((src, exclude, limit))
        tree = self.trees[src]
        if tree is None:
            raise ArchiveTooLarge(src, limit)
        return tree

    def exec(self, *_: object, **__: object) -> object:
        raise AssertionError("collection runs nothing in the sandbox")


def test_collect_takes_each_artifact_at_rest_within_what_is_left_of_the_limit() -> None:
    from pytest_reactbench.tasks import Artifact
    from pytest_reactbench.verifier import collect

    app = tar_of([entry("src", tarfile.DIRTYPE), entry("src/App.tsx"), entry("escape", tarfile.SYMTYPE, "/")],
                 payload=b"x" * 100)
    box = _AtRest({"/app": app, "/opt/out": tar_of([entry("o.txt")])})
    transfers = collect(box, [Artifact(source="/app", exclude=EXCLUDES), Artifact(source="/opt/out")],  # type: ignore[arg-type]
                        limit=1000)
    assert [(t.files, t.size, t.dropped) for t in transfers] == [
        (1, 100, [("escape", "symlink to / points outside")]), (1, 1, [])]
    assert box.asked == [("/app", EXCLUDES, 1000), ("/opt/out", [], 900)]


def test_a_tree_past_the_limit_is_the_submissions_refusal() -> None:
    from pytest_reactbench.tasks import Artifact
    from pytest_reactbench.verifier import SubmissionRefused, collect

    box = _AtRest({"/app": None})
    with pytest.raises(SubmissionRefused, match=r"more than 128 MiB \(its limit\) after the excludes of "
                       r"\[\[artifacts\]\] \(/app\)"):
        collect(box, [Artifact(source="/app")])  # type: ignore[arg-type]
