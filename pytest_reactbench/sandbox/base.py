"""The Sandbox contract and the Backend that bakes images and boots sandboxes. What
every backend shares beside it has a module each: its failures (`errors.py`), tar
streams (`archives.py`), the egress gate (`egress.py`) and the heartbeat of long work
(`heartbeat.py`).

A third backend (remote engines, Kubernetes) is one new module implementing
`Backend` and `Sandbox`, registered through the `pytest_reactbench_sandbox_backends` hook.
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pytest_reactbench.results.trial_result import BaseImage
from pytest_reactbench.sandbox.archives import (
    ARCHIVE_ATTEMPTS,
    COUNTED_TAR,
    TAR_BYTES,
    TAR_EXIT,
    TAR_NOTES,
    tar_of,
)
from pytest_reactbench.sandbox.downloads import Traffic
from pytest_reactbench.sandbox.errors import SandboxError

if TYPE_CHECKING:
    from pytest_reactbench.sandbox.bake import BakeRecord

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes
    duration: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def failure(self) -> str:
        """Why it failed, for a message: its stderr, or its exit code when it wrote none."""
        text = self.error_text.strip()
        return text or f"exit code {self.exit_code}, nothing on stderr"


#: The most of each output stream of a command the harness keeps (an agent printing
#: without end must not grow the harness's memory); the rest is left out, and said.
MAX_EXEC_OUTPUT = 256 * 1024 * 1024


def capped(data: bytes, total: int) -> bytes:
    """`data`, the first bytes of a stream of `total` bytes, with a line that says what
    was left out when the stream was longer than MAX_EXEC_OUTPUT."""
    if total <= MAX_EXEC_OUTPUT:
        return data
    return data[:MAX_EXEC_OUTPUT] + (f"\n[{total - MAX_EXEC_OUTPUT} more bytes left out by the harness]\n"
                                     .encode())


#: Processes a sandbox may hold at once: a fork bomb stops here on both backends.
PIDS_LIMIT = 2048


@dataclass(frozen=True)
class Limits:
    cpus: float = 1.0
    memory_mb: int = 2048
    #: The size of the sandbox's `/tmp` (a tmpfs, so it also counts as memory).
    storage_mb: int = 10240


@dataclass(frozen=True)
class Layer:
    """Steps baked on every external base of a recipe before the recipe's own steps
    (our grader on whatever verifier base a task names): a recipe of its own, keyed like
    any other by its base, its steps and its context, and shared by every recipe that
    asks for it on the same base."""

    name: str
    #: Dockerfile instructions after the `FROM` of the base.
    steps: str
    context: Path


@dataclass(frozen=True)
class Downloads:
    """Files a recipe's build needs that its key does not hash: `folder`, inside the
    context, is filled by `fetch` just before the image is baked here, never when it is
    reused or pulled from an image registry. The key hashes what pins them instead
    (exact versions in a file of the context), so a machine that finds the image needs
    none of them."""

    folder: Path
    fetch: Callable[[Progress], None]


@dataclass(frozen=True)
class ImageRecipe:
    """What to bake: a Dockerfile, its build context and build arguments."""

    name: str
    dockerfile: Path
    context: Path
    build_args: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 1800.0
    #: FROM names that are images this backend baked already (a layer on top of a task's
    #: image, such as an agent's CLI): built on as they are, never pulled or mapped.
    baked: Mapping[str, Image] = field(default_factory=dict)
    #: Baked on each external base (not on `baked` images) before this recipe's steps.
    layer: Layer | None = None
    downloads: Downloads | None = None


@dataclass(frozen=True)
class Image:
    """A baked image. `ref` names it for its backend; `digest` is its content hash;
    `bases` are the base images it was built on, its bases' bases included."""

    ref: str
    digest: str
    backend: str
    cached: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    bases: tuple[BaseImage, ...] = ()

    @property
    def formal(self) -> bool:
        """Built on the public images themselves (no stand-in among its bases); a
        result is formal only if its backend is too (`Capabilities.formal`)."""
        return all(base.origin != "stand-in" for base in self.bases)


