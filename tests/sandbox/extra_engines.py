"""Extra Docker engines on this machine, for the pool's tests and benchmark: each its
own dockerd with its own socket, data root, exec root and pid file, on loopback only
(a unix socket), and its own bridge so that it leaves the main engine's docker0 alone
(`--bridge=none` would delete docker0 from the host). Each starts empty."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker

#: A private range unlikely to be routed on a CI runner; one per process (xdist
#: workers may each start engines).
SUBNET = "10.{p}.{n}.1/24"


@dataclass
class ExtraEngine:
    url: str
    root: Path
    process: subprocess.Popen[bytes]
    bridge: str

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.url, timeout=120)

    def stop(self) -> None:
        """Stop the engine (SIGTERM, then SIGKILL): what a lost engine looks like."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _engine_processes(root: Path) -> list[int]:
    """Pids of processes (containerd, shims) still running for this engine's roots."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str(root) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(proc.name))
    return pids


@contextlib.contextmanager
def extra_engine(n: int) -> Iterator[ExtraEngine]:
    """Engine number `n` (1..250, unique among those running at once)."""
    if shutil.which("dockerd") is None or os.geteuid() != 0:
        raise RuntimeError("an extra Docker engine needs dockerd and root (.ci/setup installs docker.io)")
    # Short paths: containerd's sockets live under the exec root (a unix socket path
    # is at most 107 bytes).
    root = Path(tempfile.mkdtemp(prefix=f"rbe{n}-", dir="/tmp"))
    bridge = f"rbe{os.getpid() % 10000}x{n}"[:15]
    url = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("wb")
    engine: ExtraEngine | None = None
    # Everything made from here on (the bridge, the engine, its mounts, its root) goes
    # in the `finally`, whichever step fails.
    try:
        subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
        subnet = SUBNET.format(p=200 + os.getpid() % 50, n=n)
        subprocess.run(["ip", "addr", "add", subnet, "dev", bridge], check=True)
        subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
        process = subprocess.Popen(
            ["dockerd", "--host", url, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "--pidfile", str(root / "docker.pid"), f"--bridge={bridge}", "--iptables=false",
             "--ip-masq=false", "--ip-forward=false"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        engine = ExtraEngine(url, root, process, bridge)
        deadline = time.monotonic() + 60
        while True:
            try:
                client = docker.DockerClient(base_url=url, timeout=5)
                client.ping()
                client.close()
                break
            except docker.errors.DockerException:
                if process.poll() is not None or time.monotonic() > deadline:
                    log_tail = (root / "dockerd.log").read_text()[-2000:]
                    raise RuntimeError(f"the extra engine did not start: {log_tail}") from None
                time.sleep(0.3)
        yield engine
    finally:
        if engine is not None:
            engine.stop()
        log.close()
        for pid in _engine_processes(root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # A killed engine may leave its layers mounted.
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(root))]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        # An engine that held the shipped images leaves gigabytes of small files: rm
        # walks them faster than Python does.
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["ip", "link", "del", bridge], check=False)


#: A static busybox for the tools, dash (and its libc) for the shell: busybox's own
#: shell runs its applets before anything on PATH, and its find has no -delete (the
#: verifier empties a directory with it), so a find wrapper must come first on PATH.
BASE_DOCKERFILE = """\
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY rootfs/ /
RUN ["/bin/busybox", "ln", "-sf", "/bin/dash", "/bin/sh"]
RUN ln -s /bin/dash /usr/local/bin/bash && mkdir -p /app /tmp
"""
FIND = """#!/bin/sh
case " $* " in *" -delete "*) exec rm -rf "$1"/* "$1"/.[!.]* "$1"/..?* ;; esac
exec /bin/busybox find "$@"
"""
TEST_SH = """#!/bin/sh
if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then t=1; else t=0; fi
echo "{\\"reward\\": $t, \\"tests\\": $t, \\"react_doctor\\": 1}" > /logs/verifier/reward.json
"""


def tiny_task(root: Path, name: str, base: str, solve: str = "echo hello > /app/out.txt") -> None:
    task = root / name
    for folder in ("environment", "tests", "solution"):
        (task / folder).mkdir(parents=True)
    # No artifact excludes: busybox's tar has no --exclude.
    (task / "task.toml").write_text(textwrap.dedent("""\
        version = "1.0"
        [[artifacts]]
        source = "/app"
        [agent]
        timeout_sec = 60
        [verifier]
        timeout_sec = 60
        [environment]
        cpus = 1
        memory_mb = 512
        """))
    (task / "instruction.md").write_text("Write hello to /app/out.txt\n")
    (task / "environment" / "Dockerfile").write_text(f"FROM {base}\nRUN echo base > /app/base.txt\n")
    (task / "tests" / "Dockerfile").write_text(f"FROM {base}\nCOPY test.sh /tests/test.sh\n")
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "solution" / "solve.sh").write_text(f"#!/bin/sh\n{solve}\n")


def build_tiny_base(client: docker.DockerClient, context: Path) -> str:
    """The tiny base image, on the engine of `client`; returns its tag."""
    shutil.copy("/usr/bin/busybox", context / "busybox")
    (context / "Dockerfile").write_text(BASE_DOCKERFILE)
    rootfs = context / "rootfs"
    libraries = re.findall(r"(/\S+) \(0x", subprocess.run(["ldd", "/bin/dash"], capture_output=True,
                                                          text=True, check=True).stdout)
    for path in ["/bin/dash", *libraries]:
        (rootfs / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, rootfs / path.lstrip("/"))
    (rootfs / "usr/local/bin").mkdir(parents=True)
    (rootfs / "usr/local/bin/find").write_text(FIND)
    (rootfs / "usr/local/bin/find").chmod(0o755)
    tag = f"reactbench-test/pool-base:{uuid.uuid4().hex[:10]}"
    client.images.build(path=str(context), tag=tag, network_mode="host", rm=True, forcerm=True)
    return tag
