"""A sandbox of the local backend: the writable roots over the host's read-only root,
each exec in namespaces of its own under bubblewrap, in the sandbox's cgroup."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import select
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox.base import (
    EGRESS_PORT,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    egress_lines,
)
from pytest_reactbench.sandbox.cgroups import ResourceGroup

ROOTS = ("app", "opt", "tests", "logs", "tmp", "root", "solution")
DEFAULT_ENV = {
    "PATH": "/opt/npm-global/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    # `npm install -g` cannot write the host's read-only /usr: send it to /opt.
    "npm_config_prefix": "/opt/npm-global",
    "npm_config_update_notifier": "false",
    # As the docker backend's system layer (images/system) sets them for corepack.
    "COREPACK_ENABLE_DOWNLOAD_PROMPT": "0",
    "COREPACK_NPM_REGISTRY": "https://registry.npmjs.org",
}
CONTEXT_MOUNT = "/run/reactbench/context"
EGRESS_MOUNT = "/run/reactbench/egress.cjs"
EGRESS_SOCKET = "/run/reactbench/egress.sock"
# Each command runs in a fresh network namespace: a relay from its loopback to the
# host-side proxy's socket starts first, and the command once it listens.
EGRESS_WRAPPER = (
    f'node {EGRESS_MOUNT} forward {EGRESS_PORT} {EGRESS_SOCKET} /run/egress-ready & '
    'i=0; while [ ! -e /run/egress-ready ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; '
    'exec "$@"'
)


def egress_wrapper(loopback_ports: Sequence[int]) -> str:
    """EGRESS_WRAPPER, with a tunnel through the proxy for each port of the host's
    loopback the agent may reach (a client skips the proxy for 127.0.0.1)."""
    tunnels = "".join(
        f'node {EGRESS_MOUNT} tunnel {port} 127.0.0.1 {EGRESS_PORT} 127.0.0.1:{port} '
        f'/run/tunnel-{port}-ready & '
        f'i=0; while [ ! -e /run/tunnel-{port}-ready ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; '
        for port in loopback_ports)
    return EGRESS_WRAPPER.replace('exec "$@"', tunnels + 'exec "$@"')
CA_MOUNT = "/run/reactbench/ca.crt"
REQUIRED_TOOLS = ("bwrap", "unshare", "mount", "tar", "git", "node", "pnpm")
def _rmtree(path: Path) -> None:
    def fix(func: object, p: str, _exc: object) -> None:
        # Gone already: another process's sweep removes the same dead sandbox at once.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(p, 0o700)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=fix)


def _tmp_holder(tmp: Path, size_mb: int, group: ResourceGroup) -> subprocess.Popen[bytes]:
    """A process in the sandbox's group that holds a mount namespace with a tmpfs of
    `size_mb` at `tmp`; the tmpfs goes when the namespace's last process does."""
    tmp.mkdir()
    script = 'mount -t tmpfs -o "size=$1m,mode=1777" tmpfs "$2" && echo ready && exec sleep infinity'
    holder = subprocess.Popen(
        group.wrap(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "tmp",
                    str(size_mb), str(tmp)]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert holder.stdout is not None and holder.stderr is not None
    ready, _, _ = select.select([holder.stdout], [], [], 10)
    if not ready or holder.stdout.readline().strip() != b"ready":
        holder.kill()
        _, err = holder.communicate()
        raise SandboxError(f"cannot mount the sandbox's /tmp: {err.decode(errors='replace').strip()}")
    holder.stdout.close()
    holder.stderr.close()
    return holder


def _ids(user: str) -> tuple[int, int]:
    """`name`, `uid` or `uid:gid` as ids, names read from the host's /etc (the sandbox's).
    The command runs as that user in a user namespace of its own: its identity, not a
    file-permission boundary (the local backend is a development backend)."""
    name, _, group = user.partition(":")
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        uid, gid = entry.pw_uid, entry.pw_gid
    except KeyError:
        if not name.isdigit():
            raise SandboxError(f"no user {name!r} in the sandbox's /etc/passwd") from None
        uid = gid = int(name)
    if group:
        try:
            gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
        except KeyError:
            raise SandboxError(f"no group {group!r} in the sandbox's /etc/group") from None
    return uid, gid


class LocalSandbox(Sandbox):
    backend = "local"

    def __init__(
        self,
        root: Path,
        layers: Sequence[Path],
        *,
        network: bool,
        env: Mapping[str, str],
        workdir: str,
        upper: Path | None = None,
        ro_binds: Mapping[str, Path] | None = None,
        egress: subprocess.Popen[bytes] | None = None,
        limits: Limits | None = None,
        group: ResourceGroup | None = None,
        tmp_holder: subprocess.Popen[bytes] | None = None,
        loopback_ports: Sequence[int] = (),
    ) -> None:
        self.root = root
        self._wrapper = egress_wrapper(loopback_ports)
        self.limits = limits
        self.group = group
        self.tmp_holder = tmp_holder
        self.egress = egress
        self.layers = list(layers)
        self.network = network
        self.env = dict(env)
        self.workdir = workdir
        self.upper = upper or root / "upper"
        self.ro_binds = dict(ro_binds or {})
        self._closed = False
        for sub in ("work", "merged", "io"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.upper.mkdir(parents=True, exist_ok=True)
        if not self.layers:
            # overlay needs one lower layer; the first one of a chain is empty.
            empty = root / "empty"
            empty.mkdir(exist_ok=True)
            self.layers = [empty]
        self._seed_roots()

    def _seed_roots(self) -> None:
        if any((layer / "app").exists() for layer in self.layers):
            return
        for name in ROOTS:
            (self.upper / name).mkdir(exist_ok=True)
        os.chmod(self.upper / "tmp", 0o1777)

    def _argv(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
              user: str | None = None) -> list[str]:
        merged = self.root / "merged"
        options = (
            "lowerdir=" + ":".join(str(p) for p in self.layers)
            + f",upperdir={self.upper},workdir={self.root / 'work'}"
            + ",redirect_dir=off,index=off,metacopy=off"
        )
        ns = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            ns[1:1] = ["--user", "--map-root-user"]
        if self.tmp_holder is not None:
            # The sandbox's /tmp is a tmpfs in the holder's mount namespace: every
            # command starts there, so /tmp lasts as long as the sandbox.
            ns = ["nsenter", f"--target={self.tmp_holder.pid}", "--mount", "--", *ns]
        bwrap = [
            "bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--hostname", "sandbox",
            "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/run",
            "--tmpfs", "/var",
        ]
        for link in ("bin", "lib", "lib64", "sbin"):
            if Path("/", link).is_symlink():
                bwrap += ["--symlink", os.readlink(Path("/", link)), f"/{link}"]
        if not self.network:
            bwrap.append("--unshare-net")
        for name in ROOTS:
            if name == "tmp" and self.tmp_holder is not None:
                # A bake's /tmp is a layer (steps share it, as in a Docker build); a
                # booted sandbox's is bounded scratch space, as the docker backend's.
                bwrap += ["--bind", str(self.root / "tmp"), "/tmp"]
            else:
                bwrap += ["--bind", str(merged / name), f"/{name}"]
        for target, source in self.ro_binds.items():
            bwrap += ["--ro-bind", str(source), target]
        if user:
            uid, gid = _ids(user)
            bwrap += ["--unshare-user", "--uid", str(uid), "--gid", str(gid)]
        bwrap += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            bwrap += ["--setenv", key, value]
        script = 'mount -t overlay overlay -o "$1" "$2" && shift 2 && exec "$@"'
        full = [*ns, "sh", "-c", script, "sandbox", options, str(merged), *bwrap, "--", *argv]
        return self.group.wrap(full) if self.group else full

    def egress_requests(self) -> list[dict[str, Any]]:
        try:
            return egress_lines((self.root / "egress.log").read_text(errors="replace"))
        except OSError:
            return []

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        user: str | None = None,
    ) -> ExecResult:
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if self.egress is not None:
            argv = ["sh", "-c", self._wrapper, "egress", *argv]
        return self._run(argv, cwd=cwd, env=env, timeout=timeout, user=user)

    def _run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        user: str | None = None,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError(f"sandbox {self.root.name} is closed")
        if self.tmp_holder is not None and self.tmp_holder.poll() is not None:
            raise SandboxError(f"sandbox {self.root.name} lost its /tmp (its holder process was killed)")
        full_env = {**self.env, **(env or {})}
        io_dir = self.root / "io"
        token = uuid.uuid4().hex[:8]
        out_path, err_path = io_dir / f"{token}.out", io_dir / f"{token}.err"
        started = time.monotonic()
        timed_out = False
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                self._argv(argv, cwd or self.workdir, full_env, user),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                if stdin is not None:
                    assert proc.stdin is not None
                    try:
                        proc.stdin.write(stdin)
                        proc.stdin.close()
                    except BrokenPipeError:
                        pass
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # The process group holds bwrap; with --unshare-pid and
                # --die-with-parent its death takes the whole tree in the sandbox.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        duration = time.monotonic() - started
        stdout, stderr = out_path.read_bytes(), err_path.read_bytes()
        out_path.unlink(missing_ok=True)
        err_path.unlink(missing_ok=True)
        # Killed by a signal: the shell's convention (128 + signal), as docker reports it.
        code = 124 if timed_out else proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return ExecResult(code, stdout, stderr, duration, timed_out)

    def put_archive(self, dest: str, data: bytes) -> None:
        result = self._run(
            ["sh", "-c", 'mkdir -p "$1" && tar -x -C "$1" -f -', "put", dest], cwd="/", stdin=data
        )
        if not result.ok:
            raise SandboxError(f"could not unpack into {dest}: {result.failure}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for process in (self.egress, self.tmp_holder):
            if process is not None:
                process.kill()
                process.wait()
        try:
            if self.group is not None:
                self.group.remove()
        finally:
            _rmtree(self.root)
