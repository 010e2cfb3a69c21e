"""A host uid of its own for each bwrap run as root, so RLIMIT_NPROC is a per-run limit.

    uid, lock = acquire()      # a free uid of UID_SLOTS, held by an flock on `lock`
    ... run the program as `uid`, passing `lock` into the sandbox ...
    os.close(lock)             # our copy; the slot is free once the run's last process is gone

The kernel counts RLIMIT_NPROC per real uid. With one uid (65534) for every run, a fork bomb
held at its limit in one run made every concurrent run's fork fail (EAGAIN). Each run now
draws a uid from UID_SLOTS (random start, first whose lock is free) and holds it with an
exclusive flock on `<slot dir>/<uid>`. The locked descriptor is passed into the sandbox, so
every process of the run holds the lock: the slot cannot be drawn again while any of them is
still being torn down. The lock files live in a folder only root can write (/run, else the
system temporary directory), checked before use.

Not covered: a program may release its run's lock early (flock LOCK_UN on the inherited
descriptor); a later run then draws that uid with a chance of 1 in len(UID_SLOTS) while the
first run's processes live (bounded by its wall limit).
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
import tempfile

# Far above the ranges distributions give to users, system services (< 65536) and
# container sub-uids (100000 + 65536 per user); nothing else should run as these.
UID_SLOTS = range(1_800_000_000, 1_800_000_000 + 4096)


def slot_dir() -> str:
    """The lock folder: root's own, not writable by anyone else (refused otherwise)."""
    base = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
    path = os.path.join(base, "retrace-bwrap-uids")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError(f"{path}: not a private directory of uid {os.geteuid()}; remove it")
    return path


def acquire() -> tuple[int, int]:
    """(a uid of UID_SLOTS no other run holds, the descriptor holding its lock)."""
    folder = slot_dir()
    start = random.randrange(len(UID_SLOTS))
    for i in range(len(UID_SLOTS)):
        uid = UID_SLOTS[(start + i) % len(UID_SLOTS)]
        flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(os.path.join(folder, str(uid)), flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise OSError(f"all {len(UID_SLOTS)} sandbox uids are in use ({folder})")
