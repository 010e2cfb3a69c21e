"""The native `code execute` executor: the venv's own CPython inside bubblewrap.

    from retrace.tools.code_exec import run_code, Limits
    run_code("import sympy\nans = sympy.factorint(360)", Limits(), sandbox="bwrap")
    run_code(code, Limits(), sandbox="bwrap", bwrap="/opt/bwrap/bin/bwrap")   # explicit binary

For programs that need native packages (numpy, sympy from the venv). Needs the `bwrap`
binary (`apt-get install bubblewrap`; the first on PATH, or the `bwrap` option /
`tools.code_execute.bwrap` setting) and unprivileged user namespaces: bwrap runs as an
ordinary uid and `--unshare-user --disable-userns --uid 65534 --gid 65534` shows that uid to
the program as 65534, with no capabilities, on every run and in both modes. Where the kernel or
AppArmor forbids such namespaces the executor refuses with the reason (use `sandbox: wasm`
there). Who calls it picks the host uid:
- an ordinary user: its own uid.
- root: a host uid/gid of the run's own (tools/_uid_slots.py: one of 4096 unused uids, held
  by a lock while any process of the run lives), dropped to with util-linux's `setpriv` (no
  groups, no capabilities, `no_new_privs`) before bwrap starts; bwrap, its init and the
  program all run as it. A Python installation or venv behind a folder closed to others (pyenv
  under /root) is bound for bwrap onto a mount point it can reach, in a mount namespace of the
  run's own (tools/_way_in.py).

How it isolates:
- new network, PID, IPC and UTS namespaces: only a loopback device of its own; it cannot
  see or signal processes outside. The PID namespace dies with its init (bwrap, pid 1): the
  caller holds a pidfd on that init (its pid from `--info-fd`, tools/_sandbox_init.py) and
  SIGKILLs it on every exit path; a caller killed outright takes the outer bwrap with it and
  the init's parent-death signal (`--die-with-parent`) the rest. The program cannot reach
  the init to disarm that signal (the init runs as the program's own uid, in both modes):
  ptrace and process_vm_* are refused and /proc/1 is an empty read-only folder.
- a seccomp filter (tools/_seccomp.py): sockets of any family but AF_UNIX, new namespaces
  (so no nested user namespace and no tmpfs of its own), `memfd_create`, SysV IPC (message
  queues, semaphores and shared memory: kernel memory no rlimit caps), mounts, io_uring,
  userfaultfd, bpf and perf_event_open are refused; so are ptrace and process_vm_*, the
  kernel keyrings (add_key, request_key, keyctl: no key is read, added or left behind, and
  /proc/keys is empty), inotify and POSIX message queues (counted per uid: one run could
  starve its user); other ABIs killed. No /dev/pts (ptys are a host-wide count).
- a new mount namespace whose root is an empty tmpfs (remounted read-only, as is /dev)
  holding only, read-only: /usr (with the /bin, /lib, /lib64, /sbin links),
  /etc/ld.so.cache, the Python installation and the virtual environment, and the program;
  plus a fresh /proc and a minimal /dev. The repository, /root, /home, the data mirror,
  the rest of /etc and the host's /tmp are not there (the command line: tools/_bwrap_args.py).
- the only writable place is /scratch, a tmpfs capped at `Limits.scratch_bytes`, also
  reachable as /tmp and $HOME (when the Python installation itself lives under /tmp, /tmp
  is instead a second capped tmpfs holding that read-only installation); files the program
  unlinked but holds open still fill it. The program reaches the sandbox as a descriptor
  (a memfd of the caller's) and the launcher as `python -c`: no job folder on the host's
  disk, so nothing of a run is left there, readable by others, when its caller is killed.
- rlimits set by a small launcher before the program's first line: address space (AS), CPU
  seconds (SIGXCPU at the soft limit, SIGKILL one second later; both reported as
  `cpu_time`, told apart from other kills by the CPU time the launcher measured), tasks
  (NPROC: processes and threads), file size (FSIZE), open files (NOFILE), core dumps (0).
  The launcher forks the program and waits for it (so the program's parent is the launcher).
- an empty environment: PATH, LANG, HOME/TMPDIR (= /scratch), one-thread settings for
  BLAS/OpenMP (so a numpy import does not trip NPROC) and PYTHONHASHSEED; no secrets of the caller.
- the same program prints the same on every run: PYTHONHASHSEED=0 (the interpreter runs with
  `-s -P -B`: `-I` would imply `-E`, which ignores it) and `random` seeded with 0
  (code_exec.DETERMINISM, part of ART's rerun keys); os.cpu_count() is 1 (_bwrap_args.MASKED_PROC), as
  under WASM; os.getuid() and os.getgid() are 65534 (as root too, whatever the run's host
  uid); code text with a NUL byte or a lone surrogate is refused
  (`killed_reason="refused"`), never raised.
- a killed caller: bwrap runs with `--die-with-parent`, so the sandbox and every process in
  it die with the process that called `run_code`, even by SIGKILL (see above).
- the interpreter is run by a path inside the binds (the venv's own `bin/python*` when the
  caller was started through a link elsewhere), wherever the venv lives.
- wall-clock limit and output caps enforced by the caller: stdout, stderr and `ans` are read
  incrementally; past `Limits.output_bytes` or the wall limit the whole process group is
  SIGKILLed (a program cannot ignore it).

What it does NOT protect against:
- kernel exploits: the sandbox shares the host kernel and the seccomp filter is a
  deny-list, so any kernel bug reachable by an unprivileged user through another system
  call is reachable here.
- reading what is mounted: all of /usr, the Python installation, the virtual environment
  (including anything a package stored there), and /proc's host-wide information
  (/proc/cpuinfo, /proc/meminfo, load, uptime, kernel version, mounts of the sandbox).
- side channels (timing, caches, CPU frequency) and covert channels between programs
  running at the same time. Clocks, os.urandom and object addresses (ASLR) vary from run to
  run: a program that prints them prints something else each time. Task counts (NPROC) are
  per run: each run has its own user namespace, and as root its own host uid too.
- total machine load: limits are per process. A program may use up to `max_tasks` tasks,
  each with up to `memory_bytes` of address space and `cpu_s` CPU seconds, for `wall_s`
  seconds; no cgroup caps the sum. The scratch tmpfs adds up to `scratch_bytes` of RAM,
  and the kernel memory of pipes, sockets and page tables is not capped beyond NOFILE.
- resource use before the launcher runs: the interpreter's start-up (~50 MB, ~30 ms) is
  outside the rlimits (not outside the wall limit).
- anything the caller does with the result: `ans` and the output are untrusted text.
- faked results: the program can write to the `ans` channel, print whatever it likes, kill
  its launcher or exit with 128+n (reported as killed by signal n, as bwrap reports one).
- as root, the program's host uid owns nothing on the host: it reads in the mounted paths what
  "others" may read (it sees itself as 65534 whatever that uid is). As an ordinary user, the
  program is that user on the host: what it can reach through the read-only mounts is what
  the caller can read there.
"""

