"""The session's prebake: the bakes a backend takes at once, and their order."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import Capabilities, ImageRecipe, Layer
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.prebake import prebake, spread


def test_the_prebake_reports_a_fault_and_leaves_bake_errors_to_the_trials(tmp_path: Path) -> None:
    class Engine:
        capabilities = Capabilities(formal=False, bake_slots=2)

        def __init__(self, error: Exception) -> None:
            self.error, self.asked = error, []
            self.image_map: dict[str, str] = {}

        def baked(self, recipe: ImageRecipe) -> None:
            return None

        def bake_ahead(self, recipe: ImageRecipe, progress: object) -> None:
            self.asked.append(recipe.name)
            raise self.error

    recipes = [ImageRecipe(name, tmp_path / name / "Dockerfile", tmp_path / name) for name in "abc"]
    failing = Engine(BakeError("a step failed"))
    prebake(failing, recipes, lambda _: None)  # type: ignore[arg-type]
    assert sorted(failing.asked) == ["a", "b", "c"]  # every recipe tried; the trials report it
    broken = Engine(RuntimeError("the engine's answer made no sense"))
    with pytest.raises(RuntimeError, match="made no sense"):
        prebake(broken, recipes, lambda _: None)  # type: ignore[arg-type]


def test_the_pool_takes_its_bakes_in_turns_from_each_chain(tmp_path: Path) -> None:
    """Tasks in the order given, but the first bakes climb different chains: a verifier
    on the playwright base is not queued behind every task on the plain one."""
    def recipe(name: str, base: str, layer: Layer | None = None) -> ImageRecipe:
        folder = tmp_path / name
        folder.mkdir(parents=True)
        (folder / "Dockerfile").write_text(f"ARG BASE=reactbench/{base}\nFROM ${{BASE}}\nRUN true\n")
        return ImageRecipe(name, folder / "Dockerfile", folder, layer=layer)

    grader = Layer(name="grader", steps="RUN true\n", context=tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    recipes = [recipe("a/env", "base"), recipe("a/tests", "verifier", grader),
               recipe("b/env", "base"), recipe("b/tests", "verifier", grader),
               recipe("c/env", "base"), recipe("c/tests", "playwright", grader),
               recipe("d/tests", "verifier"),
               ImageRecipe("e/env", broken / "Dockerfile", broken)]
    assert [r.name for r in spread(recipes)] == [
        "a/env", "a/tests", "c/tests", "d/tests", "e/env", "b/env", "b/tests", "c/env"]
    # Two names the image map gives one stand-in are one chain: the grader layer on it
    # is one bake, which two of the pool's threads would only wait for in turns.
    same = {"reactbench/playwright": "reactbench/verifier"}
    assert [r.name for r in spread(recipes, same)] == [
        "a/env", "a/tests", "d/tests", "e/env", "b/env", "b/tests", "c/env", "c/tests"]
