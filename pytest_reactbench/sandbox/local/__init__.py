"""The `local` backend: bubblewrap over the host's read-only root, no daemon.

An image is a stack of overlay layers holding the writable roots (`/app`, `/opt`,
`/tests`, `/logs`, `/tmp`, `/root`, `/solution`); the host's `/usr` and `/etc` stand
for the system layer. A booted sandbox's `/tmp` is a tmpfs of the task's storage size
and its processes live in a cgroup with the task's limits (see cgroups.py). Each exec
mounts the sandbox's overlay in a private mount namespace that dies with it, so a
killed run leaves no mount behind, only a directory that the next run's sweep
removes. Baking replays the Dockerfile's ARG/ENV/WORKDIR/COPY/ADD/RUN/LABEL steps
into a new layer, published by an atomic rename under a file lock so that xdist
workers and concurrent sessions share it.

Verdicts from this backend are not formal: it is a development backend.
"""

from pytest_reactbench.sandbox.local.backend import LocalBackend
from pytest_reactbench.sandbox.local.sandbox import LocalSandbox

__all__ = ["LocalBackend", "LocalSandbox"]
