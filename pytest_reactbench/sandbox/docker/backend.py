"""The DockerBackend: the engine's images (share.py, images.py) and the containers
it boots from them: limits, the egress gate, the ledger of the engine's room,
removal off the trial's path, and the sweep of what a dead run left."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import socket
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from pytest_reactbench.host import pid_alive
from pytest_reactbench.sandbox.archives import tar_of
from pytest_reactbench.sandbox.bake import Pruned
from pytest_reactbench.sandbox.base import PIDS_LIMIT, Capabilities, Image, Limits, Progress, Sandbox
from pytest_reactbench.sandbox.docker.image_registry import ImageRegistry
from pytest_reactbench.sandbox.docker.images import ImageBaking
from pytest_reactbench.sandbox.docker.ledger import Ledger, Room, ledger_path, trial_of
from pytest_reactbench.sandbox.docker.mirrors import MirrorDaemon
from pytest_reactbench.sandbox.docker.sandbox import (
    DEFAULT_ENGINE,
    LABEL,
    MAIN,
    DockerSandbox,
    EgressGate,
    docker_sdk,
    engine_kwargs,
)
from pytest_reactbench.sandbox.docker.share import RECIPE_LABEL
from pytest_reactbench.sandbox.egress import EGRESS_PORT, EGRESS_SCRIPT, proxy_env
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import (
    SYSTEM_IMAGE,
)
from pytest_reactbench.sandbox.relay import (
    LoopbackRelay,
    loopback_port,
    loopback_ports,
    with_loopback_names,
)


class RegistryWarning(UserWarning):
    """The image registry could not be used: images are baked here instead."""


def _created(image: Any) -> float:
    """An image's creation time as a time stamp (0 when the engine gives none)."""
    created = str(image.attrs.get("Created", ""))
    try:
        return datetime.fromisoformat(created[:26].rstrip("Z")).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


