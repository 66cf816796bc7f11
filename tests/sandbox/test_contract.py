"""The Sandbox contract, what every backend must do: the built-ins, and `wrapped`,
a backend added through the hook (tests/sandbox/wrapped.py). A new backend joins
by adding its name to BACKENDS_UNDER_TEST."""

from __future__ import annotations

import io
import random
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_reactbench.plugin.extensions import command_hook, registered
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Backend, Capabilities, Image, Layer, Limits, Sandbox
from pytest_reactbench.sandbox.errors import ArchiveTooLarge, SandboxError
from tests.reliability.faults import pids_with
from tests.sandbox.escape import attack
from tests.sandbox.helpers import recipe

BACKENDS_UNDER_TEST = ["local", pytest.param("docker", marks=pytest.mark.docker), "wrapped"]


@pytest.fixture(scope="module", params=BACKENDS_UNDER_TEST)
def backend(request: pytest.FixtureRequest, bake_cache: Path) -> Iterator[Backend]:
    # Made the way `reactbench images` and the plugin make them: through the hook.
    factories = registered(command_hook(["tests.sandbox.wrapped"])).backends
    made = factories[request.param](environment_sandbox_options(cache=bake_cache))
    yield made
    made.close()


@pytest.fixture(scope="module")
def image(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Image:
    r = recipe(tmp_path_factory.mktemp("contract"), "FROM reactbench/system\nWORKDIR /app\n", timeout=1800)
    return backend.bake(r, lambda _: None)


@pytest.fixture
def box(backend: Backend, image: Image) -> Iterator[Sandbox]:
    sandbox = backend.boot(image, network=False, limits=Limits(), labels={"task": "contract"})
    yield sandbox
    sandbox.close()


def test_a_backend_declares_what_it_can_do_in_one_object(backend: Backend) -> None:
    declared = backend.capabilities
    assert isinstance(declared, Capabilities)
    assert declared.bake_slots >= 1
    assert backend.capabilities == declared  # declared once: the same when asked again


def test_exit_codes_and_streams(box: Sandbox) -> None:
    result = box.exec("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.timed_out
    assert box.exec(["true"]).ok
    # Killed by a signal: 128 + its number, as a shell says it.
    assert box.exec("kill -9 $$").exit_code == 137


def test_cwd_env_and_user(box: Sandbox) -> None:
    assert box.exec("pwd").text == "/app\n"
    result = box.exec('pwd; echo "$GREETING"', cwd="/tmp", env={"GREETING": "hi there"})
    assert result.text == "/tmp\nhi there\n"
    assert box.exec("id -u").text == "0\n"
    assert box.exec("id -u", user="nobody").text == "65534\n"


def test_timeout_kills_the_whole_tree(box: Sandbox) -> None:
    # Unique durations: the processes are found from the host by their command lines.
    first, second = (f"{300 + random.random():.6f}" for _ in range(2))
    started = time.monotonic()
    result = box.exec(f"(setsid sleep {first} &); sleep {second}", timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - started < 15
    assert _gone(f"sleep {first}", f"sleep {second}") == []
    assert box.exec("echo still usable").ok


def _gone(*commands: str) -> list[int]:
    """The host's processes running one of `commands`, once they had 5 s to go."""
    deadline = time.monotonic() + 5
    left = [pid for command in commands for pid in pids_with(command)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for command in commands for pid in pids_with(command)]
    return left


def test_what_commands_leave_running_is_ended(box: Sandbox) -> None:
    # An agent's background job and its daemon (setsid'd away from its tree): once its
    # command returns and end_leftovers() has run, neither may be running.
    job, daemon = (f"sleep {400 + random.random():.6f}" for _ in range(2))
    assert box.exec(f"{job} & (setsid {daemon} &); true").ok
    box.end_leftovers()
    assert _gone(job, daemon) == []
    assert box.exec("echo still usable").text == "still usable\n"


def test_archives_round_trip(box: Sandbox) -> None:
    box.write_file("/app/src/a.ts", "export const a = 1;\n")
    box.write_file("/app/node_modules/x/index.js", "x")
    data = box.get_archive("/app", exclude=["**/node_modules/**"])
    box.put_archive("/tests/copy", data)
    assert box.exec("cd /tests/copy && find . -type f | sort").text.split() == ["./src/a.ts"]
    box.put_archive("/tmp/copy", data)
    assert box.exec("cat /tmp/copy/src/a.ts").text == "export const a = 1;\n"
    with pytest.raises(SandboxError):
        box.get_archive("/nowhere")


def test_a_command_printing_without_end_is_kept_to_a_bound(box: Sandbox,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_reactbench.sandbox import base
    from pytest_reactbench.sandbox.docker import sandbox as docker_sandbox
    from pytest_reactbench.sandbox.local import sandbox as local_sandbox

    for module in (base, docker_sandbox, local_sandbox):
        monkeypatch.setattr(module, "MAX_EXEC_OUTPUT", 1 << 20)
    result = box.exec("head -c 3145728 /dev/zero; head -c 5 /dev/zero | tr '\\0' e >&2")
    assert result.ok
    assert result.stdout == bytes(1 << 20) + b"\n[2097152 more bytes left out by the harness]\n"
    assert result.stderr == b"eeeee"


def test_a_tree_is_collected_at_rest(backend: Backend, image: Image) -> None:
    """collect(): the tree as its commands left it, with the excludes, read by the
    backend's own means (tar on the sandbox's PATH replaced by a forger changes nothing);
    nothing runs afterwards; a missing tree is empty; a tree past the limit is refused
    before its contents are read."""
    def boot() -> Sandbox:
        return backend.boot(image, network=False, limits=Limits(), labels={"task": "contract"})

    with boot() as box:
        box.write_file("/app/src/a.ts", "export const a = 1;\n")
        box.write_file("/app/node_modules/x/index.js", "x")
        assert box.exec("mkdir -p /usr/local/bin 2>/dev/null; ln -s /nowhere /app/link; "
                        "(sleep 300 &) ; true").ok
        data = box.collect("/app", ["**/node_modules/**"], 1 << 20)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            names = {m.name.removeprefix("./"): m for m in tar if m.name not in (".", "./")}
        assert {n for n, m in names.items() if not m.isdir()} == {"src/a.ts", "link"}
        assert names["link"].issym() and names["link"].linkname == "/nowhere"
        with pytest.raises(SandboxError):
            box.exec("true")
    with boot() as box, tarfile.open(fileobj=io.BytesIO(box.collect("/nowhere", [], 1 << 20))) as tar:
        assert tar.getmembers() == []
    with boot() as box:
        assert box.exec("truncate -s 3G /app/big && echo small > /app/small").ok
        with pytest.raises(ArchiveTooLarge, match="/app holds more than 1 MiB"):
            box.collect("/app", [], 1 << 20)


def _interfaces(box: Sandbox) -> set[str]:
    lines = box.exec("cat /proc/net/dev").text.splitlines()[2:]
    return {line.split(":")[0].strip() for line in lines}


def test_nothing_of_the_host_is_in_reach(box: Sandbox, tmp_path: Path) -> None:
    """The escapes an agent tries first fail on every backend: a file handle forged past
    the sandbox's mounts, a remount, a mount, a user namespace of its own; and none of
    the host's own files is in sight."""
    got = attack(box, "/usr", "/etc", "/app")
    for path in ("/usr", "/etc", "/app"):
        assert got[f"open_by_handle_at {path}"]["what"] == "EPERM", got
        assert not got[f"remount rw {path}"]["won"], got
    assert not got["mount tmpfs"]["won"] and not got["unshare user"]["won"], got
    checkout = Path(__file__).resolve().parents[2]
    seen = box.exec(["sh", "-c", 'for p in "$@"; do [ -e "$p" ] && echo "$p"; done; true', "seen",
                     str(checkout), str(tmp_path), "/var/run/docker.sock", "/run/docker.sock"])
    assert seen.ok and seen.text == ""


def test_network_off_and_on(backend: Backend, image: Image, box: Sandbox) -> None:
    assert _interfaces(box) == {"lo"}
    online = backend.boot(image, network=True, limits=Limits(), labels={"task": "contract"})
    try:
        assert _interfaces(online) - {"lo"}
    finally:
        online.close()


def test_memory_limit_stops_a_hog(backend: Backend, image: Image) -> None:
    limited = backend.boot(image, network=False, limits=Limits(memory_mb=128), labels={"task": "contract"})
    try:
        hog = limited.exec("node -e 'const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))'", timeout=120)
        assert hog.exit_code == 137 and not hog.timed_out, hog.error_text[-500:]
    finally:
        limited.close()


def test_close_twice_and_after(backend: Backend, image: Image) -> None:
    sandbox = backend.boot(image, network=False, limits=Limits(), labels={"task": "contract"})
    sandbox.close()
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.exec("true")


def test_a_layer_on_two_names_for_one_image_is_baked_once(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names the image map gives one stand-in (the Playwright verifier's and the
    verifier base's): a layer on either is one bake, and each image records the name its
    Dockerfile gave."""
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "Dockerfile").write_text("FROM reactbench/system\n"
                                         "RUN mkdir -p /app && echo base > /app/base\n")
    baking = getattr(backend, "inner", backend)
    for name in ("example.org/one", "example.org/two"):
        monkeypatch.setitem(baking.image_map, name, str(stand_in))
    token = uuid.uuid4().hex  # a layer no earlier run baked (an engine keeps its images)
    layer = Layer(name="layered", steps=f"RUN echo {token} > /app/layer\n", context=stand_in)
    lines: list[str] = []
    images = [backend.bake(recipe(tmp_path / name, f"FROM example.org/{name}\nRUN cat /app/base /app/layer\n",
                                  layer=layer), lines.append)
              for name in ("one", "two")]
    assert sum("layered: baked image" in line for line in lines) == 1, lines
    assert sum("layered: reusing baked image" in line for line in lines) == 1, lines
    for name, image in zip(("one", "two"), images, strict=True):
        assert f"example.org/{name}" in [base.name for base in image.bases]
        box = backend.boot(image, network=False, limits=Limits(), labels={"task": "contract"})
        try:
            assert box.exec("cat /app/base /app/layer").text == f"base\n{token}\n"
        finally:
            box.close()
