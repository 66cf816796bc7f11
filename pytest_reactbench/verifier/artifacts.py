"""What crosses from the agent sandbox to the verifier: the task's [[artifacts]]
and nothing else, checked on the host whatever tar the sandbox ran."""

from __future__ import annotations

import io
import posixpath
import tarfile
from dataclasses import dataclass, field

from pytest_reactbench.sandbox.archives import excluded
from pytest_reactbench.sandbox.base import Sandbox
from pytest_reactbench.sandbox.errors import ArchiveTooLarge, SandboxError
from pytest_reactbench.tasks import Artifact
from pytest_reactbench.verifier.failures import SubmissionRefused

#: The most a submission may carry to the verifier (after the excludes).
MAX_SUBMISSION_BYTES = 128 * 1024 * 1024


@dataclass
class Transfer:
    """One artifact, sanitized: the tar stream that goes in, and what was refused."""

    artifact: Artifact
    data: bytes
    files: int
    size: int
    dropped: list[tuple[str, str]] = field(default_factory=list)


def _normalize(name: str) -> str | None:
    name = name.removeprefix("./")
    if name in ("", "."):
        return ""
    if name.startswith("/") or ".." in name.split("/"):
        return None
    return posixpath.normpath(name)


#: Linux's limits on a path and on one of its names, in bytes: a member past them
#: cannot be written in the verifier, and is the agent's to lose, not an error.
PATH_MAX = 4096
NAME_MAX = 255


def _too_long(root: str, name: str) -> str | None:
    def size(text: str) -> int:
        return len(text.encode("utf-8", "surrogateescape"))

    if size(posixpath.join(root, name)) >= PATH_MAX:
        return f"the path is longer than PATH_MAX ({PATH_MAX} bytes) and cannot be written"
    if any(size(part) > NAME_MAX for part in name.split("/")):
        return f"a name in the path is longer than NAME_MAX ({NAME_MAX} bytes) and cannot be written"
    return None


def _link_stays_inside(member_name: str, target: str) -> bool:
    if target.startswith("/"):
        return False
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(member_name), target))
    return not (resolved == ".." or resolved.startswith("../"))


def sanitize(raw: bytes, patterns: list[str],
             root: str = "/app") -> tuple[bytes, int, int, list[tuple[str, str]]]:
    """Re-pack a tar stream keeping regular files, directories and links that stay
    inside `root` and can be written there; everything else is dropped with a reason.
    One bad entry never loses the rest."""
    out = io.BytesIO()
    dropped: list[tuple[str, str]] = []
    files = size = 0
    try:
        source = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")  # noqa: SIM115 (closed below)
    except tarfile.TarError as exc:
        raise SandboxError(f"the agent sandbox produced an unreadable archive: {exc}") from None
    with source, tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as sink:
        for member in source:
            name = _normalize(member.name)
            if name is None:
                dropped.append((member.name, "path leaves the artifact root"))
                continue
            if name == "" or excluded(name, patterns):
                continue
            if (why := _too_long(root, name)) is not None:
                dropped.append((name[:200] + ("…" if len(name) > 200 else ""), why))
                continue
            member.name = name
            # A long name travels in a PAX header, which would override the one set here.
            member.pax_headers = {k: v for k, v in member.pax_headers.items() if k != "path"}
            if member.isdir():
                sink.addfile(member)
            elif member.isfile():
                sink.addfile(member, source.extractfile(member))
                files += 1
                size += member.size
            elif member.issym():
                if _link_stays_inside(name, member.linkname):
                    sink.addfile(member)
                else:
                    dropped.append((name, f"symlink to {member.linkname} points outside"))
            else:
                kind = "hard link" if member.islnk() else "special file"
                dropped.append((name, f"{kind} is not transferred"))
    return out.getvalue(), files, size, dropped


def collect(sandbox: Sandbox, artifacts: list[Artifact],
            limit: int = MAX_SUBMISSION_BYTES) -> list[Transfer]:
    """The task's artifacts out of the agent's sandbox, taken at rest by the backend's
    own means (`Sandbox.collect`: whatever state the agent left the sandbox in, it is
    what the agent submitted), at most `limit` bytes of file contents in all. The
    sandbox runs nothing afterwards.

    What the sandbox's archive cannot hold is lost without a word: on the docker
    backend, the engine's archive leaves out every path too long for the engine's host
    (past PATH_MAX with the container's root in front of it), so a path past PATH_MAX
    is not named among the dropped ones there (the verifier could not write it
    anyway), and one a little shorter is lost with it."""
    transfers = []
    total = 0
    for artifact in artifacts:
        try:
            raw = sandbox.collect(artifact.source, artifact.exclude, limit - total)
        except ArchiveTooLarge:
            raise SubmissionRefused(
                f"the submission is more than {limit // (1024 * 1024)} MiB (its limit) after the "
                f"excludes of [[artifacts]] ({artifact.source})"
            ) from None
        data, files, size, dropped = sanitize(raw, artifact.exclude, artifact.source)
        total += size
        if total > limit:
            raise SubmissionRefused(
                f"the submission is {total // (1024 * 1024)} MiB after the excludes of "
                f"[[artifacts]] ({artifact.source}); the limit is {limit // (1024 * 1024)} MiB"
            )
        transfers.append(Transfer(artifact, data, files, size, dropped))
    return transfers


def deliver(sandbox: Sandbox, transfers: list[Transfer]) -> None:
    """Put each artifact back at its source path, over an emptied directory, as
    Harbor's separate verifier does."""
    for transfer in transfers:
        target = transfer.artifact.source
        result = sandbox.exec(
            ["sh", "-c", 'mkdir -p "$1" && find "$1" -mindepth 1 -delete && chmod 777 "$1"',
             "empty", target],
            cwd="/",
        )
        if not result.ok:
            raise SandboxError(f"could not empty {target} in the verifier: {result.error_text}")
        sandbox.put_archive(target, transfer.data)
