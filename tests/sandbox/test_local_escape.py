"""The local backend's sandbox attacked from inside, as an agent would, for real:
real bubblewrap, the real kernel, the host's own Python in the sandbox calling the
system calls an escape needs. Each attack must be refused; what the sandbox can see
of the host is its read-only system and nothing of the host's files that matter."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.sandbox.local.sandbox import ID_BASE, ID_COUNT, LocalSandbox
from pytest_reactbench.sandbox.local.seal import LayerChanged
from tests.sandbox.helpers import recipe

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox holds an agent only as root")

CHECKOUT = Path(__file__).resolve().parents[2]

#: Each attack prints one JSON line: its name and what it got (an errno name, or what it read).
ATTACKS = textwrap.dedent(r'''
    import ctypes, errno, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    def report(name, ok, what=""):
        print(json.dumps({"attack": name, "won": bool(ok), "what": str(what)}), flush=True)
    def call(name, fn):
        ctypes.set_errno(0)
        result = fn()
        err = ctypes.get_errno()
        report(name, result >= 0, errno.errorcode.get(err, err) if result < 0 else result)
    class Handle(ctypes.Structure):
        _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
    for path in sys.argv[1:]:
        handle, mount_id = Handle(128, 0), ctypes.c_int()
        call("name_to_handle_at " + path, lambda: libc.name_to_handle_at(
            -100, path.encode(), ctypes.byref(handle), ctypes.byref(mount_id), 0))
        fd = os.open(path, os.O_RDONLY)
        # The handle of the filesystem's root (inode 2 on ext4), as the known escape forges it.
        forged = Handle(8, 1)
        forged.f[0] = 2
        call("open_by_handle_at " + path, lambda: libc.open_by_handle_at(fd, ctypes.byref(forged), 0))
        call("remount rw " + path, lambda: libc.mount(None, path.encode(), None, 0x20 | 0x1000, None))
        try:
            with open(os.path.join(path, ".reactbench-planted"), "w") as f:
                f.write("x")
            report("write " + path, True)
        except OSError as exc:
            report("write " + path, False, exc.strerror)
    call("mount tmpfs", lambda: libc.mount(b"x", b"/tmp", b"tmpfs", 0, None))
    call("unshare user", lambda: libc.unshare(0x10000000))
    call("unshare mount", lambda: libc.unshare(0x00020000))
    call("ptrace attach", lambda: libc.ptrace(16, 1, None, None))
    call("setns", lambda: libc.setns(os.open("/proc/1/ns/mnt", os.O_RDONLY), 0))
    call("chroot", lambda: libc.chroot(b"/tmp"))
    for secret in ("/etc/shadow",):
        try:
            report("read " + secret, True, open(secret).read(20))
        except OSError as exc:
            report("read " + secret, False, exc.strerror)
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
                  if ":\t" in line)
    report("capabilities", int(status["CapEff"], 16) != 0, status["CapEff"])
    report("uid map", False, open("/proc/self/uid_map").read().split())
''')


def _attack(box: LocalSandbox, *paths: str) -> dict[str, dict[str, object]]:
    box.write_file("/tmp/attack.py", ATTACKS)
    result = box.exec(["python3", "/tmp/attack.py", *paths], timeout=60)
    lines = [json.loads(line) for line in result.text.splitlines() if line.startswith("{")]
    assert lines, result.error_text
    return {line["attack"]: line for line in lines}


def test_an_agent_cannot_reach_or_change_the_host(tmp_path: Path, local_backend: LocalBackend) -> None:
    image = local_backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo base > /app/f\n"),
                               lambda _: None)
    box = local_backend.boot(image, network=False, limits=Limits(), labels={"role": "agent"})
    try:
        got = _attack(box, "/usr", "/etc", "/app", "/tmp", "/dev")
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
