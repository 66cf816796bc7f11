"""The `docker` backend: the faithful one, for formal results.

Images are built by the real engine (docker-py, `DOCKER_HOST` honoured) and tagged by
a content hash of the recipe and everything it builds on, so an unchanged recipe is
never rebuilt. A public base image is used as it is when the engine has it or can pull
it; otherwise (or when asked) its stand-in is built from `images/`. Only names under
`reactbench/` are ever tagged: the resolved base reaches the build as its `ARG` (as
`BASE_IMAGE`), and a FROM that names a public image literally is rewritten in a copy
of the Dockerfile made for that build alone.
Sandboxes are containers started with an init (they stop at once), labelled with the
run, task, role and owner; a later run removes what a dead one left.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.bake import (
    BakingBackend,
    NotBaked,
    Parent,
    Pruned,
    PublicImageUnavailable,
    replace_if_changed,
)
from pytest_reactbench.sandbox.base import (
    EGRESS_PORT,
    EGRESS_SCRIPT,
    PIDS_LIMIT,
    BakeError,
    BaseImage,
    ExecResult,
    Image,
    ImageRecipe,
    Limits,
    Progress,
    Sandbox,
    SandboxError,
    egress_lines,
    proxy_env,
    tar_of,
)
from pytest_reactbench.sandbox.engines import Ledger, Room, group_of, ledger_path
from pytest_reactbench.sandbox.host import file_lock, pid_alive, tls_hint
from pytest_reactbench.sandbox.image_registry import ImageRegistry, RegistryUnavailable, is_missing
from pytest_reactbench.sandbox.mirrors import MirrorDaemon, git_env, original_step, relevant, with_build_args
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import (
    SYSTEM_IMAGE,
    from_instructions,
    images_dir,
    recipe_key,
    strip_tag,
)
from pytest_reactbench.sandbox.relay import LoopbackRelay, loopback_port

ROOT_IMAGE = "reactbench/debian-root:bookworm"
DEFAULT_ENGINE = "unix:///var/run/docker.sock"
LABEL = "reactbench.owner"
#: Every image we build carries it (the recipe's name).
RECIPE_LABEL = "reactbench.recipe"
def _each_other_process(action: str, spared: str = "1 $main $$") -> str:
    """A shell loop, forking nothing, that runs `action` on "$p" for every process of
    the container but init (pid 1), the container's main process and `spared`. The main
    process is init's oldest child: the kernel appends children, reparented orphans
    included, at the end of the list."""
    return ('read main _ < /proc/1/task/1/children; '
            f'for p in /proc/[0-9]*; do p=${{p#/proc/}}; case " {spared} " in *" $p "*) ;; '
            f'*) {action};; esac; done; true')


# Kills every process in the container but init and the main process: a timed-out
# command's whole tree goes, orphans that setsid'd away and were reparented to init included.
KILL_ALL = _each_other_process('kill -9 "$p" 2>/dev/null')
#: Lists the processes KILL_ALL would kill (this shell and its parent spared).
LEFTOVERS = _each_other_process('[ -e "/proc/$p/stat" ] && echo "$p"', "1 $main $$ $PPID")
#: The container's main process: it makes the log directories and then idles.
MAIN = ["sh", "-c", "mkdir -p /logs/agent /logs/verifier && exec sleep infinity"]


#: A pull that the engine sends nothing about for this long has failed (an unreachable
#: registry must not hold a run up: the stand-in is the way on).
PULL_STALL_SECONDS = 30.0

#: The same for a push (a registry that accepts a connection and then says nothing).
PUSH_STALL_SECONDS = 120.0

STEP = re.compile(r"Step (\d+)/\d+ : ")
EXIT_CODE = re.compile(r"returned a non-zero code: (\d+)")


class _NotInRegistry(Exception):
    """The registry answered that it does not hold the image (a miss, not a failure)."""


def _step_location(dockerfile: Path, number: int) -> str:
    """`Dockerfile:line` of the engine's step `number` (it counts instructions)."""
    try:
        return f"{dockerfile}:{df.parse(dockerfile)[number - 1].line}"
    except (df.DockerfileError, IndexError):
        return str(dockerfile)


