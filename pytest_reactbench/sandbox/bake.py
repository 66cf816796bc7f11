"""The bake every backend shares: resolve each FROM (the system layer, a public image,
its stand-in, or a user's replacement), key the recipe by a content hash of what it
builds on and of its inputs, and build it once, under a file lock, for every process
of the machine. A backend implements only its own steps: find a baked key, build one,
its system layer and (if it can run them) the public images.

A FROM of an image the image map covers is, by the images mode: the public image when
the engine has it or can pull it, else its stand-in with one warning (`auto`); only
the public image (`public`); only the stand-in (`stand-in`). Nothing is ever tagged
under the public name: backends hand the resolved image to the build instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.base import Backend, Image, ImageRecipe, Layer, Progress
from pytest_reactbench.sandbox.downloads import DownloadCache, Traffic
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.locks import file_lock, locked_json
from pytest_reactbench.sandbox.mirrors import key_of, relevant
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import (
    SYSTEM_IMAGE,
    FromRef,
    from_refs,
    map_image,
    recipe_dir,
    recipe_key,
    strip_tag,
    tagged,
)

#: A FROM chain longer than this is a loop in the image map.
MAX_DEPTH = 8


class PublicImageUnavailable(Exception):
    """A public image is not on the engine and cannot be pulled; the text says why."""


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


class NotBaked(Exception):
    """Raised inside a look-up (`Backend.baked`) when something is not baked yet."""


@dataclass(frozen=True)
class Parent:
    """A FROM of a recipe as its build sees it."""

    #: The image as the Dockerfile names it (build arguments substituted).
    name: str
    #: What the backend builds on in its place ("" for the host's system layer).
    use: str
    #: What the recipe's key hashes for it: the content digest of `use`.
    identity: str
    #: Its provenance, its own bases included.
    bases: tuple[BaseImage, ...]
    #: The baked image behind `use` when this backend baked it.
    image: Image | None = None


def replace_if_changed(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole (others may be reading it), and only if it differs."""
    if path.exists() and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _merged(parents: Sequence[Parent]) -> tuple[BaseImage, ...]:
    seen: dict[tuple[str, str], BaseImage] = {}
    for parent in parents:
        for base in parent.bases:
            seen.setdefault((base.name, base.digest), base)
    return tuple(seen.values())


