"""Job folders of the code executors: private, owned by a live caller, removed in bounded time.

    from retrace.tools import _jobdirs
    job = _jobdirs.make("retrace-wasm-")   # 0700, under the system temporary directory
    ...
    _jobdirs.remove(job)                   # returns within CLEANUP_S; the rest goes on behind
    _jobdirs.sweep("retrace-wasm-")        # folders of callers that died (kill -9) before removing theirs

Each folder holds an `owner` file naming the process that made it: its pid, its start time
(field 22 of /proc/<pid>/stat, so a recycled pid is not taken for the owner), the kernel's
boot id and the owner's PID namespace; the owner holds an exclusive `flock` on that file for
as long as the folder is in use. A caller killed with SIGKILL cannot clean up; the next caller
of the same user sweeps its folder (`sweep`, once per process and prefix), but only a folder
whose owner is provably gone: same uid, same boot (host) and same PID namespace as the sweeper,
its lock free, and its pid (with that start time) no longer running. A folder it cannot judge
is left alone: no owner file yet (it may be being made right now), an owner of another host
sharing the temporary directory (another boot id: its pid means nothing here, and flock may not
reach across hosts), another PID namespace (its pid is not ours to look up), or a record of an
older format. Before this check, a live run of the same user in another PID namespace or on
another node was taken for dead and its folder removed mid-run (red team round 4).

Removal is linear in the number of entries (tools/_hostfs.py) and the caller waits at most
CLEANUP_S for it: whatever the program left (16,000 empty folders took 161 s to remove with
the old quadratic walk), the rest is removed by a background thread, and if the process ends
first, by the next sweep.
"""

from __future__ import annotations

import fcntl
import functools
import os
import stat
import tempfile
import threading
import time

from retrace.tools._hostfs import read_capped, remove_tree

OWNER = "owner"
CLEANUP_S = 2.0  # longest a caller waits for its job folder's removal


def _start_time(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (None if it is gone)."""
    data, _ = read_capped(f"/proc/{pid}/stat", 4096)
    fields = data.rsplit(b")", 1)[-1].split()  # the name in parentheses may hold spaces
    return fields[19].decode() if len(fields) > 19 else None


_HELD: dict[str, int] = {}  # job folder -> the descriptor holding its owner lock


def _identity() -> tuple[str, str]:
    """(this host's boot id, this process's PID namespace): where a pid means what it says."""
    boot, _ = read_capped("/proc/sys/kernel/random/boot_id", 64)
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return boot.decode("ascii", "replace").strip() or "-", pidns.replace(" ", "") or "-"


def make(prefix: str) -> str:
    """A fresh folder (mode 0700) naming this process as its owner, locked until `remove`."""
    job = tempfile.mkdtemp(prefix=prefix)  # mkdtemp makes it 0700
    me = os.getpid()
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.path.join(job, OWNER), flags, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held for the caller's life; the kernel drops it at exit
    _HELD[job] = fd
    os.write(fd, f"{me} {_start_time(me)} {' '.join(_identity())}\n".encode("ascii"))
    return job


def remove(job: str) -> None:
    """Remove `job`, waiting at most CLEANUP_S; a background thread removes what is left."""
    try:
        if not remove_tree(job, time.monotonic() + CLEANUP_S):
            threading.Thread(target=remove_tree, args=(job,), name="retrace-cleanup", daemon=True).start()
    finally:
        fd = _HELD.pop(job, None)
        if fd is not None:
            os.close(fd)


def _lock_is_free(path: str) -> bool:
    """Whether nobody holds the owner lock on `path` (False if it cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the lock if it was taken
    return True


def _orphaned(path: str) -> bool:
    """Whether `path` is a folder of this uid whose owner is provably gone (module docstring)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    owner = os.path.join(path, OWNER)
    data, more = read_capped(owner, 256)
    parts = data.decode("ascii", "replace").split()
    if more or len(parts) != 4 or not parts[0].isdigit() or tuple(parts[2:]) != _identity():
        return False  # cannot judge: an older record, another host or another PID namespace
    return _lock_is_free(owner) and _start_time(int(parts[0])) != parts[1]


def sweep(prefix: str) -> list[str]:
    """Remove (in the background) the folders `prefix`* of callers that died; their paths."""
    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return []
    gone = [os.path.join(base, n) for n in names if _orphaned(os.path.join(base, n))]
    if gone:
        threading.Thread(target=lambda: [remove_tree(p) for p in gone], daemon=True).start()
    return gone


@functools.cache
def sweep_once(prefix: str, _base: str) -> None:
    """`sweep(prefix)` at a process's first run (per temporary directory)."""
    sweep(prefix)
