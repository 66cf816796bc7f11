"""A command's output from the engine, every byte of it.

The engine answers an exec's start with `101 UPGRADED` and then the command's output,
framed (an 8-byte header: the stream, 1 or 2, and the size). docker-py reads the
frames from the raw socket under the HTTP response; but the response's headers were
read through a buffered reader, which takes whatever had arrived with them. When the
command printed before the harness read the headers (a loaded machine, a command that
prints at once), those bytes are in that buffer, and docker-py never sees them: the
output's first frames are lost without a word, or a frame is cut and the next header
is read from inside the output (`101 is not a valid stream`). Here the frames are read
through that same buffered reader, so nothing it took is lost. They are reached through
docker-py's client internals (`_post_json`, the response's `raw._fp.fp`), as its own
exec_start does; pyproject.toml holds docker-py below its next major version, and
tests/sandbox/test_engine_stream.py reads a stream through them."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from pytest_reactbench.sandbox.errors import SandboxError

#: The largest read of a frame's body.
READ_SIZE = 1024 * 1024
STREAMS = (1, 2)


def exec_frames(api: Any, exec_id: str) -> Iterator[tuple[int, bytes]]:
    """Start the exec and yield (stream, bytes) as the engine sends them: 1 is stdout,
    2 stderr. The stream ends when the command's output does; a stream cut inside a
    frame, or a header that names no stream, is a SandboxError."""
    response = api._post_json(api._url("/exec/{0}/start", exec_id), data={"Tty": False, "Detach": False},
                              headers={"Connection": "Upgrade", "Upgrade": "tcp"}, stream=True)
    try:
        api._raise_for_status(response)
        # A command may print nothing for longer than the client's timeout.
        api._disable_socket_timeout(api._get_raw_response_socket(response))
        yield from frames(response.raw._fp.fp)
    finally:
        response.close()


def frames(reader: Any) -> Iterator[tuple[int, bytes]]:
    """The frames of a buffered reader positioned at the first header."""
    said = "the engine's output stream"
    while True:
        header = reader.read(8)
        if not header:
            return
        if len(header) < 8:
            raise SandboxError(f"{said} was cut inside a frame header ({len(header)} of 8 bytes)")
        stream, size = struct.unpack(">BxxxL", header)
        if stream not in STREAMS:
            raise SandboxError(f"{said} is out of step: a frame header names stream {stream}")
        while size:
            chunk = reader.read(min(size, READ_SIZE))
            if not chunk:
                raise SandboxError(f"{said} was cut inside a frame ({size} bytes missing)")
            size -= len(chunk)
            yield stream, chunk
