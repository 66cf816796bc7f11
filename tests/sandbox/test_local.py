"""The local backend against real bubblewrap, overlayfs and Node."""

import io
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.errors import BakeError
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.sandbox.local import sandbox as local
from tests.sandbox.helpers import assert_tmp_is_usable_scratch, kill_a_bake_half_way, recipe


def test_bake_replays_steps_and_boots(tmp_path: Path, local_backend: LocalBackend) -> None:
    r = recipe(tmp_path, """ARG NAME=world
ARG HIDDEN=global
FROM reactbench/system
ARG NAME
ARG GREETING=hello
ENV WHO=${NAME:-nobody} PATH=/opt/bin:/usr/bin:/bin SEEN=${HIDDEN:-not-seen}
LABEL org.example.kind="test image"
WORKDIR /app
COPY src/ ./src/
COPY one.txt /opt/data/
RUN echo "$GREETING $WHO" > greeting.txt && node -e "console.log(1+1)" > /opt/two.txt
WORKDIR sub
""", {"src/a.ts": "export const a = 1;\n", "one.txt": "1\n"}, build_args={"NAME": "bench"})
    lines: list[str] = []
    image = local_backend.bake(r, lines.append)
    assert not image.cached
    assert image.labels == {"org.example.kind": "test image"}
    assert any("step" in line and "RUN" in line for line in lines)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        result = box.exec("pwd; cat ../greeting.txt ../src/a.ts /opt/data/one.txt /opt/two.txt; "
                          "echo $WHO $SEEN")
        assert result.ok, result.error_text
        assert result.text.split("\n") == [
            "/app/sub", "hello bench", "export const a = 1;", "1", "2", "bench not-seen", ""]
    finally:
        box.close()
    assert not box.root.exists()


def test_cache_reuses_and_rebuilds_on_change(tmp_path: Path, local_backend: LocalBackend) -> None:
    text = "FROM reactbench/system\nCOPY in.txt /app/\nRUN date +%s%N > /app/stamp\n"
    first = local_backend.bake(recipe(tmp_path, text, {"in.txt": "a"}), lambda _: None)
    lines: list[str] = []
    again = local_backend.bake(recipe(tmp_path, text, {"in.txt": "a"}), lines.append)
    assert again.cached and again.digest == first.digest
    assert lines == [f"test: reusing baked image {first.digest[:12]}"]
    changed = local_backend.bake(recipe(tmp_path, text, {"in.txt": "b"}), lambda _: None)
    assert not changed.cached and changed.digest != first.digest

    def stamp(image_digest: str) -> str:
        meta = json.loads((local_backend.images / image_digest / "image.json").read_text())
        return (local_backend.images / meta["chain"][-1] / "layer" / "app" / "stamp").read_text()

    assert stamp(first.digest) == stamp(again.digest) != stamp(changed.digest)


def test_sandboxes_are_isolated_and_copy_on_write(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo base > /app/f\n"),
                         lambda _: None)
    a = local_backend.boot(image, network=False, limits=Limits(), labels={})
    b = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        assert a.exec("echo changed > /app/f && rm -f /app/nothing").ok
        assert a.exec("cat /app/f").text == "changed\n"
        assert b.exec("cat /app/f").text == "base\n"
        # The host and the image stay untouched; /usr is read-only.
        assert a.exec("touch /usr/bin/planted").exit_code != 0
    finally:
        a.close()
        b.close()
    c = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        assert c.exec("cat /app/f").text == "base\n"
    finally:
        c.close()


