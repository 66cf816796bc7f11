"""The Sandbox contract and the Backend that bakes images and boots sandboxes.

A third backend (remote engines, Kubernetes) is one new module implementing
`Backend` and `Sandbox`, registered through the `pytest_reactbench_sandbox_backends` hook.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import re
import tarfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pytest_reactbench.results.trial_result import BaseImage

Progress = Callable[[str], None]

#: How often long work (a bake, an agent at work, a grading) says it is still going.
HEARTBEAT_SEC = 30.0


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


@contextlib.contextmanager
def heartbeat(progress: Progress, what: Callable[[], str], every: float = HEARTBEAT_SEC) -> Any:
    """While the block runs, a progress line every `every` seconds: what runs (asked
    each time) and for how long. Plain lines, so that a CI log shows them as a terminal
    does, and nothing when the work is quicker than one beat."""
    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            progress(f"{what()}, still running after {elapsed(time.monotonic() - started)}")

    thread = threading.Thread(target=beat, name="reactbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()

#: The gate between an agent that declares model hosts and the network.
EGRESS_SCRIPT = Path(__file__).with_name("egress.cjs")
EGRESS_PORT = 3128

#: Takes of an archive whose stream arrived short before it is an error.
ARCHIVE_ATTEMPTS = 3
#: tar's stream on stdout; on stderr, after tar's own words, its exit status and the
#: bytes it wrote, counted as they left it. Any tar (GNU's, BusyBox's) and any sh.
_COUNTED_TAR = ('exec 3>&1; { tar -c -f - -C "$0" "$@" .; echo "reactbench-tar-exit $?" >&2; } '
                '| tee /dev/fd/3 | { n=$(wc -c); echo "reactbench-tar-bytes $n" >&2; }')
_TAR_EXIT = re.compile(rb"^reactbench-tar-exit (\d+)$", re.MULTILINE)
_TAR_BYTES = re.compile(rb"^reactbench-tar-bytes\s*(\d+)\s*$", re.MULTILINE)
_TAR_NOTES = re.compile(rb"^reactbench-tar-(exit|bytes) .*\n?", re.MULTILINE)


def proxy_env(url: str) -> dict[str, str]:
    return {"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
            "NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}


def egress_lines(text: str) -> list[dict[str, Any]]:
    """The proxy's request records from its output (JSON lines among its other lines)."""
    seen = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    seen.append(record)
    return seen


def tar_of(files: Mapping[str, bytes], mode: int = 0o644) -> bytes:
    """A tar stream of in-memory files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def excluded(name: str, patterns: Sequence[str]) -> bool:
    """GNU tar's default --exclude matching (what Harbor uses): unanchored, `*`
    matches `/`, and names start with `./` (the archive is made with `-C SOURCE .`),
    so `**/node_modules/**` drops the contents of every node_modules, top level too."""
    if not patterns:
        return False
    name = "./" + name
    candidates = [name]
    candidates += [name[i + 1 :] for i, ch in enumerate(name) if ch == "/"]
    return any(fnmatch.fnmatchcase(c, p) for c in candidates for p in patterns)


class ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (an engine's HTTP stream), one
    chunk held at a time."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


#: What the headers of a re-packed archive may add to twice its limit of contents.
HEADER_SLACK = 1024 * 1024


def empty_tar() -> bytes:
    return tar_of({})


def repack(stream: IO[bytes] | io.RawIOBase, src: str, exclude: Sequence[str], limit: int) -> bytes:
    """Re-pack, as it streams by, a tar stream of the tree `src` whose members all sit
    under one top entry (the engine's `app/...`, or `./...`), as `tar -C src .` with
    `--exclude` would have made it: the top entry's name stripped (members named `x`,
    `dir/y`), the `exclude` globs left out with everything under an excluded directory
    (GNU tar does not descend into one). More than `limit` bytes of kept file contents
    raise ArchiveTooLarge as soon as a header says so, before its contents are read (a
    2 GiB sparse file is never read); an archive whose headers alone pass `limit` too
    (millions of empty files) is refused the same way, so no more than about twice
    `limit` (and HEADER_SLACK) is ever held. A top entry that is not a directory is an empty tree."""
    out = io.BytesIO()
    size = 0
    pruned: set[str] = set()
    try:
        source = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 (closed below)
    except tarfile.ReadError as exc:
        if "empty file" in str(exc):
            return empty_tar()
        raise SandboxError(f"the archive of {src} is unreadable: {exc}") from None
    try:
        with source, tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as sink:
            for member in source:
                _, slash, name = member.name.strip("/").partition("/")
                if not slash or name in ("", "."):
                    if not member.isdir():
                        return empty_tar()
                    continue
                name = name.removeprefix("./")
                parts = name.split("/")
                if any("/".join(parts[:i]) in pruned for i in range(1, len(parts))):
                    continue
                if excluded(name, exclude):
                    if member.isdir():
                        pruned.add(name)
                    continue
                if member.isfile():
                    size += member.size
                    if size > limit:
                        raise ArchiveTooLarge(src, limit)
                    member.type, member.sparse = tarfile.REGTYPE, None  # written out whole
                member.name = name
                # A long name travels in a PAX header, which would override the one set here.
                member.pax_headers = {k: v for k, v in member.pax_headers.items()
                                      if k not in ("path", "linkpath")}
                if member.islnk():  # a hard link names its target from the top entry too
                    member.linkname = member.linkname.strip("/").partition("/")[2].removeprefix("./")
                sink.addfile(member, source.extractfile(member) if member.isfile() else None)
                if out.tell() > 2 * limit + HEADER_SLACK:
                    raise ArchiveTooLarge(src, limit)
    except tarfile.TarError as exc:
        raise SandboxError(f"the archive of {src} is unreadable: {exc}") from None
    return out.getvalue()


class SandboxError(Exception):
    """The sandbox or its engine broke: a harness error, never the agent's fault."""


class ArchiveTooLarge(Exception):
    """A tree being collected holds more than its limit after its excludes: what the
    agent left, so the agent's fail, never a harness error."""

    def __init__(self, src: str, limit: int) -> None:
        super().__init__(f"{src} holds more than {limit // (1024 * 1024)} MiB after the excludes "
                         "of [[artifacts]]")
        self.src = src
        self.limit = limit


class BakeError(SandboxError):
    """An image could not be built from its recipe."""


class EngineLost(SandboxError):
    """The engine a sandbox ran on stopped answering mid-trial: an error, retried on
    another engine of the pool."""

    def __init__(self, message: str, engine: str = "") -> None:
        super().__init__(message)
        #: The lost engine: a trial lost while its sandbox booted knows it from here.
        self.engine = engine


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
        result is formal only if its backend is too (`Backend.formal`)."""
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
        args = ["sh", "-c", _COUNTED_TAR, src, *(f"--exclude={p}" for p in exclude)]
        got = written = 0
        for _ in range(ARCHIVE_ATTEMPTS):
            result = self.exec(args, cwd="/")
            said = _TAR_NOTES.sub(b"", result.stderr).decode("utf-8", "replace").strip()
            status, count = _TAR_EXIT.search(result.stderr), _TAR_BYTES.search(result.stderr)
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


class Backend(ABC):
    """Bakes images from recipes and boots sandboxes from them."""

    name: str
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
