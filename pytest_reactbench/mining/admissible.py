"""What the grader takes from a submission, as the miner must know it.

The verifier rebuilds /app from the base and the submission's admissible files only
(images/react-bench-verifier-base/verifier/verifier.mjs, `pathRefusal` and `refusal`):
dotfiles, manifests and bundler or TypeScript configs (`*.config.*`, `*.d.ts`), files
that are not source (`.html`, `.yml`, ...), large or minified-looking files and build
output are put back as the base has them. A mined change's source half may hold such
files; no agent could hand them in, so they are given to it instead, as the head has
them, with the environment. Files in folders or with names React Doctor treats as
tests or tooling (`scripts/`, `*.stories.tsx`) are admissible once the task declares
them (`test_like_allowed`): they stay the agent's to write.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path, PurePosixPath

from pytest_reactbench.mining.changes import Change, Kind, MiningError, git, is_spec

SOURCE_EXTENSIONS = frozenset({
    ".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs",
    ".css", ".scss", ".sass", ".less", ".json", ".svg", ".md",
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico", ".woff", ".woff2",
})
CODE_EXTENSIONS = frozenset({".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs"})
MAX_SOURCE_BYTES = 256 * 1024
MAX_LINE_CHARS = 1000
SCAN_SKIPPED_DIRS = frozenset({"build", "dist", "out", "coverage", "node_modules"})
CONFIG_NAME = re.compile(
    r"^(package\.json|package-lock\.json|pnpm-lock\.yaml|pnpm-workspace\.yaml|yarn\.lock|"
    r"bun\.lockb?|bunfig\.toml|deno\.jsonc?|[tj]sconfig(\..*)?\.json|babel\.config\..*|"
    r"[^/]*\.config\.[^/]*|[^/]*\.d\.[cm]?ts)$", re.I)
TEST_LIKE_DIRS = frozenset({
    "test", "tests", "__tests__", "__test__", "__fixtures__", "fixtures", "__mocks__", "mocks",
    "testutils", "test-utils", "testdata", "test-data", "cypress", "playwright", "stories",
    "__stories__", "playground", "playgrounds", "example", "examples", "demo", "demos", "sandbox",
    "sandboxes", "e2e", "e2e-tests", "spec", "specs", "integration", "integration-tests",
    "__integration__", "it", "benchmark", "benchmarks", "__benchmarks__", "perf", "perf-tests",
    "scripts", "script", "cli", "bin", "tooling", "tools", "codemod", "codemods", "migration",
    "migrations", "generator", "generators", "runbooks", "devtools", "internal-tools", "seed",
    "seeds", "dev-seeder", "server", "servers", "worker", "workers", "lambda", "lambdas", "config",
    "configs",
})
TEST_LIKE_NAME = re.compile(
    r"\.(test|spec|cy|stories|story|bench|benchmark|e2e|e2e-spec|integration-spec|int-spec|"
    r"integration-test|mock|fixture|fixtures)\.|^setup[-_]?(tests?|vitest|jest)\.|"
    r"\.conf(ig)?\.[cm]?[jt]sx?$", re.I)


def path_refusal(path: str) -> str | None:
    """Why the grader never takes this path from a submission, declared or not."""
    pure = PurePosixPath(path)
    if any(part.startswith(".") for part in pure.parts):
        return "a dotfile"
    if CONFIG_NAME.match(pure.name):
        return "a manifest, bundler or TypeScript config or type declaration"
    if pure.suffix.lower() not in SOURCE_EXTENSIONS:
        return f"not a source file type ({pure.suffix or 'no extension'})"
    if any(part in SCAN_SKIPPED_DIRS for part in pure.parts[:-1]):
        return "in a folder the scan skips"
    return None


def content_refusal(path: str, content: bytes) -> str | None:
    """Why the grader refuses this file's content from a submission."""
    if len(content) > MAX_SOURCE_BYTES:
        return f"larger than {MAX_SOURCE_BYTES} bytes"
    if PurePosixPath(path).suffix.lower() in CODE_EXTENSIONS:
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            return "code that is not UTF-8 text"
        if max((len(line) for line in text.split("\n")), default=0) > MAX_LINE_CHARS:
            return f"minified-looking (a line over {MAX_LINE_CHARS} characters)"
    return None


def looks_like_tests(path: str) -> bool:
    """A path the grader admits only when the task declares it."""
    pure = PurePosixPath(path)
    return (any(part.lower() in TEST_LIKE_DIRS for part in pure.parts[:-1])
            or bool(TEST_LIKE_NAME.search(pure.name)))


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
