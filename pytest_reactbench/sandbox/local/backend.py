"""The local backend: its tools checked, its sandboxes booted, its images pruned, and
what dead runs left swept."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

from pytest_reactbench.host import pid_alive
from pytest_reactbench.sandbox.bake import Pruned
from pytest_reactbench.sandbox.base import Capabilities, Image, Limits, Progress, Sandbox
from pytest_reactbench.sandbox.egress import EGRESS_PORT, EGRESS_SCRIPT, proxy_env
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.local import seccomp
from pytest_reactbench.sandbox.local.cgroups import (
    ResourceGroup,
    UnenforcedLimits,
    resource_group_of,
    stale_groups,
)
from pytest_reactbench.sandbox.local.images import LocalImages
from pytest_reactbench.sandbox.local.sandbox import (
    DEFAULT_ENV,
    EGRESS_MOUNT,
    EGRESS_SOCKET,
    REQUIRED_TOOLS,
    LocalSandbox,
    _rmtree,
    _tmp_holder,
    give_to_sandbox,
    maps_ids,
)
from pytest_reactbench.sandbox.locks import file_lock
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.relay import loopback_port, loopback_ports, with_loopback_names


class LocalBackend(LocalImages):
    name = "local"
    build_modules = ("pytest_reactbench.sandbox.local.images", "pytest_reactbench.sandbox.local.seal",
                     "pytest_reactbench.sandbox.mirrors", "pytest_reactbench.sandbox.recipes")
    runs_public_images = False

    def __init__(self, options: SandboxOptions) -> None:
        missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
        if missing:
            raise SandboxError(
                "the local backend needs these tools on the host, which are missing: "
                + ", ".join(missing)
                + " (on Debian: apt-get install bubblewrap git nodejs; npm install -g pnpm)"
            )
        super().__init__(options)
        self.images = self.cache_dir / "images"
        self.sandboxes = self.cache_dir / "sandboxes"
        self.owner = options.owner
        self.images.mkdir(parents=True, exist_ok=True)
        self.sandboxes.mkdir(parents=True, exist_ok=True)
        self._warned_unlimited = False
        self._noted_registry = False

    @cached_property
    def capabilities(self) -> Capabilities:
        # A development backend on the host: its proxy is on the host's loopback, its
        # /etc is the host's (no users added), and its bakes share the host's CPUs.
        return Capabilities(formal=False, reaches_host_loopback=True, adds_users=False,
                            untrusted_refusal=self._untrusted_refusal(),
                            bake_slots=max(1, min(4, os.cpu_count() or 1)))

    def _untrusted_refusal(self) -> str | None:
        if not maps_ids():
            return ("the local backend holds an agent only when it runs as root, which maps the "
                    "sandbox's ids onto ids no host user has; as another user its sandbox's root "
                    "would be you")
        try:
            seccomp.program("agent")
        except seccomp.UnsupportedArch as exc:
            return str(exc)
        return None

    def boot(
        self,
        image: Image,
        *,
        network: bool,
        limits: Limits,
        labels: Mapping[str, str],
        egress: Sequence[str] = (),
    ) -> Sandbox:
        meta = self._image_meta(image.ref)
        if meta is None:
            raise SandboxError(f"local image {image.ref} is not baked")
        root = Path(tempfile.mkdtemp(prefix="sbx-", dir=self.sandboxes))
        (root / "owner.json").write_text(
            json.dumps({"pid": os.getpid(), "owner": self.owner, "labels": dict(labels)})
        )
        env = {**DEFAULT_ENV, **meta["env"], **self.options.package_manager_env}  # type: ignore[dict-item]
        binds: dict[str, Path] = {}
        proxy = None
        egress = with_loopback_names(egress)
        if egress:
            proxy = self._start_egress(root / "egress.sock", egress)
            give_to_sandbox(root / "egress.sock")
            binds = {EGRESS_MOUNT: EGRESS_SCRIPT, EGRESS_SOCKET: root / "egress.sock"}
            env.update(proxy_env(f"http://127.0.0.1:{EGRESS_PORT}"))
        group = ResourceGroup.create(root.name, limits)
        if group is None and not self._warned_unlimited:
            self._warned_unlimited = True
            warnings.warn(UnenforcedLimits(
                "the local backend cannot create cgroup v1 memory/pids/cpu groups here: "
                "sandboxes run without memory, process and CPU limits and /tmp is not bounded "
                "(use the docker backend)"
            ), stacklevel=2)
        holder = None
        try:
            # Without a group nothing would stop a holder outliving a killed run.
            if group is not None:
                holder = _tmp_holder(root / "tmp", limits.storage_mb, group)
            return LocalSandbox(
                root,
                list(reversed(self._layers(image.ref))),
                network=network,
                env=env,
                workdir=str(meta["workdir"]),
                ro_binds=binds,
                egress=proxy,
                limits=limits,
                group=group,
                tmp_holder=holder,
                loopback_ports=loopback_ports(egress),
                role="verifier" if labels.get("role") == "verifier" else "agent",
            )
        except BaseException:
            for process in (proxy, holder):
                if process is not None:
                    process.kill()
                    process.wait()
            if group is not None:
                group.remove()
            _rmtree(root)
            raise

    def _start_egress(self, socket_path: Path, hosts: Sequence[str]) -> subprocess.Popen[bytes]:
        log = (socket_path.parent / "egress.log").open("wb")
        # A gateway's port under any loopback name is the one on 127.0.0.1, as on docker.
        rewrites = ",".join(f"{host.lower()}=127.0.0.1:{port}" for host in hosts
                            if (port := loopback_port(host)) is not None
                            and not host.startswith("127.0.0.1:"))
        proxy = subprocess.Popen(["node", str(EGRESS_SCRIPT), "proxy", str(socket_path), ",".join(hosts),
                                  *([rewrites] if rewrites else [])],
                                 stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            if proxy.poll() is not None or time.monotonic() > deadline:
                proxy.kill()
                raise SandboxError(f"the egress proxy did not start: {socket_path.parent / 'egress.log'}")
            time.sleep(0.02)
        return proxy

    def prune(self, unused_for: float, progress: Progress, now: float | None = None) -> Pruned:
        """Remove every image tree no session asked for in `unused_for` seconds, unless
        it is a layer of an image that stays, or a bake holds its lock."""
        cutoff = (time.time() if now is None else now) - unused_for
        metas = {entry.name: meta for entry in self.images.iterdir()
                 if entry.is_dir() and (meta := self._image_meta(entry.name)) is not None}
        fresh = {key for key, meta in metas.items()
                 if self.last_used(key, float(meta.get("baked_at", 0))) >= cutoff}  # type: ignore[arg-type]
        needed = {str(k) for key in fresh for k in metas[key]["chain"]}  # type: ignore[attr-defined]
        removed = freed = kept = 0
        for key in sorted(set(metas) - needed):
            lock = self.lock_dir / f"{self.lock_scope}{key}.lock"
            with contextlib.suppress(BlockingIOError), file_lock(lock, blocking=False):
                size = _tree_bytes(self.images / key)
                _rmtree(self.images / key)
                self.forget_use(key)
                removed, freed = removed + 1, freed + size
                progress(f"removed {key} ({metas[key].get('recipe', '?')})")
                continue
            kept += 1  # a bake of it is running
        kept += len(needed - fresh)
        return Pruned(removed, freed, kept)

    def sweep(self) -> int:
        removed = 0
        for entry in list(self.sandboxes.iterdir()):
            owner = entry / "owner.json"
            try:
                pid = int(json.loads(owner.read_text())["pid"])
            except (OSError, ValueError, KeyError):
                # A sandbox whose owner file was never written is older than a minute
                # only when its creator died mid-boot.
                try:
                    young = time.time() - entry.stat().st_mtime < 60
                except FileNotFoundError:
                    continue  # another session's sweep removed it
                if young:
                    continue
                pid = -1
            if pid == os.getpid() or (pid > 0 and pid_alive(pid)):
                continue
            if group := resource_group_of(entry.name):
                group.remove()
            _rmtree(entry)
            removed += 1
        for entry in list(self.images.glob("*.tmp-*")):
            pid = int(entry.name.split(".tmp-")[1].split("-")[0])
            if not pid_alive(pid):
                _rmtree(entry)
                removed += 1
        # Groups of dead runs whose directories are already gone: part of the above.
        for group in stale_groups():
            group.remove()
        return removed


def _tree_bytes(root: Path) -> int:
    """The bytes of the files under `root` (links not followed)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total
