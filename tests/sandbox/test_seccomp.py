"""The seccomp programs: their shape, their verdicts run through a small classic-BPF
interpreter for both architectures, their syscall numbers against this machine's headers,
and the real thing, loaded by bubblewrap on this kernel."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.local import seccomp
from pytest_reactbench.sandbox.local.seccomp import DENIED, PROFILES, UnsupportedArch, program

ARCHES = ("x86_64", "aarch64")
AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
COMPAT = {"x86_64": 0x40000003, "aarch64": 0x40000028}  # AUDIT_ARCH_I386, AUDIT_ARCH_ARM
ALLOW = 0x7FFF0000
EPERM = 0x00050000 | 1
ENOSYS = 0x00050000 | 38

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWTIME = 0x00000080
NAMESPACES = (
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
    CLONE_NEWNET, CLONE_NEWTIME,
)
# What glibc's pthread_create passes to clone (CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|
# SETTLS|PARENT_SETTID|CHILD_CLEARTID), and fork's SIGCHLD|CHILD_SETTID|CHILD_CLEARTID.
THREAD_FLAGS = 0x003D0F00
FORK_FLAGS = 0x01200011

# Calls no rule names, by number: read, write, openat, execve, wait4, exit_group.
ORDINARY = {"x86_64": (0, 1, 257, 59, 61, 231), "aarch64": (63, 64, 56, 221, 260, 94)}

# The brief's own list of what every profile refuses, outright.
COMMON_REFUSALS = {
    "open_by_handle_at", "name_to_handle_at", "bpf", "perf_event_open", "keyctl", "add_key",
    "request_key", "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module", "iopl", "ioperm", "swapon",
    "swapoff", "reboot", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "quotactl", "lookup_dcookie", "userfaultfd", "vhangup", "nfsservctl", "uselib",
    "fanotify_init", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "pivot_root", "setns", "clone3",
}


def numbers(arch: str) -> dict[str, int]:
    return dict(seccomp._ARCHES[arch].numbers)


# -- a classic-BPF interpreter, for the instructions seccomp programs use ------------------------

Insn = tuple[int, int, int, int]


def decode(prog: bytes) -> list[Insn]:
    return [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]


def seccomp_data(arch: str, nr: int, args: Sequence[int] = (), audit: int | None = None) -> bytes:
    full = [*args, *[0] * (6 - len(args))]
    return struct.pack("<iIQ6Q", nr, AUDIT[arch] if audit is None else audit, 0, *full)


def run(prog: bytes, data: bytes) -> int:
    insns = decode(prog)
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x45:  # jset #k
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"instruction {pc}: unexpected opcode {code:#x}")


def verdict(profile: str, arch: str, name: str, *args: int) -> int:
    prog = program(profile, arch)  # type: ignore[arg-type]
    return run(prog, seccomp_data(arch, numbers(arch)[name], args))


# -- the program's shape -------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("profile", PROFILES)
def test_shape(profile: str, arch: str) -> None:
    prog = program(profile, arch)  # type: ignore[arg-type]
    assert isinstance(prog, bytes)
    assert len(prog) % 8 == 0
    insns = decode(prog)
    assert len(insns) <= 4096  # BPF_MAXINSNS
    # The architecture first: load seccomp_data.arch, and refuse any other.
    assert insns[0] == (0x20, 0, 0, 4)
    assert insns[1] == (0x15, 1, 0, AUDIT[arch])
    assert insns[2] == (0x06, 0, 0, EPERM)
    assert insns[3] == (0x20, 0, 0, 0)
    if arch == "x86_64":
        assert insns[4] == (0x45, 0, 1, 0x40000000)
        assert insns[5] == (0x06, 0, 0, EPERM)
    assert insns[-1] == (0x06, 0, 0, ALLOW)
    for pc, (code, jt, jf, _k) in enumerate(insns):
        assert code in (0x20, 0x15, 0x45, 0x06)
        if code in (0x15, 0x45):
            assert pc + 1 + max(jt, jf) < len(insns)
        if code == 0x20:
            assert _k in (0, 4) or (16 <= _k < 64 and _k % 8 == 0)


def test_default_arch_is_this_machine() -> None:
    machine = platform.machine()
    if machine not in ARCHES:
        with pytest.raises(UnsupportedArch):
            program("agent")
    else:
        assert program("agent") == program("agent", machine)


@pytest.mark.parametrize("arch", ["riscv64", "i686", "armv7l", "s390x", ""])
def test_unsupported_arch(arch: str) -> None:
    with pytest.raises(UnsupportedArch, match="x86_64") as caught:
        program("agent", arch)
    assert isinstance(caught.value, Exception)
    assert repr(arch) in str(caught.value)


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="agent"):
        program("root", "x86_64")  # type: ignore[arg-type]


def test_profiles_differ_where_they_should() -> None:
    assert program("agent", "x86_64") != program("verifier", "x86_64")
    assert program("bake", "x86_64") == program("verifier", "x86_64")
    assert program("agent", "x86_64") != program("agent", "aarch64")


# -- the verdicts --------------------------------------------------------------------------------


def test_denied_lists() -> None:
    assert set(DENIED) == set(PROFILES)
    for profile in PROFILES:
        assert set(DENIED[profile]) >= COMMON_REFUSALS, profile
        assert len(set(DENIED[profile])) == len(DENIED[profile])
    assert {"mount", "umount2", "unshare"} <= set(DENIED["agent"])
    for profile in ("verifier", "bake"):
        assert not {"mount", "umount2", "unshare", "clone"} & set(DENIED[profile])
        assert "CLONE_NEWUSER" in seccomp.CONDITIONAL[profile]["unshare"]
    for profile in PROFILES:
        assert set(seccomp.CONDITIONAL[profile]) >= {"clone", "ioctl", "personality"}


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("profile", PROFILES)
def test_every_denied_call_is_refused(profile: str, arch: str) -> None:
    absent = seccomp._ARCHES[arch].absent
    for name in DENIED[profile]:
        if name in absent:
            assert name in {"iopl", "ioperm", "uselib"}
            continue
        expected = ENOSYS if name == "clone3" else EPERM
        for args in ((), (0xFFFFFFFF, 1, 2, 3, 4, 5)):
            assert verdict(profile, arch, name, *args) == expected, (name, args)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("profile", PROFILES)
def test_everything_else_is_allowed(profile: str, arch: str) -> None:
    prog = program(profile, arch)  # type: ignore[arg-type]
    ruled = {numbers(arch)[name] for name in (*DENIED[profile], *seccomp.CONDITIONAL[profile])
             if name in numbers(arch)}
    for nr in ORDINARY[arch]:
        assert nr not in ruled
    for nr in range(600):
        if nr not in ruled:
            assert run(prog, seccomp_data(arch, nr, (1, 2, 3))) == ALLOW, nr


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("profile", PROFILES)
def test_other_architectures_are_refused(profile: str, arch: str) -> None:
    prog = program(profile, arch)  # type: ignore[arg-type]
    for nr in (*ORDINARY[arch], 0):
        assert run(prog, seccomp_data(arch, nr, audit=COMPAT[arch])) == EPERM
        other = AUDIT["aarch64" if arch == "x86_64" else "x86_64"]
        assert run(prog, seccomp_data(arch, nr, audit=other)) == EPERM


@pytest.mark.parametrize("profile", PROFILES)
def test_x32_calls_are_refused(profile: str) -> None:
    prog = program(profile, "x86_64")  # type: ignore[arg-type]
    for nr in (0, 1, 257, 59):
        assert run(prog, seccomp_data("x86_64", 0x40000000 | nr)) == EPERM
    # No such bit on aarch64: a number that high is merely unknown to the kernel.
    assert run(program(profile, "aarch64"), seccomp_data("aarch64", 0x40000000)) == ALLOW  # type: ignore[arg-type]


@pytest.mark.parametrize("arch", ARCHES)
def test_clone_namespaces(arch: str) -> None:
    for flag in NAMESPACES:
        # The agent makes no namespace; the others make any but a user namespace.
        assert verdict("agent", arch, "clone", flag | FORK_FLAGS) == EPERM, hex(flag)
        for profile in ("verifier", "bake"):
            expected = EPERM if flag == CLONE_NEWUSER else ALLOW
            assert verdict(profile, arch, "clone", flag | FORK_FLAGS) == expected, (profile, hex(flag))
    for profile in PROFILES:
        assert verdict(profile, arch, "clone", THREAD_FLAGS, 1, 2, 3, 4) == ALLOW
        assert verdict(profile, arch, "clone", FORK_FLAGS) == ALLOW
        # Only the low word of the flags matters to the kernel, and to the filter.
        assert verdict(profile, arch, "clone", CLONE_NEWUSER | (0xFFFFFFFF << 32)) == EPERM
        assert verdict(profile, arch, "clone", FORK_FLAGS | (CLONE_NEWUSER << 32)) == ALLOW
        # A namespace flag in another argument is no flag.
        assert verdict(profile, arch, "clone", FORK_FLAGS, CLONE_NEWUSER, CLONE_NEWUSER) == ALLOW
        assert verdict(profile, arch, "clone3", 0, 88) == ENOSYS


@pytest.mark.parametrize("arch", ARCHES)
def test_unshare(arch: str) -> None:
    for flags in (0, CLONE_NEWNS, CLONE_NEWNS | CLONE_NEWPID, CLONE_NEWUSER):
        assert verdict("agent", arch, "unshare", flags) == EPERM
    for profile in ("verifier", "bake"):
        assert verdict(profile, arch, "unshare", CLONE_NEWNS | CLONE_NEWPID) == ALLOW
        assert verdict(profile, arch, "unshare", CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == ALLOW
        assert verdict(profile, arch, "unshare", CLONE_NEWUSER) == EPERM
        assert verdict(profile, arch, "unshare", CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) == EPERM
        assert verdict(profile, arch, "mount", 0, 0, 0, 0, 0) == ALLOW
        assert verdict(profile, arch, "umount2", 0, 0) == ALLOW


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("profile", PROFILES)
def test_ioctl_and_personality(profile: str, arch: str) -> None:
    for request in (0x5412, 0x541C, 0x5412 | (1 << 32), 0x541C | (0xDEAD << 32)):
        assert verdict(profile, arch, "ioctl", 0, request) == EPERM, hex(request)
    for request in (0x5401, 0x5413, 0x541B, 0x80045430, 0x5412 << 1):  # TCGETS, TIOCGWINSZ, FIONREAD...
        assert verdict(profile, arch, "ioctl", 0, request) == ALLOW, hex(request)
    # TIOCSTI's number in the fd argument is not the request.
    assert verdict(profile, arch, "ioctl", 0x5412, 0x5401) == ALLOW
    for persona in (0, 8, 0x20000, 0x20008, 0xFFFFFFFF):
        assert verdict(profile, arch, "personality", persona) == ALLOW, hex(persona)
    for persona in (0x0040000, 0x0400000, 0x4000000, 0x0008 | 0x0040000, 1):  # ADDR_NO_RANDOMIZE...
        assert verdict(profile, arch, "personality", persona) == EPERM, hex(persona)


# -- the numbers against the headers -------------------------------------------------------------


def header_numbers(path: Path) -> dict[str, int]:
    text = path.read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"^#define __NR_(\w+)\s+(\d+)\b", text, re.M)}


@pytest.mark.parametrize(
    ("arch", "header"),
    [
        ("x86_64", Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")),
        ("aarch64", Path("/usr/include/asm-generic/unistd.h")),  # aarch64's is the generic table
    ],
)
def test_numbers_match_the_headers(arch: str, header: Path) -> None:
    if not header.exists():
        pytest.skip(f"no {header} on this machine")
    known = header_numbers(header)
    for name, number in numbers(arch).items():
        assert known.get(name) == number, name
    for name in seccomp._ARCHES[arch].absent:
        assert name not in known, name


def test_every_rule_has_its_numbers() -> None:
    for arch in ARCHES:
        spec = seccomp._ARCHES[arch]
        for profile in PROFILES:
            for rule in seccomp._RULES[profile]:
                assert (rule.name in spec.numbers) != (rule.name in spec.absent), (arch, rule.name)
        assert len(set(spec.numbers.values())) == len(spec.numbers)


# -- the real thing: bubblewrap loads each program on this kernel --------------------------------

real = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in ARCHES
    or shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="needs bubblewrap, root, and an x86_64 or aarch64 Linux",
)


def bwrap(
    profile: str | None, argv: Sequence[str], *, userns: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run argv under bwrap as its tests' root, with every capability, and the program of
    ``profile`` (none for None) read from a pipe."""
    cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
           "--unshare-pid", "--die-with-parent", "--cap-add", "ALL"]
    if userns:
        cmd += ["--unshare-user", "--uid", "0", "--gid", "0"]
    fds: tuple[int, ...] = ()
    if profile is not None:
        prog = program(profile)  # type: ignore[arg-type]
        read, write = os.pipe()
        assert len(prog) < 65536  # the pipe holds it all before bwrap reads it
        os.write(write, prog)
        os.close(write)
        fds = (read,)
        cmd += ["--seccomp", str(read)]
    try:
        return subprocess.run([*cmd, "--", *argv], pass_fds=fds, capture_output=True, text=True,
                              timeout=60, cwd="/")
    finally:
        for fd in fds:
            os.close(fd)


