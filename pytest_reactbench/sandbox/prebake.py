"""The session's prebake: its bakes planned before the first trial and run as a
bounded pool (a bake is mostly waiting on downloads and installs, so one per xdist
worker leaves the engine idle), taken in turns from each FROM chain. A bake that fails
here fails its trials as it would have anyway: the backend remembers the failure for
the session.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from itertools import zip_longest

from pytest_reactbench.sandbox.base import Backend, ImageRecipe
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.heartbeat import heartbeat
from pytest_reactbench.sandbox.recipes import from_refs, map_image


def prebake(backend: Backend, recipes: Iterable[ImageRecipe], progress: Callable[[str], None]) -> None:
    """Bake `recipes` (each once), up to the backend's capabilities' `bake_slots` at a time, and wait."""
    pool = start(backend, recipes, progress)
    if pool is not None:
        pool.join()


def start(backend: Backend, recipes: Iterable[ImageRecipe],
          progress: Callable[[str], None]) -> BakePool | None:
    """Start baking `recipes` (each once, those not baked yet), up to the backend's
    `bake_slots` at a time, in the order given but in turns from each chain; None when
    there is nothing to bake. The pool bakes on while the trials run: a trial waits
    only for its own images, on their locks (or bakes one the pool has not reached)."""
    unique = {(r.dockerfile.resolve(), r.context.resolve()): r for r in recipes}
    waiting = spread([r for r in unique.values() if backend.baked(r) is None], backend.image_map)
    if not waiting:
        return None
    return BakePool(backend, waiting, progress)


class BakePool:
    """Bakes in daemon threads, not an executor: Ctrl-C must end the session now, not
    after the builds under way (an executor's threads are joined on the way out). A
    docker build whose client went away with this process is cancelled by the engine."""

    def __init__(self, backend: Backend, waiting: list[ImageRecipe], progress: Callable[[str], None]) -> None:
        self.backend, self.total, self.progress = backend, len(waiting), progress
        self.started = time.monotonic()
        self.running: set[str] = set()
        self.done = 0
        self.lock = threading.Lock()
        #: What broke the pool itself (not a bake's failure: the trials report those).
        self.broken: list[Exception] = []
        self.todo: queue.SimpleQueue[ImageRecipe] = queue.SimpleQueue()
        for recipe in waiting:
            self.todo.put(recipe)
        slots = max(1, backend.capabilities.bake_slots)
        progress(f"baking {self.total} image(s), {min(slots, self.total)} at a time")
        self.beat = contextlib.ExitStack()
        self.beat.enter_context(heartbeat(progress, self.now))
        self.threads = [threading.Thread(target=self.work, name=f"reactbench-bake-{i}", daemon=True)
                        for i in range(min(slots, self.total))]
        for thread in self.threads:
            thread.start()

    def now(self) -> str:
        return (f"baking: {self.done} of {self.total} image(s) done, "
                f"running {', '.join(sorted(self.running)) or 'none'}")

    def bake(self, recipe: ImageRecipe) -> None:
        with self.lock:
            self.running.add(recipe.name)
        try:
            # A bake that fails is reported by the trials that need it.
            with contextlib.suppress(SandboxError):
                self.backend.bake_ahead(recipe, self.progress)
        finally:
            with self.lock:
                self.running.discard(recipe.name)
                self.done += 1
                last = self.done == self.total
            if last:
                self.beat.close()  # no heartbeat over the trials that follow
                self.progress(f"bakes done in {time.monotonic() - self.started:.0f} s")

    def work(self) -> None:
        try:
            while True:
                self.bake(self.todo.get_nowait())
        except queue.Empty:
            pass
        except Exception as exc:  # the caller's to report, as from the session's thread
            self.broken.append(exc)

    def join(self, *, rest: bool = True) -> None:
        """Wait for the pool; without `rest`, the bakes not begun yet are dropped first
        (the session ends: no trial is left to need them). Raises what broke it."""
        if not rest:
            with contextlib.suppress(queue.Empty):
                while True:
                    self.todo.get_nowait()
        try:
            for thread in self.threads:
                thread.join()
        finally:
            self.beat.close()  # however the wait ends
        if self.broken:
            raise self.broken[0]


def _chain(recipe: ImageRecipe, image_map: Mapping[str, str]) -> Hashable:
    """What a recipe waits for before its own steps: its base images (as the image map
    resolves them: two names for one stand-in are one chain) and its layer."""
    try:
        bases = tuple(map_image(ref.image, image_map) for ref in from_refs(recipe))
    except Exception:  # its bake says what is wrong with it
        return recipe.dockerfile
    return bases, recipe.layer.name if recipe.layer else None


def spread(recipes: list[ImageRecipe], image_map: Mapping[str, str] | None = None) -> list[ImageRecipe]:
    """The recipes in their order, but taken in turns from each chain (the same bases
    and layer): the pool's first bakes then climb different chains side by side (the
    verifier's grader layer on two bases at once, say) instead of all waiting for the
    lock of one."""
    groups: dict[Hashable, list[ImageRecipe]] = {}
    for recipe in recipes:
        groups.setdefault(_chain(recipe, image_map or {}), []).append(recipe)
    return [r for turn in zip_longest(*groups.values()) for r in turn if r is not None]
