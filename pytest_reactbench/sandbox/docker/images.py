"""Baking on the engine: the Debian root, the system layer, and every recipe on the
images it builds on (the resolved bases as build arguments, the bake's own variables
declared in a copy of the Dockerfile, its steps' failures named by line)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.base import Downloads, Image, ImageRecipe, Progress
from pytest_reactbench.sandbox.bases import NotBaked, Parent
from pytest_reactbench.sandbox.buildlog import BuildLog
from pytest_reactbench.sandbox.docker.mirrors import MirrorDaemon, original_step, with_build_args
from pytest_reactbench.sandbox.docker.sandbox import docker_sdk
from pytest_reactbench.sandbox.docker.share import RECIPE_LABEL, SharedImages
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.locks import file_lock, replace_if_changed
from pytest_reactbench.sandbox.mirrors import git_env, relevant
from pytest_reactbench.sandbox.recipes import (
    SYSTEM_IMAGE,
    from_instructions,
    images_dir,
    recipe_key,
)
from pytest_reactbench.sandbox.tls import tls_hint

ROOT_IMAGE = "reactbench/debian-root:bookworm"


STEP = re.compile(r"Step (\d+)/\d+ : ")


EXIT_CODE = re.compile(r"returned a non-zero code: (\d+)")


def _step_location(dockerfile: Path, number: int) -> str:
    """`Dockerfile:line` of the engine's step `number` (it counts instructions)."""
    try:
        return f"{dockerfile}:{df.parse(dockerfile)[number - 1].line}"
    except (df.DockerfileError, IndexError):
        return str(dockerfile)


EXACT_VERSION = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?")


def pinned_packages(text: str, where: Path) -> list[str]:
    """The `name@version` lines of a packages.txt, each version exact: the system
    image's key names the packages by version instead of hashing their tarballs."""
    specs = []
    for number, line in enumerate(text.splitlines(), 1):
        spec = line.strip()
        if not spec or spec.startswith("#"):
            continue
        name, _, version = spec.rpartition("@")
        if not name or not EXACT_VERSION.fullmatch(version):
            raise BakeError(f"{where}:{number}: {spec!r} is not name@x.y.z: the image's key names "
                            "each package by its exact version")
        specs.append(spec)
    return specs


#: What a fresh Debian root holds that no image needs, as in Debian's slim images:
#: apt's package lists and caches (a task's `apt-get update` fetches the lists again),
#: manuals, documentation (copyright notices kept) and translations: 124 of its 199 MB.
#: (The system layer's dpkg excludes keep later installs as lean.)
SLIM_ROOT = ("var/lib/apt/lists/*", "var/cache/apt/*.bin", "var/cache/apt/archives/*.deb",
             "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*", "usr/share/doc/*/*")
#: What the globs above match that stays.
SLIM_ROOT_KEEPS = ("lock", "partial", "locale.alias", "copyright")


def slim_root(root: Path) -> None:
    """Remove SLIM_ROOT's matches from a debootstrap root, before it becomes an image."""
    for pattern in SLIM_ROOT:
        for path in root.glob(pattern):
            if path.name in SLIM_ROOT_KEEPS:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def packed_name(spec: str) -> str:
    """The file `npm pack` writes for `name@version` (`@scope/x` -> `scope-x-version.tgz`)."""
    name, _, version = spec.rpartition("@")
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


