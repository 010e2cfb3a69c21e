"""A handle on the bwrap sandbox's PID-namespace init, so the caller can end a run for certain.

    info_r, info_w = os.pipe()           # bwrap ... --info-fd <info_w> ...
    init = open_init(bwrap_proc, info_r, deadline)   # a pidfd, or None if bwrap failed early
    ...
    kill_init(init)                      # SIGKILL: the kernel then kills every process inside

Why: killing the outer bwrap alone relies on the init's parent-death signal (bwrap
`--die-with-parent`). As an ordinary user that init runs as the program's own uid, and a
program that rewrote its memory (ptrace, /proc/1/mem) disarmed the signal and outlived its
wall limit and its caller (red team round 4). Now the caller holds a pidfd on the init (its
host pid comes from bwrap's `--info-fd` JSON, `child-pid`) and SIGKILLs it on every exit path;
the program can no longer reach the init (seccomp denies ptrace and process_vm_*, /proc/1 is
hidden), so the parent-death signal still holds when the caller itself is SIGKILLed.

A pidfd names one process for good: a pid reused after the init ended is never signalled. The
pid is checked once, while the pidfd is open, to be a child of the unreaped outer bwrap (only
bwrap's own child can be), so a pid recycled before pidfd_open is refused.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

_INFO_CAP = 4096  # bwrap's --info-fd JSON is a few hundred bytes


def read_info(fd: int, deadline: float) -> dict:
    """bwrap's --info-fd JSON from `fd` (read until EOF or `deadline`); {} if it wrote none."""
    data = b""
    while len(data) <= _INFO_CAP:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, _INFO_CAP)
        if not chunk:
            break
        data += chunk
    try:
        info = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _parent_of(pid: int) -> int | None:
    """The parent pid of `pid` from /proc (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def open_init(bwrap: subprocess.Popen, info_fd: int, deadline: float) -> int | None:
    """A pidfd on the sandbox's init (bwrap's child), or None when bwrap reported none (it
    failed before creating the sandbox; its stderr says why)."""
    pid = read_info(info_fd, deadline).get("child-pid")
    if not isinstance(pid, int) or pid <= 1:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already gone: nothing to kill
        return None
    if _parent_of(pid) != bwrap.pid:  # recycled before pidfd_open: not ours
        os.close(pidfd)
        return None
    return pidfd


def kill_init(pidfd: int | None) -> None:
    """SIGKILL the init `pidfd` names (the kernel kills every process of its PID namespace)."""
    if pidfd is None:
        return
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
