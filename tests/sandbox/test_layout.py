"""The sandbox package's layout: its root holds the contract and what every backend
shares; each backend's own code lives in its folder (`docker/`, `local/`). Read from
the source alone (no backend is made), so it fails fast when a backend's module lands
at the root."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import pytest_reactbench

PACKAGE = Path(pytest_reactbench.__file__).parent
SANDBOX = PACKAGE / "sandbox"
BACKENDS = ("docker", "local")
#: The list of built-in backends names each one (imported when chosen).
NAMES_THE_BACKENDS = {"registry.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imports(path: Path) -> frozenset[str]:
    """Every module `path` imports, anywhere in it (a function's own imports too), and
    for `from X import Y` both X and X.Y (Y may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def strings(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def root_modules() -> list[Path]:
    return sorted(p for p in SANDBOX.glob("*.py") if p.name != "__init__.py")


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("path", root_modules(), ids=lambda p: p.name)
def test_no_module_at_the_sandbox_root_uses_a_backend_s_own_code(path: Path) -> None:
    used = imports(path)
    assert not any(under(name, "docker") for name in used), (
        f"sandbox/{path.name} imports docker-py: it is the docker backend's, in sandbox/docker/")
    assert not any(word.split()[0] in ("bwrap", "bubblewrap") for word in strings(path) if word.strip()), (
        f"sandbox/{path.name} runs bubblewrap: it is the local backend's, in sandbox/local/")
    if path.name in NAMES_THE_BACKENDS:
        return
    for backend in BACKENDS:
        assert not any(under(name, f"pytest_reactbench.sandbox.{backend}") for name in used), (
            f"sandbox/{path.name} imports the {backend} backend's code: the root holds what every "
            f"backend shares, so it belongs in sandbox/{backend}/")


@pytest.mark.parametrize("path", root_modules(), ids=lambda p: p.name)
def test_no_module_at_the_sandbox_root_serves_one_backend_alone(path: Path) -> None:
    """A root module that only one backend's folder imports (and nothing else of the
    package) is that backend's: cgroups and seccomp are the local backend's, the engine
    pool and the image registry client docker's."""
    name = module_name(path)
    importers = {module_name(other) for other in PACKAGE.rglob("*.py")
                 if other != path and any(under(used, name) for used in imports(other))}
    if not importers:
        return
    for backend in BACKENDS:
        folder = f"pytest_reactbench.sandbox.{backend}"
        assert not all(under(importer, folder) for importer in importers), (
            f"sandbox/{path.name} is imported by the {backend} backend alone "
            f"({', '.join(sorted(importers))}): it belongs in sandbox/{backend}/")


def test_each_backend_has_its_folder() -> None:
    for backend in BACKENDS:
        assert (SANDBOX / backend / "__init__.py").is_file()
