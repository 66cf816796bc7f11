"""The record's diff, made on the host from the trees before and after the agent: no
configuration of anyone's making (the agent's repository, the user's HOME, the
harness's environment) takes part, `.git` is left out, and it is bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.trial import stat_of
from pytest_reactbench.trial.diff import Tree, tree_diff
from tests.helpers import tree_tar

FORGED = b"FORGED-BY-THE-AGENT"


BASE = {"src": None, "src/App.tsx": b"one\n", "gone.ts": b"g\n", "logo.png": b"\x89PNG\0\1",
        ".git": None, ".git/config": b"[core]\n"}
FORGER = {"src": None, "src/App.tsx": b"two\n", "new.ts": b"n\n", "logo.png": b"\x89PNG\0\2",
          ".gitattributes": b"* diff=forged filter=forged\n*.tsx diff=conv\n", ".git": None,
          ".git/config": (b'[diff "forged"]\n\tcommand = sh -c "echo FORGED-BY-THE-AGENT"\n'
                          b'[diff "conv"]\n\ttextconv = sh -c "echo FORGED-BY-THE-AGENT"\n'
                          b'[filter "forged"]\n\tclean = sh -c "echo FORGED-BY-THE-AGENT"\n'
                          b'[diff]\n\texternal = sh -c "echo FORGED-BY-THE-AGENT"\n')}


def test_the_diff_is_the_harnesss_whatever_anyone_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The harness's own environment and HOME name a diff program too: neither counts.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[diff]\n\texternal = sh -c "echo FORGED-BY-THE-AGENT"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "false")
    monkeypatch.chdir(tmp_path)
    after = [Tree("/app", tree_tar(FORGER)), Tree("/opt/out", tree_tar({"o": b"o\n"}))]
    diff = tree_diff([Tree("/app", tree_tar(BASE))], after, 10 * 1024 * 1024)
    assert FORGED not in diff
    text = diff.decode()
    assert "-one\n+two\n" in text and "GIT binary patch" in text
    assert ".git/" not in text.replace(".gitattributes", "")
    # Paths as git's own diff in /app prints them, added and deleted files too.
    assert stat_of(text).files == [".gitattributes", "gone.ts", "logo.png", "new.ts", "opt/out/o",
                                   "src/App.tsx"]
    assert "diff --git a/gone.ts b/gone.ts\ndeleted file mode" in text
    assert "diff --git a/new.ts b/new.ts\nnew file mode" in text
    assert "--- a/src/App.tsx\n+++ b/src/App.tsx\n" in text


def test_no_change_is_an_empty_diff_and_a_long_one_is_cut() -> None:
    assert tree_diff([Tree("/app", tree_tar(BASE))], [Tree("/app", tree_tar(BASE))], 1000) == b""
    big = {"src": None, "src/App.tsx": b"".join(b"line %d\n" % i for i in range(100_000))}
    diff = tree_diff([Tree("/app", tree_tar(BASE))], [Tree("/app", tree_tar(big))], 64 * 1024)
    assert len(diff) < 65 * 1024 and diff.endswith(b"[diff truncated at 0 MiB by the run record]\n")