# Each call with arguments the kernel itself refuses (so that, unfiltered, the answer is
# never EPERM, and nothing happens whatever the filter does), then the one real request:
# a new user namespace.
PROBE = r"""
import ctypes, json, sys
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    conv = [a if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    r = libc.syscall(ctypes.c_long(nr[name]), *conv)
    return "ok" if r >= 0 else {1: "EPERM", 38: "ENOSYS"}.get(ctypes.get_errno(), "other")
NEWNS, NEWUSER, FS, VFORK = 0x20000, 0x10000000, 0x200, 0x4000
out = {
    "open_by_handle_at": call("open_by_handle_at", -1, 0, 0),
    "name_to_handle_at": call("name_to_handle_at", -1, 0, 0, 0, 0),
    "mount": call("mount", 0, b"/nonexistent-seccomp", 0, 0, 0),
    "umount2": call("umount2", b"/nonexistent-seccomp", 0),
    "unshare(NEWNS|VFORK)": call("unshare", NEWNS | VFORK),
    "clone(NEWUSER|FS)": call("clone", NEWUSER | FS, 0, 0, 0, 0),
    "clone(NEWNS|FS)": call("clone", NEWNS | FS, 0, 0, 0, 0),
    "clone3": call("clone3", 0, 0),
    "ptrace": call("ptrace", 2, 0x3FFFFFF0, 0, 0),
    "bpf": call("bpf", 0xFFFF, 0, 0),
    "keyctl": call("keyctl", 0xFFFF, 0, 0, 0, 0),
    "add_key": call("add_key", 0, 0, 0, 0, -1),
    "perf_event_open": call("perf_event_open", 0, 0, -1, -1, 0),
    "setns": call("setns", -1, 0),
    "fsopen": call("fsopen", 0, 0),
    "open_tree": call("open_tree", -1, 0, 0),
    "pidfd_getfd": call("pidfd_getfd", -1, -1, 0),
    "process_vm_readv": call("process_vm_readv", 0x3FFFFFF0, 0, 0, 0, 0, 0),
    "userfaultfd": call("userfaultfd", 0xFFFFFFFF),
    "ioctl(TIOCSTI)": call("ioctl", -1, 0x5412, 0),
    "ioctl(TIOCSTI, high bits)": call("ioctl", -1, (1 << 32) | 0x5412, 0),
    "ioctl(TIOCLINUX)": call("ioctl", -1, 0x541C, 0),
    "ioctl(TCGETS)": call("ioctl", -1, 0x5401, 0),
    "personality(query)": call("personality", 0xFFFFFFFF),
    "personality(ADDR_NO_RANDOMIZE)": call("personality", 0x0040000),
}
out["unshare(NEWUSER)"] = call("unshare", NEWUSER)
print(json.dumps(out))
"""

