"""Tar streams, as the sandboxes move trees in and out: made from memory, re-packed as
they stream by with the excludes of `[[artifacts]]` (GNU tar's matching), and taken
from a sandbox with a count of the bytes tar wrote (`Sandbox.get_archive`)."""

from __future__ import annotations

import fnmatch
import io
import re
import tarfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

from pytest_reactbench.sandbox.errors import ArchiveTooLarge, SandboxError

#: Takes of an archive whose stream arrived short before it is an error.
ARCHIVE_ATTEMPTS = 3
#: tar's stream on stdout; on stderr, after tar's own words, its exit status and the
#: bytes it wrote, counted as they left it. Any tar (GNU's, BusyBox's) and any sh.
COUNTED_TAR = ('exec 3>&1; { tar -c -f - -C "$0" "$@" .; echo "reactbench-tar-exit $?" >&2; } '
                '| tee /dev/fd/3 | { n=$(wc -c); echo "reactbench-tar-bytes $n" >&2; }')
TAR_EXIT = re.compile(rb"^reactbench-tar-exit (\d+)$", re.MULTILINE)
TAR_BYTES = re.compile(rb"^reactbench-tar-bytes\s*(\d+)\s*$", re.MULTILINE)
TAR_NOTES = re.compile(rb"^reactbench-tar-(exit|bytes) .*\n?", re.MULTILINE)


def tar_of(files: Mapping[str, bytes], mode: int = 0o644) -> bytes:
    """A tar stream of in-memory files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def excluded(name: str, patterns: Sequence[str]) -> bool:
    """GNU tar's default --exclude matching (what Harbor uses): unanchored, `*`
    matches `/`, and names start with `./` (the archive is made with `-C SOURCE .`),
    so `**/node_modules/**` drops the contents of every node_modules, top level too."""
    if not patterns:
        return False
    name = "./" + name
    candidates = [name]
    candidates += [name[i + 1 :] for i, ch in enumerate(name) if ch == "/"]
    return any(fnmatch.fnmatchcase(c, p) for c in candidates for p in patterns)


class ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (an engine's HTTP stream), one
    chunk held at a time."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


#: What the headers of a re-packed archive may add to twice its limit of contents.
HEADER_SLACK = 1024 * 1024


def empty_tar() -> bytes:
    return tar_of({})


def repack(stream: IO[bytes] | io.RawIOBase, src: str, exclude: Sequence[str], limit: int) -> bytes:
    """Re-pack, as it streams by, a tar stream of the tree `src` whose members all sit
    under one top entry (the engine's `app/...`, or `./...`), as `tar -C src .` with
    `--exclude` would have made it: the top entry's name stripped (members named `x`,
    `dir/y`), the `exclude` globs left out with everything under an excluded directory
    (GNU tar does not descend into one). More than `limit` bytes of kept file contents
    raise ArchiveTooLarge as soon as a header says so, before its contents are read (a
    2 GiB sparse file is never read); an archive whose headers alone pass `limit` too
    (millions of empty files) is refused the same way, so no more than about twice
    `limit` (and HEADER_SLACK) is ever held. A top entry that is not a directory is an empty tree."""
    out = io.BytesIO()
    size = 0
    pruned: set[str] = set()
    try:
        source = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 (closed below)
    except tarfile.ReadError as exc:
        if "empty file" in str(exc):
            return empty_tar()
        raise SandboxError(f"the archive of {src} is unreadable: {exc}") from None
    try:
        with source, tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as sink:
            for member in source:
                _, slash, name = member.name.strip("/").partition("/")
                if not slash or name in ("", "."):
                    if not member.isdir():
                        return empty_tar()
                    continue
                name = name.removeprefix("./")
                parts = name.split("/")
                if any("/".join(parts[:i]) in pruned for i in range(1, len(parts))):
                    continue
                if excluded(name, exclude):
                    if member.isdir():
                        pruned.add(name)
                    continue
                if member.isfile():
                    size += member.size
                    if size > limit:
                        raise ArchiveTooLarge(src, limit)
                    member.type, member.sparse = tarfile.REGTYPE, None  # written out whole
                member.name = name
                # A long name travels in a PAX header, which would override the one set here.
                member.pax_headers = {k: v for k, v in member.pax_headers.items()
                                      if k not in ("path", "linkpath")}
                if member.islnk():  # a hard link names its target from the top entry too
                    member.linkname = member.linkname.strip("/").partition("/")[2].removeprefix("./")
                sink.addfile(member, source.extractfile(member) if member.isfile() else None)
                if out.tell() > 2 * limit + HEADER_SLACK:
                    raise ArchiveTooLarge(src, limit)
    except tarfile.TarError as exc:
        raise SandboxError(f"the archive of {src} is unreadable: {exc}") from None
    return out.getvalue()
