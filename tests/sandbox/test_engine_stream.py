"""A command's output as the engine sends it: every frame, including those that came
with the response's headers (what a loaded machine does to a command that prints at
once). The engine here is a socket of the test's own that answers as dockerd does, so
that the bytes' arrival is chosen, not left to the machine's load; the real engine's
side is `test_a_command_that_prints_at_once_keeps_its_first_bytes`."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.docker.streams import exec_frames
from pytest_reactbench.sandbox.errors import SandboxError
from tests.sandbox.helpers import recipe

UPGRADED = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
            b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")


def frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[docker.APIClient, list[bytes]]]:
    """An engine that answers each exec start with the headers and the whole output in
    one write; the test sets the output (one answer per request)."""
    path = str(tmp_path / "engine.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    answers: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                conn.sendall(UPGRADED + answers.pop(0))

    threading.Thread(target=serve, daemon=True).start()
    api = docker.APIClient(base_url=f"unix://{path}", version="1.41")
    try:
        yield api, answers
    finally:
        api.close()
        server.close()


def test_frames_that_came_with_the_headers_are_kept(engine: tuple[docker.APIClient, list[bytes]]) -> None:
    api, answers = engine
    # Read the way docker-py's own exec_start reads it, these three frames are lost:
    # they are in the buffer the headers were read through.
    answers.append(frame(1, b"first\n") + frame(2, b"on stderr\n") + frame(1, b"last\n"))
    assert list(exec_frames(api, "x")) == [(1, b"first\n"), (2, b"on stderr\n"), (1, b"last\n")]


@pytest.mark.parametrize(("output", "said"), [
    (frame(1, b"whole") + frame(1, b"cut short")[:-3], "cut inside a frame (3 bytes missing)"),
    (frame(1, b"whole") + b"\x01\x00\x00", "cut inside a frame header (3 of 8 bytes)"),
    (b"error: not framed at all\n", "out of step: a frame header names stream 101"),
])
def test_a_stream_cut_or_out_of_step_is_an_error(engine: tuple[docker.APIClient, list[bytes]],
                                                 output: bytes, said: str) -> None:
    api, answers = engine
    answers.append(output)
    with pytest.raises(SandboxError, match=said.replace("(", r"\(").replace(")", r"\)")):
        list(exec_frames(api, "x"))


@pytest.mark.docker
def test_a_command_that_prints_at_once_keeps_its_first_bytes(tmp_path: Path,
                                                             docker_backend: DockerBackend) -> None:
    image = docker_backend.bake(recipe(tmp_path, "FROM reactbench/system\n", timeout=600), lambda _: None)
    box = docker_backend.boot(image, network=False, limits=Limits(cpus=1, memory_mb=512),
                             labels={"task": "stream", "role": "agent"})
    try:
        command = "printf first; printf err >&2; sleep 0.05; head -c 3000000 /dev/zero | tr '\\0' x"
        for _ in range(20):
            result = box.exec(command)
            assert result.stdout[:5] == b"first" and len(result.stdout) == 3_000_005, result.stdout[:40]
            assert result.stderr == b"err"
    finally:
        box.close()
    docker_backend.drain()
