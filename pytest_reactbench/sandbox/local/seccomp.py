"""Seccomp filters for bubblewrap: classic-BPF programs, built here with the standard
library alone, in the form ``bwrap --seccomp FD`` / ``--add-seccomp-fd FD`` reads from
its descriptor (an array of ``struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}``,
native byte order, no header).

Three profiles, for the three kinds of work a sandbox runs:

``agent``
    An untrusted agent's commands. The common refusals below, plus ``mount``,
    ``umount2``, ``unshare`` whatever its flags, and ``clone`` with any namespace flag.
``verifier``
    The grader, root of a user namespace, which makes rooms for the code under test
    with ``unshare --pid --fork --mount-proc`` and ``setpriv``: the common refusals;
    ``mount`` and ``unshare`` are allowed, but never a new user namespace.
``bake``
    A task's own Dockerfile steps: the common refusals only (the same program as
    ``verifier`` today; the two are kept apart so either can change alone).

The common refusals follow bubblewrap's own recommendations and Docker's default
profile: file handles (``open_by_handle_at``, ``name_to_handle_at``), the kernel's
keyring, BPF and perf, tracing other processes (``ptrace``, ``process_vm_*``,
``pidfd_getfd``), modules and kexec, port I/O, swap, reboot, accounting, the clock,
the kernel log, quotas, ``userfaultfd``, ``vhangup``, the old ``nfsservctl`` and
``uselib``, the new mount API (``open_tree`` ... ``mount_setattr``), ``pivot_root``,
``setns``, ``fanotify_init``, ``personality`` but for the values Docker allows,
``ioctl`` TIOCSTI and TIOCLINUX (typing into, or reading, the controlling terminal),
and any ``unshare`` or ``clone`` asking for a new user namespace. Each is answered
``EPERM``; ``clone3`` is answered ``ENOSYS`` (its flags are in memory a filter cannot
read), on which glibc falls back to ``clone``, whose flags the filter does see.

The filter first checks the call's architecture: a 32-bit compat call (``int 0x80`` on
x86_64, AArch32 on aarch64), and on x86_64 any x32 call, is refused ``EPERM``, so no
other syscall table can slip past the numbers below. The program then tests the call's
number against each rule in turn; a rule that matches decides the call at once, and the
arguments are read only after the number matched, so every jump is short and the
kernel's per-syscall action cache still allows the untouched calls without running the
filter at all.
"""

from __future__ import annotations

import platform
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

__all__ = ["CONDITIONAL", "DENIED", "PROFILES", "Profile", "UnsupportedArch", "program"]

Profile = Literal["agent", "verifier", "bake"]
PROFILES: Final[tuple[Profile, ...]] = ("agent", "verifier", "bake")


class UnsupportedArch(Exception):
    """No seccomp program is known for this machine's architecture."""

    def __init__(self, arch: str) -> None:
        super().__init__(
            f"no seccomp filter for the {arch!r} architecture: only {', '.join(sorted(_ARCHES))} "
            "are supported"
        )
        self.arch = arch


# -- the numbers ---------------------------------------------------------------------------------

# Only the names a rule uses, from linux/arch/x86/entry/syscalls/syscall_64.tbl as
# <asm/unistd_64.h> gives them (tests/sandbox/test_seccomp.py checks them against the
# header when the machine has it).
_X86_64: Final[Mapping[str, int]] = MappingProxyType({
    "ioctl": 16,
    "clone": 56,
    "ptrace": 101,
    "syslog": 103,
    "uselib": 134,
    "personality": 135,
    "vhangup": 153,
    "pivot_root": 155,
    "adjtimex": 159,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "nfsservctl": 180,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "quotactl_fd": 443,
})

# aarch64 uses the generic table, <asm-generic/unistd.h>.
_AARCH64: Final[Mapping[str, int]] = MappingProxyType({
    "lookup_dcookie": 18,
    "ioctl": 29,
    "umount2": 39,
    "mount": 40,
    "pivot_root": 41,
    "nfsservctl": 42,
    "vhangup": 58,
    "quotactl": 60,
    "acct": 89,
    "personality": 92,
    "unshare": 97,
    "kexec_load": 104,
    "init_module": 105,
    "delete_module": 106,
    "clock_settime": 112,
    "syslog": 116,
    "ptrace": 117,
    "reboot": 142,
    "settimeofday": 170,
    "adjtimex": 171,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "clone": 220,
    "swapon": 224,
    "swapoff": 225,
    "perf_event_open": 241,
    "fanotify_init": 262,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "clock_adjtime": 266,
    "setns": 268,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "finit_module": 273,
    "bpf": 280,
    "userfaultfd": 282,
    "kexec_file_load": 294,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "quotactl_fd": 443,
})


@dataclass(frozen=True)
class _Arch:
    audit: int  # AUDIT_ARCH_*, as seccomp_data.arch carries it
    x32: bool  # whether calls with __X32_SYSCALL_BIT set reach this filter
    numbers: Mapping[str, int]
    absent: frozenset[str]  # refused names this architecture has no syscall for


