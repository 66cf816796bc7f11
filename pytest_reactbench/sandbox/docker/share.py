"""The engine's images: looked up by tag, saved and loaded between engines, pulled (a
public image, with progress and a stall limit) and shared through an image registry
(pulled by a baked image's tag before it is baked, pushed after)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox.bake import BakingBackend
from pytest_reactbench.sandbox.base import Image, ImageRecipe, Progress
from pytest_reactbench.sandbox.bases import Parent, PublicImageUnavailable
from pytest_reactbench.sandbox.docker.image_registry import ImageRegistry, RegistryUnavailable, is_missing
from pytest_reactbench.sandbox.docker.sandbox import docker_sdk
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.recipes import (
    strip_tag,
)

#: Every image we build carries it (the recipe's name).
RECIPE_LABEL = "reactbench.recipe"


#: A pull that the engine sends nothing about for this long has failed (an unreachable
#: registry must not hold a run up: the stand-in is the way on).
PULL_STALL_SECONDS = 30.0


#: The same for a push (a registry that accepts a connection and then says nothing).
PUSH_STALL_SECONDS = 120.0


class _NotInRegistry(Exception):
    """The registry answered that it does not hold the image (a miss, not a failure)."""


def _registry_digest(image: Any, name: str) -> str:
    """The registry's digest of a pulled image (what `name@sha256:...` pulls again), or
    the engine's content id of one that never came from a registry."""
    repository = strip_tag(name)
    digests = [str(d) for d in image.attrs.get("RepoDigests") or []]
    for digest in digests:
        if digest.split("@", 1)[0] == repository:
            return digest.split("@", 1)[1]
    return digests[0].split("@", 1)[1] if digests else str(image.id)


