"""A sandbox of the local backend: the writable roots over the host's read-only root,
each exec in namespaces of its own under bubblewrap, in the sandbox's cgroup."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pytest_reactbench.sandbox.archives import repack, tar_of
from pytest_reactbench.sandbox.base import MAX_EXEC_OUTPUT, ExecResult, Limits, Sandbox, capped
from pytest_reactbench.sandbox.egress import EGRESS_PORT, egress_lines
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.local import seccomp
from pytest_reactbench.sandbox.local.cgroups import ResourceGroup

Role = Literal["bake", "verifier", "agent"]
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
#: Every id of a sandbox maps to the host's ids from ID_BASE on (65536 of them): a
#: range no host user has, so a sandbox's root owns nothing on the host but the
#: sandbox's own layers, and its capabilities (in its own user namespace) reach nothing
#: of the host's. Only root can map a range; see `Capabilities.untrusted_refusal`.
ID_BASE = 1 << 30
ID_COUNT = 1 << 16
#: Where each command's private mount namespace gathers what the sandbox binds, on a
#: tmpfs of its own, so that no host path (a home, a checkout, the cache) need be
#: traversable by the sandbox's ids.
STAGE = "/run"
#: The capabilities a sandbox's commands keep, by role, all of them only within the
#: sandbox's user namespace: a bake's steps and our grader (which makes its test rooms
#: with unshare and setpriv) keep them; an agent's commands keep none.
KEEPS_CAPABILITIES = {"bake": True, "verifier": True, "agent": False}
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
    return _holder(group.wrap(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "tmp",
                                str(size_mb), str(tmp)]), "mount the sandbox's /tmp")


def _holder(argv: list[str], what: str) -> subprocess.Popen[bytes]:
    """A process of `argv`, once it says "ready" (within 10 s): it holds a namespace."""
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert holder.stdout is not None and holder.stderr is not None
    ready, _, _ = select.select([holder.stdout], [], [], 10)
    if not ready or holder.stdout.readline().strip() != b"ready":
        holder.kill()
        _, err = holder.communicate()
        raise SandboxError(f"cannot {what}: {err.decode(errors='replace').strip() or 'it did not start'}")
    holder.stdout.close()
    holder.stderr.close()
    return holder


def read_tar_stream(argv: Sequence[str], src: str, exclude: Sequence[str], limit: int) -> bytes:
    """The tar stream `argv` writes on its stdout (none: an empty archive), re-packed as
    it streams by (`repack`: refused past `limit` before a member's contents are read)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        assert proc.stdout is not None
        try:
            with proc.stdout:
                data = repack(proc.stdout, src, exclude, limit)
                while proc.stdout.read(65536):  # the archive's last blocks
                    pass
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            proc.wait()
        if proc.returncode != 0:
            err.seek(0)
            said = err.read(4096).decode(errors="replace").strip()
            raise SandboxError(f"could not archive {src}: {said or f'exit code {proc.returncode}'}")
    return data


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(MAX_EXEC_OUTPUT)


def _ids(user: str) -> tuple[int, int]:
    """`name`, `uid` or `uid:gid` as ids, names read from the host's /etc (the sandbox's).
    The command runs as that user in a user namespace nested in the sandbox's, mapped onto
    the sandbox's root: its identity, not a file-permission boundary within the sandbox
    (the sandbox's ids as a whole are nobody's on the host)."""
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


def maps_ids() -> bool:
    """Whether this process can map a sandbox's ids onto ID_BASE (root can)."""
    return os.geteuid() == 0


def user_namespace() -> int:
    """A new user namespace whose ids 0..ID_COUNT-1 are the host's ID_BASE..: an open
    descriptor of it, which keeps it alive; every command of the sandbox joins it."""
    holder = _holder(["unshare", "--user", "sh", "-c", "echo ready && exec sleep infinity"],
                     "make the sandbox's user namespace")
    try:
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{holder.pid}/{name}").write_text(f"0 {ID_BASE} {ID_COUNT}\n")
        return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxError(f"cannot map the sandbox's ids: {exc}") from None
    finally:
        holder.kill()
        holder.wait()


def give_to_sandbox(*paths: Path) -> None:
    """Make `paths` the sandbox root's own (the host's ID_BASE), where ids are mapped."""
    if maps_ids():
        for path in paths:
            os.chown(path, ID_BASE, ID_BASE)


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
        role: Role = "bake",
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
        self.role = role
        self._closed = False
        self._collected = False
        for sub in ("work", "merged", "io"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.upper.mkdir(parents=True, exist_ok=True)
        if not self.layers:
            # overlay needs one lower layer; the first one of a chain is empty.
            empty = root / "empty"
            empty.mkdir(exist_ok=True)
            self.layers = [empty]
        give_to_sandbox(self.upper)
        self._seed_roots()
        (root / "seccomp.bpf").write_bytes(seccomp.program(role))
        self.userns = user_namespace() if maps_ids() else None

    def _seed_roots(self) -> None:
        if any((layer / "app").exists() for layer in self.layers):
            return
        for name in ROOTS:
            (self.upper / name).mkdir(exist_ok=True)
            give_to_sandbox(self.upper / name)
        os.chmod(self.upper / "tmp", 0o1777)

    def _overlay(self) -> str:
        return ("lowerdir=" + ":".join(str(p) for p in self.layers)
                + f",upperdir={self.upper},workdir={self.root / 'work'}"
                + ",redirect_dir=off,index=off,metacopy=off")

    def _sources(self) -> dict[str, Path]:
        """What each writable root is on the host, once the overlay is mounted."""
        merged = self.root / "merged"
        return {name: self.root / "tmp" if name == "tmp" and self.tmp_holder is not None else merged / name
                for name in ROOTS}

    def _outer(self, script: str, *args: str, in_group: bool = True) -> list[str]:
        """`script` as root of a private mount namespace of the sandbox's (its /tmp's,
        where it has one), within the sandbox's group unless not `in_group`."""
        ns = ["unshare", "--mount", "--propagation", "private"]
        if not maps_ids():
            ns[1:1] = ["--user", "--map-root-user"]
        if self.tmp_holder is not None:
            # The sandbox's /tmp is a tmpfs in the holder's mount namespace: every
            # command starts there, so /tmp lasts as long as the sandbox.
            ns = ["nsenter", f"--target={self.tmp_holder.pid}", "--mount", "--", *ns]
        full = [*ns, "sh", "-c", script, "sandbox", *args]
        return self.group.wrap(full) if self.group and in_group else full

    def _argv(self, argv: Sequence[str], cwd: str, env: Mapping[str, str], seccomp_fd: int,
              user: str | None = None) -> list[str]:
        # As root of the command's own mount namespace: the overlay, then everything the
        # sandbox binds gathered on a tmpfs at STAGE; then into the sandbox's user
        # namespace, where bubblewrap builds the sandbox from STAGE alone.
        q = shlex.quote
        stage = [f"mount -t overlay overlay -o {q(self._overlay())} {q(str(self.root / 'merged'))}",
                 f"mount -t tmpfs -o mode=755,size=1m reactbench {STAGE}", f"mkdir {STAGE}/rw {STAGE}/ro"]
        bwrap = [
            "bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox",
            "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/run",
            "--tmpfs", "/var", "--seccomp", str(seccomp_fd),
        ]
        if not KEEPS_CAPABILITIES[self.role]:
            bwrap += ["--cap-drop", "ALL"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if Path("/", link).is_symlink():
                bwrap += ["--symlink", os.readlink(Path("/", link)), f"/{link}"]
        if not self.network:
            bwrap.append("--unshare-net")
        for name, source in self._sources().items():
            stage.append(f"mkdir {STAGE}/rw/{name} && mount --bind {q(str(source))} {STAGE}/rw/{name}")
            bwrap += ["--bind", f"{STAGE}/rw/{name}", f"/{name}"]
        for number, (target, source) in enumerate(self.ro_binds.items()):
            make = "mkdir" if source.is_dir() else "touch"
            stage.append(f"{make} {STAGE}/ro/{number} && mount --bind {q(str(source))} {STAGE}/ro/{number}")
            bwrap += ["--ro-bind", f"{STAGE}/ro/{number}", target]
        if user:
            uid, gid = _ids(user)
            bwrap += ["--unshare-user", "--uid", str(uid), "--gid", str(gid)]
        bwrap += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            bwrap += ["--setenv", key, value]
        enter = [] if self.userns is None else ["nsenter", f"--user=/proc/self/fd/{self.userns}", "--"]
        script = " && ".join(stage) + ' && exec "$@"'
        return self._outer(script, *enter, *bwrap, "--", *argv)

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
        if self._closed or self._collected:
            raise SandboxError(f"sandbox {self.root.name} is {'closed' if self._closed else 'collected'}")
        if self.tmp_holder is not None and self.tmp_holder.poll() is not None:
            raise SandboxError(f"sandbox {self.root.name} lost its /tmp (its holder process was killed)")
        full_env = {**self.env, **(env or {})}
        io_dir = self.root / "io"
        token = uuid.uuid4().hex[:8]
        out_path, err_path = io_dir / f"{token}.out", io_dir / f"{token}.err"
        started = time.monotonic()
        timed_out = False
        with out_path.open("wb") as out, err_path.open("wb") as err, \
                (self.root / "seccomp.bpf").open("rb") as rules:
            # Its own output: a command may open it again by /dev/fd (tee /dev/fd/3).
            give_to_sandbox(out_path, err_path)
            kept = (rules.fileno(),) if self.userns is None else (rules.fileno(), self.userns)
            proc = subprocess.Popen(
                self._argv(argv, cwd or self.workdir, full_env, rules.fileno(), user),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=kept,
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
        stdout, stderr = (capped(_head(path), path.stat().st_size) for path in (out_path, err_path))
        out_path.unlink(missing_ok=True)
        err_path.unlink(missing_ok=True)
        # Killed by a signal: the shell's convention (128 + signal), as docker reports it.
        code = 124 if timed_out else proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return ExecResult(code, stdout, stderr, duration, timed_out)

    def put_archive(self, dest: str, data: bytes) -> None:
        result = self._run(
            # Owned by the sandbox's root whoever owned them on the host (an agent's
            # commands keep no capability to give files away).
            ["sh", "-c", 'mkdir -p "$1" && tar -x --no-same-owner -C "$1" -f -', "put", dest], cwd="/",
            stdin=data
        )
        if not result.ok:
            raise SandboxError(f"could not unpack into {dest}: {result.failure}")

    def collect(self, src: str, exclude: Sequence[str], limit: int) -> bytes:
        # Every command took its whole tree with it (see _run): nothing of the agent's
        # runs now. The tree is read by the host's tar, as root of a mount namespace of
        # its own with the sandbox's overlay, never by anything in the sandbox.
        if self._closed:
            raise SandboxError(f"sandbox {self.root.name} is closed")
        self._collected = True
        top, _, rest = src.strip("/").partition("/")
        if ".." in rest.split("/"):
            raise SandboxError(f"cannot collect {src}: a path with '..'")
        if top not in ROOTS:
            return tar_of({})  # the host's read-only system: nothing of the sandbox's is there
        q = shlex.quote
        where = str(self._sources()[top] / rest) if rest else str(self._sources()[top])
        script = (f"mount -t overlay overlay -o {q(self._overlay())} {q(str(self.root / 'merged'))} && "
                  f"if [ -d {q(where)} ] && [ ! -L {q(where)} ]; then "
                  f'exec tar -c -f - -C {q(where)} "$@" .; fi')
        # tar leaves out what is excluded without reading it; repack keeps to the limit.
        # Outside the sandbox's group: the agent may have left it at its memory limit
        # (a full /tmp is memory), where the collection would be killed with it.
        argv = self._outer(script, *(f"--exclude={pattern}" for pattern in exclude), in_group=False)
        return read_tar_stream(argv, src, exclude, limit)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.userns is not None:
            os.close(self.userns)
        for process in (self.egress, self.tmp_holder):
            if process is not None:
                process.kill()
                process.wait()
        try:
            if self.group is not None:
                self.group.remove()
        finally:
            _rmtree(self.root)
