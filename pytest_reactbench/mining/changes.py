"""A commit range read from git and split into the halves a task is made of.

    test        spec and test files, fixtures, mocks, snapshots: the hidden specs
    source      what the agent must write: the reference solution
    dependency  manifests and lockfiles: installed at bake, part of the environment
    config      build and test-runner configuration: also part of the environment
    docs        documentation and repository housekeeping: in no half of the task
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath


class MiningError(Exception):
    """The repository or the revisions cannot be read: the user's input is wrong."""


class Kind(StrEnum):
    TEST = "test"
    SOURCE = "source"
    DEPENDENCY = "dependency"
    CONFIG = "config"
    DOCS = "docs"


#: Kinds whose head versions become part of the environment at bake.
ENVIRONMENT_KINDS = (Kind.DEPENDENCY, Kind.CONFIG)

DEPENDENCY_FILES = frozenset({
    "package.json", "pnpm-lock.yaml", "pnpm-workspace.yaml", "yarn.lock", "package-lock.json",
    "npm-shrinkwrap.json", "bun.lockb", "bun.lock", ".npmrc", ".yarnrc", ".yarnrc.yml",
    ".pnpmfile.cjs", ".nvmrc", ".node-version",
})
#: The package manager's own files (yarn's releases, plugins and Plug'n'Play loader) and
#: patches of dependencies (pnpm, yarn, patch-package): the install reads them.
DEPENDENCY_PATH = re.compile(r"(^|/)\.yarn/|(^|/)\.pnp\.(c?js|loader\.mjs)$|^patches/[^/]+\.patch$")
CONFIG_FILE = re.compile(
    r"(^|/)((vite|vitest|vitest\.workspace|jest|playwright|babel|postcss|tailwind|eslint|prettier)"
    r"\.config\.[cm]?[jt]s|tsconfig(\.[\w-]+)?\.json|jsconfig\.json|\.babelrc(\.json)?|"
    r"\.eslintrc(\.[\w]+)?|\.prettierrc(\.[\w]+)?|\.browserslistrc|babel\.config\.json)$"
)
TEST_DIRS = frozenset({
    "__tests__", "__mocks__", "__fixtures__", "__snapshots__", "__verifier__", "test", "tests",
    "e2e", "fixtures", "cypress",
})
TEST_FILE = re.compile(
    r"\.(test|spec|e2e|cy)\.[cm]?[jt]sx?$|\.snap$|"
    r"(^|/)(setupTests|setup-tests|test-setup|vitest\.setup|jest\.setup)\.[cm]?[jt]sx?$"
)
#: A file a test runner runs (the rest of the test half supports them).
SPEC_FILE = re.compile(r"\.(test|spec|e2e|cy)\.[cm]?[jt]sx?$|(^|/)__tests__/.*\.[cm]?[jt]sx?$")
#: Cypress's specs: the verifier has no Cypress to run them with.
CYPRESS_SPEC = re.compile(r"(^|/)cypress/|\.cy\.[cm]?[jt]sx?$")
DOCS_EXTENSIONS = frozenset({".md", ".mdx", ".rst", ".txt", ".adoc"})
DOCS_DIRS = frozenset({"docs", "doc", "documentation", ".github", ".vscode", ".idea", ".husky",
                       ".changeset"})
DOCS_NAMES = frozenset({"LICENSE", "LICENCE", "CHANGELOG", "AUTHORS", "CODEOWNERS", "NOTICE",
                        ".editorconfig", ".gitattributes"})


def classify(path: str) -> Kind:
    """The half of a task a changed path belongs to, from its path alone."""
    pure = PurePosixPath(path)
    if pure.name in DEPENDENCY_FILES or DEPENDENCY_PATH.search(path):
        return Kind.DEPENDENCY
    if CONFIG_FILE.search(path):
        return Kind.CONFIG
    if TEST_FILE.search(path) or any(part in TEST_DIRS for part in pure.parts[:-1]):
        return Kind.TEST
    if (pure.parts[0] in DOCS_DIRS and len(pure.parts) > 1) or pure.name in DOCS_NAMES \
            or pure.suffix.lower() in DOCS_EXTENSIONS:
        return Kind.DOCS
    return Kind.SOURCE


