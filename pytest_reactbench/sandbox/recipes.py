"""Image recipes shared by the backends: the image map, the stand-in recipes under
`images/`, and content hashes that decide when an image must be rebuilt."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.base import ImageRecipe

#: The system layer (Debian root, Node, pnpm, git, Chromium). Docker builds it from
#: images/system; on the local backend the host stands for it.
SYSTEM_IMAGE = "reactbench/system"

#: Base images of the public suite and the local recipe that stands in for each. The
#: verifier base's stand-in serves the Playwright verifier too: it carries the base's
#: browser, which its bake proved Playwright launches, and nothing else differs; one
#: image for both names means one bake of the grader layer on it, not two.
DEFAULT_IMAGE_MAP: dict[str, str] = {
    "ghcr.io/millionco/react-bench-base": "react-bench-base",
    "ghcr.io/millionco/react-bench-agents": "react-bench-agents",
    "ghcr.io/millionco/react-bench-verifier-base": "react-bench-verifier-base",
    "ghcr.io/millionco/react-bench-verifier-playwright": "react-bench-verifier-base",
}


class ImageMapError(ValueError):
    pass


def images_dir() -> Path:
    """Where the recipes live: inside the installed package, or the source checkout."""
    packaged = Path(__file__).resolve().parent.parent / "images"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "images"


def parse_image_map(
    entries: Iterable[str], source: str, base: Mapping[str, str] = DEFAULT_IMAGE_MAP
) -> dict[str, str]:
    """`FROM=TO` entries (later ones win) over `base` (by default, the stand-ins)."""
    mapping = dict(base)
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ImageMapError(
                f"{source}: image map entry {entry!r} must be FROM=TO, "
                "e.g. ghcr.io/millionco/react-bench-base=react-bench-base"
            )
        mapping[strip_tag(key.strip())] = value.strip()
    return mapping


def strip_tag(ref: str) -> str:
    """`name:tag` and `name@digest` both map by name alone."""
    ref = ref.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    return ref[:colon] if colon > slash else ref


def tagged(ref: str) -> str:
    """`ref` as the engine reads it: `name` is `name:latest`."""
    return ref if "@" in ref or ref.rfind(":") > ref.rfind("/") else f"{ref}:latest"


def map_image(ref: str, image_map: Mapping[str, str]) -> str:
    return image_map.get(strip_tag(ref), image_map.get(ref, ref))


def recipe_dir(name: str) -> Path | None:
    """The directory of a stand-in recipe named by the image map, if it is one."""
    if name == SYSTEM_IMAGE:
        return None
    candidate = Path(name)
    if candidate.is_absolute() and (candidate / "Dockerfile").is_file():
        return candidate
    local = images_dir() / name
    return local if (local / "Dockerfile").is_file() else None


def hash_tree(root: Path, digest: hashlib._Hash | None = None, skip: Path | None = None) -> str:
    """A content hash of a directory: relative paths, modes, file bytes, link targets;
    without the folder `skip`."""
    h = digest or hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if path.is_symlink():
                h.update(b"L" + os.readlink(path).encode() + b"\0")
                continue
            st = path.stat()
            h.update(f"{st.st_mode & 0o111:o}\0".encode())
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


@functools.cache
def code_key(*modules: str) -> str:
    """What the named modules' code does, as a hash: their syntax trees with docstrings
    left out, so a comment or a docstring edited keeps every image baked, and any change
    of the code that builds rebakes what it built (no version to remember to bump)."""
    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ImportError(f"no module {name} to hash")
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                    and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        h.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
    return h.hexdigest()[:24]


def recipe_key(*parts: str, context: Path | None = None, skip: Path | None = None) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    if context is not None:
        hash_tree(context, h, skip)
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class FromRef:
    """A base image a Dockerfile builds on, and the ARG that names it, if any."""

    image: str
    variable: str | None
    line: int
    #: The image as written on the FROM line (before ARG substitution).
    raw: str = ""


def declare_arg(ins: df.Instruction, build_args: Mapping[str, str], variables: dict[str, str]) -> None:
    """ARG NAME[=default], overridden by a build argument."""
    name, sep, default = ins.args.partition("=")
    name = name.strip()
    if name in build_args:
        variables[name] = build_args[name]
    elif sep:
        variables[name] = df.substitute(default.strip().strip('"'), variables)
    else:
        variables.setdefault(name, "")


def from_instructions(recipe: ImageRecipe) -> list[FromRef]:
    """Every FROM of an external base image (not of an earlier stage), in order."""
    instructions = df.parse(recipe.dockerfile)
    variables: dict[str, str] = {}
    stages: set[str] = set()
    refs: list[FromRef] = []
    seen_from = False
    for ins in instructions:
        if ins.keyword == "ARG" and not seen_from:
            declare_arg(ins, recipe.build_args, variables)
        elif ins.keyword == "FROM":
            seen_from = True
            words = ins.args.split()
            raw = words[0]
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2])
            image = df.substitute(raw, variables)
            if image in stages:
                continue
            whole = raw.strip("${}")
            variable = whole if raw.startswith("$") and whole.isidentifier() else None
            refs.append(FromRef(image, variable, ins.line, raw))
    return refs


def from_refs(recipe: ImageRecipe) -> list[FromRef]:
    """The external base images of a Dockerfile, each once (where it first appears)."""
    refs: dict[str, FromRef] = {}
    for ref in from_instructions(recipe):
        refs.setdefault(ref.image, ref)
    return list(refs.values())
