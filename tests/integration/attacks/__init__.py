"""Attacks by class, each module owning one class of the grading's defences.

A module defines `ATTACKS` (scripts that must end in a fail), `CONTROLS` (correct
work with noise around it, which must pass), `BOTH` (those of them that attack what a
backend builds for itself) and `check(verdicts, grade_json)`, the class's own
assertions on the verdicts of one run (JUnit properties per agent; only the names the
run had). `tests/integration/test_reward_hacks.py` runs them in its sessions, beside
its own catalogue, each on the backends `on_backend` gives it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterable
from types import ModuleType
from typing import Any

Verdicts = dict[str, dict[str, str]]
Check = Callable[[Verdicts, Callable[[dict[str, str]], dict[str, Any]]], None]


def modules() -> list[ModuleType]:
    """The class modules of this package, by name."""
    return [importlib.import_module(f"{__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)]


def scripts(kind: str) -> dict[str, str]:
    """Every module's `ATTACKS` or `CONTROLS`; a name twice is an error."""
    merged: dict[str, str] = {}
    for module in modules():
        for name, script in getattr(module, kind, {}).items():
            assert name not in merged, f"{name} in two attack modules"
            merged[name] = script
    return merged


def checks() -> list[Check]:
    return [module.check for module in modules() if hasattr(module, "check")]


#: The backends, in the order `on_backend` deals the attacks out.
BACKENDS = ("local", "docker")


def on_backend(names: Iterable[str], both: Collection[str], backend: str) -> list[str]:
    """The names of one class that run on `backend`.

    What the grader judges of a submitted tree (the path policy, the scan, the
    canaries, the leak watch, the browser's guard) is one program on either backend: an
    attack on it proves the same on both. Each such attack runs on one backend, dealt
    out in turn by name, so that each backend meets about half of every class (the
    runtimes differ: the host's Node and Chromium on local, the image's on docker).
    What a backend builds for itself (the room, the sandbox, the way the tree comes
    out) is attacked on both: the names in `both`."""
    names = list(names)
    dealt = sorted(n for n in names if n not in both)
    return [n for n in names if n in both] + dealt[BACKENDS.index(backend)::len(BACKENDS)]


def scripts_on(kind: str, backend: str) -> dict[str, str]:
    """`scripts(kind)`, of the names that run on `backend`."""
    merged: dict[str, str] = {}
    for module in modules():
        found = getattr(module, kind, {})
        for name in on_backend(found, getattr(module, "BOTH", ()), backend):
            merged[name] = found[name]
    return merged