from __future__ import annotations

import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from retrace.tools import _uid_slots, _way_in
from retrace.tools._bwrap_args import MASKED_PROC, SANDBOX_UID, _python_roots, bwrap_command
from retrace.tools._sandbox_init import kill_init, open_init
from retrace.tools._seccomp import filter_bytes
from retrace.tools.code_exec import (
    PROBE_WALL_S,
    ExecResult,
    Limits,
    SandboxUnavailable,
    probe_failure,
    refused,
)


def _kill(proc: subprocess.Popen) -> None:
    # The outer bwrap leads the group; its death SIGKILLs the sandbox's PID-namespace init
    # (--die-with-parent), which takes every process inside with it. Only while bwrap is
    # unreaped: a reaped pid, and so its group id, may belong to another process.
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for bwrap until `deadline` (False if it is still running then)."""
    while proc.returncode is None:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
        elif time.monotonic() >= deadline:
            return False
        else:
            time.sleep(0.01)
    return True


def _collect(
    proc: subprocess.Popen, ans_r: int, status_r: int, limits: Limits, start: float
) -> tuple[list[str], bool, str | None]:
    """Read stdout, stderr, ans and status until all close, a cap is hit, or the wall limit."""
    assert proc.stdout is not None and proc.stderr is not None  # opened with PIPE
    fds = {
        proc.stdout.fileno(): bytearray(),
        proc.stderr.fileno(): bytearray(),
        ans_r: bytearray(),
        status_r: bytearray(),
    }
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    caps = {fd: limits.output_bytes + (fd == ans_r) for fd in fds}  # + the "=" marker
    caps[status_r] = 256
    truncated, reason = False, None
    while sel.get_map() and reason is None:
        left = start + limits.wall_s - time.monotonic()
        if left <= 0:
            reason = "wall_time"
            break
        for key, _ in sel.select(left):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fd)
                continue
            buf = fds[key.fd]
            room = caps[key.fd] - len(buf)
            buf += chunk[:room]
            if len(chunk) > room and key.fd != status_r:
                truncated, reason = True, "output_limit"
    sel.close()
    if reason is None:  # all pipes closed, but a program may close them and keep running
        if not _reap(proc, start + limits.wall_s):
            reason = "wall_time"
    if reason is not None:
        _kill(proc)
    return [bytes(b).decode("utf-8", "replace") for b in fds.values()], truncated, reason


def _execute(code: str, limits: Limits, bwrap: str, rootless: bool) -> ExecResult:
    # No job folder: the program reaches the sandbox as a descriptor (nothing is left on the
    # host's disk, readable by others, when the caller is killed) and the launcher as `-c`.
    fds: list[int] = []
    proc = init = None
    try:
        host_uid: int | None = None
        lock: tuple[int, ...] = ()
        if not rootless:  # a host uid of its own: NPROC is then this run's alone
            host_uid, lock_fd = _uid_slots.acquire()
            fds.append(lock_fd)
            lock = (lock_fd,)
        ans_r, ans_w = _pipe(fds)
        status_r, status_w = _pipe(fds)
        info_r, info_w = _pipe(fds)
        data = [filter_bytes() or b"", code.encode("utf-8"), *MASKED_PROC.values()]
        data_fds = [_data_fd("retrace-sandbox", d, fds) for d in data]
        passed = (ans_w, status_w, data_fds[0], data_fds[1], info_w, *data_fds[2:])
        start = time.monotonic()
        proc = subprocess.Popen(
            bwrap_command(bwrap, limits, passed, host_uid),
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # the slot's lock goes in too: every process of the run holds it (tools/_uid_slots.py)
            pass_fds=passed + lock,
            start_new_session=True,
            cwd="/",
        )
        for fd in passed:
            os.close(fd)
            fds.remove(fd)
        # bwrap writes the init's pid before it lets the sandbox start (tools/_sandbox_init.py)
        init = open_init(proc, info_r, start + limits.wall_s)
        (out, err, ans, status), truncated, reason = _collect(proc, ans_r, status_r, limits, start)
        _reap(proc, time.monotonic() + 30)
        wall = time.monotonic() - start
    finally:
        kill_init(init)  # whatever happened above, nothing of the run outlives it
        if proc is not None:
            _kill(proc)
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        for fd in fds + ([init] if init is not None else []):
            os.close(fd)
    return _result(proc.returncode, _cpu_s(status), limits, reason, truncated, out, err, ans, wall)


def _pipe(fds: list[int]) -> tuple[int, int]:
    """A pipe whose two ends `fds` records (closed when the run ends)."""
    r, w = os.pipe()
    fds += [r, w]
    return r, w


def _cpu_s(status: str) -> float:
    """The program's CPU seconds as its launcher reported them (0 when it could not)."""
    try:
        return float(json.loads(status)["cpu"])
    except (ValueError, KeyError, TypeError):
        return 0.0