class ImageBaking(SharedImages):
    """The bake template's steps on the engine."""

    #: Set by DockerBackend: what tells this engine's bake locks from another's, and
    #: the git daemons of the bakes' mirrors.
    lock_scope: str
    _mirror_daemon: MirrorDaemon

    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        """The system layer: a debootstrap root plus images/system."""
        if build:
            self._root_image(progress)
            recipe = self._system_recipe(progress, deadline)
        else:
            recipe = self._system_recipe(None, deadline)
        image = self._bake(recipe, progress, deadline, 1, build=build)
        return Parent(SYSTEM_IMAGE, image.ref, image.digest,
                      (BaseImage(name=SYSTEM_IMAGE, digest=image.digest, origin="system"),), image)

    def build(self, recipe: ImageRecipe, key: str, parents: Sequence[Parent], progress: Progress,
              deadline: float) -> Image:
        build_args = dict(recipe.build_args)
        use = {parent.name: parent.use for parent in parents}
        rewrite: dict[int, tuple[str, str]] = {}
        for ref in from_instructions(recipe):
            if use[ref.image] == ref.image:
                continue
            if ref.variable:
                build_args[ref.variable] = use[ref.image]
            else:
                rewrite[ref.line] = (ref.raw, use[ref.image])
        dockerfile = recipe.dockerfile
        lines = recipe.dockerfile.read_text().splitlines(keepends=True)
        # A FROM that names a public image (or part of it) literally: the build reads a
        # copy whose FROM names the resolved image; nothing is tagged under the public
        # name, and the lines keep their numbers.
        for line, (raw, resolved) in rewrite.items():
            lines[line - 1] = lines[line - 1].replace(raw, resolved, 1)
        text = "".join(lines)
        mirrors = relevant(self.options.git_mirrors, recipe.dockerfile, recipe.context)
        # git's URL rewrites, and the package managers' registries (the download cache,
        # reached over the host's loopback: builds run on the host's network), reach RUN
        # steps as build arguments the copy declares; they are not part of the key.
        declared = git_env(self._mirror_daemon.rewrites(mirrors)) if mirrors else {}
        if self.downloads is not None:
            declared.update(self.downloads.env())
        declared.update(self.options.package_manager_env)
        if declared:
            build_args.update(declared)
            text = with_build_args(text, list(declared))
        if rewrite or declared:
            dockerfile = self.cache_dir / "dockerfiles" / f"{key}.Dockerfile"
            dockerfile.parent.mkdir(parents=True, exist_ok=True)
            replace_if_changed(dockerfile, text.encode())
        tag = self._tag(recipe, key)
        self._build(recipe, dockerfile, tag, build_args, progress, deadline, bool(declared))
        image = self.find(key, recipe)
        if image is None:
            raise BakeError(f"{recipe.dockerfile}: the engine built {tag} but cannot find it")
        return image

    def _build(self, recipe: ImageRecipe, dockerfile: Path, tag: str, build_args: Mapping[str, str],
               progress: Progress, deadline: float, declared: bool = False) -> None:
        docker = docker_sdk()
        progress(f"{recipe.name}: building {recipe.dockerfile} on the Docker engine")
        started = time.monotonic()
        remaining = max(1.0, deadline - time.monotonic())
        api = self._api_client(remaining)
        where = str(recipe.dockerfile)
        # Each step's own output, and what any step said of a host or a command.
        log = BuildLog(where)
        try:
            stream = api.build(
                path=str(recipe.context),
                # An absolute path: docker-py sends a Dockerfile from outside the
                # context along with it.
                dockerfile=str(dockerfile.resolve()),
                pull=False,
                tag=tag,
                buildargs=dict(build_args),
                network_mode="host",
                rm=True,
                forcerm=True,
                decode=True,
                labels={RECIPE_LABEL: recipe.name},
            )
            for chunk in stream:
                text = str(chunk.get("stream", ""))
                if step := STEP.match(text):
                    progress(f"{recipe.name}: {text.strip()[:100]} ({time.monotonic() - started:.0f} s)")
                    number = int(step.group(1))
                    if declared:  # the copy declares one ARG step after each FROM
                        number = original_step(recipe.dockerfile.read_text(), number)
                    where = _step_location(recipe.dockerfile, number)
                    log.step(where)
                elif text:
                    log.add(text)
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    code = EXIT_CODE.search(error)
                    said = log.failure(where, int(code.group(1)) if code else None, error)
                    raise BakeError(said + tls_hint(said))
                if time.monotonic() > deadline:
                    raise BakeError(f"{recipe.dockerfile}: build_timeout_sec ran out")
        except docker.errors.DockerException as exc:
            raise BakeError(f"{recipe.dockerfile}: the engine refused the build: {exc}") from None
        except OSError as exc:  # a read timeout of the build stream
            raise BakeError(f"{recipe.dockerfile}: build_timeout_sec ran out ({exc})") from None
        finally:
            api.close()

    def _system_recipe(self, progress: Progress | None, deadline: float) -> ImageRecipe:
        """images/system, keyed by its Dockerfile, the exact versions of the npm packages
        it installs (packages.txt) and the CA bundle; the packages themselves are packed
        beside it only when the image is baked here, not to look it up or pull it. Without
        `progress`, only what is there already (a look-up writes nothing)."""
        recipe_path = images_dir() / "system"
        specs = (recipe_path / "packages.txt").read_text()
        # One context per version of the recipe: sessions of different checkouts
        # sharing a cache do not repack each other's tarballs.
        context = self.cache_dir / "system-context" / recipe_key(
            specs, (recipe_path / "Dockerfile").read_text())[:16]
        packages = pinned_packages(specs, recipe_path / "packages.txt")
        stage = context / "npm"
        recipe = ImageRecipe("system", context / "Dockerfile", context,
                             build_args={"ROOT_IMAGE": ROOT_IMAGE}, timeout=deadline - time.monotonic(),
                             downloads=Downloads(stage, lambda told: self._pack(stage, packages, told)))
        if progress is None:
            if not recipe.dockerfile.is_file() or self._image(ROOT_IMAGE) is None:
                raise NotBaked("system")
            return recipe
        with self._context_lock(context):
            context.mkdir(parents=True, exist_ok=True)
            # Other workers may be reading these: replace them whole, and only on change.
            replace_if_changed(context / "packages.txt", specs.encode())
            replace_if_changed(context / "ca.crt", self.ca_bundle.read_bytes() if self.ca_bundle else b"")
            replace_if_changed(context / "Dockerfile", (recipe_path / "Dockerfile").read_bytes())
        return recipe

    def _context_lock(self, context: Path) -> contextlib.AbstractContextManager[None]:
        """What keeps two workers from writing one system context at once."""
        return file_lock(self.cache_dir / "locks" / f"system-context-{context.name}.lock")

    def _pack(self, stage: Path, packages: Sequence[str], progress: Progress) -> None:
        """The npm tarballs of `packages` in `stage`, each packed once (their versions
        are exact: a version's tarball never changes)."""
        with self._context_lock(stage.parent):
            stage.mkdir(parents=True, exist_ok=True)
            wanted = {packed_name(spec) for spec in packages}
            for spec in packages:
                if not (stage / packed_name(spec)).exists():
                    progress(f"system: packing {spec}")
                    packed = subprocess.run(["npm", "pack", "--silent", spec,
                                             "--pack-destination", str(stage)],
                                            capture_output=True, text=True,
                                            env={**os.environ, **(self.downloads.env()
                                                                  if self.downloads else {})})
                    if packed.returncode != 0:
                        raise BakeError(f"npm pack {spec} failed: {packed.stderr.strip()[-500:]}")
            for stale in stage.glob("*.tgz"):
                if stale.name not in wanted:
                    stale.unlink()

    @property
    def lock_dir(self) -> Path:
        """The engine's images are shared by every session of this machine, whatever its
        bake cache (two test workers, a miner beside a run): so are the locks that keep
        two of them from baking one recipe at once (the second would get another image
        id, and every image baked on it another key)."""
        return Path(tempfile.gettempdir()) / "reactbench-bake-locks"

    def _root_image(self, progress: Progress) -> None:
        with file_lock(self.lock_dir / f"{self.lock_scope}root.lock"):
            if self._image(ROOT_IMAGE) is not None:
                return
            # The root every key builds on: another machine's, shared, keeps their keys.
            if self._pull_shared(ROOT_IMAGE, progress):
                return
            if shutil.which("debootstrap") is None or os.geteuid() != 0:
                raise BakeError(
                    f"the base root {ROOT_IMAGE} is missing and building it needs root and "
                    "debootstrap (apt-get install debootstrap)"
                )
            progress(f"system: debootstrap of a Debian bookworm root for {ROOT_IMAGE}")
            with tempfile.TemporaryDirectory(prefix="root-", dir=self.cache_dir) as tmp:
                root = Path(tmp, "root")
                made = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(root)],
                                      capture_output=True, text=True)
                if made.returncode != 0:
                    raise BakeError(f"debootstrap failed: {made.stdout[-800:]}{made.stderr[-800:]}")
                slim_root(root)
                archive = Path(tmp, "root.tar")
                subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], check=True)
                repository, _, tag = ROOT_IMAGE.partition(":")
                with archive.open("rb") as data:
                    self.api.import_image_from_data(data, repository=repository, tag=tag)
            self._push_later(ROOT_IMAGE, progress)