class DockerBackend(ImageBaking):
    name = "docker"
    build_modules = ("pytest_reactbench.sandbox.docker.images", "pytest_reactbench.sandbox.docker.mirrors",
                     "pytest_reactbench.sandbox.recipes")

    def __init__(self, options: SandboxOptions, host: str | None = None) -> None:
        docker = docker_sdk()
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

    def boot(self, image: Image, *, network: bool, limits: Limits,
             labels: Mapping[str, str], egress: Sequence[str] = ()) -> Sandbox:
        docker = docker_sdk()
        tags = {f"reactbench.{k}": str(v) for k, v in labels.items()}
        tags[LABEL] = self.owner
        if not self.ledger.capacity.fits(min(limits.cpus, float(self._engine_cpus)), limits.memory_mb):
            raise SandboxError(
                f"the sandbox asks for {limits.memory_mb} MiB of memory; the engine {self.engine} has "
                f"{self.ledger.capacity.memory_mb} MiB in all: lower the task's memory_mb or use a "
                "larger engine")
        egress = with_loopback_names(egress)
        gate = self._egress(egress, tags) if egress else None
        # A task may ask for more CPUs than the engine has (4 on a 2-core machine):
        # the engine refuses that, so the limit is the engine's size.
        cpus = min(limits.cpus, float(self._engine_cpus))
        options: dict[str, Any] = {
            "entrypoint": MAIN,
            "detach": True,
            "init": True,
            "network_mode": gate.network.name if gate else ("bridge" if network else "none"),
            "environment": {**self.options.package_manager_env,
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
        holder, waited = self.ledger.reserve(trial_of(labels), cpus, limits.memory_mb)
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
        box.room_wait = waited
        if gate is not None and gate.relays:
            try:
                self._tunnel(box, loopback_ports(egress))
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
        errors = docker_sdk().errors
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
        relays: dict[int, LoopbackRelay] = {}
        try:
            for port in loopback_ports(hosts):
                relays[port] = LoopbackRelay(self._bridge_address(), port)
        except OSError as exc:
            for relay in relays.values():
                relay.close()
            raise SandboxError(f"cannot serve a port of this host's loopback to the egress proxy "
                               f"on the engine's bridge ({self.engine}): {exc}") from None
        # Every name of a gateway's port goes to its relay.
        rewrites = ",".join(f"{h.lower()}={relays[gateway].address[0]}:{relays[gateway].address[1]}"
                            for h in hosts if (gateway := loopback_port(h)) is not None)
        network = self.client.networks.create(
            name, driver="bridge", internal=True, labels=dict(labels),
            options={"com.docker.network.bridge.inhibit_ipv4": "true"})
        try:
            proxy = self.client.containers.create(
                system.use, ["node", "/egress.cjs", "proxy", str(EGRESS_PORT), ",".join(hosts),
                             *([rewrites] if rewrites else [])],
                name=name, labels=dict(labels), network_mode="bridge", init=True)
            gate = EgressGate(network, proxy, list(relays.values()))
            proxy.put_archive("/", tar_of({"egress.cjs": EGRESS_SCRIPT.read_bytes()}))
            network.connect(proxy, aliases=["egress"])
            proxy.start()
        except errors.DockerException as exc:
            with contextlib.suppress(errors.DockerException):
                network.remove()
            for relay in relays.values():
                relay.close()
            raise SandboxError(f"cannot start the egress proxy: {exc}") from None
        return gate

    @cached_property
    def capabilities(self) -> Capabilities:
        # The host's loopback is reached from an engine on this host: its bridge's address
        # is this host's, where a relay serves a loopback port to the proxy. A remote
        # engine's is not. Bakes are mostly downloads and installs: as many at once as
        # the engine has CPUs.
        return Capabilities(
            formal=True,
            reaches_host_loopback=not self.engine.startswith(("tcp://", "ssh://", "http://", "https://")),
            bake_slots=max(1, min(8, self._engine_cpus)))

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
        errors = docker_sdk().errors
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
        # The git daemons of mirrors whose users all died (their supervisors stop them
        # within a second; this is for one that could not). Not sandboxes: not counted.
        MirrorDaemon.sweep()
        removed = 0
        # Other runs remove their containers meanwhile: one gone between the list and
        # its inspection is not an error.
        for container in self.client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
            owner = container.labels.get(LABEL, "")
            owner_host, _, pid = owner.rpartition(":")
            if owner_host != host or owner == self.owner or not pid.isdigit() or pid_alive(int(pid)):
                continue
            if _remove_container(container):
                removed += 1
        for network in self.client.networks.list(filters={"label": LABEL}):
            owner_host, _, pid = (network.attrs.get("Labels") or {}).get(LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and not pid_alive(int(pid)):
                with contextlib.suppress(docker_sdk().errors.DockerException):
                    network.remove()
                    removed += 1
        return removed

    def _remove_later(self, container: Any, gate: EgressGate | None) -> None:
        self._removals.append(self._teardown.submit(self._remove, container, gate))

    def _remove(self, container: Any, gate: EgressGate | None) -> None:
        errors = docker_sdk().errors
        try:
            _remove_container(container)  # an error keeps it in _live: close() tries again
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
            with contextlib.suppress(docker_sdk().errors.DockerException):
                gate.close()
        for container_id in list(self._live):
            with contextlib.suppress(docker_sdk().errors.DockerException):
                self.client.containers.get(container_id).remove(force=True, v=True)
            self._live.discard(container_id)
        # A container that could not be removed (its engine is gone) holds no room.
        for container_id in list(self._holders):
            self._release(container_id)
        self.client.close()


def _remove_container(container: Any) -> bool:
    """Force-removes a container; False when it is gone already or someone else (another
    session's sweep, a removal from outside) is removing it: both leave the same end."""
    errors = docker_sdk().errors
    try:
        container.remove(force=True, v=True)
    except errors.NotFound:
        return False
    except errors.APIError as exc:
        if exc.status_code != 409:  # 409: "removal ... is already in progress"
            raise
        return False
    return True
