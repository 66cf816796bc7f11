"""An agent's attempts to get out of its sandbox, as one script run inside it with the
host's (or the image's) Python: each attack prints one JSON line, its name and whether
it won."""

from __future__ import annotations

import json
import textwrap

from pytest_reactbench.sandbox.base import Sandbox

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


def attack(box: Sandbox, *paths: str) -> dict[str, dict[str, object]]:
    box.write_file("/tmp/attack.py", ATTACKS)
    result = box.exec(["python3", "/tmp/attack.py", *paths], timeout=60)
    lines = [json.loads(line) for line in result.text.splitlines() if line.startswith("{")]
    assert lines, result.error_text
    return {line["attack"]: line for line in lines}


