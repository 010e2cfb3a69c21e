"""Job folders of the code executors: private, owned by a live caller, removed in bounded time.

    from retrace.tools import _jobdirs
    job = _jobdirs.make("retrace-wasm-")   # 0700, under the system temporary directory
    ...
    _jobdirs.remove(job)                   # returns within CLEANUP_S; the rest goes on behind
    _jobdirs.sweep("retrace-wasm-")        # folders of callers that died (kill -9) before removing theirs

Each folder holds an `owner` file naming the process that made it: its pid and its start time
(field 22 of /proc/<pid>/stat), so a recycled pid is not taken for the owner. A caller killed
with SIGKILL cannot clean up; the next caller of the same user sweeps its folder (`sweep`, once
per process and prefix): only folders of this uid whose owner is gone. A folder without an
owner file is left alone (it may be one being made right now).

Removal is linear in the number of entries (tools/_hostfs.py) and the caller waits at most
CLEANUP_S for it: whatever the program left (16,000 empty folders took 161 s to remove with
the old quadratic walk), the rest is removed by a background thread, and if the process ends
first, by the next sweep.
"""

from __future__ import annotations

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


def make(prefix: str) -> str:
    """A fresh folder (mode 0700) naming this process as its owner."""
    job = tempfile.mkdtemp(prefix=prefix)  # mkdtemp makes it 0700
    me = os.getpid()
    with open(os.path.join(job, OWNER), "w", encoding="ascii") as f:
        f.write(f"{me} {_start_time(me)}\n")
    return job


def remove(job: str) -> None:
    """Remove `job`, waiting at most CLEANUP_S; a background thread removes what is left."""
    if not remove_tree(job, time.monotonic() + CLEANUP_S):
        threading.Thread(target=remove_tree, args=(job,), name="retrace-cleanup", daemon=True).start()


def _orphaned(path: str) -> bool:
    """Whether `path` is a folder of this uid whose owner process is gone."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    data, more = read_capped(os.path.join(path, OWNER), 64)
    parts = data.decode("ascii", "replace").split()
    if more or len(parts) != 2 or not parts[0].isdigit():
        return False
    return _start_time(int(parts[0])) != parts[1]


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
