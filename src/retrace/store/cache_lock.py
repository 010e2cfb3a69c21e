"""Per-shard locks of the request cache's index (retrace.store.cache_store) that die with their holder.

    with shard_lock(Path("results/cache/requests/index/3.lock")):
        ...  # append index lines of shard 3

Two kinds, chosen per lock file (RETRACE_CACHE_LOCK=fcntl|lease forces one):

- fcntl (the default): a POSIX record lock (`fcntl.lockf`) on `<shard>.lock`. The kernel drops
  it when its holder dies, SIGKILL included, so the next writer waits for nothing; NFSv4 and
  NFSv3 with lockd carry it between nodes (a whole node that dies holds it until the server's
  lease expires, ~90 s).
- lease, where the filesystem refuses record locks (ENOLCK, EOPNOTSUPP: NFS mounted `nolock`,
  Lustre without `flock`): `<shard>.lock.lease`, created with O_EXCL and holding its owner's
  host, pid, process start time and expiry (LEASE_S). A waiter breaks it at once when the
  owner is on its own host and that process is gone (or its pid was reused: another start
  time), else when it has expired. Locks are held for one append (milliseconds), so a lease
  of a few seconds is never outlived by a live holder except on a hung mount.

What this does not cover: a filesystem whose record locks succeed but are node-local (Lustre
mounted `localflock`) excludes nothing between nodes; set RETRACE_CACHE_LOCK=lease there.
Breaking a lease is check-then-rename: two waiters breaking the same dead lease at once are
told apart by re-reading what was renamed (a live lease renamed by mistake is put back).
`stats` records how many locks this process took and its longest wait (benchmarks/cache_cluster.py;
`retrace` logs it at the end of each command, and a wait over SLOW_WAIT_S when it happens).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

LEASE_S = 5.0
SLOW_WAIT_S = 1.0
log = logging.getLogger(__name__)
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
stats = {"acquired": 0, "longest_wait_s": 0.0}  # this process's locks


@contextmanager
def shard_lock(path: Path):
    """Hold the lock at `path` (fcntl, or a lease where record locks are refused)."""
    started = time.monotonic()
    kind = os.environ.get("RETRACE_CACHE_LOCK", "fcntl")
    fd = None if kind == "lease" else _fcntl_acquire(path)
    lease = None if fd is not None else _lease_acquire(path.with_name(path.name + ".lease"))
    waited = time.monotonic() - started
    stats["acquired"] += 1
    stats["longest_wait_s"] = max(stats["longest_wait_s"], waited)
    if waited > SLOW_WAIT_S:  # seconds where milliseconds are usual: say so in the job's log
        log.warning("waited %.1f s for the request cache lock %s", waited, path)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing drops the record lock
        elif lease is not None:
            _lease_release(*lease)


def _fcntl_acquire(path: Path) -> int | None:
    """The locked file's descriptor, or None where this filesystem refuses record locks."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)  # blocks; returns once the holder releases or dies
        return fd
    except OSError as e:
        os.close(fd)
        if e.errno in _NO_LOCKS:
            return None
        raise


# ---------------------------------------------------------------- leases
def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), or None
    if no such process; pids are reused, the pair (pid, start) is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner() -> dict:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "start": _start_time(os.getpid()),
        "token": uuid.uuid4().hex,
        "expires": time.time() + LEASE_S,
    }


def _lease_acquire(lease: Path) -> tuple[Path, str]:
    while True:
        me = _owner()
        try:
            fd = os.open(lease, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            _break_if_dead(lease)
            time.sleep(0.005)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(me))
        return lease, me["token"]


def _lease_release(lease: Path, token: str) -> None:
    if _read(lease).get("token") == token:  # not broken and retaken meanwhile
        lease.unlink(missing_ok=True)


def _read(lease: Path) -> dict:
    try:
        owner = json.loads(lease.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def is_dead(owner: dict, now: float) -> bool:
    """Whether a lease's holder is gone: expired, or on this host and not running."""
    if not owner:  # being written (or torn by a kill between create and write): wait it out
        return False
    if owner.get("expires", 0) < now:
        return True
    if owner.get("host") != socket.gethostname():
        return False
    return _start_time(int(owner.get("pid", -1))) != owner.get("start")


def _break_if_dead(lease: Path) -> None:
    owner = _read(lease)
    if not owner:
        _break_if_blank(lease)
        return
    if not is_dead(owner, time.time()):
        return
    grabbed = lease.with_name(f"{lease.name}.broken-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(lease, grabbed)
    except FileNotFoundError:  # another waiter broke it first
        return
    if _read(grabbed).get("token") != owner.get("token"):  # a fresh lease: put it back
        try:
            os.link(grabbed, lease)
        except FileExistsError:
            pass
    grabbed.unlink(missing_ok=True)


def _break_if_blank(lease: Path) -> None:
    """A lease file left empty (its creator killed before writing) is broken after LEASE_S."""
    try:
        if time.time() - lease.stat().st_mtime > LEASE_S:
            lease.unlink()
    except FileNotFoundError:
        pass
