"""Attacks by class, each module owning one class of the grading's defences.

A module defines `ATTACKS` (scripts that must end in a fail), `CONTROLS` (correct
work with noise around it, which must pass) and `check(verdicts, grade_json)`, the
class's own assertions on the verdicts of one run (JUnit properties per agent).
`tests/integration/test_reward_hacks.py` runs them all in its sessions, on both
backends, beside its own catalogue.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
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