_ARCHES: Final[Mapping[str, _Arch]] = MappingProxyType({
    "x86_64": _Arch(0xC000003E, True, _X86_64, frozenset()),
    "aarch64": _Arch(0xC00000B7, False, _AARCH64, frozenset({"iopl", "ioperm", "uselib"})),
})
_ALIASES: Final[Mapping[str, str]] = MappingProxyType({"amd64": "x86_64", "arm64": "aarch64"})

# -- the rules -----------------------------------------------------------------------------------

EPERM: Final = 1
ENOSYS: Final = 38

CLONE_NEWTIME: Final = 0x00000080
CLONE_NEWNS: Final = 0x00020000
CLONE_NEWCGROUP: Final = 0x02000000
CLONE_NEWUTS: Final = 0x04000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000
# Every namespace flag. CLONE_NEWTIME shares its bit with clone()'s exit signal (CSIGNAL),
# which no valid signal number sets, so refusing it there costs nothing.
CLONE_NAMESPACES: Final = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
    | CLONE_NEWNET | CLONE_NEWTIME
)

TIOCSTI: Final = 0x5412
TIOCLINUX: Final = 0x541C

# personality(2) values Docker's default profile allows: PER_LINUX, PER_LINUX32,
# UNAME26, PER_LINUX32|UNAME26, and 0xffffffff (the query).
PERSONALITIES: Final = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)


@dataclass(frozen=True)
class _Deny:
    """The call refused whatever its arguments."""

    name: str
    errno: int = EPERM


@dataclass(frozen=True)
class _DenyBits:
    """The call refused (EPERM) when the low word of argument ``arg`` has a bit of ``mask``."""

    name: str
    arg: int
    mask: int


@dataclass(frozen=True)
class _DenyValues:
    """The call refused (EPERM) when the low word of argument ``arg`` is one of ``values``."""

    name: str
    arg: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class _AllowValues:
    """The call allowed only when the low word of argument ``arg`` is one of ``values``."""

    name: str
    arg: int
    values: tuple[int, ...]


_Rule = _Deny | _DenyBits | _DenyValues | _AllowValues

_COMMON_NAMES: Final = (
    # File handles reach any inode of a mounted filesystem, past the sandbox's view of it.
    "open_by_handle_at", "name_to_handle_at",
    # The kernel's attack surface an agent has no use for.
    "bpf", "perf_event_open", "userfaultfd", "lookup_dcookie", "nfsservctl", "uselib",
    # The keyring is not namespaced.
    "keyctl", "add_key", "request_key",
    # Other processes' memory and descriptors.
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    # The machine itself.
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "iopl", "ioperm", "swapon", "swapoff", "reboot", "acct", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "quotactl", "quotactl_fd", "fanotify_init",
    # Mounts and namespaces by other doors than mount(2) and unshare(2).
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "pivot_root", "setns",
)

_COMMON: Final[tuple[_Rule, ...]] = (
    *(_Deny(name) for name in _COMMON_NAMES),
    _AllowValues("personality", 0, PERSONALITIES),
    _DenyValues("ioctl", 1, (TIOCSTI, TIOCLINUX)),
    _Deny("clone3", ENOSYS),
)

_RULES: Final[Mapping[Profile, tuple[_Rule, ...]]] = MappingProxyType({
    "agent": (
        *_COMMON,
        _Deny("mount"),
        _Deny("umount2"),
        _Deny("unshare"),
        _DenyBits("clone", 0, CLONE_NAMESPACES),
    ),
    "verifier": (
        *_COMMON,
        _DenyBits("unshare", 0, CLONE_NEWUSER),
        _DenyBits("clone", 0, CLONE_NEWUSER),
    ),
    "bake": (
        *_COMMON,
        _DenyBits("unshare", 0, CLONE_NEWUSER),
        _DenyBits("clone", 0, CLONE_NEWUSER),
    ),
})

#: Per profile, the syscalls refused whatever their arguments (each ``EPERM`` but
#: ``clone3``, ``ENOSYS``), where the architecture has them (``iopl``, ``ioperm`` and
#: ``uselib`` are x86_64's alone).
DENIED: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    profile: tuple(rule.name for rule in rules if isinstance(rule, _Deny))
    for profile, rules in _RULES.items()
})


def _describe(rule: _Rule) -> str:
    if isinstance(rule, _DenyBits):
        names = [
            name for name, bit in (
                ("CLONE_NEWNS", CLONE_NEWNS), ("CLONE_NEWCGROUP", CLONE_NEWCGROUP),
                ("CLONE_NEWUTS", CLONE_NEWUTS), ("CLONE_NEWIPC", CLONE_NEWIPC),
                ("CLONE_NEWUSER", CLONE_NEWUSER), ("CLONE_NEWPID", CLONE_NEWPID),
                ("CLONE_NEWNET", CLONE_NEWNET), ("CLONE_NEWTIME", CLONE_NEWTIME),
            ) if rule.mask & bit
        ]
        return f"refused when flags (argument {rule.arg}) has any of {'|'.join(names)}"
    if isinstance(rule, _DenyValues):
        return f"refused when argument {rule.arg} is {' or '.join(hex(v) for v in rule.values)}"
    if isinstance(rule, _AllowValues):
        return f"allowed only when argument {rule.arg} is {' or '.join(hex(v) for v in rule.values)}"
    raise AssertionError(rule)