def _data_fd(name: str, data: bytes, fds: list[int]) -> int:
    """A readable descriptor holding `data` from its start, for the sandbox (bwrap reads the
    filter and the masked /proc files whole before it runs the program; the launcher reads
    the program); `fds` records it."""
    fd = os.memfd_create(name) if hasattr(os, "memfd_create") else None
    if fd is None:  # pragma: no cover - Linux always has memfd_create
        fd, path = tempfile.mkstemp()
        os.unlink(path)
    fds.append(fd)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _result(
    status: int,
    cpu_s: float,
    limits: Limits,
    reason: str | None,
    truncated: bool,
    out: str,
    err: str,
    ans: str,
    wall: float,
) -> ExecResult:
    sig = -status if status < 0 else (status - 128 if status > 128 else None)
    if reason is None and sig is not None:
        # SIGXCPU at the soft CPU limit, or the kernel's SIGKILL at the hard one when the
        # program ignores SIGXCPU: both are the CPU limit (its processes used >= cpu_s).
        cpu_kill = sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_s)
        reason = "cpu_time" if cpu_kill else "signal"
    exit_code = None if sig is not None else status
    ok = exit_code == 0 and reason is None
    return ExecResult(
        ok=ok,
        ans=ans[1:] if ok and ans else None,
        stdout=out,
        stderr=err,
        exit_code=exit_code,
        signal=sig,
        timed_out=reason in ("wall_time", "cpu_time"),
        killed_reason=reason,
        truncated=truncated,
        wall_s=round(wall, 3),
    )