def _docker() -> Any:
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError("the docker backend needs the `docker` package") from exc
    return docker


def engine_kwargs(host: str | None) -> dict[str, Any]:
    """docker-py's client arguments for the engine at `host` (None: DOCKER_HOST and its
    TLS variables). A tcp:// engine uses DOCKER_TLS_VERIFY and DOCKER_CERT_PATH as the
    docker CLI does; an ssh:// one the ssh client and its configuration."""
    kwargs: dict[str, Any] = dict(_docker().utils.kwargs_from_env())
    if host is None:
        return kwargs
    kwargs["base_url"] = host
    if not host.startswith("tcp://"):
        kwargs.pop("tls", None)
    if host.startswith("ssh://"):
        kwargs["use_ssh_client"] = True
    return kwargs


def packed_name(spec: str) -> str:
    """The file `npm pack` writes for `name@version` (`@scope/x` -> `scope-x-version.tgz`)."""
    name, _, version = spec.rpartition("@")
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


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


class EgressGate:
    """An internal network with no route out, and the allowlisting proxy on it (alias
    `egress`) that is also on the default bridge: the agent's only way out."""

    def __init__(self, network: Any, proxy: Any, relays: Sequence[LoopbackRelay] = ()) -> None:
        self.network = network
        self.proxy = proxy
        #: Ports of this host's loopback the proxy reaches (a model gateway on 127.0.0.1).
        self.relays = list(relays)

    def close(self) -> None:
        errors = _docker().errors
        with contextlib.suppress(errors.NotFound):
            self.proxy.remove(force=True)
        with contextlib.suppress(errors.NotFound):
            self.network.remove()
        for relay in self.relays:
            relay.close()


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, container: Any, api: Any, on_close: Any, gate: EgressGate | None = None) -> None:
        self.container = container
        self.api = api
        self.gate = gate
        self._on_close = on_close
        self._closed = False

    def _errors(self) -> Any:
        return _docker().errors

    def egress_requests(self) -> list[dict[str, Any]]:
        if self.gate is None:
            return []
        try:
            logs = self.gate.proxy.logs(stdout=True, stderr=False)
        except _docker().errors.DockerException:
            return []
        return egress_lines(logs.decode("utf-8", "replace"))

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox is closed")
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        errors = self._errors()
        started = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                self.container.id, argv, workdir=cwd, environment=dict(env or {}), user=user or ""
            )["Id"]
        except errors.DockerException as exc:
            raise SandboxError(f"cannot run a command in container {self.container.name}: {exc}") from None
        output: dict[str, Any] = {}

        def pump() -> None:
            try:
                output["streams"] = self.api.exec_start(exec_id, demux=True)
            except Exception as exc:  # reported below, in the caller's thread
                output["error"] = exc

        worker = threading.Thread(target=pump, daemon=True)
        worker.start()
        worker.join(timeout)
        timed_out = worker.is_alive()
        if timed_out:
            self._kill_all()
            worker.join(30)
        if "error" in output:
            raise SandboxError(f"container {self.container.name} broke: {output['error']}")
        stdout, stderr = output.get("streams") or (b"", b"")
        try:
            code = self.api.exec_inspect(exec_id).get("ExitCode")
        except errors.DockerException as exc:
            raise SandboxError(f"container {self.container.name} went away: {exc}") from None
        return ExecResult(
            124 if timed_out else (code if code is not None else -1),
            stdout or b"",
            stderr or b"",
            time.monotonic() - started,
            timed_out,
        )

    def _kill_all(self) -> bool:
        """Run KILL_ALL (it forks nothing, so a container at its pids limit runs it too)."""
        try:
            killer = self.api.exec_create(self.container.id, ["sh", "-c", KILL_ALL])["Id"]
            self.api.exec_start(killer)
            return bool(self.api.exec_inspect(killer).get("ExitCode") == 0)
        except self._errors().DockerException:
            return False

    def end_leftovers(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")
        # A process being forked as the killer walks /proc escapes one pass; a few more
        # passes find it. Something that still will not stop shows in the collection.
        for _ in range(3):
            if self._kill_all() and not self._leftovers():
                return

    def _leftovers(self) -> bool:
        listed = self.exec(["sh", "-c", LEFTOVERS], cwd="/")
        return listed.ok and bool(listed.text.strip())

    def put_archive(self, dest: str, data: bytes) -> None:
        if dest.rstrip("/") == "/tmp" or dest.startswith("/tmp/"):
            # The engine's archive API writes under a tmpfs mount, not into it: stage
            # the files on the container's own filesystem and copy them in.
            stage = f"/.reactbench-put-{uuid.uuid4().hex[:8]}"
            self._unpack(stage, data)
            moved = self.exec(["sh", "-c", 'mkdir -p "$2" && cp -a "$1"/. "$2"/ && rm -rf "$1"',
                               "put", stage, dest], cwd="/")
            if not moved.ok:
                raise SandboxError(f"could not unpack into {dest}: {moved.failure}")
            return
        self._unpack(dest, data)

    def _unpack(self, dest: str, data: bytes) -> None:
        errors = self._errors()
        try:
            # Most destinations exist: a mkdir only when the engine says it does not.
            with contextlib.suppress(errors.NotFound):
                self.container.put_archive(dest, data)
                return
            made = self.exec(["mkdir", "-p", dest], cwd="/")
            if not made.ok:
                raise SandboxError(f"could not create {dest}: {made.failure}")
            self.container.put_archive(dest, data)
        except errors.DockerException as exc:
            raise SandboxError(f"could not unpack into {dest}: {exc}") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._on_close(self.container, self.gate)


class RegistryWarning(UserWarning):
    """The image registry could not be used: images are baked here instead."""


def _created(image: Any) -> float:
    """An image's creation time as a time stamp (0 when the engine gives none)."""
    created = str(image.attrs.get("Created", ""))
    try:
        return datetime.fromisoformat(created[:26].rstrip("Z")).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


class DockerBackend(BakingBackend):
    name = "docker"
    formal = True
    recipe_version = "2"

    def __init__(self, options: SandboxOptions, host: str | None = None) -> None:
        docker = _docker()
        #: The engine's URL (`host`, else DOCKER_HOST, else the local socket).
        self.engine = host or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
        self._client_kwargs = engine_kwargs(host)
        try:
            self.client = docker.DockerClient(**self._client_kwargs, timeout=600)
            self.client.ping()
            info = self.client.info()
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"cannot reach the Docker engine at {self.engine}: {exc}. Start it (dockerd), or "
                "give its URL (--reactbench-docker-host or DOCKER_HOST), or use --reactbench-sandbox=local"
            ) from None
        super().__init__(options)
        # Engines of one machine may share an ID (a copied key.json): their data roots tell them apart.
        identity = f"{info.get('ID')}|{info.get('Name')}|{info.get('DockerRootDir')}"
        self.lock_scope = f"{hashlib.sha256(identity.encode()).hexdigest()[:12]}-"
        #: What our sandboxes hold of the engine, for every process of this machine.
        self.ledger = Ledger(ledger_path(options.cache, identity),
                             Room(float(info.get("NCPU") or 1), int(info.get("MemTotal") or 0) // 2**20))
        self.api = self.client.api
        self.owner = options.owner or f"{socket.gethostname()}:{os.getpid()}"
        self._live: set[str] = set()
        #: Container id -> its reservation in the ledger.
        self._holders: dict[str, str] = {}
        # Removing a container takes the engine a few hundred milliseconds: it happens
        # here, off the trial's path; close() (and drain()) wait for every removal.
        self._teardown = ThreadPoolExecutor(max_workers=4, thread_name_prefix="reactbench-teardown")
        self._removals: list[Future[None]] = []
        self._gates: list[EgressGate] = []
        self._engine_cpus = int(info.get("NCPU") or 1)
        self._mirror_daemon = MirrorDaemon(options.git_mirrors)
        self.registry = ImageRegistry(options.image_registry) if options.image_registry else None
        # One push at a time: pushes share the engine's upload and its compression.
        self._pusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reactbench-push")
        self._pushes: list[Future[None]] = []
        # Bakes are mostly downloads and installs: as many at once as the engine has CPUs.
        self.bake_slots = max(1, min(8, self._engine_cpus))

    # -- images ---------------------------------------------------------------------

    def _image(self, tag: str) -> Any:
        try:
            return self.client.images.get(tag)
        except _docker().errors.ImageNotFound:
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
        except _docker().errors.DockerException as exc:
            raise SandboxError(f"{self.engine} could not load an image: {exc}") from None

    def alive(self) -> bool:
        """Whether the engine answers now (within a few seconds)."""
        docker = _docker()
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
        return _docker().APIClient(**self._client_kwargs, version=self.api.api_version, timeout=timeout)

    # -- the image registry ---------------------------------------------------------

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
        errors = _docker().errors
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
        docker = _docker()
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
                f"image; `docker rmi {name}` removes that name")
        if image is None:
            if not pull:
                raise PublicImageUnavailable("it is not on the engine")
            self._pull(name, progress)
            image = self._image(name)
            if image is None:
                raise PublicImageUnavailable("the engine pulled it but cannot find it")
        return Parent(name, name, str(image.id), (BaseImage(name, _registry_digest(image, name), "public"),))

    def _pull(self, name: str, progress: Progress, *, missing_ok: bool = False) -> None:
        """Pull `name` with progress lines; with `missing_ok`, a registry that answers it
        does not hold the image raises _NotInRegistry, quietly."""
        docker = _docker()
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

    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        """The system layer: a debootstrap root plus images/system."""
        if build:
            self._root_image(progress)
            recipe = self._system_recipe(progress, deadline)
        else:
            recipe = self._system_recipe(None, deadline)
        image = self._bake(recipe, progress, deadline, 1, build=build)
        return Parent(SYSTEM_IMAGE, image.ref, image.digest,
                      (BaseImage(SYSTEM_IMAGE, image.digest, "system"),), image)

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
        declared.update(self.options.registry_env)
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
        docker = _docker()
        progress(f"{recipe.name}: building {recipe.dockerfile} on the Docker engine")
        started = time.monotonic()
        remaining = max(1.0, deadline - time.monotonic())
        api = self._api_client(remaining)
        tail: list[str] = []
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
            where = str(recipe.dockerfile)
            for chunk in stream:
                text = str(chunk.get("stream", "")).rstrip()
                if text:
                    tail = (tail + text.splitlines())[-15:]
                    if step := STEP.match(text):
                        progress(f"{recipe.name}: {text[:100]} ({time.monotonic() - started:.0f} s)")
                        number = int(step.group(1))
                        if declared:  # the copy declares one ARG step after each FROM
                            number = original_step(recipe.dockerfile.read_text(), number)
                        where = _step_location(recipe.dockerfile, number)
                if "error" in chunk:
                    error = str(chunk["error"]).strip()
                    code = EXIT_CODE.search(error)
                    what = f"step failed with exit code {code.group(1)}" if code else error
                    raise BakeError(
                        f"{where}: {what}\n  " + "\n  ".join(tail) + tls_hint("\n".join(tail))
                    )
                if time.monotonic() > deadline:
                    raise BakeError(f"{recipe.dockerfile}: build_timeout_sec ran out")
        except docker.errors.DockerException as exc:
            raise BakeError(f"{recipe.dockerfile}: the engine refused the build: {exc}") from None
        except OSError as exc:  # a read timeout of the build stream
            raise BakeError(f"{recipe.dockerfile}: build_timeout_sec ran out ({exc})") from None
        finally:
            api.close()

    def _system_recipe(self, progress: Progress | None, deadline: float) -> ImageRecipe:
        """images/system with the npm tarballs it installs packed beside it; without
        `progress`, only what is there already (a look-up packs nothing)."""
        recipe_path = images_dir() / "system"
        # One context per version of the recipe: sessions of different checkouts
        # sharing a cache do not repack each other's tarballs.
        context = self.cache_dir / "system-context" / recipe_key(
            (recipe_path / "packages.txt").read_text(), (recipe_path / "Dockerfile").read_text())[:16]
        recipe = ImageRecipe("system", context / "Dockerfile", context,
                             build_args={"ROOT_IMAGE": ROOT_IMAGE}, timeout=deadline - time.monotonic())
        if progress is None:
            if not recipe.dockerfile.is_file() or self._image(ROOT_IMAGE) is None:
                raise NotBaked("system")
            return recipe
        packages = [line.strip() for line in (recipe_path / "packages.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
        with file_lock(self.cache_dir / "locks" / f"system-context-{context.name}.lock"):
            stage = context / "packages"
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
            # Other workers may be reading these: replace them whole, and only on change.
            replace_if_changed(stage / "ca.crt", self.ca_bundle.read_bytes() if self.ca_bundle else b"")
            replace_if_changed(context / "Dockerfile", (recipe_path / "Dockerfile").read_bytes())
        return recipe

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
                archive = Path(tmp, "root.tar")
                subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], check=True)
                repository, _, tag = ROOT_IMAGE.partition(":")
                with archive.open("rb") as data:
                    self.api.import_image_from_data(data, repository=repository, tag=tag)
            self._push_later(ROOT_IMAGE, progress)

    # -- sandboxes ---------------------------------------------------------------

    def boot(self, image: Image, *, network: bool, limits: Limits,
             labels: Mapping[str, str], egress: Sequence[str] = ()) -> Sandbox:
        docker = _docker()
        tags = {f"reactbench.{k}": str(v) for k, v in labels.items()}
        tags[LABEL] = self.owner
        if not self.ledger.capacity.fits(min(limits.cpus, float(self._engine_cpus)), limits.memory_mb):
            raise SandboxError(
                f"the sandbox asks for {limits.memory_mb} MiB of memory; the engine {self.engine} has "
                f"{self.ledger.capacity.memory_mb} MiB in all: lower the task's memory_mb or use a "
                "larger engine")
        gate = self._egress(egress, tags) if egress else None
        # A task may ask for more CPUs than the engine has (4 on a 2-core machine):
        # the engine refuses that, so the limit is the engine's size.
        cpus = min(limits.cpus, float(self._engine_cpus))
        options: dict[str, Any] = {
            "entrypoint": MAIN,
            "detach": True,
            "init": True,
            "network_mode": gate.network.name if gate else ("bridge" if network else "none"),
            "environment": {**self.options.registry_env,
                            **(proxy_env(f"http://egress:{EGRESS_PORT}") if gate else {})},
            "nano_cpus": int(cpus * 1e9),
            "mem_limit": f"{limits.memory_mb}m",
            "memswap_limit": f"{limits.memory_mb}m",
            # A fork bomb stops at this many processes instead of taking the engine down.
            "pids_limit": PIDS_LIMIT,
            # /tmp is bounded; filling it ends in ENOSPC, not in a full host disk.
            # (`exec`: the engine's default for a tmpfs is noexec, the local backend's is not.)
            "tmpfs": {"/tmp": f"size={limits.storage_mb}m,mode=1777,exec"},
            "labels": tags,
            "name": f"reactbench-{uuid.uuid4().hex[:12]}",
        }
        # Never more than the engine has: wait for room (the trial's other sandbox joins
        # the room its first one holds).
        holder = self.ledger.reserve(group_of(labels), cpus, limits.memory_mb)
        try:
            container = self.client.containers.run(image.ref, **options)
        except docker.errors.DockerException as exc:
            self.ledger.release(holder)
            if gate:
                gate.close()
            raise SandboxError(f"cannot start a container from {image.ref}: {exc}") from None
        self._live.add(container.id)
        self._holders[container.id] = holder
        box = DockerSandbox(container, self.api, self._remove_later, gate)
        box.engine = self.engine
        if gate is not None and gate.relays:
            try:
                self._tunnel(box, [loopback_port(h) for h in egress if loopback_port(h) is not None])
            except SandboxError:
                box.close()
                raise
        return box

    def _tunnel(self, box: DockerSandbox, ports: Sequence[int | None]) -> None:
        """In the agent's container, 127.0.0.1:PORT of each loopback gateway, tunnelled
        through the proxy (a client that skips the proxy for 127.0.0.1 connects there)."""
        box.container.put_archive("/", tar_of({"reactbench-egress.cjs": EGRESS_SCRIPT.read_bytes()}))
        for port in ports:
            ready = f"/reactbench-tunnel-{port}"
            box.container.exec_run(["node", "/reactbench-egress.cjs", "tunnel", str(port), "egress",
                                    str(EGRESS_PORT), f"127.0.0.1:{port}", ready], detach=True)
            waited = box.exec(f"i=0; while [ ! -e {ready} ] && [ $i -lt 500 ]; do sleep 0.02; "
                              f"i=$((i+1)); done; test -e {ready}", timeout=30)
            if not waited.ok:
                said = waited.text + waited.error_text
                raise SandboxError(f"the tunnel to the gateway on this host's 127.0.0.1:{port} did "
                                   f"not start in the agent's container: {said}")

    def _egress(self, hosts: Sequence[str], labels: Mapping[str, str]) -> EgressGate:
        errors = _docker().errors
        known = (SYSTEM_IMAGE, None)
        if known not in self._parents:
            self._parents[known] = self.system_layer(lambda _: None, time.monotonic() + 3600, build=True)
        system = self._parents[known]
        name = f"reactbench-egress-{uuid.uuid4().hex[:12]}"
        # Internal: the engine routes nothing out of it. And without an address of the
        # host's on its bridge: an agent that ignores the proxy variables cannot reach
        # the host itself either (its bridge addresses, a gateway listening on them),
        # only the proxy, its one peer.
        # A model host on this host's loopback (a gateway on 127.0.0.1:PORT): that port,
        # relayed on the default bridge's address, which the proxy reaches.
        relays: list[LoopbackRelay] = []
        try:
            for port in (loopback_port(h) for h in hosts):
                if port is not None:
                    relays.append(LoopbackRelay(self._bridge_address(), port))
        except OSError as exc:
            for relay in relays:
                relay.close()
            raise SandboxError(f"cannot serve a port of this host's loopback to the egress proxy "
                               f"on the engine's bridge ({self.engine}): {exc}") from None
        rewrites = ",".join(f"{h.lower()}={r.address[0]}:{r.address[1]}"
                            for h, r in zip([h for h in hosts if loopback_port(h) is not None], relays,
                                            strict=True))
        network = self.client.networks.create(
            name, driver="bridge", internal=True, labels=dict(labels),
            options={"com.docker.network.bridge.inhibit_ipv4": "true"})
        try:
            proxy = self.client.containers.create(
                system.use, ["node", "/egress.cjs", "proxy", str(EGRESS_PORT), ",".join(hosts),
                             *([rewrites] if rewrites else [])],
                name=name, labels=dict(labels), network_mode="bridge", init=True)
            gate = EgressGate(network, proxy, relays)
            proxy.put_archive("/", tar_of({"egress.cjs": EGRESS_SCRIPT.read_bytes()}))
            network.connect(proxy, aliases=["egress"])
            proxy.start()
        except errors.DockerException as exc:
            with contextlib.suppress(errors.DockerException):
                network.remove()
            for relay in relays:
                relay.close()
            raise SandboxError(f"cannot start the egress proxy: {exc}") from None
        return gate

    @property
    def reaches_host_loopback(self) -> bool:  # type: ignore[override]
        """An engine on this host: its bridge's address is this host's, where a relay
        serves a loopback port to the proxy. A remote engine's is not."""
        return not self.engine.startswith(("tcp://", "ssh://", "http://", "https://"))

    def _bridge_address(self) -> str:
        """This host's address on the engine's default bridge (where the proxy runs)."""
        config = (self.client.networks.get("bridge").attrs.get("IPAM", {}).get("Config") or [{}])[0]
        if config.get("Gateway"):
            return str(config["Gateway"])
        return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))

    def prune(self, unused_for: float, progress: Progress, now: float | None = None) -> Pruned:
        """Untag every image baked here (label `reactbench.recipe`) that no session
        asked for in `unused_for` seconds; the engine deletes what no container and no
        kept image still uses. Newest first, so children go before their parents."""
        errors = _docker().errors
        cutoff = (time.time() if now is None else now) - unused_for
        before = int(self.api.df().get("LayersSize") or 0)
        removed = kept = 0
        images = self.client.images.list(filters={"label": RECIPE_LABEL})
        images.sort(key=lambda image: str(image.attrs.get("Created", "")), reverse=True)
        for image in images:
            made = _created(image)
            for tag in image.tags:
                repository, _, key = tag.rpartition(":")
                if not repository.startswith("reactbench/") or self.last_used(key, made) >= cutoff:
                    continue
                try:
                    self.client.images.remove(tag)
                except errors.APIError as exc:  # a container still uses it
                    kept += 1
                    progress(f"kept {tag}: {exc.explanation or exc}")
                    continue
                self.forget_use(key)
                removed += 1
                progress(f"removed {tag}")
        freed = max(0, before - int(self.api.df().get("LayersSize") or 0))
        return Pruned(removed, freed, kept)

    def sweep(self) -> int:
        host = self.owner.rsplit(":", 1)[0]
        removed = 0
        # Other runs remove their containers meanwhile: one gone between the list and
        # its inspection is not an error.
        for container in self.client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
            owner = container.labels.get(LABEL, "")
            owner_host, _, pid = owner.rpartition(":")
            if owner_host != host or owner == self.owner or not pid.isdigit() or pid_alive(int(pid)):
                continue
            with contextlib.suppress(_docker().errors.NotFound):
                container.remove(force=True, v=True)
                removed += 1
        for network in self.client.networks.list(filters={"label": LABEL}):
            owner_host, _, pid = (network.attrs.get("Labels") or {}).get(LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(_docker().errors.DockerException):
                    network.remove()
                    removed += 1
        return removed

    def _remove_later(self, container: Any, gate: EgressGate | None) -> None:
        self._removals.append(self._teardown.submit(self._remove, container, gate))

    def _remove(self, container: Any, gate: EgressGate | None) -> None:
        errors = _docker().errors
        try:
            try:
                container.remove(force=True, v=True)
            except errors.NotFound:
                pass
            except errors.APIError as exc:
                # 409: someone else is removing it already (a container removed from
                # outside); anything else stays in _live and close() tries again.
                if exc.status_code != 409:
                    raise
            self._live.discard(container.id)
            self._release(container.id)
        finally:
            if gate is not None:
                try:
                    gate.close()
                except errors.DockerException:
                    self._gates.append(gate)
                    raise

    def _release(self, container_id: str) -> None:
        holder = self._holders.pop(container_id, None)
        if holder is not None:
            self.ledger.release(holder)

    def drain(self) -> None:
        """Wait until every closed sandbox's container is removed."""
        while self._removals:
            try:
                self._removals.pop().result()
            except Exception as exc:  # what failed is retried by close()
                warnings.warn(f"reactbench: removing a container failed, retrying at the end: {exc}",
                              stacklevel=2)

    def close(self) -> None:
        self.drain()
        self._teardown.shutdown(wait=True)
        for push in self._pushes:
            # A push that failed has warned already; anything else is said here.
            if (error := push.exception()) is not None:
                warnings.warn(RegistryWarning(f"reactbench: a push to the image registry broke: {error}"),
                              stacklevel=2)
        self._pusher.shutdown(wait=True)
        self._mirror_daemon.close()
        super().close()
        for gate in self._gates:
            with contextlib.suppress(_docker().errors.DockerException):
                gate.close()
        for container_id in list(self._live):
            with contextlib.suppress(_docker().errors.DockerException):
                self.client.containers.get(container_id).remove(force=True, v=True)
            self._live.discard(container_id)
        # A container that could not be removed (its engine is gone) holds no room.
        for container_id in list(self._holders):
            self._release(container_id)
        self.client.close()