def _safe_name(name: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.") or "image"


class SharedImages(BakingBackend):
    """The engine's images, and the image registry they are shared through."""

    name = "docker"
    #: Set by DockerBackend: the engine's URL, its clients, the registry (None: none,
    #: or given up for the session) and the pushes under way.
    engine: str
    client: Any
    api: Any
    registry: ImageRegistry | None
    _client_kwargs: dict[str, Any]
    _pusher: ThreadPoolExecutor
    _pushes: list[Future[None]]

    def _image(self, tag: str) -> Any:
        try:
            return self.client.images.get(tag)
        except docker_sdk().errors.ImageNotFound:
            return None

    @staticmethod
    def _tag(recipe: ImageRecipe, key: str) -> str:
        return f"reactbench/{_safe_name(recipe.name)}:{key}"

    def find(self, key: str, recipe: ImageRecipe) -> Image | None:
        image = self._image(self._tag(recipe, key))
        if image is None:
            return None
        return Image(self._tag(recipe, key), str(image.id), self.name, cached=True,
                     labels=dict(image.labels or {}))

    def has_image(self, ref: str) -> bool:
        return self._image(ref) is not None

    def save_images(self, refs: Sequence[str]) -> Iterator[bytes]:
        """Images as one `docker save` writes them, streamed: a layer they share is in
        the tarball once (one save per image would send the shared system layer again
        for each)."""
        # docker-py saves one image per call; the engine's endpoint takes several names
        # (the client is a requests session, so this is its public `get`).
        url = f"{self.api.base_url}/v{self.api.api_version}/images/get"
        try:
            response = self.api.get(url, params={"names": list(refs)}, stream=True, timeout=self.api.timeout)
            response.raise_for_status()
        except Exception as exc:
            raise SandboxError(f"{self.engine} could not save {', '.join(refs)}: {exc}") from None

        def stream() -> Iterator[bytes]:
            # A load that fails half way leaves the rest unread: the connection goes with it.
            with contextlib.closing(response):
                try:
                    yield from response.iter_content(chunk_size=1 << 20)
                except Exception as exc:  # the HTTP client's own errors: the save broke
                    raise SandboxError(f"{self.engine} broke off saving {', '.join(refs)}: {exc}") from None

        return stream()

    def load_image(self, data: Iterator[bytes]) -> None:
        """`docker load` of a stream (another engine's `save_images`)."""
        try:
            for line in self.api.load_image(data):
                if isinstance(line, dict) and "error" in line:
                    raise SandboxError(f"{self.engine} could not load an image: {line['error']}")
        except docker_sdk().errors.DockerException as exc:
            raise SandboxError(f"{self.engine} could not load an image: {exc}") from None

    def alive(self) -> bool:
        """Whether the engine answers now (within a few seconds)."""
        docker = docker_sdk()
        try:
            # The version known already: no version request before the ping.
            api = docker.APIClient(**self._client_kwargs, version=self.api.api_version, timeout=10)
            try:
                return bool(api.ping())
            finally:
                api.close()
        except Exception:  # any failure to answer is an engine that is not there
            return False

    def _api_client(self, timeout: float) -> Any:
        """A low-level client of this engine with its own read timeout."""
        return docker_sdk().APIClient(**self._client_kwargs, version=self.api.api_version, timeout=timeout)

    def fetch(self, key: str, recipe: ImageRecipe, progress: Progress) -> Image | None:
        if self.registry is None:
            return None
        tag = self._tag(recipe, key)
        if not self._pull_shared(tag, progress):
            return None
        return self.find(key, recipe)

    def publish(self, key: str, recipe: ImageRecipe, image: Image, progress: Progress) -> None:
        self._push_later(self._tag(recipe, key), progress)

    def pull_baked(self, tag: str, progress: Progress) -> bool:
        """A baked image (`reactbench/<name>:<key>`) pulled from the image registry by
        its tag, as another engine pushed it (same image id); False when the run has no
        registry, or it does not hold the image."""
        return self._pull_shared(tag, progress)

    def _push_later(self, tag: str, progress: Progress) -> None:
        """Push in the background: the image is usable now, and a push (compressing
        gigabytes) must not count against the bake's time limit; close() waits for it."""
        if self.registry is not None:
            self._pushes.append(self._pusher.submit(self._push_shared, tag, progress))

    def _pull_shared(self, tag: str, progress: Progress) -> bool:
        """Pull `tag` from the image registry and tag it here; False when the registry
        does not hold it or cannot be used."""
        if self.registry is None:
            return False
        remote = self.registry.remote(tag)
        try:
            self._pull(remote, progress, missing_ok=True)
        except _NotInRegistry:
            return False
        except (PublicImageUnavailable, RegistryUnavailable) as exc:
            self._registry_failed("pulling", remote, exc, progress)
            return False
        repository, _, name = tag.rpartition(":")
        errors = docker_sdk().errors
        try:
            self.client.images.get(remote).tag(repository, name)
            # The registry's name goes: only names under reactbench/ stay on the engine.
            self.client.images.remove(remote)
        except errors.DockerException as exc:
            self._registry_failed("tagging", remote, exc, progress)
            return False
        return True

    def _push_shared(self, tag: str, progress: Progress) -> None:
        if self.registry is None:
            return
        remote = self.registry.remote(tag)
        docker = docker_sdk()
        repository, _, name = remote.rpartition(":")
        started = time.monotonic()
        progress(f"pushing {remote}")
        api = self._api_client(PUSH_STALL_SECONDS)
        shown = time.monotonic()
        pushed: set[str] = set()
        try:
            api.tag(tag, repository, name)
            for chunk in api.push(repository, name, stream=True, decode=True):
                if "error" in chunk:
                    raise RegistryUnavailable(str(chunk["error"]).strip())
                status = str(chunk.get("status", ""))
                if chunk.get("id") and status in ("Pushed", "Layer already exists", "Mounted from"):
                    pushed.add(str(chunk["id"]))
                if time.monotonic() - shown > 5:
                    shown = time.monotonic()
                    progress(f"pushing {remote}: {len(pushed)} layer(s) done, "
                             f"{time.monotonic() - started:.0f} s")
            progress(f"pushed {remote} in {time.monotonic() - started:.0f} s")
        except (docker.errors.DockerException, RegistryUnavailable, OSError) as exc:
            self._registry_failed("pushing", remote, exc, progress)
        finally:
            with contextlib.suppress(docker.errors.DockerException):
                api.remove_image(remote)
            api.close()

    def _registry_failed(self, doing: str, remote: str, exc: Exception, progress: Progress) -> None:
        """The registry is not used again in this session, and says so once."""
        if self.registry is None:
            return
        prefix, self.registry = self.registry.prefix, None
        # Without the image's name, every process of the session says the same line,
        # which the session prints once.
        why = str(exc).replace(remote, "an image").replace(remote.rpartition(":")[0], "an image")
        line = (f"warning: the image registry {prefix} cannot be used ({doing}: {why}); images are "
                "baked here and not shared for the rest of the session")
        progress(line)

    def public_image(self, name: str, progress: Progress, *, pull: bool) -> Parent:
        image = self._image(name)
        # (An empty label is not ours: Docker cannot drop an inherited one.)
        if image is not None and (image.labels or {}).get(RECIPE_LABEL):
            # Built by us and tagged under the public name by an older version: it is
            # not the public image, and pulling over it would overwrite it.
            raise PublicImageUnavailable(
                f"the engine's {name} is a stand-in an older version tagged so, not the public "
                f"image (it carries the stand-ins' label {RECIPE_LABEL}); `docker rmi {name}` removes "
                f"that name, and an image of yours built FROM a stand-in clears the label it "
                f"inherits with `LABEL {RECIPE_LABEL}=\"\"`")
        if image is None:
            if not pull:
                raise PublicImageUnavailable("it is not on the engine")
            self._pull(name, progress)
            image = self._image(name)
            if image is None:
                raise PublicImageUnavailable("the engine pulled it but cannot find it")
        used = BaseImage(name=name, digest=_registry_digest(image, name), origin="public")
        return Parent(name, name, str(image.id), (used,))

    def _pull(self, name: str, progress: Progress, *, missing_ok: bool = False) -> None:
        """Pull `name` with progress lines; with `missing_ok`, a registry that answers it
        does not hold the image raises _NotInRegistry, quietly."""
        docker = docker_sdk()
        started = time.monotonic()
        if not missing_ok:
            progress(f"pulling {name}")
        api = self._api_client(PULL_STALL_SECONDS)
        sizes: dict[str, int] = {}
        done: set[str] = set()
        shown = time.monotonic()
        try:
            for chunk in api.pull(name, stream=True, decode=True):
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    if missing_ok and is_missing(error):
                        raise _NotInRegistry(name)
                    raise PublicImageUnavailable(f"the pull failed: {error}")
                if missing_ok and not sizes and not done:
                    missing_ok = False
                    progress(f"pulling {name}")
                layer, status = chunk.get("id"), str(chunk.get("status", ""))
                total = (chunk.get("progressDetail") or {}).get("total")
                if layer and status == "Downloading" and total:
                    sizes[layer] = int(total)
                if layer and status in ("Pull complete", "Already exists"):
                    done.add(layer)
                if time.monotonic() - shown > 2:
                    shown = time.monotonic()
                    progress(f"pulling {name}: {len(done)} layer(s) done, "
                             f"{sum(sizes.values()) / 1e6:.0f} MB to fetch, "
                             f"{time.monotonic() - started:.0f} s")
        except docker.errors.APIError as exc:
            if missing_ok and is_missing(str(exc.explanation or exc)):
                raise _NotInRegistry(name) from None
            raise PublicImageUnavailable(f"the pull failed: {exc.explanation or exc}") from None
        except docker.errors.DockerException as exc:
            raise PublicImageUnavailable(f"the pull failed: {exc}") from None
        except OSError as exc:  # the engine said nothing for PULL_STALL_SECONDS
            raise PublicImageUnavailable(f"the pull stalled ({exc})") from None
        finally:
            api.close()
        progress(f"pulled {name} in {time.monotonic() - started:.0f} s")
