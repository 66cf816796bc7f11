"""The package's shape, read from its source (no sandbox, no pytest run): the Trial is
the only maker of a result, failures and events are compared through their types, and
only the option table reads the settings' environment variables.

Reading a result back (status.json, JUnit properties) is not making one: it belongs
to `results/`, beside the model, because the reports and `reactbench` commands read
records with no trial at hand and `results/` is the layer every other one imports
(it cannot call up into `trial/`). So TrialResult's own readers, `from_status` and
`from_properties`, are the one place outside `trial/` that builds a TrialResult, and
`retried` the one that copies one (for the Trial)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest_reactbench

PACKAGE = Path(pytest_reactbench.__file__).parent
#: Where a result is made: the Trial's package.
MAKERS = PACKAGE / "trial"
#: The methods of TrialResult that read one back from a form a trial wrote (or copy one).
READERS = {"from_status", "from_properties", "retried"}
#: Where the failure and event types are declared: their literals live there only.
TYPES = {PACKAGE / "results" / "failure.py", PACKAGE / "results" / "events.py"}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Makers(ast.NodeVisitor):
    """Every construction of a TrialResult: a call of the class (by name, or as `cls`
    in its own methods), `model_validate*`, `model_construct`, `model_copy`; each with
    the method of TrialResult it is in, if any."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.AST, str | None]] = []
        self._class: list[str] = []
        self._method: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._class.append(node.name)
        self.generic_visit(node)
        self._class.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._method.append(node.name)
        self.generic_visit(node)
        self._method.pop()

    def visit_Call(self, node: ast.Call) -> None:
        inside = self._class[-1:] == ["TrialResult"]
        func = node.func
        made = _name(func) == "TrialResult" or (inside and _name(func) == "cls")
        if isinstance(func, ast.Attribute) and func.attr.startswith(("model_validate", "model_construct")):
            made |= _name(func.value) == "TrialResult" or (inside and _name(func.value) == "cls")
        if isinstance(func, ast.Attribute) and func.attr == "model_copy":
            made |= inside and _name(func.value) == "self"
        if made:
            self.found.append((node, self._method[-1] if inside and self._method else None))
        self.generic_visit(node)


def test_no_result_is_made_outside_the_trial() -> None:
    outside, inside = [], []
    for path, tree in _modules():
        makers = _Makers()
        makers.visit(tree)
        for node, method in makers.found:
            if path.is_relative_to(MAKERS):
                inside.append(_where(path, node))
            elif method not in READERS:
                outside.append(_where(path, node))
    assert not outside, ("a TrialResult is made outside trial/ (make it there: the Trial's "
                         f"lifecycle, or trial/outcomes.py): {outside}")
    # The walk sees constructions at all: the Trial's own are found.
    assert any("lifecycle.py" in where for where in inside) and any("outcomes.py" in where
                                                                   for where in inside), inside


def _literal(node: ast.AST) -> bool:
    """A string literal, a container of them, or a class's `__name__`: what a failure
    or an event used to be compared with."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_literal(e) for e in node.elts)
    return isinstance(node, ast.Attribute) and node.attr == "__name__"


def _event_of(node: ast.AST) -> bool:
    """A record event's name read back: `e.get("event")` or `e["event"]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "event"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "event"
    return False