#: Per profile, the syscalls refused (EPERM) for some arguments only, and which.
CONDITIONAL: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType({
    profile: MappingProxyType({
        rule.name: _describe(rule) for rule in rules if not isinstance(rule, _Deny)
    })
    for profile, rules in _RULES.items()
})

# -- the program ---------------------------------------------------------------------------------

# <linux/filter.h>, <linux/bpf_common.h>
_LD_W_ABS: Final = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K: Final = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K: Final = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
_RET_K: Final = 0x06 | 0x00  # BPF_RET | BPF_K
# <linux/seccomp.h>
_RET_ALLOW: Final = 0x7FFF0000
_RET_ERRNO: Final = 0x00050000
# Offsets into struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6]}.
_NR: Final = 0
_ARCH: Final = 4
_X32_SYSCALL_BIT: Final = 0x40000000

_Insn = tuple[int, int, int, int]


def _arg_low(index: int) -> int:
    """The offset of argument ``index``'s low 32 bits (both supported arches are little-endian)."""
    return 16 + 8 * index


def _ld(offset: int) -> _Insn:
    return (_LD_W_ABS, 0, 0, offset)


def _jeq(k: int, jt: int, jf: int) -> _Insn:
    return (_JEQ_K, jt, jf, k)


def _jset(k: int, jt: int, jf: int) -> _Insn:
    return (_JSET_K, jt, jf, k)


def _ret(k: int) -> _Insn:
    return (_RET_K, 0, 0, k)


def _errno(errno: int) -> _Insn:
    return _ret(_RET_ERRNO | errno)


def _any_of(values: Sequence[int]) -> list[_Insn]:
    """Tests of A against each value: a match jumps to the instruction just after the last
    test, no match at all skips that one instruction too."""
    last = len(values) - 1
    return [_jeq(value, last - i, 0) if i < last else _jeq(value, 0, 1) for i, value in enumerate(values)]


def _block(number: int, rule: _Rule) -> list[_Insn]:
    """The instructions of one rule: with the syscall number in A, a test of it that skips
    the rest when it differs; the rest reads the arguments it needs and returns."""
    body: list[_Insn]
    if isinstance(rule, _Deny):
        body = [_errno(rule.errno)]
    elif isinstance(rule, _DenyBits):
        body = [_ld(_arg_low(rule.arg)), _jset(rule.mask, 0, 1), _errno(EPERM), _ret(_RET_ALLOW)]
    elif isinstance(rule, _DenyValues):
        body = [_ld(_arg_low(rule.arg)), *_any_of(rule.values), _errno(EPERM), _ret(_RET_ALLOW)]
    else:
        body = [_ld(_arg_low(rule.arg)), *_any_of(rule.values), _ret(_RET_ALLOW), _errno(EPERM)]
    return [_jeq(number, 0, len(body)), *body]


def _resolve(arch: str | None) -> tuple[str, _Arch]:
    name = platform.machine() if arch is None else arch
    name = _ALIASES.get(name, name)
    try:
        return name, _ARCHES[name]
    except KeyError:
        raise UnsupportedArch(name) from None


def _instructions(profile: Profile, spec: _Arch) -> list[_Insn]:
    insns: list[_Insn] = [
        _ld(_ARCH),
        _jeq(spec.audit, 1, 0),
        _errno(EPERM),
        _ld(_NR),
    ]
    if spec.x32:
        insns += [_jset(_X32_SYSCALL_BIT, 0, 1), _errno(EPERM)]
    for rule in _RULES[profile]:
        if rule.name in spec.absent:
            continue
        insns += _block(spec.numbers[rule.name], rule)
    insns.append(_ret(_RET_ALLOW))
    return insns


def _encode(insns: Sequence[_Insn]) -> bytes:
    # struct sock_filter in the target's (little-endian) byte order; struct.pack refuses a
    # jump offset past 255, which the layout above never needs.
    return b"".join(struct.pack("<HBBI", *insn) for insn in insns)


def program(profile: Profile, arch: str | None = None) -> bytes:
    """The seccomp program of ``profile`` for ``arch`` (this machine's,
    ``platform.machine()``, by default), ready to be written to the descriptor given to
    ``bwrap --seccomp`` or ``--add-seccomp-fd``. Raises UnsupportedArch for any
    architecture but x86_64 and aarch64, and ValueError for an unknown profile."""
    if profile not in _RULES:
        raise ValueError(f"unknown seccomp profile {profile!r}: expected one of {', '.join(PROFILES)}")
    _, spec = _resolve(arch)
    return _encode(_instructions(profile, spec))
