"""The docker backend's sandbox: a container started with an init, and what runs in it
(commands, archives in and out, the processes an agent left, its egress gate)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_reactbench.sandbox.archives import ChunkReader, empty_tar, repack
from pytest_reactbench.sandbox.base import MAX_EXEC_OUTPUT, ExecResult, Sandbox, capped
from pytest_reactbench.sandbox.docker.streams import exec_frames
from pytest_reactbench.sandbox.egress import egress_lines
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.relay import LoopbackRelay

DEFAULT_ENGINE = "unix:///var/run/docker.sock"
#: The most a container being stopped for collection may take to stop.
STOP_TIMEOUT = 60
#: Kills sent, each followed by a wait of STOP_TIMEOUT, before a container that will not stop is an error.
STOP_ATTEMPTS = 3
#: The size of the reads of an archive's stream from the engine.
ARCHIVE_CHUNK = 1024 * 1024
#: What the engine says when the path to archive leads to no directory (a file on the
#: way, a symlink loop or one to a path too long): what the agent left holds no tree.
_NO_TREE = ("not a directory", "too many levels of symbolic links", "too many links", "file name too long",
            "no such file or directory")


LABEL = "reactbench.owner"


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
# Everything is stopped first, in one call (`kill -1`: every process the shell may
# signal but init and itself), so nothing forks while the loop walks: one by one, a
# fork bomb at its pids limit refills each slot a kill frees (measured: 2,048 processes,
# 1,271 after the walk, 2,048 again 2 s later; stopped first, none). The main process
# is let go on after.
KILL_ALL = ("kill -STOP -1 2>/dev/null; " + _each_other_process('kill -9 "$p" 2>/dev/null')
            + '; kill -CONT "$main" 2>/dev/null; true')


#: Lists the processes KILL_ALL would kill (this shell and its parent spared).
LEFTOVERS = _each_other_process('[ -e "/proc/$p/stat" ] && echo "$p"', "1 $main $$ $PPID")


#: The container's main process: it makes the log directories and then idles.
MAIN = ["sh", "-c", "mkdir -p /logs/agent /logs/verifier && exec sleep infinity"]


def docker_sdk() -> Any:
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError("the docker backend needs the `docker` package") from exc
    return docker


def engine_kwargs(host: str | None) -> dict[str, Any]:
    """docker-py's client arguments for the engine at `host` (None: DOCKER_HOST and its
    TLS variables). A tcp:// engine uses DOCKER_TLS_VERIFY and DOCKER_CERT_PATH as the
    docker CLI does; an ssh:// one the ssh client and its configuration."""
    kwargs: dict[str, Any] = dict(docker_sdk().utils.kwargs_from_env())
    if host is None:
        return kwargs
    kwargs["base_url"] = host
    if not host.startswith("tcp://"):
        kwargs.pop("tls", None)
    if host.startswith("ssh://"):
        kwargs["use_ssh_client"] = True
    return kwargs