def _free_strings(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    for function in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        # Names bound to an event's name in this function (`kind = event.get("event")`).
        events = set() if function is tree else {
            target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
            and _event_of(node.value) for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(function):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_literal(o) for o in operands):
                    if any(_name(o) == "failure" for o in operands):
                        yield node, "a failure compared with a literal"
                    if any(_event_of(o) or (isinstance(o, ast.Name) and o.id in events) for o in operands):
                        yield node, "an event compared with a literal"
            elif isinstance(node, ast.Call):
                name = _name(node.func)
                if name in ("event", "_event") and node.args and _literal(node.args[0]):
                    yield node, "an event written as a free string"
                if name in ("Failure", "Event") and node.args and _literal(node.args[0]):
                    yield node, f"a {name} made from a literal outside its type"
                for keyword in node.keywords:
                    if keyword.arg == "failure" and _literal(keyword.value):
                        yield node, "a failure given as a literal"


def test_failures_and_events_are_compared_through_their_types() -> None:
    found = sorted({f"{_where(path, node)}: {what}" for path, tree in _modules() if path not in TYPES
                    for node, what in _free_strings(tree)})
    assert not found, ("use pytest_reactbench.results.Failure and Event (their constants, "
                       f"Failure.of(ErrorClass), Failure.is_) instead: {found}")


def test_the_walk_finds_what_it_forbids() -> None:
    """The checks above are not vacuous: each kind of free string is found."""
    source = '''
def f(result, record, e):
    kind = e.get("event")
    record.event("trial-start")
    if result.failure == "audit" or result.failure in ("tampered",) or kind == "model":
        return Failure("WorkerCrashed")
    if result.failure == KeyError.__name__ or e["event"] == "tool":
        return TrialResult(task="t", agent="a", verdict="error", failure="reward")
'''
    tree = ast.parse(source)
    kinds = sorted({what for _, what in _free_strings(tree)})
    assert kinds == ["a Failure made from a literal outside its type", "a failure compared with a literal",
                     "a failure given as a literal", "an event compared with a literal",
                     "an event written as a free string"]
    makers = _Makers()
    makers.visit(tree)
    assert len(makers.found) == 1


#: The one reader of the settings' variables.
TABLE = PACKAGE / "plugin" / "options.py"


def _env_reads(tree: ast.Module, names: set[str]) -> Iterator[tuple[ast.AST, str]]:
    """Reads of the variables `names` from the environment: `os.environ.get(NAME)`,
    `os.getenv(NAME)`, `os.environ[NAME]` (not an assignment to it: a variable the
    product sets for a sandbox is no setting), `NAME in os.environ`."""
    def environ(node: ast.AST) -> bool:
        return _name(node) == "environ"

    def named(node: ast.AST) -> str | None:
        return node.value if isinstance(node, ast.Constant) and node.value in names else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and named(node.args[0]):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and environ(func.value)) \
                    or _name(func) == "getenv":
                yield node, str(named(node.args[0]))
        elif isinstance(node, ast.Subscript) and environ(node.value) and named(node.slice) \
                and isinstance(node.ctx, ast.Load):
            yield node, str(named(node.slice))
        elif isinstance(node, ast.Compare) and named(node.left) and any(environ(c) for c in node.comparators):
            yield node, str(named(node.left))


def _declared_variables() -> set[str]:
    from pytest_reactbench.plugin.options import OPTIONS

    return {option.env for option in OPTIONS if option.env}


def test_only_the_option_table_reads_the_settings_variables() -> None:
    declared = _declared_variables()
    assert {"REACTBENCH_CA_BUNDLE", "REACTBENCH_UNSIGNED_REGISTRY", "REACTBENCH_CACHE"} <= declared
    found = sorted(f"{_where(path, node)}: {name}" for path, tree in _modules() if path != TABLE
                   for node, name in _env_reads(tree, declared))
    assert not found, ("a setting's variable is read outside the option table "
                       f"(plugin/options.py): take its value as an argument, and resolve it with "
                       f"the table (`setting`, `environment_sandbox_options`): {found}")


def test_the_environment_walk_finds_every_kind_of_read() -> None:
    source = '''
import os
from os import environ, getenv
a = os.environ.get("REACTBENCH_CA_BUNDLE")
b = getenv("REACTBENCH_CACHE", "")
c = environ["REACTBENCH_UNSIGNED_REGISTRY"]
d = "REACTBENCH_CACHE" in os.environ
env = {"REACTBENCH_CACHE": "set for a sandbox"}
os.environ["REACTBENCH_CACHE"] = "set, not read"
e = os.environ.get("REACTBENCH_INSTRUCTION_FILE")
'''
    found = [name for _, name in _env_reads(ast.parse(source), _declared_variables())]
    assert found == ["REACTBENCH_CA_BUNDLE", "REACTBENCH_CACHE", "REACTBENCH_UNSIGNED_REGISTRY",
                     "REACTBENCH_CACHE"], found
