"""The agent's diff for the run record, made by the harness on the host from two trees:
the artifacts as they were before the agent acted and as they were collected. Nothing
the agent configured takes part (its `.git/config`, its diff drivers, textconv and
filters, its attributes): the host's git compares two plain directories with no
configuration but its defaults, and its output goes to a file read back up to a
limit, so no diff can grow the harness's memory."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_reactbench.results import DiffStat

#: The workspace: the diff's paths read relative to it (`a/src/App.tsx`), as git's in it would.
WORKSPACE = "/app"
#: The most the host's git may take to compare the two trees.
DIFF_TIMEOUT = 300.0


@dataclass(frozen=True)
class Tree:
    """One artifact's tree as a tar stream (sanitized: what crosses to the verifier),
    at its source path in the sandbox."""

    source: str
    data: bytes


def _place(source: str) -> str:
    """Where an artifact's tree goes in the compared directories: relative to the
    workspace when inside it, else under its absolute path."""
    source = source.rstrip("/") or "/"
    if source == WORKSPACE:
        return ""
    if source.startswith(WORKSPACE + "/"):
        return source[len(WORKSPACE) + 1 :]
    return source.lstrip("/")


def _no_git(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """tarfile's `data` filter, a member it refuses skipped rather than raised, and
    git's own metadata left out (the diff is of the work, not of the repository)."""
    if ".git" in member.name.split("/"):
        return None
    try:
        return tarfile.data_filter(member, path)
    except tarfile.FilterError:
        return None


def _unpack(trees: Sequence[Tree], into: Path) -> None:
    into.mkdir()
    for tree in trees:
        target = into / _place(tree.source)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(tree.data), mode="r:") as tar:
            tar.errorlevel = 0  # a member the host cannot write (a name too long) is skipped
            tar.extractall(target, filter=_no_git)


def _git_env(home: Path, ceiling: Path) -> dict[str, str]:
    """Git with no configuration or attributes of anyone's making: no system or global
    file, an empty HOME, no repository found above the compared directories."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(ceiling),
        "LC_ALL": "C",
    }


def _headed(line: bytes) -> bytes:
    """A file added or deleted is headed `diff --git b/x b/x` (or `a/x a/x`) when
    directories are compared: `a/x b/x`, as git's own diff of a repository heads it.
    (No other line of a diff starts so: a patch's lines start with a space, `+`, `-`,
    `\\`, or a base85 character, and base85 has no space.)"""
    if not line.startswith(b"diff --git "):
        return line
    rest = line[len(b"diff --git "):]
    half = len(rest) // 2
    if len(rest) % 2 == 0 or rest[half:half + 1] != b" " or rest[:half] != rest[half + 1:]:
        return line
    quote = b'"' if rest.startswith(b'"') else b""
    path = rest[:half][len(quote) + 2:]
    return b"diff --git " + quote + b"a/" + path + b" " + quote + b"b/" + path


def tree_diff(before: Sequence[Tree], after: Sequence[Tree], limit: int) -> bytes:
    """A git diff (binary patches included) from the trees `before` to the trees
    `after`, paths `a/<path>` and `b/<path>` relative to the workspace, `.git` left out;
    at most `limit` bytes of it, with a line that says so when it was longer. Empty
    when nothing changed or when this host has no git."""
    git = shutil.which("git")
    if git is None:
        return b""
    with tempfile.TemporaryDirectory(prefix="reactbench-diff-") as folder:
        root = Path(folder)
        (root / "home").mkdir()
        work = root / "trees"
        work.mkdir()
        _unpack(before, work / "a")
        _unpack(after, work / "b")
        out = root / "diff.patch"
        with out.open("wb") as sink:
            # `a` and `b` are the directories and no prefix is added: the names read
            # `a/src/App.tsx` and `b/src/App.tsx`, as git's own diff in /app prints them.
            done = subprocess.run(
                [git, "diff", "--no-index", "--binary", "--no-ext-diff", "--no-textconv", "--no-color",
                 "--no-prefix", "--", "a", "b"],
                cwd=work, env=_git_env(root / "home", root), stdin=subprocess.DEVNULL, stdout=sink,
                stderr=subprocess.PIPE, timeout=DIFF_TIMEOUT, check=False)
        if done.returncode not in (0, 1):
            said = done.stderr.decode("utf-8", "replace").strip()[-2000:]
            return f"[the host's git could not compare the trees: {said}]\n".encode()
        with out.open("rb") as source:
            diff = source.read(limit + 1)
    diff = b"\n".join(_headed(line) for line in diff.split(b"\n"))
    if len(diff) > limit:
        note = f"\n[diff truncated at {limit // (1024 * 1024)} MiB by the run record]\n"
        diff = diff[:limit] + note.encode()
    return diff


def stat_of(diff: str) -> DiffStat:
    """Changed files and added/removed line counts of a unified diff."""
    lines = diff.splitlines()
    return DiffStat(
        files=[line.split(" b/", 1)[-1] for line in lines if line.startswith("diff --git ")],
        added=sum(1 for line in lines if line.startswith("+") and not line.startswith("+++")),
        removed=sum(1 for line in lines if line.startswith("-") and not line.startswith("---")),
    )
