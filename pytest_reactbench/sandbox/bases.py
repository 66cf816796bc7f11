"""What each FROM of a recipe resolves to, for the bake every backend shares
(`bake.py`): the host's system layer, a public image, its stand-in, a user's
replacement (the image map), or a layer baked on its base.

A FROM of an image the image map covers is, by the images mode: the public image when
the engine has it or can pull it, else its stand-in with one warning (`auto`); only
the public image (`public`); only the stand-in (`stand-in`). Nothing is ever tagged
under the public name: backends hand the resolved image to the build instead.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox.base import Image, ImageRecipe, Layer, Progress
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.locks import file_lock, locked_json, replace_if_changed
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import (
    SYSTEM_IMAGE,
    FromRef,
    map_image,
    recipe_dir,
    recipe_key,
    strip_tag,
    tagged,
)


class PublicImageUnavailable(Exception):
    """A public image is not on the engine and cannot be pulled; the text says why."""


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


def merged_bases(parents: Sequence[Parent]) -> tuple[BaseImage, ...]:
    """The base images of `parents`, each once, in their order."""
    seen: dict[tuple[str, str], BaseImage] = {}
    for parent in parents:
        for base in parent.bases:
            seen.setdefault((base.name, base.digest), base)
    return tuple(seen.values())


class FromResolution(ABC):
    """The part of a BakingBackend that resolves a recipe's FROMs into its parents,
    each once a session (the stand-ins, the system layer and the public images do not
    change during one)."""

    name: str
    options: SandboxOptions
    image_map: Mapping[str, str]
    cache_dir: Path
    #: Whether the backend can run the public images themselves (else: stand-ins only).
    runs_public_images: bool = True
    #: Prefix of the bake locks' names: a backend whose images live on one of several
    #: engines locks per engine.
    lock_scope: str = ""
    _parents: dict[tuple[str, Layer | None], Parent]
    _warned: set[str]
    _unavailable: dict[str, str]

    @abstractmethod
    def _bake(self, recipe: ImageRecipe, progress: Progress, deadline: float, depth: int, *,
              build: bool) -> Image:
        """The template's bake of `recipe` (a stand-in's, a layer's) at FROM depth `depth`."""

    @abstractmethod
    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        """The system layer (`reactbench/system`)."""

    @abstractmethod
    def public_image(self, name: str, progress: Progress, *, pull: bool) -> Parent:
        """The image `name` itself, or PublicImageUnavailable."""

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
