"""Our grader as a layer of its own: the Node program under `grader/` (the clean room,
the test room, the React Doctor scan, grade.json) reaches a verifier image as a layer
baked on top of whatever base the task's `tests/Dockerfile` names, public image or
stand-in, before the task's own steps run. Its key hashes the grader's files, so a
change of the grader rebakes every verifier built on it.

A task uses our grader when its `tests/Dockerfile` or `tests/test.sh` runs it from
`contract.json`'s `home`; a task of the public suite, with its own `grader.mjs`, gets
no layer and bakes exactly as written."""

from __future__ import annotations

from pathlib import Path

from pytest_reactbench.sandbox.base import Layer
from pytest_reactbench.verifier.contract import CONTRACT, GRADER_FILES

#: The grader's files: all of them, and nothing else, are copied to `CONTRACT.home`.
GRADER_DIR = GRADER_FILES


def uses_grader(tests_dir: Path) -> bool:
    """Whether the task's verifier runs our grader (its Dockerfile or test.sh name it)."""
    home = CONTRACT.home + "/"
    for name in ("Dockerfile", "test.sh"):
        try:
            if home in (tests_dir / name).read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def grader_layer() -> Layer:
    """The grader and the React Doctor it pins, on a verifier base. The public bases
    carry neither (their tasks install React Doctor in their own bake), so the layer
    installs it beside the grader, with its whole tree from the grader's lockfile (`npm
    ci`: no resolution, no package metadata fetched), before the grader's files: a
    change of the grader alone reuses the install. Last, the base's own dependencies
    (`/app/node_modules`) are kept apart as pristine here, once for every task on this
    base, not copied out of the base by each task's bake."""
    return Layer(
        name="grader",
        steps=(f"COPY package.json package-lock.json {CONTRACT.home}/\n"
               f"RUN cd {CONTRACT.home} && npm ci --no-fund --no-audit --no-update-notifier\n"
               f"COPY . {CONTRACT.home}/\n"
               f"RUN node {CONTRACT.home}/verifier.mjs keep-deps\n"),
        context=GRADER_DIR,
    )
