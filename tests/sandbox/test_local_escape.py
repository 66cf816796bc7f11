"""The local backend's sandbox attacked from inside, as an agent would, for real:
real bubblewrap, the real kernel, the host's own Python in the sandbox calling the
system calls an escape needs. Each attack must be refused; what the sandbox can see
of the host is its read-only system and nothing of the host's files that matter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.sandbox.local.sandbox import ID_BASE, ID_COUNT
from pytest_reactbench.sandbox.local.seal import LayerChanged
from tests.sandbox.escape import ATTACKS, attack
from tests.sandbox.helpers import recipe

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox holds an agent only as root")

CHECKOUT = Path(__file__).resolve().parents[2]

def test_an_agent_cannot_reach_or_change_the_host(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo base > /app/f\n"),
                               lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={"role": "agent"})
    try:
        got = attack(box, "/usr", "/etc", "/app", "/tmp", "/dev")
        won = {name: line["what"] for name, line in got.items() if line["won"]}
        # The agent owns its own workspace (and its /dev, a tmpfs of its own), and that is
        # all it may write.
        assert set(won) == {"write /app", "write /tmp", "write /dev"}, won
        for path in ("/usr", "/etc", "/app", "/tmp", "/dev"):
            assert got[f"open_by_handle_at {path}"]["what"] == "EPERM"
            assert got[f"name_to_handle_at {path}"]["what"] == "EPERM"
        assert got["unshare user"]["what"] == "EPERM"
        assert got["capabilities"]["what"] == "0000000000000000"
        assert got["uid map"]["what"] == f"['0', '{ID_BASE}', '{ID_COUNT}']"
        # Nothing of the host's that matters is in sight: no checkout, no cache, no home.
        seen = box.exec(["sh", "-c", 'for p in "$@"; do [ -e "$p" ] && echo "$p"; done; true', "seen",
                         str(CHECKOUT), str(local_backend.cache_dir), str(tmp_path), "/work",
                         "/var/run/docker.sock", "/run/docker.sock"]).text
        assert seen == ""
        assert not Path("/usr/.reactbench-planted").exists() and not Path("/etc/.reactbench-planted").exists()
        # The files it made belong to the sandbox's range on the host, not to a host user.
        assert box.exec("echo mine > /app/mine").ok
        assert (box.upper / "app" / "mine").stat().st_uid == ID_BASE
    finally:
        box.close()


def test_the_grader_can_make_its_rooms_and_the_rooms_cannot_get_out(
        tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={"role": "verifier"})
    try:
        box.write_file("/tmp/attack.py", ATTACKS)
        room = box.exec("unshare --pid --fork --kill-child --mount-proc setpriv --reuid=1001 --regid=1001 "
                        "--clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- "
                        "python3 /tmp/attack.py /usr /app", timeout=60)
        assert room.ok, room.error_text
        got = {line["attack"]: line for line in map(json.loads, room.text.splitlines())}
        won = {name: line["what"] for name, line in got.items() if line["won"]}
        assert won == {}, won
        assert got["open_by_handle_at /usr"]["what"] == "EPERM"
        assert got["unshare user"]["what"] == "EPERM"
        # The grader itself, the sandbox's root, may not open a user namespace either.
        assert box.exec("unshare --user true").exit_code != 0
    finally:
        box.close()


def test_a_changed_layer_is_refused_never_used(tmp_path: Path, local_backend: LocalBackend) -> None:
    base = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo graded > /opt/grade.mjs\n"),
                              lambda _: None)
    layer = local_backend.images / base.ref / "layer"
    box = local_backend.boot(base, network=False, limits=Limits(), labels={"role": "agent"})
    box.close()
    # Written on the host after the bake, as a sandbox that got out would: the same
    # size, so only its contents tell.
    (layer / "opt" / "grade.mjs").write_text("passed\n")
    with pytest.raises(LayerChanged, match=r"opt/grade.mjs changed since its bake"):
        local_backend.boot(base, network=False, limits=Limits(), labels={"role": "agent"})
    # A recipe built on it is refused too, and so is an added file.
    (layer / "opt" / "grade.mjs").write_text("graded\n")
    local_backend.boot(base, network=False, limits=Limits(), labels={"role": "agent"}).close()
    (layer / "app" / "planted.js").write_text("x")
    with pytest.raises(LayerChanged, match=r"app/planted.js was added"):
        local_backend.bake(recipe(tmp_path / "on-top", "FROM base\nRUN true\n", baked={"base": base}),
                           lambda _: None)
    assert not list(local_backend.sandboxes.iterdir())