def describe(bwrap: str | None = None) -> dict:
    """What provenance records about this executor."""
    path = bwrap or shutil.which("bwrap") or "bwrap"
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "bwrap": path,
        "bwrap_version": version,
        "mode": "root" if os.geteuid() == 0 else "user namespace",
    }


USERNS_HELP = (
    "bubblewrap cannot create a user namespace as an ordinary user here "
    "(kernel.unprivileged_userns_clone=0, user.max_user_namespaces=0 or an AppArmor "
    "restriction; as root too, bwrap runs as an ordinary uid of the run's own): allow "
    "unprivileged user namespaces, or use sandbox: wasm"
)


@functools.lru_cache(maxsize=4)
def sandbox_problem(bwrap: str | None = None) -> str | None:
    """Why the sandbox cannot run here (None if it can); the probe runs once per process."""
    path = bwrap or shutil.which("bwrap")
    if path is None or not os.access(path, os.X_OK):
        return f"bwrap not found ({bwrap or 'PATH'}); install it: apt-get install -y bubblewrap"
    if filter_bytes() is None:
        return "no seccomp filter for this architecture (x86_64 and aarch64 only)"
    rootless = os.geteuid() != 0
    problem = None if rootless else _root_problem(path)
    if problem is not None:
        return problem
    try:
        # Only its own loopback (network namespace), AF_INET refused (seccomp), the sandbox's
        # uid and gid (65534, in both modes).
        r = _execute(
            "import os, socket\ntry:\n    socket.socket()\nexcept OSError as e:\n"
            "    s = e.strerror\nnet = [l.split(':')[0].strip() for l in "
            f"open('/proc/net/dev').readlines()[2:]]\nans = (os.getuid() == os.getgid() == {SANDBOX_UID}, net, s)",
            Limits(wall_s=PROBE_WALL_S),
            path,
            rootless,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap failed to start: {exc}"
    if r.ans != "(True, ['lo'], 'Address family not supported by protocol')":
        if "namespace" in r.stderr:
            return f"{USERNS_HELP}: {' '.join(r.stderr.split())[-300:]}"  # one line
        return f"sandbox {probe_failure(r)}"
    return None


def _root_problem(bwrap: str) -> str | None:
    """As root, why bwrap cannot run as a run's slot uid here (None if it can)."""
    if shutil.which("setpriv") is None:
        return "setpriv not found; install it: apt-get install -y util-linux"
    if _way_in.blocked(bwrap):
        return f"{bwrap}: a folder above it is closed to others, so bwrap cannot run as a run's own uid"
    try:
        blocked = _way_in.ways_in(_python_roots())
    except OSError as exc:
        return f"no mount point for the Python installation: {exc}"
    missing = _way_in.tools_missing() if blocked else []
    if missing:
        return f"{', '.join(missing)} not found (to bind {', '.join(blocked)}); install util-linux and mount"
    return None


def run_code(code: str, limits: Limits = Limits(), bwrap: str | None = None) -> ExecResult:
    """Run `code` in the sandbox; raise SandboxUnavailable rather than run it unisolated. Text
    no interpreter could be given whole (a NUL byte, a lone surrogate) is refused.

    `bwrap`: the path of the bwrap binary (default: the first on PATH)."""
    problem = sandbox_problem(bwrap)
    if problem is not None:
        raise SandboxUnavailable(f"refusing to run generated code: {problem}")
    return refused(code) or _execute(
        code, limits, bwrap or shutil.which("bwrap") or "bwrap", os.geteuid() != 0
    )