class BakingBackend(Backend):
    """A backend whose images are baked from Dockerfiles by the shared template."""

    #: Bumped whenever the backend's way of building changes, so old images are not reused.
    recipe_version: str
    #: Whether the backend can run the public images themselves (else: stand-ins only).
    runs_public_images: bool = True
    #: Prefix of the bake locks' names: a backend whose images live on one of several
    #: engines locks per engine.
    lock_scope: str = ""

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
            self.recipe_version,
            *(parent.identity for parent in parents),
            recipe.dockerfile.read_text(),
            json.dumps(sorted(recipe.build_args.items())),
            context=recipe.context,
            skip=recipe.downloads.folder if recipe.downloads else None,
        )
        bases = _merged(parents)
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

    def _parent(self, ref: FromRef, recipe: ImageRecipe, progress: Progress, deadline: float,
                depth: int, build: bool) -> Parent:
        # An image baked already is the recipe's own: its name says nothing of another's.
        if not build or ref.image in recipe.baked:
            return self._resolve(ref, recipe, progress, deadline, depth, build)
        # The same base with a layer on it is another parent.
        known = (ref.image, recipe.layer)
        if known not in self._parents:
            self._parents[known] = self._resolve(ref, recipe, progress, deadline, depth, build)
        return self._parents[known]

    def _resolve(self, ref: FromRef, recipe: ImageRecipe, progress: Progress, deadline: float,
                 depth: int, build: bool) -> Parent:
        name = ref.image
        if name in recipe.baked:
            image = recipe.baked[name]
            return Parent(name, image.ref, image.digest, tuple(image.bases), image)
        if recipe.layer is not None:
            base = self._parent(ref, replace(recipe, layer=None), progress, deadline, depth, build)
            image = self._bake(self._layer_recipe(recipe.layer, base, recipe), progress, deadline,
                               depth + 1, build=build)
            return Parent(name, image.ref, image.digest, tuple(image.bases), image)
        where = f"{recipe.dockerfile}:{ref.line}"
        mapped = map_image(name, self.image_map)
        if mapped == SYSTEM_IMAGE:
            return replace(self.system_layer(progress, deadline, build=build), name=name)
        stand_in = recipe_dir(mapped)
        if stand_in is None:
            try:
                parent = self._public(mapped, progress, build)
            except PublicImageUnavailable as exc:
                if not build:
                    raise NotBaked(mapped) from None
                raise BakeError(
                    f"{where}: FROM {mapped}: {exc}; build it, or map it with --reactbench-image-map "
                    f"'{strip_tag(name)}=<recipe under images/ or a local image>'"
                ) from None
            if mapped == name:
                return parent
            # The user's replacement of the image the Dockerfile names.
            return replace(parent, name=name, bases=tuple(
                BaseImage(name=name, digest=b.digest, origin="stand-in") if b.name == mapped else b
                for b in parent.bases))
        mode = self.options.images
        if mode != "stand-in" and self.runs_public_images:
            try:
                return self._public(name, progress, build)
            except PublicImageUnavailable as exc:
                if mode == "public":
                    raise BakeError(f"{where}: FROM {name}: {exc} (--reactbench-images=public: "
                                    "no stand-in)") from None
                if build and tagged(name) not in self._warned:
                    self._warned.add(tagged(name))
                    line = (f"warning: {name} is not available ({exc}); using its stand-in "
                            f"{stand_in.name} (results are not formal)")
                    progress(line)
        elif mode == "public":
            raise BakeError(f"{where}: FROM {name}: the {self.name} backend runs stand-ins only; "
                            "use --reactbench-sandbox=docker for the public images")
        image = self._bake(self._stand_in_recipe(stand_in, recipe), progress, deadline, depth + 1,
                           build=build)
        return Parent(name, image.ref, image.digest,
                      (BaseImage(name=name, digest=image.digest, origin="stand-in"), *image.bases), image)

    def _public(self, name: str, progress: Progress, build: bool) -> Parent:
        """The public image `name`; a pull that failed is not tried again this session,
        by this process or (through the session's folder) another of its workers: every
        task naming the image would wait for the same timeout. The workers take turns
        per name, so that one pulls and the others learn how that went."""
        if tagged(name) in self._unavailable:
            raise PublicImageUnavailable(self._unavailable[tagged(name)])
        shared = self.options.session_dir
        if shared is None or not build:
            return self._pull_public(name, progress, build)
        # What the engine holds is used whatever a pull elsewhere found (in a pool of
        # engines one may have the image and another not): only pulls are shared.
        with contextlib.suppress(PublicImageUnavailable):
            return self.public_image(name, progress, pull=False)
        # Per engine (its lock scope): engines may reach different registries.
        which = f"{self.lock_scope}{tagged(name)}"
        with file_lock(shared / f"public-{recipe_key(which)[:16]}.lock"):
            with locked_json(shared / "unavailable.json", shared / "unavailable.lock") as known:
                why = known.get(which)
            if why is not None:
                self._unavailable[tagged(name)] = str(why)
                raise PublicImageUnavailable(str(why))
            try:
                return self._pull_public(name, progress, build)
            except PublicImageUnavailable as exc:
                with locked_json(shared / "unavailable.json", shared / "unavailable.lock") as known:
                    known[which] = str(exc)
                raise

    def _pull_public(self, name: str, progress: Progress, build: bool) -> Parent:
        try:
            return self.public_image(name, progress, pull=build)
        except PublicImageUnavailable as exc:
            if build:  # a lookup without a pull proves nothing about the registry
                self._unavailable[tagged(name)] = str(exc)
            raise

    def _layer_recipe(self, layer: Layer, base: Parent, recipe: ImageRecipe) -> ImageRecipe:
        """`layer` on the resolved `base` as a recipe: its FROM names the base by its
        content, not by the name a Dockerfile gave it, so two names for one image (a
        public name and the stand-in another public name maps to as well) share one
        bake of the layer. Its Dockerfile is written to the cache (named by its text:
        concurrent sessions write the same bytes), its context is the layer's."""
        below = f"reactbench-layer-base-{recipe_key(base.identity)[:16]}"
        text = f"FROM {below}\n{layer.steps.strip()}\n"
        dockerfile = self.cache_dir / "layers" / f"{recipe_key(text)[:16]}.Dockerfile"
        dockerfile.parent.mkdir(parents=True, exist_ok=True)
        replace_if_changed(dockerfile, text.encode())
        # The base's provenance as the Dockerfile named it (a stand-in's public name).
        image = (replace(base.image, bases=base.bases) if base.image is not None
                 else Image(base.use, base.identity, self.name, cached=True, bases=base.bases))
        return ImageRecipe(layer.name, dockerfile, layer.context, timeout=recipe.timeout,
                           baked={below: image})

    @staticmethod
    def _stand_in_recipe(directory: Path, recipe: ImageRecipe) -> ImageRecipe:
        return ImageRecipe(directory.name, directory / "Dockerfile", directory, timeout=recipe.timeout)
