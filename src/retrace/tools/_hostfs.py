"""Host-side access to files a sandboxed program could have touched: read, measure, remove.

    data, more = read_capped("/tmp/job/scratch/.retrace-ans", 65536)  # b"" unless a plain file
    tree_usage("/tmp/job/scratch", max_entries=16384, max_depth=64)     # (bytes, entries) or None
    remove_tree("/tmp/job")                                             # any tree; never raises

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


def remove_tree(path: str | os.PathLike) -> None:
    """Delete `path` and everything under it, whatever its depth, links or permissions; best
    effort, never raises. Iterative, depth first, with one open descriptor: it descends into a
    subdirectory, climbs back through ".." once that is empty, and keeps only the names on the
    way down (a tree must no longer be changing: the program that made it is dead)."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
        fd = os.open(path, _DIR)
    except OSError:
        return
    names: list[str] = []
    try:
        while True:
            sub = _clear_files(fd)
            if sub is not None:
                _quietly(os.chmod, sub, 0o700, dir_fd=fd)  # an ordinary user needs w+x to empty it
                child = os.open(sub, _DIR, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = parent
            if not _quietly(os.rmdir, names.pop(), dir_fd=fd):
                break  # it could not be emptied: stop rather than loop
    except OSError:
        pass
    finally:
        os.close(fd)
    _quietly(os.rmdir, path)


def _clear_files(fd: int) -> str | None:
    """Unlink everything but directories in the directory open as `fd`; a subdirectory's name, if any."""
    sub = None
    with os.scandir(fd) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                sub = sub or entry.name
            else:
                _quietly(os.unlink, entry.name, dir_fd=fd)
    return sub


def _quietly(fn, *args, **kwargs) -> bool:
    try:
        fn(*args, **kwargs)
    except OSError:
        return False
    return True
