"""What the suite's tests share: the backends as a parameter and a tiny task."""

from __future__ import annotations

import http.server
import io
import tarfile
import textwrap
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pytest_reactbench.results import TrialResult
from pytest_reactbench.results.load import from_junit

#: The built-in backends as a parameter; the docker one carries the `docker` marker,
#: so `pytest -m "not docker"` runs everything else on a machine without an engine.
BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]

ORACLE_WRITES = "#!/bin/bash\necho hello > /app/out.txt\n"
CHECKS_OUT = """#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then t=1; else t=0; fi
echo "tests gate: $t"
echo "{\\"reward\\": $t, \\"tests\\": $t, \\"react_doctor\\": 1}" > /logs/verifier/reward.json
"""


def run_folder(result: pytest.RunResult) -> Path:
    """The run folder a pytest session printed it wrote (two runs started in one
    second are not ordered by their folders' names)."""
    (line,) = [line for line in result.stdout.lines if line.startswith("records and leaderboard: ")]
    return Path(line.split(": ", 1)[1].rsplit(" (", 1)[0])


def write_task(
    root: Path,
    name: str,
    *,
    test_sh: str = CHECKS_OUT,
    solve_sh: str = ORACLE_WRITES,
    environment: str = "FROM reactbench/system\nWORKDIR /app\nRUN echo base > /app/base.txt\n",
    extra_toml: str = "",
    agent_timeout: float = 30,
    verifier_timeout: float = 30,
    tags: tuple[str, ...] = ("smoke",),
) -> Path:
    """A tiny task whose verifier is plain bash: fast, and it needs no Node."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "task.toml").write_text(textwrap.dedent(f"""\
        version = "1.0"
        [[artifacts]]
        source = "/app"
        exclude = ["**/node_modules/**"]
        [metadata]
        difficulty = "easy"
        tags = {list(tags)!r}
        [agent]
        timeout_sec = {agent_timeout}
        [verifier]
        timeout_sec = {verifier_timeout}
        """) + extra_toml)
    (task / "instruction.md").write_text("Write hello to /app/out.txt\n")
    (task / "environment" / "Dockerfile").write_text(environment)
    (task / "tests" / "Dockerfile").write_text(
        "FROM reactbench/system\nWORKDIR /app\nCOPY test.sh /tests/test.sh\n")
    (task / "tests" / "test.sh").write_text(test_sh)
    (task / "solution" / "solve.sh").write_text(solve_sh)
    return task


def tree_tar(files: dict[str, bytes | None]) -> bytes:
    """A tar stream of `files` in order (None: a directory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as out:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                out.addfile(info)
            else:
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def http_get(url: str, timeout: float = 20) -> tuple[int, bytes]:
    """An HTTP GET's status and body, an error status included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class LoopbackServer:
    """A threaded HTTP server on a free loopback port with `handler`, until `stop`."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def junit_results(path: Path) -> list[TrialResult]:
    """The trials of a JUnit XML file, read back as every report reads them. Tests read
    results through TrialResult, never by the properties' names: those are a published
    format, pinned once (tests/results/test_junit_properties.py)."""
    return from_junit(path)