def test_network_is_cut_when_asked(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        result = box.exec("ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
        assert "eth" not in result.text and "ens" not in result.text
        assert "lo" in result.text
    finally:
        box.close()


def test_timeout_kills_the_whole_tree(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={})
    marker = f"reactbench-orphan-{time.time_ns()}"
    try:
        started = time.monotonic()
        result = box.exec(f"(setsid sleep 300 {marker} &) ; exec -a {marker} sleep 300", timeout=1)
        assert result.timed_out and result.exit_code == 124
        assert time.monotonic() - started < 10
        time.sleep(0.3)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        assert left.stdout == "", f"processes survived the timeout: {left.stdout}"
    finally:
        box.close()


def test_archives_round_trip_with_excludes(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        box.write_file("/app/src/a.ts", "a")
        box.write_file("/app/node_modules/x/index.js", "x")
        data = box.get_archive("/app", exclude=["**/node_modules/**"])
        box.put_archive("/tests/copy", data)
        listing = box.exec("cd /tests/copy && find . -type f | sort").text.split()
        assert listing == ["./src/a.ts"]
    finally:
        box.close()


def test_bake_errors_name_the_step(tmp_path: Path, local_backend: LocalBackend) -> None:
    failing = recipe(tmp_path, "FROM reactbench/system\nRUN echo doing && exit 7\n")
    with pytest.raises(BakeError, match=r"Dockerfile:2: step failed with exit code 7") as info:
        local_backend.bake(failing, lambda _: None)
    assert "doing" in str(info.value)
    # Nothing half-made is published, and the failure is remembered for the session.
    assert not list(local_backend.images.glob("*.tmp-*"))
    assert not [p for p in local_backend.images.iterdir() if p.is_dir()]
    with pytest.raises(BakeError, match="exit code 7"):
        local_backend.bake(failing, lambda _: None)


def test_missing_copy_source(tmp_path: Path, local_backend: LocalBackend) -> None:
    r = recipe(tmp_path, "FROM reactbench/system\nCOPY nowhere/ /app/\n")
    with pytest.raises(BakeError, match=r"Dockerfile:2: COPY source 'nowhere/' not found"):
        local_backend.bake(r, lambda _: None)


def test_unknown_base_image_says_how_to_map_it(tmp_path: Path, local_backend: LocalBackend) -> None:
    r = recipe(tmp_path, "FROM example.com/unknown:1\n")
    with pytest.raises(BakeError, match=r"--reactbench-image-map 'example.com/unknown=<recipe"):
        local_backend.bake(r, lambda _: None)


def test_build_timeout(tmp_path: Path, local_backend: LocalBackend) -> None:
    r = recipe(tmp_path, "FROM reactbench/system\nRUN sleep 30\n", timeout=1.0)
    with pytest.raises(BakeError, match="build_timeout_sec ran out"):
        local_backend.bake(r, lambda _: None)


def test_sweep_removes_sandboxes_of_dead_runs(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    live = local_backend.boot(image, network=False, limits=Limits(), labels={})
    dead = local_backend.boot(image, network=False, limits=Limits(), labels={})
    gone = subprocess.Popen(["true"])
    gone.wait()
    (dead.root / "owner.json").write_text(json.dumps({"pid": gone.pid}))
    try:
        assert local_backend.sweep() == 1
        assert live.root.exists() and not dead.root.exists()
    finally:
        live.close()


def test_missing_host_tools_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_reactbench.sandbox.errors import SandboxError

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("tar", "mount", "unshare", "git"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(SandboxError, match=r"missing: bwrap, node, pnpm \(on Debian: apt-get"):
        LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={}))


def test_a_bake_killed_half_way_is_never_reused(tmp_path: Path) -> None:
    r = recipe(tmp_path, "FROM reactbench/system\nRUN echo one > /app/one\nRUN sleep 60\n")
    kill_a_bake_half_way("local", tmp_path / "cache", r)
    local_backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={}))
    # Only a temporary folder exists: nothing was published under the recipe's key.
    assert list(local_backend.images.glob("*.tmp-*"))
    assert [p for p in local_backend.images.iterdir() if p.is_dir() and ".tmp-" not in p.name] == []
    assert local_backend.sweep() >= 1
    assert not list(local_backend.images.glob("*.tmp-*"))


def test_tmp_is_bounded_and_lasts_as_long_as_the_sandbox(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(storage_mb=64), labels={})
    try:
        assert_tmp_is_usable_scratch(box)
        holder = box.tmp_holder
        assert holder is not None
    finally:
        box.close()
    assert holder.poll() is not None and not box.root.exists()


@pytest.mark.parametrize(("step", "says"), [
    ("RUN apt-get update && apt-get install -y curl", "`apt-get update` installs system packages"),
    ("RUN corepack enable && corepack prepare yarn@1.22.22 --activate", "`corepack enable` puts"),
    ("COPY tool /usr/local/bin/tool", "COPY /usr/local/bin/tool is outside /app"),
    ("WORKDIR /srv/app", "WORKDIR /srv/app is outside /app"),
    ("RUN mkdir -p /opt/ok && echo x > /usr/local/planted", "this step writes outside /app"),
    ("USER node", "USER node is not supported by the local backend"),
    ('SHELL ["/bin/bash", "-c"]', 'SHELL ["/bin/bash", "-c"] is not supported by the local backend'),
], ids=["apt-get", "corepack", "copy-usr", "workdir", "run-usr", "user", "shell"])
def test_steps_the_host_cannot_take_name_the_line_and_the_docker_backend(
        tmp_path: Path, local_backend: LocalBackend, step: str, says: str) -> None:
    r = recipe(tmp_path, f"FROM reactbench/system\nWORKDIR /app\n{step}\n", {"tool": "#!/bin/sh\n"})
    with pytest.raises(BakeError) as info:
        local_backend.bake(r, lambda _: None)
    message = str(info.value)
    assert message.startswith(f"{r.dockerfile}:3: ") and says in message
    assert message.endswith("use --reactbench-sandbox=docker") and "\n" not in message


def test_corepack_into_a_writable_directory_is_allowed(tmp_path: Path, local_backend: LocalBackend) -> None:
    r = recipe(tmp_path, "FROM reactbench/system\nRUN mkdir -p /opt/bin && "
                         "corepack enable --install-directory /opt/bin && test -e /opt/bin/yarn\n")
    assert local_backend.bake(r, lambda _: None).cached is False


def test_a_tree_another_sweep_removes_meanwhile_is_removed_without_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions sweep the same dead sandbox at once: what the other removed first
    is not an error."""
    tree = tmp_path / "sandbox"
    (tree / "state").mkdir(parents=True)
    for name in ("a.json", "b.json"):
        (tree / "state" / name).write_text("{}")
    real_unlink = os.unlink
    raced: list[str] = []

    def unlink_after_the_other_sweep(path: str, *args: object, **kwargs: object) -> None:
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]
        if not raced:
            raced.append(str(path))
            raise FileNotFoundError(2, "No such file or directory", str(path))

    monkeypatch.setattr(os, "unlink", unlink_after_the_other_sweep)
    local._rmtree(tree)
    assert raced and not tree.exists()


def test_a_sandbox_left_at_its_limits_is_collected(tmp_path: Path, local_backend: LocalBackend) -> None:
    """An agent may leave its sandbox's group at a limit (a /tmp filled to the memory
    limit stays charged to the group; seen under load: the collection killed with it).
    The collection runs outside the group: here, the group at its process limit."""
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo work > /app/f\n"),
                               lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        if box.group is None:
            pytest.skip("no cgroup v1 controllers writable here: no limit to reach")
        (pids,) = [d for d in box.group.dirs if (d / "pids.max").exists()]
        (pids / "pids.max").write_text(str(len(box.group.members())))
        assert box.exec("true").exit_code != 0  # nothing more starts in the group
        with tarfile.open(fileobj=io.BytesIO(box.collect("/app", [], 1 << 20))) as tar:
            assert "f" in {m.name.removeprefix("./") for m in tar}
    finally:
        box.close()
