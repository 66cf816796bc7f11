"""The session's bakes: planned before the first trial and run as a bounded pool (a
bake is mostly waiting on downloads and installs, so one per xdist worker leaves the
engine idle), and summed up at the end in the terminal and in the run's `bakes.json`
(and the download cache's traffic, counted once for the session, in `downloads.json`).

The process that claims the session's prebake (the only one, or the first of xdist's
workers to ask) bakes every image its items need; the other workers find them baked,
or wait on the same per-key file locks. A bake that fails here fails its trials as it
would have anyway: the backend remembers the failure for the session.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import asdict
from itertools import zip_longest
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox.base import Backend, ImageRecipe
from pytest_reactbench.sandbox.downloads import Traffic
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.heartbeat import heartbeat
from pytest_reactbench.sandbox.recipes import from_refs, map_image

#: The workers' bake records, merged by the controller into bakes.json.
PARTS = ".bakes"
#: When the same image is settled several ways in one run, the costliest one counts.
_RANK = {"baked": 0, "pulled": 1, "reused": 2}


def prebake(backend: Backend, recipes: Iterable[ImageRecipe], progress: Callable[[str], None]) -> None:
    """Bake `recipes` (each once), up to the backend's capabilities' `bake_slots` at a time, and wait."""
    pool = start(backend, recipes, progress)
    if pool is not None:
        pool.join()


def start(backend: Backend, recipes: Iterable[ImageRecipe],
          progress: Callable[[str], None]) -> Pool | None:
    """Start baking `recipes` (each once, those not baked yet), up to the backend's
    `bake_slots` at a time, in the order given but in turns from each chain; None when
    there is nothing to bake. The pool bakes on while the trials run: a trial waits
    only for its own images, on their locks (or bakes one the pool has not reached)."""
    unique = {(r.dockerfile.resolve(), r.context.resolve()): r for r in recipes}
    waiting = spread([r for r in unique.values() if backend.baked(r) is None], backend.image_map)
    if not waiting:
        return None
    return Pool(backend, waiting, progress)


class Pool:
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


def session_folder(run_dir: Path, session: str | None) -> Path | None:
    """The folder the processes of an xdist session (`session`, its id) share for what
    one learns for all (SandboxOptions.session_dir); None without xdist. Removed with
    the bake parts when the session ends."""
    return None if session is None else run_dir / PARTS / f"session-{session}"


def claims_prebake(run_dir: Path, session: str | None) -> bool:
    """Whether this process bakes the session's images ahead of its trials: without
    xdist (`session` None) the one process does; with it, the first worker to ask, by
    creating a file only one process can (the session's, so a resumed run bakes again).
    The parts' folder, and the claim with it, is removed when the parts are merged."""
    if session is None:
        return True
    folder = run_dir / PARTS
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(folder / f"prebake-{session}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def write_part(run_dir: Path, worker: str, backend: Backend | None) -> None:
    """This process's bake records and the download traffic of its caches (a pool of
    engines has one per engine: the caches' own counts, each byte once, however many
    bakes ran side by side; a bake's own figures are the traffic while it ran, which
    bakes beside it share), for the controller to merge."""
    records = backend.bake_records() if backend is not None else ()
    traffic = backend.download_traffic() if backend is not None else Traffic()
    if not records and traffic == Traffic():
        return
    folder = run_dir / PARTS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{worker}.json").write_text(json.dumps({"bakes": [asdict(r) for r in records],
                                                      "downloads": asdict(traffic)}))


def merge_parts(run_dir: Path) -> tuple[list[dict[str, Any]], Traffic]:
    """Every process's records, one per image (its costliest settling), written to
    the run's bakes.json, and the download traffic of the session (every process's,
    summed), written to its downloads.json; the parts are removed."""
    folder = run_dir / PARTS
    if not folder.is_dir():
        return [], Traffic()
    by_key: dict[str, dict[str, Any]] = {}
    traffic = Traffic()
    for part in sorted(folder.glob("*.json")):
        try:
            content = json.loads(part.read_text())
            records = content["bakes"]
            traffic = traffic + Traffic(**content["downloads"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for record in records:
            known = by_key.get(record["key"])
            if known is None or _RANK[record["how"]] < _RANK[known["how"]]:
                by_key[record["key"]] = record
    shutil.rmtree(folder, ignore_errors=True)
    merged = sorted(by_key.values(), key=lambda r: (_RANK[r["how"]], -r["seconds"]))
    if merged:
        (run_dir / "bakes.json").write_text(json.dumps(merged, indent=1) + "\n")
    if traffic != Traffic():
        (run_dir / "downloads.json").write_text(json.dumps(asdict(traffic), indent=1) + "\n")
    return merged, traffic


def summary_lines(records: list[dict[str, Any]], traffic: Traffic | None = None) -> list[str]:
    """What the session's bakes cost, by how each image was had, and what the download
    cache moved for them (`traffic`, the session's)."""
    lines = []
    for how, label in (("baked", "baked here"), ("pulled", "pulled from the image registry"),
                       ("reused", "reused")):
        chosen = [r for r in records if r["how"] == how]
        if not chosen:
            continue
        line = f"{len(chosen)} image(s) {label}"
        if how != "reused":
            slowest = max(chosen, key=lambda r: r["seconds"])
            line += (f": {sum(r['seconds'] for r in chosen):.0f} s in all, the longest "
                     f"{slowest['name']} ({slowest['seconds']:.0f} s)")
        lines.append(line)
    if traffic is not None and traffic.served_bytes:
        lines.append(f"packages: {traffic.served_bytes / 1e6:.1f} MB served to bakes by the download "
                     f"cache, {traffic.fetched_bytes / 1e6:.1f} MB of it fetched from the registry")
    return lines