REFUSED_EVERYWHERE = {
    "open_by_handle_at", "name_to_handle_at", "clone(NEWUSER|FS)", "ptrace", "bpf", "keyctl",
    "add_key", "perf_event_open", "setns", "fsopen", "open_tree", "pidfd_getfd", "process_vm_readv",
    "userfaultfd", "ioctl(TIOCSTI)", "ioctl(TIOCSTI, high bits)", "ioctl(TIOCLINUX)",
    "personality(ADDR_NO_RANDOMIZE)", "unshare(NEWUSER)",
}
REFUSED_BY_AGENT = {"mount", "umount2", "unshare(NEWNS|VFORK)", "clone(NEWNS|FS)"}


def probe(profile: str | None) -> dict[str, str]:
    done = bwrap(profile, ["python3", "-c", PROBE, json.dumps(numbers(platform.machine()))])
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


@real
def test_unfiltered_calls_are_not_eperm() -> None:
    """Without a filter the kernel answers each probe otherwise than EPERM: so the EPERM
    of the filtered runs below is the filter's."""
    result = probe(None)
    assert {k: v for k, v in result.items() if v in ("EPERM", "ENOSYS")} == {}
    assert result["unshare(NEWUSER)"] == "ok"


@real
@pytest.mark.parametrize("profile", PROFILES)
def test_refused_calls_under_bwrap(profile: str) -> None:
    result = probe(profile)
    refused = REFUSED_EVERYWHERE | (REFUSED_BY_AGENT if profile == "agent" else set())
    expected = {key: "EPERM" if key in refused else "other" for key in result}
    expected["clone3"] = "ENOSYS"
    expected["personality(query)"] = "ok"
    assert result == expected