class Sandbox(ABC):
    """One isolated workspace booted from an image. `close()` always works."""

    backend: str
    #: The engine it runs on, for backends with several (a Docker engine's URL).
    engine: str = ""
    #: The seconds its boot waited for room on its engine (another run held it).
    room_wait: float = 0.0

    @abstractmethod
    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run a command (a string runs under `bash -c`); kill its whole tree on timeout."""

    @abstractmethod
    def put_archive(self, dest: str, data: bytes) -> None:
        """Unpack a tar stream into the directory `dest` (created if missing)."""

    def get_archive(self, src: str, exclude: Sequence[str] = ()) -> bytes:
        """A tar stream of the directory `src`'s contents, leaving out `exclude` globs
        (GNU tar's matching, as Harbor's transfer). The caller checks what it gets."""
        args = ["sh", "-c", COUNTED_TAR, src, *(f"--exclude={p}" for p in exclude)]
        got = written = 0
        for _ in range(ARCHIVE_ATTEMPTS):
            result = self.exec(args, cwd="/")
            said = TAR_NOTES.sub(b"", result.stderr).decode("utf-8", "replace").strip()
            status, count = TAR_EXIT.search(result.stderr), TAR_BYTES.search(result.stderr)
            if (status and status[1] != b"0") or not result.ok:
                code = int(status[1]) if status else result.exit_code
                said = said or f"exit code {code}, nothing on stderr"
                raise SandboxError(f"could not archive {src}: {said}")
            got, written = len(result.stdout), int(count[1]) if count else -1
            if status and got == written:
                return result.stdout
            # The bytes were counted as they left tar: fewer arrived when the engine
            # lost part of a command's output (seen under load on docker: all of it, or
            # a large stream's tail), so the archive is taken again, never read short.
        told = f"of the {written} tar wrote" if written >= 0 else "and the count of them was lost too"
        raise SandboxError(f"could not archive {src}: tar succeeded {ARCHIVE_ATTEMPTS} times and its output "
                           f"was lost each time (the last time {got} bytes arrived {told})")

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        """The tree at `src` as the agent left it, as a tar stream without the `exclude`
        globs, taken without the agent's cooperation: every process of the sandbox is
        stopped first, and the tree is read by the backend's own means (never a program
        inside the sandbox, which the agent may have replaced, broken or filled). A
        missing `src` is an empty archive. More than `limit` bytes of file contents after
        the excludes raise ArchiveTooLarge, with no more than about `limit` bytes held in
        memory. The sandbox runs nothing afterwards."""
        raise NotImplementedError(f"the {self.backend} backend cannot collect a tree at rest")

    @abstractmethod
    def close(self) -> None:
        """Tear the sandbox down; safe to call twice and after a failure."""

    def ready(self) -> float:
        """Block until the sandbox can run commands; the seconds it waited."""
        return 0.0

    def end_leftovers(self) -> None:
        """Stop every process its commands left running (an agent's background jobs and
        daemons), so that what is collected afterwards holds still. A backend whose
        commands take their whole tree with them (local) has nothing to do."""

    def egress_requests(self) -> list[dict[str, Any]]:
        """Every request its egress proxy saw so far (host, port, method, and the
        upstream's `status` or the `error` that stopped it; `refused` ones too), oldest
        first; none for a sandbox without egress."""
        return []

    def put_path(self, local: Path, dest: str) -> None:
        """Copy a host directory's contents (or one file) into the sandbox at `dest`."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if local.is_dir():
                for child in sorted(local.iterdir()):
                    tar.add(child, arcname=child.name)
            else:
                tar.add(local, arcname=local.name)
        self.put_archive(dest, buffer.getvalue())

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        parent, _, name = path.rstrip("/").rpartition("/")
        self.put_archive(parent or "/", tar_of({name: raw}, mode))

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BootingSandbox(Sandbox):
    """A sandbox booting in the background (`boot` runs in a thread, after `prepare`,
    say the bake of its image), so that both overlap other work; every call waits for
    it, and `close()` always closes it. A close during `prepare` does not wait for it (a
    bake can take minutes, and a trial that ends early, Ctrl-C included, must not): the
    thread then ends without booting. A close during the boot waits for it, so that no
    sandbox outlives its close."""

    def __init__(self, boot: Callable[[], Sandbox], what: str,
                 prepare: Callable[[], object] | None = None) -> None:
        self._sandbox: Sandbox | None = None
        self._error: BaseException | None = None
        self._what = what
        self._closed = False
        self._booting = prepare is None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._boot, args=(boot, prepare), name=f"boot {what}",
                                        daemon=True)
        self._thread.start()

    def _boot(self, boot: Callable[[], Sandbox], prepare: Callable[[], object] | None) -> None:
        try:
            if prepare is not None:
                prepare()
                with self._lock:
                    if self._closed:
                        return
                    self._booting = True
            self._sandbox = boot()
        except BaseException as exc:  # handed to the caller's thread by ready()
            self._error = exc

    def ready(self) -> float:
        """Wait for the boot; returns the seconds waited, raises what made it fail."""
        started = time.monotonic()
        self._thread.join()
        waited = time.monotonic() - started
        self.raise_failure()
        return waited

    def raise_failure(self) -> None:
        """Raise what made the boot fail if it has failed already; never waits."""
        if self._thread.is_alive():
            return
        if isinstance(self._error, Exception):  # with the boot thread's traceback
            raise self._error
        if self._error is not None or self._sandbox is None:
            raise SandboxError(f"booting the {self._what} sandbox failed: {self._error!r}")

    @property
    def sandbox(self) -> Sandbox:
        self.ready()
        assert self._sandbox is not None
        return self._sandbox

    @property
    def backend(self) -> str:  # type: ignore[override]
        return self.sandbox.backend

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        return self.sandbox.exec(cmd, cwd=cwd, env=env, timeout=timeout, user=user)

    def put_archive(self, dest: str, data: bytes) -> None:
        self.sandbox.put_archive(dest, data)

    def get_archive(self, src: str, exclude: Sequence[str] = ()) -> bytes:
        return self.sandbox.get_archive(src, exclude)

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        return self.sandbox.collect(src, exclude, limit)

    def end_leftovers(self) -> None:
        self.sandbox.end_leftovers()

    def egress_requests(self) -> list[dict[str, Any]]:
        return self.sandbox.egress_requests()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            booting = self._booting
        if booting:
            self._thread.join()
            if self._sandbox is not None:
                self._sandbox.close()


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do here, declared in one object (`Backend.capabilities`) that
    the plugin and the trial read, rather than flags probed one by one."""

    #: Whether verdicts from this backend count as formal results.
    formal: bool
    #: Whether an agent's egress reaches the host's own loopback (a model gateway on
    #: 127.0.0.1): the local backend's proxy runs on the host; a container's does not.
    reaches_host_loopback: bool = False
    #: Whether a bake can add a user to the image (an agent's layer that runs its CLI as
    #: one): the local backend's /etc is the host's, read-only.
    adds_users: bool = True
    #: Why this backend cannot hold an untrusted agent here (None: it can). Only the
    #: control agents, whose work is the task's own, run on a backend that says why.
    untrusted_refusal: str | None = None
    #: How many bakes it takes at once (the size of the session's prebake pool).
    bake_slots: int = 1


class Backend(ABC):
    """Bakes images from recipes and boots sandboxes from them."""

    name: str
    #: The engine it runs on, for a backend that has one (a Docker engine's URL).
    engine: str = ""
    #: The image map its bakes resolve a FROM through (public name -> replacement).
    image_map: Mapping[str, str] = MappingProxyType({})

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this backend can do here (asked once it is made)."""

    def bake_records(self) -> Sequence[BakeRecord]:
        """Every image it was asked to bake, as it had it, in the order they were settled
        (the session's bake summary)."""
        return ()

    def download_traffic(self) -> Traffic:
        """What its download caches moved so far, each byte once."""
        return Traffic()

    @abstractmethod
    def bake(self, recipe: ImageRecipe, progress: Progress) -> Image:
        """Build (or reuse, by content hash) the image for a recipe."""

    def baked(self, recipe: ImageRecipe) -> Image | None:
        """The recipe's image if it is baked already, building and pulling nothing;
        None when it is not (or the backend cannot tell)."""
        return None

    def bake_ahead(self, recipe: ImageRecipe, progress: Progress) -> Image:
        """`bake`, before any trial and outside one (the session's prebake): a backend
        that places trials (a pool of engines) bakes without placing one."""
        return self.bake(recipe, progress)

    @abstractmethod
    def boot(
        self,
        image: Image,
        *,
        network: bool,
        limits: Limits,
        labels: Mapping[str, str],
        egress: Sequence[str] = (),
    ) -> Sandbox:
        """Start a fresh sandbox from an image: with the network (`network`), without it,
        or (`egress`) reaching only those hosts, through an allowlisting proxy that the
        sandbox's HTTP(S)_PROXY names."""

    def sweep(self) -> int:
        """Remove what a dead run left behind; returns how many things were removed."""
        return 0

    def close(self) -> None:
        """Release the backend's own resources at the end of the session."""
