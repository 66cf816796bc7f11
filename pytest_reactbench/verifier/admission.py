"""The grader's admission rules, read by the harness from the file the grader reads
them from (grader/admission.json): which files React Doctor analyses, which it treats
as tests or tooling, and which it drops as minified. The miner uses them to know what
an agent can hand in; the audit, to flag what a grader might be fooled by."""

from __future__ import annotations

import json
import posixpath
import re

from pytest_reactbench.verifier.layer import GRADER_DIR

RULES = json.loads((GRADER_DIR / "admission.json").read_text())
SOURCE_EXTENSIONS = frozenset(RULES["source_extensions"])
CODE_EXTENSIONS = frozenset(RULES["code_extensions"])
MAX_SOURCE_BYTES = int(RULES["max_source_bytes"])
SCAN_SKIPPED_DIRS = frozenset(RULES["scan_skipped_dirs"])
CONFIG_NAME = re.compile(RULES["config_name"], re.I)
LINTABLE = re.compile(RULES["lintable"])
GENERATED = re.compile(RULES["generated"])
DECLARATION = re.compile(RULES["declaration"])
_MINIFIED: dict[str, int] = RULES["minified"]
_CONTEXT: dict[str, str] = RULES["test_context"]


def test_like(path: str) -> str | None:
    """Why React Doctor skips most of its rules on this file (a test, story, fixture
    or tooling, by its name or a folder below the last source root, as its plugin
    tells them), or None for production code. `path` is relative to /app."""
    filename = f"/app/{path}"
    basename = posixpath.basename(path)
    if basename.lower() in RULES["test_like_basenames"]:
        return f"its name ({basename})"
    for suffix in RULES["test_like_suffixes"]:
        if suffix in basename:
            return f"its name ({suffix})"
    cut = max(filename.rfind(f"/{root}/") for root in RULES["source_root_segments"])
    scoped = filename if cut < 0 else filename[cut:]
    for segment in RULES["test_like_segments"]:
        if f"/{segment}/" in (filename if segment.startswith(".") else scoped):
            return f"a folder {segment}/"
    return None


def test_context(path: str) -> str | None:
    """Why React Doctor's report takes this file for a test or a story (the findings of
    its test-noise rules, a leaking effect among them, dropped) by its own rule beside
    its plugin's: test and story suffixes, and test folders anywhere in the path (below
    the last source root once a fixtures/ folder is in it); None for production code."""
    if re.search(_CONTEXT["suffix"], path):
        return "its name"
    scoped = path
    if fixture := re.search(_CONTEXT["fixture_project"], path):
        cut = max(path.rfind(f"/{root}/") for root in RULES["source_root_segments"])
        scoped = path[cut:] if cut >= 0 else path[fixture.end() - 1:]
    folder = re.search(_CONTEXT["directory"], scoped)
    return f"a folder {folder.group().lstrip('/')}" if folder else None


def analysed(path: str) -> bool:
    """Whether React Doctor lints this code file at all (its extensions, lower case;
    no generated bundle)."""
    return bool(LINTABLE.search(path)) and not GENERATED.search(path)


def minified_looking(content: bytes) -> bool:
    """React Doctor's own test for a file it drops as minified."""
    if len(content) < _MINIFIED["min_bytes"]:
        return False
    prefix = content[:_MINIFIED["sniff_bytes"]].decode("utf-8", "replace")
    lines = prefix.split("\n")
    return bool(max(len(line) for line in lines) > _MINIFIED["longest_line"]
                and len(prefix) / len(lines) > _MINIFIED["average_line"])
