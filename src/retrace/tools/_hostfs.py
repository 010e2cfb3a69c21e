"""Host-side access to files a sandboxed program could have touched: read, measure, remove.

    data, more = read_capped("/tmp/job/scratch/.retrace-ans", 65536)  # b"" unless a plain file
    tree_usage("/tmp/job/scratch", max_entries=16384, max_depth=64)     # (bytes, entries) or None
    remove_tree("/tmp/job", deadline)                                   # any tree; never raises
    deleted_open_bytes(worker_pid)                                      # unlinked files it holds open

A program inside the sandbox may leave anything where the caller expects its output: a
symbolic link (WASI creates relative ones whose `..` leave the sandbox when the host follows
them), a FIFO or a device (an open() that blocks forever), a directory, or a tree ~1,000
levels deep (os.walk and shutil.rmtree recurse and raise RecursionError). These helpers
follow no link, never block, walk iteratively with bounded depth and open files, and treat
whatever is not a plain file as absent.
"""

from __future__ import annotations

import errno
import os
import stat
import time

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
# What a racing or hostile tree may answer while it is walked: the entry went away, changed
# kind, or is a link (O_NOFOLLOW's ELOOP); none of them is the caller's problem.
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


def read_capped(path: str | os.PathLike, cap: int) -> tuple[bytes, bool]:
    """(at most `cap` bytes of `path`, whether it holds more). (b"", False) when `path` is
    missing, a link, or not a regular file: opened without following its last component and
    without blocking (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY), checked with fstat before reading."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | _NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return b"", False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"", False
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return b"", False
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


def tree_usage(root: str | os.PathLike, max_entries: int, max_depth: int) -> tuple[int, int] | None:
    """(bytes, entries) of everything under `root` (links counted, not followed), or None once
    the tree holds more than `max_entries` entries or is deeper than `max_depth`. Iterative;
    directories are opened relative to their parent's descriptor, so neither path length nor
    Python's recursion limit bounds it, and at most `max_depth` + 1 descriptors are open."""
    try:
        top = os.open(root, _DIR)
    except OSError:
        return 0, 0
    size = count = 0
    stack: list[tuple[int, list[str]]] = []
    try:
        s, c, subdirs = _listing(top, max_entries)
        size, count = size + s, count + c
        stack.append((top, subdirs))
        while stack and count <= max_entries:
            fd, subdirs = stack[-1]
            if not subdirs:
                os.close(stack.pop()[0])
                continue
            if len(stack) > max_depth:  # the child would be at depth len(stack)
                return None
            try:
                child = os.open(subdirs.pop(), _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                raise
            stack.append((child, []))
            s, c, grand = _listing(child, max_entries - count)
            size, count = size + s, count + c
            stack[-1] = (child, grand)
    except OSError:
        return None  # a tree that cannot be measured is over the limit, not a crash
    finally:
        for fd, _ in stack:
            os.close(fd)
    return None if count > max_entries else (size, count)


def _listing(fd: int, budget: int) -> tuple[int, int, list[str]]:
    """(bytes, entries, names of subdirectories) of the directory open as `fd`; stops once it
    has seen more than `budget` entries (a huge directory must not stall the caller)."""
    size = count = 0
    subdirs = []
    with os.scandir(fd) as it:
        for entry in it:
            count += 1
            if count > budget:
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            size += st.st_size
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(entry.name)
    return size, count, subdirs


class _OutOfTime(Exception):
    """remove_tree's deadline passed; what is left stays for a later call."""


def remove_tree(path: str | os.PathLike, deadline: float | None = None) -> bool:
    """Delete `path` and everything under it, whatever its depth, links or permissions; best
    effort, never raises; True once `path` is gone. Stops at `deadline` (time.monotonic())
    with False, the rest left for another call. Linear in the number of entries: each
    directory is listed once, its files unlinked and its subdirectories' names kept; it then
    descends into them with one open descriptor and climbs back through ".." once one is empty
    (so neither depth nor the descriptor limit bounds it; the tree must no longer be changing:
    the program that made it is dead)."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
        fd = os.open(path, _DIR)
    except OSError:
        return not os.path.lexists(path)
    names: list[str] = []  # the way down from `path`
    try:
        pending = [_clear_files(fd, deadline)]  # subdirectories still to empty, per level
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise _OutOfTime
            if pending[-1]:
                sub = pending[-1].pop()
                if _quietly(os.rmdir, sub, dir_fd=fd):  # empty: one call, nothing to open
                    continue
                _quietly(os.chmod, sub, 0o700, dir_fd=fd)  # an ordinary user needs w+x to empty it
                try:
                    child = os.open(sub, _DIR, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child
                names.append(sub)
                pending.append(_clear_files(fd, deadline))
                continue
            if not names:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = parent
            pending.pop()
            _quietly(os.rmdir, names.pop(), dir_fd=fd)
    except (OSError, _OutOfTime):
        pass
    finally:
        os.close(fd)
    _quietly(os.rmdir, path)
    return not os.path.lexists(path)


def _clear_files(fd: int, deadline: float | None) -> list[str]:
    """Unlink everything but directories in the directory open as `fd`; its subdirectories' names."""
    subdirs = []
    with os.scandir(fd) as it:
        for i, entry in enumerate(it):
            if deadline is not None and i % 256 == 0 and time.monotonic() > deadline:
                raise _OutOfTime
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                _quietly(os.unlink, entry.name, dir_fd=fd)
    return subdirs


def deleted_open_bytes(pid: int) -> int:
    """Bytes of the regular files that process `pid` holds open but that no name reaches any
    more (unlinked): they use disk until closed, and no walk of a tree sees them."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return 0
    total = 0
    for name in names:
        try:
            st = os.stat(os.path.join(fds, name))  # follows the magic link to the open file
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 0:
            total += max(st.st_size, st.st_blocks * 512)
    return total


def _quietly(fn, *args, **kwargs) -> bool:
    try:
        fn(*args, **kwargs)
    except OSError:
        return False
    return True
