"""Helpers the sandbox tests of every backend share."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox.base import ImageRecipe, Sandbox


def recipe(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None,
           **kwargs: object) -> ImageRecipe:
    context = tmp_path / "ctx"
    context.mkdir(parents=True, exist_ok=True)
    (context / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        (context / name).write_text(text)
    return ImageRecipe("test", context / "Dockerfile", context, **kwargs)  # type: ignore[arg-type]


def kill_a_bake_half_way(backend: str, cache: Path, r: ImageRecipe) -> None:
    """Bakes `r` on `backend` in another process, SIGKILLed during its `RUN sleep` step."""
    script = (f"from pathlib import Path\nfrom pytest_reactbench.sandbox.base import ImageRecipe\n"
              f"from pytest_reactbench.plugin.options import environment_sandbox_options\n"
              f"from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS\n"
              f"BUILTIN_BACKENDS[{backend!r}](environment_sandbox_options(cache=Path({str(cache)!r}))).bake("
              f"ImageRecipe('t', Path({str(r.dockerfile)!r}), Path({str(r.context)!r})), print)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "RUN sleep" in line:
            break
    time.sleep(0.5)
    proc.kill()
    proc.wait()


def assert_tmp_is_usable_scratch(box: Sandbox) -> None:
    """/tmp keeps files between commands, runs programs, takes files from the host,
    and is the task's 64 MiB."""
    assert box.exec("printf '#!/bin/sh\\necho ran\\n' > /tmp/tool && chmod +x /tmp/tool").ok
    box.write_file("/tmp/from-host.txt", "put")
    assert box.exec("/tmp/tool && cat /tmp/from-host.txt").text == "ran\nput"
    assert "64M" in box.exec("df -h /tmp").text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def loopback_registry(root: Path) -> Iterator[int]:
    """Debian's `docker-registry` serving from `root` on a loopback port (the engine
    speaks plain http to loopback registries); yields the port."""
    if shutil.which("docker-registry") is None:
        raise RuntimeError("these tests need Debian's docker-registry (.ci/setup installs it)")
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n")
    server = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait()


def busybox_image(client: Any, root: Path, origin: str, tag: str) -> None:
    """A tiny image (a static busybox) whose /origin says where it came from."""
    context = root / f"ctx-{origin}"
    context.mkdir()
    shutil.copy("/usr/bin/busybox", context / "busybox")
    (context / "Dockerfile").write_text(
        "FROM scratch\nCOPY busybox /bin/busybox\n"
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
        f"RUN echo {origin} > /origin\n")
    client.images.build(path=str(context), tag=tag, rm=True, network_mode="none")