def is_spec(path: str) -> bool:
    return bool(SPEC_FILE.search(path))


def is_cypress(path: str) -> bool:
    return bool(CYPRESS_SPEC.search(path)) and is_spec(path)


@dataclass(frozen=True)
class Change:
    """One changed path: `status` is git's letter (A, M, D, R, C, T)."""

    status: str
    path: str
    old_path: str | None = None
    binary: bool = False
    #: The half the miner settled on where the path alone does not tell it.
    half: Kind | None = None

    @property
    def kind(self) -> Kind:
        # A deletion belongs where the deleted file was; anything else where it is now.
        return self.half or classify(self.path)

    @property
    def deleted(self) -> bool:
        return self.status == "D"

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the change touches (both sides of a rename)."""
        return (self.old_path, self.path) if self.old_path else (self.path,)


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, input=input,
                              check=False)
    except OSError as exc:
        raise MiningError(f"cannot run git: {exc}") from None
    if proc.returncode != 0:
        raise MiningError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def check_repository(repo: Path) -> None:
    if not repo.is_dir():
        raise MiningError(f"{repo} does not exist")
    try:
        git(repo, "rev-parse", "--git-dir")
    except MiningError:
        raise MiningError(f"{repo} is not a git repository") from None


def resolve(repo: Path, rev: str) -> str:
    """The commit id a revision names; git's own error rewritten to say which revision."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{rev}^{{commit}}").decode().strip()
    except MiningError:
        pass
    try:
        kind = git(repo, "cat-file", "-t", "--end-of-options", rev).decode().strip()
    except MiningError:
        kind = ""
    if kind:
        raise MiningError(f"revision {rev!r} is a {kind}, not a commit, in {repo}") from None
    if rev.startswith("-"):
        raise MiningError(f"revision {rev!r} looks like an option, not a revision") from None
    raise MiningError(f"revision {rev!r} is not in {repo} (a typo, or a branch not fetched?)") from None


def commits_in(repo: Path, spec: str) -> list[str]:
    """The first-parent commits of a range `BASE..HEAD`, oldest first: on a history
    that merges pull requests, one per merge; on a squash-merged one, one per change."""
    base, sep, head = spec.partition("..")
    if not sep or not base or not head or head.startswith("."):
        raise MiningError(f"range {spec!r} is not BASE..HEAD")
    base_id, head_id = resolve(repo, base), resolve(repo, head)
    out = git(repo, "rev-list", "--first-parent", "--reverse", f"{base_id}..{head_id}").decode().split()
    if not out:
        raise MiningError(f"range {spec!r} has no commits ({head} is not ahead of {base})")
    return out


def parse_name_status(raw: bytes) -> list[tuple[str, str, str | None]]:
    """`git diff --name-status -z` output as (status, path, old path)."""
    fields = raw.decode("utf-8", errors="surrogateescape").split("\0")
    out: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i][0]
        if status in "RC":
            out.append((status, fields[i + 2], fields[i + 1]))
            i += 3
        else:
            out.append((status, fields[i + 1], None))
            i += 2
    return out


def parse_binary_paths(raw: bytes) -> set[str]:
    """The binary paths in `git diff --numstat -z` output ("-\t-" counts)."""
    fields = raw.decode("utf-8", errors="surrogateescape").split("\0")
    binary: set[str] = set()
    i = 0
    while i < len(fields) and fields[i]:
        added, deleted, path = fields[i].split("\t", 2)
        if path:  # a plain entry
            names = [path]
            i += 1
        else:  # a rename or copy: the old and new paths follow
            names = [fields[i + 1], fields[i + 2]]
            i += 3
        if added == "-" and deleted == "-":
            binary.update(names)
    return binary


def read_changes(repo: Path, base: str, head: str) -> list[Change]:
    """The changes from base to head, renames detected, binary files marked."""
    statuses = parse_name_status(git(repo, "diff", "--name-status", "-z", "-M", base, head))
    binary = parse_binary_paths(git(repo, "diff", "--numstat", "-z", "-M", base, head))
    return [Change("M" if status == "T" else status, path, old, path in binary)
            for status, path, old in statuses]


def of_kind(changes: Iterable[Change], *kinds: Kind) -> list[Change]:
    return [c for c in changes if c.kind in kinds]
