"""What the backends need from the host machine: file locks, process liveness, and
the environment that makes downloads trust a CA bundle. The lowest module of the
package: it imports nothing of pytest_reactbench."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path, *, blocking: bool = True) -> Iterator[None]:
    """An exclusive lock held while the block runs, shared by every process of the
    machine (xdist workers, concurrent sessions). The kernel drops it when its holder
    dies, so a lock file is never stale. Not `blocking`: BlockingIOError when another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    """Whether the process runs. A zombie does not: a killed xdist worker stays one
    until its parent reaps it, which may be never while the parent waits on it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def missing_tools(tools: Sequence[str]) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


def tls_hint(output: str) -> str:
    """A line telling how to fix a download that failed TLS verification, or that a
    package manager refused for want of npm's signatures; or ''."""
    markers = ("UNABLE_TO_GET_ISSUER_CERT", "SELF_SIGNED_CERT", "CERT_HAS_EXPIRED",
               "certificate verify failed", "unable to get local issuer certificate")
    if any(m in output for m in markers):
        return ("\nhint: downloads failed TLS verification; behind a proxy that re-signs "
                "certificates, pass its CA bundle with --reactbench-ca-bundle=PATH "
                "(or REACTBENCH_CA_BUNDLE)")
    unsigned = ("registry signature could not be verified",  # pnpm's switch to a pinned version
                "No compatible signature found in package metadata")  # corepack
    if any(m in output for m in unsigned):
        return ("\nhint: the package registry serves no npm signatures (a mirror or proxy may "
                "strip them); if you trust it, pass --reactbench-unsigned-registry "
                "(or REACTBENCH_UNSIGNED_REGISTRY=1)")
    return ""


def ca_env(path: str) -> dict[str, str]:
    """Environment that makes npm, Node, git, curl and pip trust a CA bundle."""
    return {
        "NODE_EXTRA_CA_CERTS": path,
        "npm_config_cafile": path,
        "SSL_CERT_FILE": path,
        "GIT_SSL_CAINFO": path,
        "CURL_CA_BUNDLE": path,
        "PIP_CERT": path,
    }
