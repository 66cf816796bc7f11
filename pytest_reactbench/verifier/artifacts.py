"""What crosses from the agent sandbox to the verifier: the task's [[artifacts]]
and nothing else, checked on the host whatever tar the sandbox ran."""

from __future__ import annotations

import fnmatch
import io
import posixpath
import tarfile
from dataclasses import dataclass, field

from pytest_reactbench.sandbox.base import Sandbox, SandboxError
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


def excluded(name: str, patterns: list[str]) -> bool:
    """GNU tar's default --exclude matching (what Harbor uses): unanchored, `*`
    matches `/`, and names start with `./` (the archive is made with `-C SOURCE .`),
    so `**/node_modules/**` drops the contents of every node_modules, top level too."""
    if not patterns:
        return False
    name = "./" + name
    candidates = [name]
    candidates += [name[i + 1 :] for i, ch in enumerate(name) if ch == "/"]
    return any(fnmatch.fnmatchcase(c, p) for c in candidates for p in patterns)


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


#: Paths of PATH_MAX bytes or more, for find (an interval past 255 is not allowed).
_PAST_PATH_MAX = f"(.{{128}}){{{PATH_MAX // 128},}}"


def _left_out(sandbox: Sandbox, root: str, patterns: list[str], named: set[str]) -> list[tuple[str, str]]:
    """Paths past PATH_MAX under `root` that the sandbox's archive left out without a
    word (the Docker engine's does), so that they are refused by name as on a backend
    whose archive holds them."""
    found = sandbox.exec(["find", root, "-regextype", "posix-extended", "-regex", _PAST_PATH_MAX, "-print0"],
                         cwd="/", env={"LC_ALL": "C"}, timeout=120)
    left: list[tuple[str, str]] = []
    for path in found.stdout.decode("utf-8", "surrogateescape").split("\0"):
        name = _normalize(posixpath.relpath(path, root)) if path.startswith(root + "/") else None
        if not name or excluded(name, patterns):
            continue
        shown = name[:200] + ("…" if len(name) > 200 else "")
        if shown not in named and (why := _too_long(root, name)) is not None:
            left.append((shown, why))
            named.add(shown)
    return left


def collect(sandbox: Sandbox, artifacts: list[Artifact],
            limit: int = MAX_SUBMISSION_BYTES) -> list[Transfer]:
    transfers = []
    total = 0
    for artifact in artifacts:
        raw = sandbox.get_archive(artifact.source, exclude=artifact.exclude)
        data, files, size, dropped = sanitize(raw, artifact.exclude, artifact.source)
        dropped += _left_out(sandbox, artifact.source, artifact.exclude, {name for name, _ in dropped})
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
