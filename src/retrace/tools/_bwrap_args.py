"""The bwrap executor's command line: uid drop, namespaces, binds, masks, environment, launcher.

    from retrace.tools._bwrap_args import bwrap_command
    argv = bwrap_command("/usr/bin/bwrap", Limits(), fds, host_uid=None)   # an ordinary user
    argv = bwrap_command("/usr/bin/bwrap", Limits(), fds, host_uid=1_800_000_007)   # as root

What each part isolates, and why, is in tools/bwrap_exec.py's docstring; each function here
keeps its binds beside the reason for them. Read `bwrap_command` top to bottom.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

from retrace.tools import _way_in
from retrace.tools.code_exec import DETERMINISM, Limits

SANDBOX_UID = 65534  # nobody / nogroup on Debian; the uid and gid the program sees, in both modes
SCRATCH = "/scratch"


# Runs inside the sandbox as the run's uid (`python -c`): set the rlimits, fork; the child reads the
# program from the descriptor argv[5], runs it and
# sends str(ans) down the pipe whose fd is argv[2]; the parent waits and reports how the
# child ended and its CPU time on the pipe argv[4] (a kill at the hard CPU limit is a SIGKILL
# that only the CPU time tells apart). Limits are set here rather than in a preexec_fn so
# they bind the program and not bwrap's set-up (its mounts and memory before the program).
_LAUNCHER = """\
import json, os, resource, signal, sys
for _name, _value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, _name), tuple(_value))
_fd, _cap, _st, _prog = (int(a) for a in sys.argv[2:6])
_pid = os.fork()
if _pid:
    os.close(_fd)
    os.close(_prog)
    for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(_s, signal.SIG_IGN)
    _null = os.open("/dev/null", os.O_RDWR)
    for _i in (0, 1, 2):
        os.dup2(_null, _i)
    _, _status, _ru = os.wait4(_pid, 0)
    _code = os.waitstatus_to_exitcode(_status)
    os.write(_st, json.dumps({"status": _code, "cpu": _ru.ru_utime + _ru.ru_stime}).encode())
    os._exit(128 - _code if _code < 0 else _code)
os.close(_st)
_src = b"".join(iter(lambda: os.read(_prog, 1 << 20), b""))
os.close(_prog)
_code = compile(_src.decode("utf-8"), "program.py", "exec")
del _src
import random
random.seed(0)  # code_exec.DETERMINISM; the hash seed comes from PYTHONHASHSEED
_g = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
exec(_code, _g)
if "ans" in _g:
    # "=" marks that ans exists (it may be ""); one byte over the cap tells the caller
    os.write(_fd, b"=" + str(_g["ans"]).encode("utf-8", "replace")[:_cap + 1])
"""


def _python_roots() -> list[str]:
    """Directories the sandbox needs to run this interpreter with this venv's packages."""
    paths = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    ]
    roots: list[str] = []
    for p in sorted({os.path.realpath(p) for p in paths} | {os.path.abspath(sys.prefix)}):
        if not any(p == r or p.startswith(r + "/") for r in ["/usr", *roots]):
            roots.append(p)
    return roots


def _interpreter(roots: list[str]) -> str:
    """The path to run this interpreter by inside the sandbox: sys.executable when the binds
    reach it, else the venv's own `bin/python*` that is the same file. A caller started
    through a link outside the venv (~/bin/python -> ~/clone/.venv/bin/python) made bwrap
    fail with "execvp ...: No such file or directory" (red team round 4)."""
    exe = os.path.abspath(sys.executable)
    if any(exe.startswith(r + "/") for r in ["/usr", *roots]):
        return exe
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in ("python3", "python", version):
        candidate = os.path.join(os.path.abspath(sys.prefix), "bin", name)
        try:
            if os.path.samefile(candidate, exe):
                return candidate
        except OSError:
            continue
    return os.path.realpath(exe)  # the interpreter itself, inside its bound installation


def bwrap_command(bwrap: str, limits: Limits, fds: tuple[int, ...], host_uid: int | None) -> list[str]:
    """The command line; `host_uid`: as root, the host uid the run runs as (None: an ordinary
    user, who runs it as itself). `fds`: the ans and status pipes, the seccomp filter, the
    program, bwrap's info pipe and the contents of the masked /proc files (MASKED_PROC). Read
    top to bottom: the uid drop (as root), namespaces, the read-only system, scratch, what is
    masked, environment and the launcher; each part keeps its binds beside the reason for them."""
    ans_fd, status_fd, seccomp_fd, program_fd, info_fd, *mask_fds = fds
    roots = _python_roots()
    tmp_holds_python = any(r == "/tmp" or r.startswith("/tmp/") for r in roots)
    ways = _way_in.ways_in(roots) if host_uid is not None else {}
    return [
        *_way_in.prefix(ways),
        *_uid_drop(host_uid),
        *_namespaces(bwrap),
        "--info-fd",
        str(info_fd),
        *_system_binds(),
        *_python_binds(roots, limits, tmp_holds_python, ways),
        *_scratch(limits, tmp_holds_python),
        *_masks(mask_fds),
        "--seccomp",
        str(seccomp_fd),
        *_environment(),
        _interpreter(roots),
        *_launcher(limits, ans_fd, status_fd, program_fd),
    ]


