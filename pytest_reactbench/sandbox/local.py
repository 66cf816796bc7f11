"""The `local` backend: bubblewrap over the host's read-only root, no daemon.

An image is a stack of overlay layers holding the writable roots (`/app`, `/opt`,
`/tests`, `/logs`, `/tmp`, `/root`, `/solution`); the host's `/usr` and `/etc` stand
for the system layer. A booted sandbox's `/tmp` is a tmpfs of the task's storage size
and its processes live in a cgroup with the task's limits (see cgroups.py). Each exec
mounts the sandbox's overlay in a private mount namespace that dies with it, so a
killed run leaves no mount behind, only a directory that the next run's sweep
removes. Baking replays the Dockerfile's ARG/ENV/WORKDIR/COPY/ADD/RUN/LABEL steps
into a new layer, published by an atomic rename under a file lock so that xdist
workers and concurrent sessions share it.

Verdicts from this backend are not formal: it is a development backend.
"""

from __future__ import annotations

import contextlib
import glob
import grp
import json
import os
import pwd
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.bake import BakingBackend, Parent, Pruned
from pytest_reactbench.sandbox.base import (
    EGRESS_PORT,
    EGRESS_SCRIPT,
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
)
from pytest_reactbench.sandbox.cgroups import ResourceGroup, UnenforcedLimits, group_of, stale_groups
from pytest_reactbench.sandbox.host import ca_env, file_lock, missing_tools, pid_alive, tls_hint
from pytest_reactbench.sandbox.mirrors import git_env, local_binds, relevant
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import SYSTEM_IMAGE, declare_arg
from pytest_reactbench.sandbox.relay import loopback_port

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
USE_DOCKER = "use --reactbench-sandbox=docker"
# Steps that write the host's read-only system directories, which a replay over the
# host cannot do: refused before the bake starts, with the line that asks for them.
HOST_WRITES = (
    (re.compile(r"\bapt(-get)?\s+(-\S+\s+)*(install|update|upgrade|remove)\b"),
     "installs system packages into the host's read-only /usr"),
    (re.compile(r"\b(apk|dnf|yum)\s+(add|install)\b"), "installs system packages"),
    (re.compile(r"\bcorepack\s+enable\b(?![^&;|]*--install-directory)"),
     "puts package-manager shims next to node in the host's read-only /usr"),
)


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


def _writable(path: str, where: str, keyword: str) -> None:
    """Refuses a WORKDIR or COPY destination outside the sandbox's writable roots."""
    top = path.strip("/").split("/", 1)[0]
    if top and top not in ROOTS:
        raise BakeError(f"{where}: {keyword} {path} is outside {', '.join('/' + r for r in ROOTS)}, "
                        f"which the local backend cannot write; {USE_DOCKER}")


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


class LocalBackend(BakingBackend):
    name = "local"
    formal = False
    reaches_host_loopback = True
    adds_users = False
    recipe_version = "2"
    runs_public_images = False

    def __init__(self, options: SandboxOptions) -> None:
        missing = missing_tools(REQUIRED_TOOLS)
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

    def fetch(self, key: str, recipe: ImageRecipe, progress: Progress) -> Image | None:
        # Its images are directory trees over the host's own root, meaningful on this
        # host only: a registry of them would share nothing another machine can run.
        if self.options.image_registry and not self._noted_registry:
            self._noted_registry = True
            progress(f"note: the local backend does not use the image registry "
                     f"{self.options.image_registry}; its images are baked on this host")
        return None

    # -- images -----------------------------------------------------------------

    def _image_meta(self, key: str) -> dict[str, object] | None:
        meta = self.images / key / "image.json"
        if not meta.is_file():
            return None
        loaded: dict[str, object] = json.loads(meta.read_text())
        return loaded

    def _layers(self, key: str) -> list[Path]:
        meta = self._image_meta(key)
        if meta is None:
            raise SandboxError(f"local image {key} is not baked")
        return [self.images / str(k) / "layer" for k in meta["chain"]]  # type: ignore[attr-defined]

    def find(self, key: str, recipe: ImageRecipe) -> Image | None:
        meta = self._image_meta(key)
        if meta is None:
            return None
        return Image(key, key, self.name, cached=True, labels=meta.get("labels", {}))  # type: ignore[arg-type]

    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        # The host's /usr and /etc stand for the system layer.
        return Parent(SYSTEM_IMAGE, "", "host", (BaseImage(SYSTEM_IMAGE, "host", "system"),))

    def check(self, recipe: ImageRecipe, instructions: Sequence[df.Instruction]) -> None:
        froms = [ins for ins in instructions if ins.keyword == "FROM"]
        if len(froms) > 1:
            raise BakeError(f"{recipe.dockerfile}:{froms[1].line}: multi-stage builds are not "
                            f"supported by the local backend; {USE_DOCKER}")
        for ins in instructions:
            if ins.keyword == "SHELL" or (ins.keyword == "USER"
                                          and ins.args.split(":")[0].strip() not in ("root", "0")):
                # Every step and command runs as root under /bin/sh here: a Dockerfile
                # that says otherwise would be built and graded as something it is not.
                raise BakeError(f"{recipe.dockerfile}:{ins.line}: {ins.keyword} {ins.args.strip()} is "
                                f"not supported by the local backend; {USE_DOCKER}")
            if ins.keyword != "RUN":
                continue
            text = " ".join(ins.exec_form) if ins.exec_form else ins.args
            for pattern, why in HOST_WRITES:
                if found := pattern.search(text):
                    raise BakeError(f"{recipe.dockerfile}:{ins.line}: `{found.group(0)}` {why}, which "
                                    f"the local backend cannot do; {USE_DOCKER}")

    def build(self, recipe: ImageRecipe, key: str, parents: Sequence[Parent], progress: Progress,
              deadline: float) -> Image:
        instructions = df.parse(recipe.dockerfile)
        first_from = next(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
        # Global ARGs serve FROM, and a stage's value-less ARG of the same name.
        global_args: dict[str, str] = {}
        for ins in instructions[:first_from]:
            if ins.keyword == "ARG":
                declare_arg(ins, recipe.build_args, global_args)
        parent = parents[0].image
        parent_meta = self._image_meta(parent.ref) if parent else None
        self._replay(recipe, instructions[first_from + 1 :], {}, global_args, parent_meta, key,
                     progress, deadline)
        image = self.find(key, recipe)
        assert image is not None
        return image

    def _replay(
        self,
        recipe: ImageRecipe,
        steps: Sequence[df.Instruction],
        variables: dict[str, str],
        global_args: Mapping[str, str],
        parent_meta: Mapping[str, object] | None,
        key: str,
        progress: Progress,
        deadline: float,
    ) -> None:
        env: dict[str, str] = dict(parent_meta["env"]) if parent_meta else {}  # type: ignore[call-overload]
        workdir = str(parent_meta["workdir"]) if parent_meta else "/"
        labels: dict[str, str] = dict(parent_meta["labels"]) if parent_meta else {}  # type: ignore[call-overload]
        chain = list(parent_meta["chain"]) if parent_meta else []  # type: ignore[call-overload]
        building = self.images / f"{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        layers = [self.images / str(k) / "layer" for k in reversed(chain)]
        mirrors = relevant(self.options.git_mirrors, recipe.dockerfile, recipe.context)
        mirror_binds, rewrites = local_binds(mirrors)
        ro_binds = {CONTEXT_MOUNT: recipe.context.resolve(), **mirror_binds}
        # The bake's own variables (CA, git mirrors): in every step, never in the image.
        bake_only = {**(ca_env(CA_MOUNT) if self.ca_bundle else {}),
                     **(git_env(rewrites) if mirrors else {}),
                     **(self.downloads.env() if self.downloads else {}),
                     **self.options.registry_env}
        bake_env = {**DEFAULT_ENV, **env, **bake_only}
        if self.ca_bundle:
            ro_binds[CA_MOUNT] = self.ca_bundle.resolve()
        box = LocalSandbox(
            building / "box", layers, network=True, env=bake_env, workdir=workdir,
            upper=building / "layer", ro_binds=ro_binds,
        )
        progress(f"{recipe.name}: baking {recipe.dockerfile} ({len(steps)} steps)")
        started = time.monotonic()
        try:
            for number, ins in enumerate(steps, start=1):
                where = f"{recipe.dockerfile}:{ins.line}"
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BakeError(f"{where}: build_timeout_sec ran out before {ins.keyword}")
                if ins.keyword in ("RUN", "COPY", "ADD"):
                    progress(f"{recipe.name}: step {number}/{len(steps)} {ins.keyword} "
                             f"{ins.args[:70]} ({time.monotonic() - started:.0f} s)")
                if ins.keyword == "ARG":
                    name = ins.args.partition("=")[0].strip()
                    if "=" not in ins.args and name in global_args:
                        variables[name] = global_args[name]
                    declare_arg(ins, recipe.build_args, variables)
                elif ins.keyword == "ENV":
                    # $VAR sees the inherited environment too (the host's PATH for the
                    # system layer), so `ENV PATH=/x:$PATH` keeps it.
                    for k, v in df.expand_pairs(ins.args, {**DEFAULT_ENV, **variables, **env},
                                                recipe.dockerfile, ins.line):
                        env[k] = v
                    box.env = {**DEFAULT_ENV, **env, **bake_only}
                elif ins.keyword == "LABEL":
                    for k, v in df.expand_pairs(ins.args, {**DEFAULT_ENV, **variables, **env},
                                                recipe.dockerfile, ins.line):
                        labels[k] = v
                elif ins.keyword == "WORKDIR":
                    target = df.substitute(ins.args, {**variables, **env})
                    workdir = os.path.normpath(os.path.join(workdir, target))
                    _writable(workdir, where, "WORKDIR")
                    self._step(box, ["mkdir", "-p", workdir], where, remaining, progress, "/")
                    box.workdir = workdir
                elif ins.keyword in ("COPY", "ADD"):
                    script = self._copy_script(ins, recipe, {**variables, **env}, workdir)
                    self._step(box, ["sh", "-c", script], where, remaining, progress, "/")
                elif ins.keyword == "RUN":
                    argv = (list(ins.exec_form) if ins.exec_form
                            else ["/bin/sh", "-c", ins.args])
                    self._step(box, argv, where, remaining, progress, workdir,
                               {k: v for k, v in variables.items() if k not in env})
                # USER root is the default; another USER and SHELL are refused by check().
            meta = {"chain": [*chain, key], "env": env, "workdir": workdir, "labels": labels,
                    "recipe": str(recipe.dockerfile), "baked_at": time.time()}
            (building / "image.json").write_text(json.dumps(meta, indent=2))
            _rmtree(building / "box")
            os.rename(building, self.images / key)
        except BaseException:
            _rmtree(building)
            raise

    def _step(
        self,
        box: LocalSandbox,
        argv: list[str],
        where: str,
        timeout: float,
        progress: Progress,
        cwd: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        result = box.exec(argv, cwd=cwd, timeout=timeout, env=env)
        if result.timed_out:
            raise BakeError(f"{where}: build_timeout_sec ran out during this step")
        if result.exit_code != 0:
            output = result.text + result.error_text
            if "Read-only file system" in output:
                raise BakeError(f"{where}: this step writes outside {', '.join('/' + r for r in ROOTS)} "
                                f"(Read-only file system), which the local backend cannot do; {USE_DOCKER}")
            tail = output.strip().splitlines()[-15:]
            raise BakeError(
                f"{where}: step failed with exit code {result.exit_code}:\n  " + "\n  ".join(tail)
                + tls_hint(output) + root_hint(output)
            )

    def _copy_script(
        self, ins: df.Instruction, recipe: ImageRecipe, variables: Mapping[str, str], workdir: str
    ) -> str:
        where = f"{recipe.dockerfile}:{ins.line}"
        if "from" in ins.flags:
            raise BakeError(f"{where}: COPY --from is not supported by the local backend")
        sources, dest = df.copy_operands(ins, recipe.dockerfile)
        dest = df.substitute(dest, variables)
        dest_abs = os.path.normpath(os.path.join(workdir, dest))
        _writable(dest_abs, where, ins.keyword)
        into_dir = dest.endswith("/") or len(sources) > 1
        context = recipe.context.resolve()
        commands: list[str] = []
        for raw in sources:
            pattern = df.substitute(raw, variables)
            if pattern.startswith(("http://", "https://")):
                raise BakeError(f"{where}: ADD from a URL is not supported by the local backend")
            matches = sorted(glob.glob(str(context / pattern.lstrip("/")))) or []
            if not matches:
                raise BakeError(f"{where}: COPY source {pattern!r} not found in {recipe.context}")
            for match in matches:
                path = Path(match).resolve()
                if path != context and context not in path.parents:
                    raise BakeError(f"{where}: COPY source {pattern!r} is outside the build context")
                inside = CONTEXT_MOUNT + "/" + path.relative_to(context).as_posix()
                q_src, q_dest = shlex.quote(inside), shlex.quote(dest_abs)
                if path.is_dir():
                    commands.append(f"mkdir -p {q_dest} && cp -a {q_src}/. {q_dest}/")
                elif into_dir or len(matches) > 1:
                    commands.append(f"mkdir -p {q_dest} && cp -a {q_src} {q_dest}/")
                else:
                    commands.append(
                        f"if [ -d {q_dest} ]; then cp -a {q_src} {q_dest}/; "
                        f"else mkdir -p $(dirname {q_dest}) && cp -a {q_src} {q_dest}; fi"
                    )
        if "chmod" in ins.flags:
            commands.append(f"chmod -R {shlex.quote(ins.flags['chmod'])} {shlex.quote(dest_abs)}")
        return "set -e\n" + "\n".join(commands)

    # -- sandboxes -----------------------------------------------------------------

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
        env = {**DEFAULT_ENV, **meta["env"], **self.options.registry_env}  # type: ignore[dict-item]
        binds: dict[str, Path] = {}
        proxy = None
        if egress:
            proxy = self._start_egress(root / "egress.sock", egress)
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
                loopback_ports=[port for port in map(loopback_port, egress) if port is not None],
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
        proxy = subprocess.Popen(["node", str(EGRESS_SCRIPT), "proxy", str(socket_path), ",".join(hosts)],
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
            if group := group_of(entry.name):
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


def root_hint(output: str) -> str:
    """A step that removes a writable root (`rm -rf /app && git clone ... /app`): each
    is a mount point here, which only the docker backend can replace."""
    if any(f"cannot remove '/{name}': Device or resource busy" in output for name in ROOTS):
        return ("\nhint: the local backend's /app, /opt, /tests... are mount points and cannot "
                "be removed; build this task with --reactbench-sandbox=docker")
    return ""
