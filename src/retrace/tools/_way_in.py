"""As root, a way in for bwrap to the Python roots that sit behind folders only root may enter.

    ways = ways_in(["/root/.pyenv/versions/3.11.7", "/work/.venv"])   # {blocked root: mount point}
    argv = [*prefix(ways), "setpriv", ..., "bwrap", "--ro-bind", ways[root], root, ...]

As root, bwrap runs as the run's slot uid (tools/_uid_slots.py; a user namespace shows it to the
program as 65534), so bwrap itself reaches only what others may traverse. A Python installation
or venv behind a 0700 folder (pyenv under /root) made bwrap fail with "Can't find source path".
bwrap's own `--ro-bind-fd` does not help: bwrap resolves `/proc/self/fd/N` to its path with
realpath(3), which walks the blocked folder again. So each blocked root is bound, by root, onto
a root-owned mount point that others can traverse (`<MOUNT_DIR>/<i>`), in a mount namespace of
the run's own (util-linux `unshare --mount --propagation private`, then `mount --rbind`): the
host's mounts are untouched, and the mount lives as long as the run's processes. bwrap then
binds the mount point to the root's own path inside the sandbox, as it binds any other root.

Roots that others can reach (every folder above them has o+x) are bound directly: no extra
namespace, the common case (CI's venv, /usr).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

MOUNT_DIR = "/run/retrace-bwrap-roots"  # else in the system temporary folder, as tools/_uid_slots.py

# Runs as root in the run's own mount namespace: bind each SOURCE onto its TARGET, then exec
# the rest of the command line (setpriv ... bwrap ...).
_BIND_THEN_EXEC = (
    'while [ "$1" != -- ]; do "$0" --rbind -- "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"'
)


def blocked(path: str) -> bool:
    """Whether a folder above `path` (not `path` itself) is closed to others (no o+x)."""
    parent = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return True
        if parent == "/":
            return False
        parent = os.path.dirname(parent)


def ways_in(roots: list[str]) -> dict[str, str]:
    """{root: the mount point bwrap binds it from} for each root `blocked` (an empty dict when
    bwrap can reach them all)."""
    closed = [r for r in roots if blocked(r)]
    return {root: _mount_point(i) for i, root in enumerate(closed)}


def _mount_point(i: int) -> str:
    """`<MOUNT_DIR>/<i>`: an empty folder, root's, that others may traverse but not write."""
    path = os.path.join(_mount_dir(), str(i))
    _private_dir(path, 0o755)
    return path


def _mount_dir() -> str:
    """MOUNT_DIR (under /run, else the system temporary folder), made and checked each run."""
    base = (
        os.path.dirname(MOUNT_DIR)
        if os.access(os.path.dirname(MOUNT_DIR), os.W_OK)
        else tempfile.gettempdir()
    )
    path = os.path.join(base, os.path.basename(MOUNT_DIR))
    if blocked(path):
        raise OSError(f"{base} is closed to others: bwrap could not reach {path}")
    _private_dir(path, 0o755)
    return path


def _private_dir(path: str, mode: int) -> None:
    """Make `path` (mode `mode`) unless it exists; refuse one not root's or writable by others."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError(f"{path}: not a directory of uid {os.geteuid()} closed to writes by others; remove it")


def tools_missing() -> list[str]:
    """The util-linux tools `prefix` needs that are not on PATH."""
    return [t for t in ("unshare", "mount") if shutil.which(t) is None]


def prefix(ways: dict[str, str]) -> list[str]:
    """The command line's start that binds each blocked root onto its mount point, in a mount
    namespace of the run's own ([] when there is none to bind)."""
    if not ways:
        return []
    unshare, mount = (shutil.which(t) or t for t in ("unshare", "mount"))
    pairs = [arg for root, point in ways.items() for arg in (root, point)]
    sh = shutil.which("sh") or "/bin/sh"
    return [
        unshare,
        "--mount",
        "--propagation",
        "private",
        "--",
        sh,
        "-c",
        _BIND_THEN_EXEC,
        mount,
        *pairs,
        "--",
    ]
