"""A pool of Docker engines for one run.

The room each engine has is its ledger's (`ledger.py`), the images bound for it are
listed in `wanted.py`, and its sandboxes are wrapped by `pooled.py`.

`EnginePool`: the docker backend over several engines (`--reactbench-docker-host`,
repeated). Each trial is placed on a live engine, the one with the fewest trials
placed on it. Its images are baked once and copied to the engines that lack them
(`docker save | docker load`, image ids kept), which is bounded where a build is not:
the images bound for an engine go in one save, where each layer they share (the
gigabytes of the system layer) is sent once, rather than once per image. The prebake
spreads every image of the session to every engine before the trials need them. An
engine that stops answering is lost for the rest of the session: the trials on it end
in `EngineLost` (errors, retried elsewhere by `--reactbench-retries`), and no new trial
is placed on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import TYPE_CHECKING

from pytest_reactbench.sandbox.base import (
    Backend,
    Capabilities,
    Image,
    ImageRecipe,
    Limits,
    Progress,
    Sandbox,
)
from pytest_reactbench.sandbox.docker.backend import DockerBackend
from pytest_reactbench.sandbox.docker.pooled import PooledSandbox
from pytest_reactbench.sandbox.docker.wanted import Wanted
from pytest_reactbench.sandbox.downloads import Traffic
from pytest_reactbench.sandbox.errors import BakeError, EngineLost, SandboxError
from pytest_reactbench.sandbox.locks import file_lock
from pytest_reactbench.sandbox.options import SandboxOptions

if TYPE_CHECKING:
    from pytest_reactbench.sandbox.bake import BakeRecord


def _identity(recipe: ImageRecipe) -> tuple[str, str, str]:
    return recipe.name, str(recipe.dockerfile), str(recipe.context)


def _digest(recipe: ImageRecipe) -> str:
    return hashlib.sha256("\0".join(_identity(recipe)).encode()).hexdigest()[:16]


class EnginePool(Backend):
    """The docker backend over several engines."""

    name = "docker"

    def __init__(self, options: SandboxOptions,
                 member: Callable[[SandboxOptions, str], DockerBackend] | None = None) -> None:
        if member is None:
            member = DockerBackend
        self.options = options
        self.image_map = dict(options.image_map)
        self.members: list[DockerBackend] = []
        #: Engines that did not answer when the pool was made: lost from the start.
        self.unreachable: dict[str, str] = {}
        for host in options.docker_hosts:
            try:
                self.members.append(member(options, host))
            except SandboxError as exc:
                self.unreachable[host] = str(exc)
        if not self.members:
            raise SandboxError("no Docker engine of the pool answers:\n  "
                               + "\n  ".join(self.unreachable.values()))
        for host, why in self.unreachable.items():
            warnings.warn(f"reactbench: the pool goes on without {host}: {why}", stacklevel=2)
        self.lost: set[str] = set(self.unreachable)
        self._lock = threading.Lock()
        #: Recipes the prebake asked about (`baked`) and has not settled yet.
        self._ahead: set[tuple[str, str, str]] = set()
        #: The engine of the trial this process runs now, its claim there, its open sandboxes.
        self._placed: DockerBackend | None = None
        self._claim = ""
        self._open = 0
        #: Placements of every process of the machine, one at a time: each sees the others' claims.
        self._placing = options.cache / "docker" / "engines" / "placement.lock"

    @property
    def engines(self) -> list[str]:
        return [m.engine for m in self.members]

    def _live(self) -> list[DockerBackend]:
        return [m for m in self.members if m.engine not in self.lost]

    def explain(self, member: DockerBackend, exc: BaseException) -> EngineLost | None:
        """EngineLost when the engine no longer answers (it is then lost for the
        session); None when it does (`exc` is some other failure)."""
        if member.engine not in self.lost and member.alive():
            return None
        self._lose(member)
        return EngineLost(f"the Docker engine {member.engine} was lost mid-trial ({exc}); "
                          "it takes no more trials in this session", member.engine)

    def _lose(self, member: DockerBackend) -> None:
        with self._lock:
            self.lost.add(member.engine)
            if self._placed is member:
                self._unplace()

    def _unplace(self) -> None:
        """The current trial is over (or its engine lost): its claim goes."""
        if self._placed is not None and self._claim:
            self._placed.ledger.release(self._claim)
        self._placed, self._claim = None, ""

    @contextlib.contextmanager
    def _on(self, member: DockerBackend) -> Iterator[None]:
        try:
            yield
        except EngineLost:
            raise
        except Exception as exc:
            lost = self.explain(member, exc)
            if lost is None:
                raise
            raise lost from None

    def _place(self) -> DockerBackend:
        with self._lock:
            if self._placed is not None and self._placed.engine not in self.lost:
                return self._placed
        with file_lock(self._placing):
            while True:
                live = self._live()
                if not live:
                    raise SandboxError("every Docker engine of the pool was lost: "
                                       + ", ".join(sorted(self.lost)))
                loads = {m.engine: m.ledger.load() for m in live}
                # Fewest trials now (by the engine's size), then the one placed on longest
                # ago: engines take turns, and one that ran many trials in earlier runs is
                # not passed over for a new one (a count of trials ever placed would be).
                chosen = min(live, key=lambda m: (loads[m.engine][0] / max(m.ledger.capacity.cpus, 1),
                                                  loads[m.engine][1]))
                # Another worker may have seen it die: a new trial goes only to an engine that answers.
                if not chosen.alive():
                    self._lose(chosen)
                    continue
                claim = chosen.ledger.claim()
                with self._lock:
                    self._placed, self._claim = chosen, claim
                return chosen

    def end_placement(self) -> None:
        """The current trial is over: the next one is placed afresh (closing the
        trial's last sandbox does this)."""
        with self._lock:
            self._unplace()

    def placement(self) -> str:
        """The engine the current trial of this process runs on ('' before one is placed)."""
        return self._placed.engine if self._placed else ""

    # -- images ------------------------------------------------------------------------

    @cached_property
    def capabilities(self) -> Capabilities:
        # A pool's trials may land on remote engines: its sandboxes are not said to
        # reach this host's loopback. It bakes as many at once as its largest engine.
        return Capabilities(formal=True,
                            bake_slots=max(member.capabilities.bake_slots for member in self.members))

    @property
    def bakes(self) -> list[BakeRecord]:
        """Every member's bake records (the session's bake summary reads them)."""
        return [record for member in self.members for record in member.bakes]

    def bake_records(self) -> list[BakeRecord]:
        return self.bakes

    def download_traffic(self) -> Traffic:
        """Every member's download cache's traffic (one cache per engine)."""
        return sum((member.download_traffic() for member in self.members), Traffic())

    def bake(self, recipe: ImageRecipe, progress: Progress) -> Image:
        return self._bake_on(self._place(), recipe, progress)

    def baked(self, recipe: ImageRecipe) -> Image | None:
        """The recipe's image when every engine that answers has it. When some lack it:
        None, so that the prebake bakes it ahead (`bake_ahead`, which spreads it), and
        the image, if an engine has it, is listed as wanted on those that lack it."""
        found, lacking = None, []
        for member in self._live():
            try:
                with self._on(member):
                    image = member.baked(recipe)
            except EngineLost:
                continue
            if image is None:
                lacking.append(member)
            elif found is None:
                found = image
        if not lacking:
            return found
        with self._lock:
            self._ahead.add(_identity(recipe))
        if found is not None:
            for member in lacking:
                self.wanted(member).add([found.ref])
        return None

    def bake_ahead(self, recipe: ImageRecipe, progress: Progress) -> Image:
        """The prebake's bake (several at once, in threads of one process), placing no
        trial: the image where an engine has it, else baked on the first engine that
        answers; listed as wanted on the others. When the last image the prebake asked
        about (`baked`) is settled, every engine gets the images it lacks, in one save
        each, before the trials need them."""
        try:
            image = self._settle(recipe, progress)
            for member in self._live():
                with contextlib.suppress(EngineLost), self._on(member):
                    if not member.has_image(image.ref):
                        self.wanted(member).add([image.ref])
            return image
        finally:
            with self._lock:
                self._ahead.discard(_identity(recipe))
                last = not self._ahead
            if last:
                self.spread(progress)

    def _settle(self, recipe: ImageRecipe, progress: Progress) -> Image:
        for member in self._live():
            with contextlib.suppress(EngineLost), self._on(member):
                image = member.baked(recipe)
                if image is not None:
                    progress(f"{recipe.name}: reusing baked image on {member.engine}")
                    return image
        for member in self._live():
            if member.alive():
                return self._bake_on(member, recipe, progress)
            self._lose(member)
        raise SandboxError("every Docker engine of the pool was lost: " + ", ".join(sorted(self.lost)))

    def spread(self, progress: Progress) -> None:
        """Every engine gets the images listed as wanted on it, all engines at once."""
        targets = self._live()
        with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="reactbench-spread") as pool:
            for done in [pool.submit(self._deliver_quietly, target, progress) for target in targets]:
                done.result()

    def _deliver_quietly(self, target: DockerBackend, progress: Progress) -> None:
        # Ahead of the trials: what fails here is met again, and reported, by the trial
        # that needs the image.
        with contextlib.suppress(SandboxError):
            self.deliver(target, (), progress)

    def _bake_on(self, target: DockerBackend, recipe: ImageRecipe, progress: Progress) -> Image:
        with self._on(target):
            image = self._found_for(target, recipe, progress)
            if image is not None:
                return image
            # One bake of a recipe in the whole pool at a time, for every process of this
            # machine (each engine's own bake lock is per engine): a trial placed on
            # another engine while the prebake bakes its image waits for it and gets a
            # copy, the same image, not a build of its own.
            with file_lock(self._placing.parent / f"bake-{_digest(recipe)}.lock"):
                image = self._found_for(target, recipe, progress)
                if image is not None:
                    return image
                try:
                    return target.bake(recipe, progress)
                except BakeError as failed:
                    # Some engines cannot build everything (a base image only one of
                    # them has, no registry in reach): baked on one that can, then copied.
                    for source in self._live():
                        if source is target:
                            continue
                        with contextlib.suppress(BakeError), self._on(source):
                            image = source.bake(recipe, progress)
                            self.deliver(target, [image.ref], progress)
                            return image
                    raise failed from None

    def _found_for(self, target: DockerBackend, recipe: ImageRecipe, progress: Progress) -> Image | None:
        """The recipe's image on `target`: there already, or copied from an engine that
        has it; None when no engine has it."""
        image = target.baked(recipe)
        if image is not None:
            progress(f"{recipe.name}: reusing baked image on {target.engine}")
            return image
        for source in self._live():
            if source is target:
                continue
            with self._on(source):
                image = source.baked(recipe)
            if image is not None:
                self.deliver(target, [image.ref], progress)
                return image
        return None

    def wanted(self, member: DockerBackend) -> Wanted:
        return Wanted(member.ledger.path.with_suffix(".wanted.json"))

    def deliver(self, target: DockerBackend, refs: Sequence[str], progress: Progress) -> None:
        """Bring `refs`, and every other image listed as wanted on `target`, to it:
        pulled from the image registry when the run has one and it holds them, else
        copied, the images of each engine that has them in one `docker save | docker
        load`; one delivery into an engine at a time for every process of the machine.
        Raises SandboxError when one of `refs` is still missing after."""
        wanted = self.wanted(target)
        wanted.add(refs)
        with file_lock(target.ledger.path.with_suffix(".copy.lock")):
            wanted.settle()
            with self._on(target):
                missing = [ref for ref in wanted.listed() if not target.has_image(ref)]
                # A registry (when the run has one) sends only the layers the engine lacks.
                pulled = [ref for ref in missing if target.pull_baked(ref, progress)]
            missing = [ref for ref in missing if ref not in pulled]
            wanted.done([ref for ref in wanted.listed() if ref not in missing])
            by_source: dict[str, list[str]] = {}
            sources = [m for m in self._live() if m is not target]
            for ref in missing:
                for source in sources:
                    with contextlib.suppress(EngineLost), self._on(source):
                        if source.has_image(ref):
                            by_source.setdefault(source.engine, []).append(ref)
                            break
            for source in sources:
                batch = by_source.get(source.engine)
                if batch:
                    self._copy(source, target, batch, progress)
                    wanted.done(batch)
        with self._on(target):
            lacking = [ref for ref in refs if not target.has_image(ref)]
        if lacking:
            raise SandboxError(f"no engine of the pool has {', '.join(lacking)} to copy to {target.engine}")

    def _copy(self, source: DockerBackend, target: DockerBackend, refs: Sequence[str],
              progress: Progress) -> None:
        progress(f"copying {len(refs)} image(s) from {source.engine} to {target.engine}")
        started = time.monotonic()
        try:
            with self._on(source), self._on(target):
                target.load_image(source.save_images(refs))
        except EngineLost:
            raise
        except SandboxError as exc:
            if len(refs) == 1:
                raise
            # An engine that cannot save several images at once: one at a time.
            progress(f"one save of {len(refs)} images failed ({exc}); copying them one at a time")
            for ref in refs:
                with self._on(source), self._on(target):
                    target.load_image(source.save_images([ref]))
        progress(f"copied {len(refs)} image(s) to {target.engine} in {time.monotonic() - started:.1f}s")

    # -- sandboxes -----------------------------------------------------------------------

    def boot(self, image: Image, *, network: bool, limits: Limits, labels: Mapping[str, str],
             egress: Sequence[str] = ()) -> Sandbox:
        target = self._place()
        with self._on(target):
            if not target.has_image(image.ref):
                # Baked elsewhere (the trial moved): copied from an engine that has it.
                self.deliver(target, [image.ref], lambda _: None)
            inner = target.boot(image, network=network, limits=limits, labels=labels, egress=egress)
        with self._lock:
            self._open += 1
        return PooledSandbox(inner, target, self)

    def closed(self, sandbox: PooledSandbox) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                # The trial is over: the next one is placed afresh.
                self._unplace()

    def sweep(self) -> int:
        """What dead runs left, on every engine that answers."""
        removed = 0
        for member in self._live():
            try:
                removed += member.sweep()
            except Exception as exc:
                if self.explain(member, exc) is None:
                    raise
        return removed

    def close(self) -> None:
        self.end_placement()
        for member in self.members:
            with contextlib.suppress(Exception):
                member.close()