AGENT_WORK = r"""
set -e
node -e '
const cp = require("child_process");
const { Worker } = require("worker_threads");
const w = new Worker("require(\"worker_threads\").parentPort.postMessage(6 * 7)", { eval: true });
w.on("message", (m) => { console.log("node", cp.execSync("echo ok").toString().trim(), m); });
'
cd /tmp
git init -q repo
git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m first
echo "git $(git -C repo rev-list --count HEAD)"
python3 -c '
import subprocess, threading
out = []
def work():
    out.append(subprocess.run(["echo", "ok"], capture_output=True, text=True).stdout.strip())
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("python", *out)
'
"""


@real
@pytest.mark.skipif(shutil.which("node") is None or shutil.which("git") is None, reason="needs node and git")
def test_ordinary_work_under_the_agent_profile() -> None:
    done = bwrap("agent", ["sh", "-c", AGENT_WORK])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["node ok 42", "git 1", "python ok ok ok ok", ""]


ROOMS = r"""
if unshare --pid --fork --mount-proc sh -c 'test "$(cut -d" " -f1 /proc/self/stat)" -lt 10'; then
  echo rooms
else
  echo no-rooms
fi
if unshare --user true 2>/dev/null; then echo user-ns; else echo no-user-ns; fi
setpriv "$@" id -u
"""


@real
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("setpriv") is None,
                    reason="needs util-linux's unshare and setpriv")
@pytest.mark.parametrize("userns", [False, True], ids=["root", "userns-root"])
@pytest.mark.parametrize("profile", ["verifier", "agent", None])
def test_rooms_of_the_verifier(profile: str | None, userns: bool) -> None:
    """The grader, root (of a user namespace, in the sandbox), makes its rooms under the
    verifier profile, and drops its privileges with setpriv; never a user namespace of its
    own. The agent makes no room at all."""
    # bwrap's user namespace maps uid 0 alone, and denies setgroups.
    setpriv = ["--reuid", "0", "--regid", "0", "--keep-groups", "--inh-caps=-all"] if userns else [
        "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    done = bwrap(profile, ["sh", "-c", ROOMS, "rooms", *setpriv], userns=userns)
    assert done.returncode == 0, done.stderr
    rooms = "no-rooms" if profile == "agent" else "rooms"
    user_ns = "user-ns" if profile is None else "no-user-ns"
    assert done.stdout.split() == [rooms, user_ns, "0" if userns else "65534"]