class EgressGate:
    """An internal network with no route out, and the allowlisting proxy on it (alias
    `egress`) that is also on the default bridge: the agent's only way out."""

    def __init__(self, network: Any, proxy: Any, relays: Sequence[LoopbackRelay] = ()) -> None:
        self.network = network
        self.proxy = proxy
        #: Ports of this host's loopback the proxy reaches (a model gateway on 127.0.0.1).
        self.relays = list(relays)

    def close(self) -> None:
        errors = docker_sdk().errors
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
        #: Stopped for good by `collect`: it runs nothing afterwards.
        self._stopped = False

    def _errors(self) -> Any:
        return docker_sdk().errors

    def egress_requests(self) -> list[dict[str, Any]]:
        if self.gate is None:
            return []
        try:
            logs = self.gate.proxy.logs(stdout=True, stderr=False)
        except docker_sdk().errors.DockerException:
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
        if self._stopped:
            raise SandboxError("the sandbox was stopped for good when its tree was collected")
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
            # Kept as it streams, each stream up to MAX_EXEC_OUTPUT: a command that
            # prints without end does not grow the harness's memory.
            kept, totals = (bytearray(), bytearray()), [0, 0]
            try:
                for stream, chunk in exec_frames(self.api, exec_id):
                    index = stream - 1
                    totals[index] += len(chunk)
                    kept[index].extend(chunk[:max(0, MAX_EXEC_OUTPUT - len(kept[index]))])
                output["streams"] = tuple(capped(bytes(k), t) for k, t in zip(kept, totals, strict=True))
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
            for _ in exec_frames(self.api, killer):
                pass
            return bool(self.api.exec_inspect(killer).get("ExitCode") == 0)
        except (self._errors().DockerException, SandboxError):
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

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        """The container is killed (its init first, so every process of it dies: a fork
        bomb's too), then `src` is read from its filesystem at rest by the engine's
        archive API, which works on a stopped container and runs nothing in it. Whatever
        the agent did to the container (killed its main process, filled its memory, ate
        its process table, removed `src`), what it left is read the same way.

        What the engine's archive cannot give: a tmpfs's contents (`/tmp`: gone with
        the container's processes), and paths longer than the engine's host allows (the
        container's root directory on the host in front of them past PATH_MAX, so from a
        little under 4,096 bytes inside): the engine leaves them out without a word."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        errors = self._errors()
        import requests

        self._stop()
        # `src/.`: the directory's contents under a top entry `.`, following `src`
        # if the agent made it a symlink, as `tar -C src .` would (resolved inside the
        # container's root by the engine). A missing `src` (or parent) is a 404; one
        # the agent made a file or a link that leads nowhere, an error of the path.
        path = src.rstrip("/") + "/."
        try:
            response = self.api._get(self.api._url("/containers/{0}/archive", self.container.id),
                                     params={"path": path}, stream=True,
                                     headers={"Accept-Encoding": "identity"})
        except (errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not read {src} out of container {self.container.name}: "
                               f"{exc}") from None
        # Closed on every way out: an archive left half read holds the container in the
        # engine (every later call on it, its removal too, waits for the stream).
        with response:
            if response.status_code == 404 and "No such container" not in response.text:
                return empty_tar()
            if response.status_code == 500 and any(why in response.text for why in _NO_TREE):
                return empty_tar()
            try:
                self.api._raise_for_status(response)
                return repack(ChunkReader(response.iter_content(ARCHIVE_CHUNK, False)), src, exclude, limit)
            except (errors.DockerException, requests.RequestException) as exc:
                raise SandboxError(f"could not read {src} out of container {self.container.name}: "
                                   f"{exc}") from None

    def _stop(self) -> None:
        """Kill the container for good and wait until it has stopped; its filesystem stays
        until it is removed."""
        if self._stopped:
            return
        errors = self._errors()
        import requests

        self._stopped = True
        try:
            self._lift_cpu_quota()
            for attempt in range(1, STOP_ATTEMPTS + 1):
                try:
                    self.api.kill(self.container.id)
                except errors.APIError as exc:
                    # 409: not running (the agent ended its main process). 500, "did not
                    # receive an exit event": the SIGKILL went, but the container's
                    # processes (a fork bomb's thousands, on a loaded host) take longer
                    # to go than the engine waits for them: wait on, as for any kill.
                    if exc.status_code not in (409, 500):
                        raise
                try:
                    self.api.wait(self.container.id, timeout=STOP_TIMEOUT)
                    break
                except requests.RequestException:  # still running after STOP_TIMEOUT
                    if attempt == STOP_ATTEMPTS:
                        raise
            # A removal from outside the run (`docker rm -f`) marks the container as
            # being removed before it kills it: what stopped it was not the agent, and
            # its filesystem is about to go. Nothing in the container can set this.
            state = self.api.inspect_container(self.container.id)["State"]
        except errors.NotFound:
            state = {"Status": "removed"}
        except (errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not stop container {self.container.name} to collect from it: "
                               f"{exc}") from None
        if state.get("Status") in ("removing", "removed"):
            raise SandboxError(f"container {self.container.name} was removed from outside the run "
                               "(by `docker rm` or the engine) while the agent ran")

    def _lift_cpu_quota(self) -> None:
        """Let the container's processes die at the host's speed. A killed process still
        runs to exit inside its CPU quota: a fork bomb's thousands, throttled to one CPU
        on a loaded host, outlast the engine's wait for the exit (measured here: 1,565
        processes, still there after three kills; gone within 5 s of the quota's lift).
        Nothing in the container runs any more once this is asked: it is being stopped."""
        errors = self._errors()
        # -1 is the kernel's "no quota". A container already stopped (its init killed by
        # the memory limit, say) or gone needs none, and the engine refuses it.
        with contextlib.suppress(errors.APIError):
            self.api.update_container(self.container.id, cpu_quota=-1)

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

