"""The seccomp filter of the bwrap executor, as raw classic-BPF bytes for `bwrap --seccomp FD`.

    from retrace.tools._seccomp import filter_bytes
    data = filter_bytes()        # None on an architecture without a table here

What it refuses (a deny-list, not an allow-list: every other system call reaches the kernel):
- sockets of any family but AF_UNIX (`socket`, `socketpair`: EAFNOSUPPORT), so AF_VSOCK,
  AF_NETLINK, AF_PACKET ... cannot even be created (the network namespace already leaves
  only an unrouted loopback for AF_INET/AF_INET6);
- new namespaces: `unshare`/`clone` with any CLONE_NEW* flag and `setns` (EPERM), so no
  nested user namespace in which the program would be root and could mount its own,
  uncapped tmpfs; `clone3` answers ENOSYS (its flags sit in memory a filter cannot read;
  glibc then falls back to `clone`);
- memory outside the address-space and scratch caps: `memfd_create`, `memfd_secret`, and all
  of SysV IPC: message queues (`msgget`, `msgsnd`, `msgrcv`, `msgctl`), semaphores (`semget`,
  `semop`, `semtimedop`, `semctl`) and shared memory (`shmget`, `shmat`, `shmdt`, `shmctl`)
  (EPERM); plus `mount` and the new mount API, `io_uring_setup`,
  `userfaultfd`, `bpf`, `perf_event_open` (EPERM);
- other processes' memory and descriptors: `ptrace`, `process_vm_readv`, `process_vm_writev`,
  `pidfd_getfd` (EPERM; with /proc/1 hidden, the sandbox's init is out of reach) and
  `umount2` (nothing of the sandbox's mounts may be taken away);
- the kernel keyrings: `add_key`, `request_key`, `keyctl` (EPERM): no key of the caller's
  session or user keyring can be read, linked or searched, and none added (a key would
  outlive the run: a channel between runs and kernel memory never freed);
- per-uid kernel counters a run could exhaust for its whole user: `inotify_init`,
  `inotify_init1` (max_user_instances) and `mq_open` (RLIMIT_MSGQUEUE) (EPERM);
- any other ABI (i386 via int 0x80, x32): the process is killed.
Layout of `struct seccomp_data` and the return values: linux/seccomp.h, linux/filter.h.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0: low 32 bits, LE)
AF_UNIX = 1
CLONE_NEW_ANY = 0x7E020080  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME

# name -> number; the new mount API (428-433), clone3 and io_uring share numbers across arches
_COMMON = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "io_uring_setup": 425,
    "clone3": 435,
    "memfd_secret": 447,
    "pidfd_getfd": 438,
}
# SysV IPC (message queues, semaphores, shared memory): kernel memory outside every rlimit
# (msgsnd grew it by 525 MB in one run, red team 2026-12). The IPC namespace hides other
# runs' objects but caps nothing. x86_64 and aarch64 have no multiplexed ipc() (the i386
# ABI that does is killed at the architecture check).
_SYSV_X86_64 = {
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "shmdt": 67,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "semtimedop": 220,
}
_SYSV_GENERIC = {
    "msgget": 186,
    "msgctl": 187,
    "msgrcv": 188,
    "msgsnd": 189,
    "semget": 190,
    "semctl": 191,
    "semtimedop": 192,
    "semop": 193,
    "shmget": 194,
    "shmctl": 195,
    "shmat": 196,
    "shmdt": 197,
}
SYSV_IPC = tuple(_SYSV_X86_64)
# Reaching other processes' memory or descriptors: the sandbox's PID-namespace init (bwrap, pid
# 1) runs as the program's own uid when the caller is an ordinary user, and a program that
# could ptrace it or write its memory could disarm its parent-death signal and outlive its
# caller (red team round 4). /proc/1 itself is hidden by a mount (tools/bwrap_exec.py).
# Kernel keyrings: a caller's session and user keyrings would be readable and writable, and
# keys left by a run would outlive it (a channel between runs, kernel memory never freed).
# inotify: instances count per uid (fs.inotify.max_user_instances, 128): one run took all of
# its user's, so a host process of that user could make none. POSIX message queues count
# against the uid's RLIMIT_MSGQUEUE. Numbers: each architecture's unistd.h.
_X86_64_ONLY = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "inotify_init": 253,
    "inotify_init1": 294,
    "mq_open": 240,
}
_GENERIC_ONLY = {
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "inotify_init1": 26,
    "mq_open": 180,
}
OTHER_PROCESSES = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
KEYRINGS = ("add_key", "request_key", "keyctl")
PER_UID_COUNTERS = ("inotify_init", "inotify_init1", "mq_open")
_TABLES = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "socketpair": 53,
            "clone": 56,
            "unshare": 272,
            "setns": 308,
            "memfd_create": 319,
            "mount": 165,
            "userfaultfd": 323,
            "bpf": 321,
            "perf_event_open": 298,
            "umount2": 166,
            **_SYSV_X86_64,
            **_X86_64_ONLY,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "socketpair": 199,
            "clone": 220,
            "unshare": 97,
            "setns": 268,
            "memfd_create": 279,
            "mount": 40,
            "userfaultfd": 282,
            "bpf": 280,
            "perf_event_open": 241,
            "umount2": 39,
            **_SYSV_GENERIC,
            **_GENERIC_ONLY,
        },
    ),
}
_DENY = [
    "setns",
    "memfd_create",
    "memfd_secret",
    *SYSV_IPC,
    "mount",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "io_uring_setup",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "umount2",
    *OTHER_PROCESSES,
    *KEYRINGS,
    *PER_UID_COUNTERS,
]


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _program(arch: int, nr: dict[str, int]) -> list[bytes]:
    prog = [_ins(_LD_ABS, _ARCH), _ins(_JEQ, arch, 1, 0), _ins(_RET, _KILL), _ins(_LD_ABS, _NR)]
    if arch == _TABLES["x86_64"][0]:  # x32 system calls carry bit 30
        prog += [_ins(_JGE, 0x40000000, 0, 1), _ins(_RET, _KILL)]
    for name in ("socket", "socketpair"):  # family is arg 0
        prog += [
            _ins(_JEQ, nr[name], 0, 4),
            _ins(_LD_ABS, _ARG0),
            _ins(_JEQ, AF_UNIX, 0, 1),
            _ins(_RET, _ALLOW),
            _ins(_RET, _ERRNO | errno.EAFNOSUPPORT),
        ]
    for name in ("unshare", "clone"):  # flags are arg 0 on both architectures
        prog += [
            _ins(_JEQ, nr[name], 0, 4),
            _ins(_LD_ABS, _ARG0),
            _ins(_JSET, CLONE_NEW_ANY, 0, 1),
            _ins(_RET, _ERRNO | errno.EPERM),
            _ins(_RET, _ALLOW),
        ]
    prog += [_ins(_JEQ, nr["clone3"], 0, 1), _ins(_RET, _ERRNO | errno.ENOSYS)]
    for name in (n for n in _DENY if n in nr):  # aarch64 has no inotify_init
        prog += [_ins(_JEQ, nr[name], 0, 1), _ins(_RET, _ERRNO | errno.EPERM)]
    return prog + [_ins(_RET, _ALLOW)]


def filter_bytes(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, or None where there is no table."""
    table = _TABLES.get(machine or platform.machine())
    if table is None:
        return None
    arch, numbers = table
    return b"".join(_program(arch, {**_COMMON, **numbers}))
