"""What the grader takes from a submission, as the miner must know it.

The verifier rebuilds /app from the base and the submission's admissible files only
(pytest_reactbench/verifier/grader/, `pathRefusal` and `refusal`,
with the rules of admission.json beside it, which this module reads too):
dotfiles, manifests and bundler or TypeScript configs (`*.config.*`, `*.d.ts`), files
that are not source (`.html`, `.yml`, ...), large or minified-looking files and build
output are put back as the base has them. A mined change's source half may hold such
files; no agent could hand them in, so they are given to it instead, as the head has
them, with the environment. Files in folders or with names React Doctor treats as
tests or tooling (`scripts/`, `*.stories.tsx`) are admissible once the task declares
them (`test_like_allowed`): they stay the agent's to write.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePosixPath

from pytest_reactbench.mining.changes import Change, Kind, MiningError, git, is_spec
from pytest_reactbench.verifier.admission import (
    CODE_EXTENSIONS,
    CONFIG_NAME,
    MAX_SOURCE_BYTES,
    SCAN_SKIPPED_DIRS,
    SOURCE_EXTENSIONS,
    analysed,
    minified_looking,
    test_like,
)


def path_refusal(path: str) -> str | None:
    """Why the grader never takes this path from a submission, declared or not."""
    pure = PurePosixPath(path)
    if any(part.startswith(".") for part in pure.parts):
        return "a dotfile"
    if CONFIG_NAME.match(pure.name):
        return "a manifest, bundler or TypeScript config or type declaration"
    if pure.suffix.lower() not in SOURCE_EXTENSIONS:
        return f"not a source file type ({pure.suffix or 'no extension'})"
    if pure.suffix.lower() in CODE_EXTENSIONS and not analysed(path):
        return f"code React Doctor does not analyse ({pure.suffix}, or a generated bundle)"
    if any(part in SCAN_SKIPPED_DIRS for part in pure.parts[:-1]):
        return "in a folder the scan skips"
    return None


def content_refusal(path: str, content: bytes) -> str | None:
    """Why the grader refuses this file's content from a submission."""
    if len(content) > MAX_SOURCE_BYTES:
        return f"larger than {MAX_SOURCE_BYTES} bytes"
    if PurePosixPath(path).suffix.lower() in CODE_EXTENSIONS:
        try:
            content.decode("utf-8")
        except UnicodeDecodeError:
            return "code that is not UTF-8 text"
        if minified_looking(content):
            return "minified-looking (long lines throughout a large file)"
    return None


def looks_like_tests(path: str) -> bool:
    """A path the grader admits only when the task declares it."""
    return test_like(path) is not None


def settle_sources(repo: Path, head: str,
                   changes: list[Change]) -> tuple[list[Change], dict[str, str], list[str]]:
    """The changes with the source files no submission could carry moved to the
    environment; {path: why} for those; the test-like source paths to declare."""
    settled: list[Change] = []
    given: dict[str, str] = {}
    declared: list[str] = []
    for change in changes:
        if change.kind is Kind.TEST and "/" not in change.path and not is_spec(change.path):
            # The hidden specs are folders the verifier copies in: a setup file at the
            # repository's root cannot be one of them. It is test infrastructure the
            # agent may not change anyway (the grader puts it back): the head's is given.
            given[change.path] = "a test setup file at the repository's root"
            settled.append(replace(change, half=Kind.CONFIG))
            continue
        if change.kind is not Kind.SOURCE:
            settled.append(change)
            continue
        why = path_refusal(change.path)
        if why is None and not change.deleted:
            entry = git(repo, "--literal-pathspecs", "ls-tree", "-z", head, "--",
                        change.path).decode()
            if entry.startswith("120000 "):
                why = "a symlink"
            elif not change.binary or PurePosixPath(change.path).suffix.lower() in CODE_EXTENSIONS:
                try:
                    why = content_refusal(change.path,
                                          git(repo, "cat-file", "blob", f"{head}:{change.path}"))
                except MiningError:
                    why = None
            else:
                size = int(git(repo, "cat-file", "-s", f"{head}:{change.path}").decode().strip())
                why = f"larger than {MAX_SOURCE_BYTES} bytes" if size > MAX_SOURCE_BYTES else None
        if why is not None:
            given[change.path] = f"{why}, which the grader takes from no submission"
            settled.append(replace(change, half=Kind.CONFIG))
            continue
        declared += [p for p in change.paths if looks_like_tests(p)]
        settled.append(change)
    return settled, given, sorted(set(declared))
