"""Helpers the sandbox tests of every backend share."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

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
              f"from pytest_reactbench.sandbox.options import SandboxOptions\n"
              f"from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS\n"
              f"BUILTIN_BACKENDS[{backend!r}](SandboxOptions(cache=Path({str(cache)!r}))).bake("
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
