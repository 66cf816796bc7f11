"""The bake every backend shares: resolve each FROM (the system layer, a public image,
its stand-in, or a user's replacement), key the recipe by a content hash of what it
builds on and of its inputs, and build it once, under a file lock, for every process
of the machine. A backend implements only its own steps: find a baked key, build one,
its system layer and (if it can run them) the public images.

What each FROM resolves to (the images mode, the image map, layers) is `bases.py`'s.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.base import Backend, Image, ImageRecipe, Layer, Progress
from pytest_reactbench.sandbox.bases import (
    FromResolution,
    NotBaked,
    Parent,
    PublicImageUnavailable,
    merged_bases,
)
from pytest_reactbench.sandbox.downloads import DownloadCache, Traffic
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.locks import file_lock, replace_if_changed
from pytest_reactbench.sandbox.mirrors import key_of, relevant
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import (
    FromRef,
    code_key,
    from_refs,
    recipe_key,
)

#: A FROM chain longer than this is a loop in the image map.
MAX_DEPTH = 8


#: How a bake had its image: built here, found on the engine (or in the cache), or
#: pulled from the image registry.
BakeHow = Literal["baked", "reused", "pulled"]


@dataclass(frozen=True)
class BakeRecord:
    """One image a session needed, how it had it and the seconds that took."""

    name: str
    key: str
    how: BakeHow
    seconds: float
    #: Package bytes the bake fetched from the registry, and those the download cache
    #: served it (baked images only, when there is a download cache).
    fetched_bytes: int = 0
    served_bytes: int = 0


@dataclass(frozen=True)
class Pruned:
    """What a prune removed: images, and the bytes the host got back (as the backend
    can tell)."""

    images: int = 0
    freed_bytes: int = 0
    #: Stale images left in place (in use by a container, or a parent of a kept image).
    kept: int = 0


class BakingBackend(FromResolution, Backend):
    """A backend whose images are baked from Dockerfiles by the shared template."""

    #: The modules whose code turns a recipe into an image: their code is in every key
    #: (`code_key`), so a change of the way of building is never served an old image.
    build_modules: tuple[str, ...]

    @property
    def build_logic(self) -> str:
        return code_key(*self.build_modules)

    @property
    def lock_dir(self) -> Path:
        """Where the bake locks are: beside the images the backend keeps in its cache."""
        return self.cache_dir / "locks"

    def __init__(self, options: SandboxOptions) -> None:
        self.options = options
        self.image_map = dict(options.image_map)
        self.ca_bundle = options.ca_bundle
        self.cache_dir = options.cache / self.name
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # A recipe that failed once fails again at once in this session, rather than
        # costing every item that needs it a full rebuild.
        self._failed: dict[str, BakeError] = {}
        # The stand-ins, the system layer and public images do not change during a
        # session: each FROM is resolved (pulled, hashed, looked up) once.
        self._parents: dict[tuple[str, Layer | None], Parent] = {}
        self._warned: set[str] = set()
        #: Baked images found already and said so (once each).
        self._reused: set[str] = set()
        #: Public images a pull failed for, and why: one attempt per name a session.
        self._unavailable: dict[str, str] = {}
        #: Every image this backend was asked to bake, in the order they were settled.
        self.bakes: list[BakeRecord] = []
        #: The caching registry every bake's package downloads go through.
        self.downloads = (DownloadCache(options.download_cache, options.ca_bundle)
                          if options.download_cache else None)

    def bake_records(self) -> list[BakeRecord]:
        return list(self.bakes)

    def download_traffic(self) -> Traffic:
        return self.downloads.snapshot() if self.downloads is not None else Traffic()

    # -- the backend's own steps ---------------------------------------------------------

    @abstractmethod
    def find(self, key: str, recipe: ImageRecipe) -> Image | None:
        """The image baked under `key`, if there is one."""

    @abstractmethod
    def build(self, recipe: ImageRecipe, key: str, parents: Sequence[Parent], progress: Progress,
              deadline: float) -> Image:
        """Build the recipe on `parents` (one per external FROM, in order) as `key`."""

    @abstractmethod
    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        """The system layer (`reactbench/system`); with `build` False, look it up only
        (raise NotBaked when it is missing)."""

    def fetch(self, key: str, recipe: ImageRecipe, progress: Progress) -> Image | None:
        """The image baked elsewhere under `key`, brought here from a shared store (the
        image registry); None when there is none, or it cannot be had."""
        return None

    def publish(self, key: str, recipe: ImageRecipe, image: Image, progress: Progress) -> None:
        """Offer a freshly baked image to the shared store, if there is one."""

    def public_image(self, name: str, progress: Progress, *, pull: bool) -> Parent:
        """The image `name` itself: on the engine already, or pulled (when `pull`);
        raises PublicImageUnavailable saying why not."""
        raise PublicImageUnavailable(f"the {self.name} backend cannot run images it did not bake")

    def check(self, recipe: ImageRecipe, instructions: Sequence[df.Instruction]) -> None:
        """Refuse, before anything is built, a recipe this backend cannot build."""

    def close(self) -> None:
        if self.downloads is not None:
            self.downloads.close()

    def prune(self, unused_for: float, progress: Progress, now: float | None = None) -> Pruned:
        """Remove the images this backend baked that no session used for `unused_for`
        seconds (their content-hashed keys are never asked for again once a recipe or a
        base changed, so the cache only grows otherwise)."""
        raise NotImplementedError(f"the {self.name} backend does not prune its images")

    def _mark_used(self, key: str) -> None:
        stamp = self.cache_dir / "used" / key
        try:
            stamp.touch()
        except FileNotFoundError:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()

    def last_used(self, key: str, made: float) -> float:
        """When a session last asked for the image `key` (made at `made`, a time stamp)."""
        try:
            return max(made, (self.cache_dir / "used" / key).stat().st_mtime)
        except FileNotFoundError:
            return made

    def forget_use(self, key: str) -> None:
        (self.cache_dir / "used" / key).unlink(missing_ok=True)

    # -- the template -------------------------------------------------------------------

    def bake(self, recipe: ImageRecipe, progress: Progress) -> Image:
        return self._bake(recipe, progress, time.monotonic() + recipe.timeout, 0, build=True)

    def baked(self, recipe: ImageRecipe) -> Image | None:
        try:
            return self._bake(recipe, lambda _: None, time.monotonic() + recipe.timeout, 0, build=False)
        except NotBaked:
            return None

    def base_image(self, name: str, progress: Progress | None, timeout: float = 3600) -> BaseImage | None:
        """What a bake uses for `FROM name`, the images mode honoured: with `progress`,
        pulled or baked as needed; without, looked up only (None if it is not there)."""
        ref = FromRef(name, None, 1, name)
        asked = ImageRecipe(name, Path(f"FROM {name}"), Path("."), timeout=timeout)
        try:
            parent = self._parent(ref, asked, progress or (lambda _: None), time.monotonic() + timeout, 0,
                                  build=progress is not None)
        except NotBaked:
            return None
        return parent.bases[0] if parent.bases else None

    def _bake(self, recipe: ImageRecipe, progress: Progress, deadline: float, depth: int, *,
              build: bool) -> Image:
        if depth > MAX_DEPTH:
            raise BakeError(f"{recipe.dockerfile}: FROM chain is too deep (a loop in the image map?)")
        try:
            instructions = df.parse(recipe.dockerfile)
            refs = from_refs(recipe)
        except df.DockerfileError as exc:
            raise BakeError(str(exc)) from None
        self.check(recipe, instructions)
        parents = [self._parent(ref, recipe, progress, deadline, depth, build) for ref in refs]
        mirrors = relevant(self.options.git_mirrors, recipe.dockerfile, recipe.context)
        key = recipe_key(
            *([key_of(mirrors)] if mirrors else []),
            self.build_logic,
            *(parent.identity for parent in parents),
            recipe.dockerfile.read_text(),
            json.dumps(sorted(recipe.build_args.items())),
            context=recipe.context,
            skip=recipe.downloads.folder if recipe.downloads else None,
        )
        bases = merged_bases(parents)
        if (failed := self._failure(key)) is not None:
            raise failed
        self._mark_used(key)
        image = self.find(key, recipe)
        if image is None and not build:
            raise NotBaked(recipe.name)
        started = time.monotonic()
        how: BakeHow = "reused"
        if image is None:
            with file_lock(self.lock_dir / f"{self.lock_scope}{key}.lock"):
                # Another bake (a thread of this process, another worker) may have built
                # it while this one waited, or failed to: a failure is not built again.
                if (failed := self._failure(key)) is not None:
                    raise failed
                image = self.find(key, recipe)
                if image is None:
                    image = self.fetch(key, recipe, progress)
                    how = "pulled"
                if image is None:
                    before = self.downloads.snapshot() if self.downloads else Traffic()
                    try:
                        if recipe.downloads is not None:
                            recipe.downloads.fetch(progress)
                        built = self.build(recipe, key, parents, progress, deadline)
                    except BakeError as exc:
                        self._remember_failure(key, exc)
                        raise
                    seconds = time.monotonic() - started
                    # Concurrent bakes of one process share the counters: their figures
                    # are the traffic while this one ran.
                    traffic = self.downloads.snapshot().since(before) if self.downloads else Traffic()
                    downloaded = (f"; packages: {traffic.fetched_bytes / 1e6:.1f} MB fetched, "
                                  f"{traffic.served_bytes / 1e6:.1f} MB served by the download cache"
                                  if traffic.served_bytes else "")
                    progress(f"{recipe.name}: baked image {key[:12]} in {seconds:.0f} s{downloaded}")
                    self.bakes.append(BakeRecord(recipe.name, key, "baked", seconds,
                                                 traffic.fetched_bytes, traffic.served_bytes))
                    self.publish(key, recipe, built, progress)
                    return replace(built, cached=False, bases=bases)
        if build:
            seconds = time.monotonic() - started
            if how == "pulled":
                progress(f"{recipe.name}: pulled baked image {key[:12]} from the image registry "
                         f"in {seconds:.0f} s")
            elif key not in self._reused:
                self._reused.add(key)
                progress(f"{recipe.name}: reusing baked image {key[:12]}")
            self.bakes.append(BakeRecord(recipe.name, key, how, seconds))
        return replace(image, cached=True, bases=bases)

    def _failure_file(self, key: str) -> Path | None:
        """Where the session's processes (xdist's workers) learn that the bake of `key`
        failed: in the session's folder, which goes with the session, so that a later
        session tries again. None without one (a session of one process)."""
        shared = self.options.session_dir
        return None if shared is None else shared / "failed-bakes" / f"{self.lock_scope}{key}.txt"

    def _failure(self, key: str) -> BakeError | None:
        """How the bake of `key` failed in this session, if it did (here or in another
        of its processes)."""
        if key in self._failed:
            return self._failed[key]
        where = self._failure_file(key)
        if where is None:
            return None
        try:
            said = where.read_text()
        except OSError:
            return None
        self._failed[key] = BakeError(said)
        return self._failed[key]

    def _remember_failure(self, key: str, exc: BakeError) -> None:
        """The bake of `key` failed: it fails at once for the rest of the session, in
        every process of it, rather than costing each item that needs it a full rebuild."""
        self._failed[key] = exc
        where = self._failure_file(key)
        if where is not None:
            where.parent.mkdir(parents=True, exist_ok=True)
            replace_if_changed(where, str(exc).encode())