def _uid_drop(host_uid: int | None) -> list[str]:
    """As root (a `host_uid`): bwrap itself runs as the run's own host uid, dropped for real by
    util-linux's setpriv (no groups, no capabilities, no_new_privs) before bwrap starts, so
    from there on both modes are one: bwrap an unprivileged process, its init and the program
    that uid outside and 65534 inside (_namespaces)."""
    if host_uid is None:
        return []
    uid = str(host_uid)
    return [
        shutil.which("setpriv") or "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _namespaces(bwrap: str) -> list[str]:
    """New user, network, pid, ipc, uts and cgroup namespaces, an empty environment, a new
    session. The user namespace maps the caller's uid (an ordinary user's own, or the run's
    slot as root) to SANDBOX_UID: the program sees 65534 on every run, with no capabilities;
    no nested namespaces (--disable-userns where bwrap knows it, and seccomp)."""
    cmd = [
        bwrap,
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    return cmd + (["--disable-userns"] if _has_option(bwrap, "--disable-userns") else [])


def _system_binds() -> list[str]:
    """/usr read-only, the merged-/usr links, and the dynamic loader's cache."""
    cmd = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):  # merged-/usr links of Debian 12
        if os.path.islink(f"/{link}"):
            cmd += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    if os.path.exists("/etc/ld.so.cache"):
        cmd += ["--perms", "0755", "--dir", "/etc", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return cmd


def _python_binds(
    roots: list[str], limits: Limits, tmp_holds_python: bool, ways: dict[str, str]
) -> list[str]:
    """The interpreter's and its packages' folders, read-only, each parent readable; a root
    bwrap cannot reach itself (as root: behind a folder closed to others) from its mount point
    (`ways`, tools/_way_in.py)."""
    cmd: list[str] = []
    made: set[str] = set()
    if tmp_holds_python:
        # A venv under /tmp (e.g. a CI checkout there) must be bound inside /tmp, so /tmp
        # cannot be the symlink to /scratch: it becomes its own capped tmpfs instead.
        cmd += ["--perms", "1777", "--size", str(limits.scratch_bytes), "--tmpfs", "/tmp"]
        made.add("/tmp")
    for root in roots:
        parts = root.strip("/").split("/")
        for i in range(1, len(parts)):  # bwrap would make parents 0700: unreadable to the program
            parent = "/" + "/".join(parts[:i])
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", ways.get(root, root), root]
    return cmd


def _scratch(limits: Limits, tmp_holds_python: bool) -> list[str]:
    """/proc, /dev, the capped scratch tmpfs (and /tmp pointing there), / read-only."""
    cmd = ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(limits.scratch_bytes), "--tmpfs", SCRATCH]
    if not tmp_holds_python:
        cmd += ["--symlink", SCRATCH, "/tmp"]
    # The tmpfs bwrap builds / and /dev on belongs to the program's own uid: made read-only,
    # they cannot hold files outside the scratch cap.
    return cmd + ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SCRATCH]


# /proc files whose contents the program gets from us instead of the kernel: the keys it could
# see (their descriptions; the keyring system calls are refused, tools/_seccomp.py) and one CPU
# (glibc counts the "cpuN" lines of /proc/stat when /sys is absent, as here), so os.cpu_count()
# is 1 on every host, as under WASM.
MASKED_PROC = {
    "/proc/keys": b"",
    "/proc/key-users": b"",
    "/proc/stat": b"cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n",
}
# Empty read-only folders over: the PID-namespace init (bwrap, pid 1; it runs as the program's
# own uid, and a program that wrote its memory disarmed its parent-death signal, red team
# round 4), and devpts (ptys are a host-wide count, kernel.pty.max; a run took
# ~460): no /dev/pts, so /dev/ptmx leads nowhere.
HIDDEN = ("/proc/1", "/dev/pts")


def _masks(mask_fds: list[int]) -> list[str]:
    """MASKED_PROC's files (read from `mask_fds`, in its order) and the HIDDEN folders."""
    cmd: list[str] = []
    for path, fd in zip(MASKED_PROC, mask_fds, strict=True):
        cmd += ["--perms", "0444", "--ro-bind-data", str(fd), path]  # else 0600, the program's
    for path in HIDDEN:
        cmd += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
    return cmd


def _environment() -> list[str]:
    """The program's whole environment: one thread per library, the fixed hash seed."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": SCRATCH,
        "TMPDIR": SCRATCH,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONHASHSEED": DETERMINISM["PYTHONHASHSEED"],
    }
    return [arg for key, value in env.items() for arg in ("--setenv", key, value)]


def _launcher(limits: Limits, ans_fd: int, status_fd: int, program_fd: int) -> list[str]:
    """The interpreter's arguments: _LAUNCHER with the limits and the pipes' descriptors."""
    return [
        *("-s", "-P", "-B"),  # -I without its -E, which would ignore PYTHONHASHSEED (env is ours)
        "-c",
        _LAUNCHER,
        json.dumps(limits.rlimits()),
        str(ans_fd),
        str(limits.output_bytes),
        str(status_fd),
        str(program_fd),
    ]


@functools.lru_cache(maxsize=8)
def _has_option(bwrap: str, option: str) -> bool:
    """Whether this bwrap knows `option` (--disable-userns came with 0.8.0; seccomp covers
    nested user namespaces without it)."""
    return option in subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout
