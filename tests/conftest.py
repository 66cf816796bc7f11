from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]


def _registry_signs(spec: str = "pnpm@11.10.0") -> bool:
    """Whether the npm registry this machine reaches serves npm's signatures (a mirror
    or a re-signing proxy often serves none)."""
    try:
        shown = subprocess.run(["npm", "view", spec, "dist.signatures", "--json"],
                               capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return shown.returncode != 0 or shown.stdout.strip() not in ("", "[]")


# The suite's bakes fetch pinned package managers (corepack, pnpm's own switch): on a
# machine whose registry serves no signatures they run as a user behind such a mirror
# would, with --reactbench-unsigned-registry (here through its variable, which the test
# sessions read, and the tests' own backends through the option table:
# environment_sandbox_options). A test of the default sets the variable itself.
if "REACTBENCH_UNSIGNED_REGISTRY" not in os.environ:
    os.environ["REACTBENCH_UNSIGNED_REGISTRY"] = "0" if _registry_signs() else "1"

def suite_leftovers(basetemp: Path, engine: bool) -> list[str]:
    """What the whole test session left on this machine: containers and networks of
    dead owners (when tests used the engine), local sandbox directories, cgroups of
    dead processes, and sandbox processes still running from the session's temporary
    directories."""
    from pytest_reactbench.host import pid_alive
    from pytest_reactbench.sandbox.local.cgroups import stale_groups
    from tests.reliability.faults import pids_with

    def dead(owner: str) -> bool:
        pid = owner.rpartition(":")[2]
        return pid.isdigit() and not pid_alive(int(pid))

    found: list[str] = []
    if engine:
        import docker

        client = docker.from_env()
        label = {"label": "reactbench.owner"}
        # One listing, no inspection of each: a container another process removes
        # meanwhile (a concurrent session on the engine) is no error.
        found += [f"container {c['Names'][0].lstrip('/')}"
                  for c in client.api.containers(all=True, filters=label)
                  if dead((c.get("Labels") or {}).get("reactbench.owner", ""))]
        found += [f"network {n.name}" for n in client.networks.list(filters=label)
                  if dead((n.attrs.get("Labels") or {}).get("reactbench.owner", ""))]
    found += [f"sandbox dir {p}" for p in basetemp.glob("**/local/sandboxes/*")]
    found += [f"cgroup {d}" for group in stale_groups() for d in group.dirs]
    found += [f"process {pid}" for pid in pids_with(f"{basetemp}/")]
    return found


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Notes (on the controller, for xdist workers' tests too) that a test of the
    engine ran, so the session-end check looks at the engine only then."""
    if "docker" in report.keywords and report.when == "call":
        _engine_used[0] = True


_engine_used = [False]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite's own gate: after every fault it injected, nothing may be left."""
    config = session.config
    if hasattr(config, "workerinput") or not hasattr(config, "_tmp_path_factory"):
        return
    # The basetemp of the whole session (xdist workers make theirs beneath it).
    basetemp = config._tmp_path_factory.getbasetemp()  # private: pytest has no public accessor
    found = suite_leftovers(basetemp, engine=_engine_used[0])
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(f"reactbench leftovers after the suite: {len(found)}")
        for item in found:
            reporter.write_line(f"  left behind: {item}")
    if found and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def bake_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bake cache for the test session, as a user's machine has."""
    return tmp_path_factory.mktemp("bake-cache")


@pytest.fixture
def suite(pytester: pytest.Pytester, bake_cache: Path) -> pytest.Pytester:
    pytester.makeini(f"""
        [pytest]
        reactbench_cache = {bake_cache}
        reactbench_records = records
    """)
    return pytester


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The engine the docker tests use (DOCKER_HOST or the local socket)."""
    import docker

    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="module")
def docker_backend(bake_cache: Path) -> Iterator[Any]:
    """A docker backend on the session's bake cache, never the user's: the engine's
    images are content-hashed, so each image is baked once per machine all the same."""
    from pytest_reactbench.plugin.options import environment_sandbox_options
    from pytest_reactbench.sandbox.docker import DockerBackend

    backend = DockerBackend(environment_sandbox_options(cache=bake_cache))
    yield backend
    backend.close()
