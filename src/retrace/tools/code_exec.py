"""`code execute`: run LLM-written Python in a throw-away, network-less sandbox.

ART's convention: the program stores its result in `ans` and prints it. Run it with

    from retrace.tools.code_exec import run_code, Limits
    result = run_code("import sympy\\nans = sympy.factorint(360)\\nprint(ans)")
    result.ok, result.ans, result.stdout     # True, '{2: 3, 3: 2, 5: 1}', '{2: 3, 3: 2, 5: 1}\\n'

or as ART's `[code execute]` tool, `TOOLS.get("code_execute")` (tools/code.py). A hostile
program ends with `ok=False` and says why
(`timed_out`, `killed_reason`, `signal`, its traceback in `stderr`); the caller is never
harmed. If the sandbox cannot be built, `run_code` raises `SandboxUnavailable` instead of
running the code unisolated.

How it isolates (bubblewrap, `apt-get install -y bubblewrap`, run as root; util-linux's
`setpriv`):
- new network, PID, IPC and UTS namespaces: only a loopback device of its own, so nothing
  on the host (not even 127.0.0.1) or outside is reachable; it cannot see or signal
  processes outside the sandbox; killing the outer bwrap (`--die-with-parent`) kills every
  process the program started.
- a new mount namespace whose root is an empty tmpfs holding only, read-only: /usr (with
  the /bin, /lib, /lib64, /sbin links), /etc/ld.so.cache, the Python installation and the
  virtual environment (so sympy imports), and the program; plus a fresh /proc and a minimal
  /dev. The repository, /root, /home, the rest of /etc and the host's /tmp are not there.
- the only writable place is /scratch, a tmpfs capped at `Limits.scratch_bytes`, also
  reachable as /tmp and $HOME (when the Python installation itself lives under /tmp, /tmp is
  instead a second capped tmpfs holding that read-only installation); it vanishes with the namespace. The program file lives in a
  host `tempfile.mkdtemp()` directory (mounted read-only) that is deleted afterwards.
- the program runs as uid/gid 65534 (nobody/nogroup), no supplementary groups, no
  capabilities, `no_new_privs`, in a new session (no terminal to inject keystrokes into).
- rlimits set by a small launcher before the program's first line: address space (AS), CPU
  seconds (SIGXCPU at the soft limit, SIGKILL one second later), tasks of the sandbox user
  (NPROC: processes and threads), file size (FSIZE), open files (NOFILE), core dumps (0).
- an empty environment: PATH, LANG, HOME/TMPDIR (= /scratch) and one-thread settings for
  BLAS/OpenMP (so a numpy import does not trip NPROC); no secrets of the caller.
- wall-clock limit and output caps enforced by the caller: stdout, stderr and `ans` are read
  incrementally; past `Limits.output_bytes` or the wall limit the whole process group is
  SIGKILLed (a program cannot ignore it).

What it does NOT protect against:
- kernel exploits: the sandbox shares the host kernel, and no seccomp filter restricts
  system calls (bwrap's `--seccomp` is not used), so any kernel bug reachable by an
  unprivileged user is reachable here.
- reading what is mounted: all of /usr, the Python installation, the virtual environment
  (including anything a package stored there), and /proc's host-wide information
  (/proc/cpuinfo, /proc/meminfo, load, uptime, kernel version, mounts of the sandbox).
- side channels (timing, caches, CPU frequency) and covert channels between programs
  running at the same time; two sandboxes at once share uid 65534, so their task counts
  (NPROC) add up (each is in its own PID namespace, so neither can signal the other).
- total machine load: limits are per process. A program may use up to `max_tasks` tasks,
  each with up to `memory_bytes` of address space and `cpu_s` CPU seconds, for `wall_s`
  seconds — e.g. 8 × 1 GiB and all cores for 10 s with the defaults. No cgroup caps the sum.
  The scratch tmpfs adds up to `scratch_bytes` of RAM.
- resource use before the launcher runs: the interpreter's start-up (~50 MB, ~30 ms) is
  outside the rlimits (not outside the wall limit).
- anything the caller does with the result: `ans` and the output are untrusted text and
  may be crafted to mislead a later prompt (prompt injection) or a parser.
- faked results: the program can write to the `ans` channel or print whatever it likes; a
  program that exits with status 128+n is reported as killed by signal n (bwrap reports a
  signal death that way).
- uid 65534 is shared with anything else on the host that runs as nobody (their processes
  count against NPROC; files they leave world-readable in mounted paths are readable).
"""
from __future__ import annotations

import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


SANDBOX_UID = 65534  # nobody / nogroup on Debian
SCRATCH = "/scratch"
_MiB = 1 << 20


class SandboxUnavailable(RuntimeError):
    """The isolation cannot be built here; the code was not run."""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0           # wall clock, enforced by the caller (sleep counts)
    cpu_s: int = 5                 # RLIMIT_CPU per process: SIGXCPU, SIGKILL 1 s later
    memory_bytes: int = 1024 * _MiB  # RLIMIT_AS per process
    max_tasks: int = 8             # RLIMIT_NPROC: processes + threads of the sandbox uid
    file_bytes: int = 16 * _MiB    # RLIMIT_FSIZE: largest file the program may write
    max_open_files: int = 64       # RLIMIT_NOFILE
    scratch_bytes: int = 64 * _MiB  # size of the /scratch tmpfs (all files together)
    output_bytes: int = 64 * 1024  # cap on each of stdout, stderr and ans

    def rlimits(self) -> dict[str, tuple[int, int]]:
        return {"RLIMIT_AS": (self.memory_bytes,) * 2,
                "RLIMIT_CPU": (self.cpu_s, self.cpu_s + 1),
                "RLIMIT_NPROC": (self.max_tasks,) * 2,
                "RLIMIT_FSIZE": (self.file_bytes,) * 2,
                "RLIMIT_NOFILE": (self.max_open_files,) * 2,
                "RLIMIT_CORE": (0, 0)}


@dataclass(frozen=True)
class ExecResult:
    ok: bool                    # exited 0 and was not killed
    ans: str | None             # str(ans) after the program ran, None if unset or it failed
    stdout: str                 # capped at Limits.output_bytes
    stderr: str
    exit_code: int | None       # as reported by bwrap; None if a signal killed the program
    signal: int | None          # the signal that killed it (bwrap reports it as 128 + n)
    timed_out: bool             # the wall or CPU limit ended it
    killed_reason: str | None   # "wall_time" | "cpu_time" | "output_limit" | "signal" | None
    truncated: bool             # some output was cut at the cap
    wall_s: float


# Runs inside the sandbox as uid 65534: set the rlimits, run the program, send str(ans)
# down the pipe whose fd is argv[2]. Limits are set here rather than in a preexec_fn so
# they bind the program and not bwrap (root, exempt from NPROC anyway).
_LAUNCHER = """\
import json, os, resource, sys
for _name, _value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, _name), tuple(_value))
_fd, _cap = int(sys.argv[2]), int(sys.argv[3])
with open("/job/program.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "program.py", "exec")
_g = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
exec(_code, _g)
if "ans" in _g:
    # "=" marks that ans exists (it may be ""); one byte over the cap tells the caller
    os.write(_fd, b"=" + str(_g["ans"]).encode("utf-8", "replace")[:_cap + 1])
"""


def _python_roots() -> list[str]:
    """Directories the sandbox needs to run this interpreter with this venv's packages."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))]
    roots: list[str] = []
    for p in sorted({os.path.realpath(p) for p in paths} | {os.path.abspath(sys.prefix)}):
        if not any(p == r or p.startswith(r + "/") for r in ["/usr", *roots]):
            roots.append(p)
    return roots


def _bwrap_command(jobdir: str, limits: Limits, ans_fd: int) -> list[str]:
    cmd = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv",
           "--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):  # merged-/usr links of Debian 12
        if os.path.islink(f"/{link}"):
            cmd += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    if os.path.exists("/etc/ld.so.cache"):
        cmd += ["--perms", "0755", "--dir", "/etc",
                "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    made: set[str] = set()
    roots = _python_roots()
    tmp_holds_python = any(r == "/tmp" or r.startswith("/tmp/") for r in roots)
    if tmp_holds_python:
        # A venv under /tmp (e.g. a CI checkout there) must be bound inside /tmp, so /tmp
        # cannot be the symlink to /scratch: it becomes its own capped tmpfs instead.
        cmd += ["--perms", "1777", "--size", str(limits.scratch_bytes), "--tmpfs", "/tmp"]
        made.add("/tmp")
    for root in roots:
        parts = root.strip("/").split("/")
        for i in range(1, len(parts)):  # bwrap would make parents 0700: unreadable to 65534
            parent = "/" + "/".join(parts[:i])
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", parent]
        cmd += ["--ro-bind", root, root]
    cmd += ["--ro-bind", jobdir, "/job", "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(limits.scratch_bytes), "--tmpfs", SCRATCH]
    if not tmp_holds_python:
        cmd += ["--symlink", SCRATCH, "/tmp"]
    cmd += ["--chdir", SCRATCH]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": SCRATCH,
           "TMPDIR": SCRATCH, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    uid = str(SANDBOX_UID)
    cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            sys.executable, "-I", "-B", "/job/launcher.py",
            json.dumps(limits.rlimits()), str(ans_fd), str(limits.output_bytes)]
    return cmd


def _kill(proc: subprocess.Popen) -> None:
    # The outer bwrap leads the group; its death SIGKILLs the sandbox's PID-namespace init
    # (--die-with-parent), which takes every process inside with it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _collect(proc: subprocess.Popen, ans_r: int, limits: Limits,
             start: float) -> tuple[list[str], bool, str | None]:
    """Read stdout, stderr and ans until all close, a cap is hit, or the wall limit."""
    fds = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray(),
           ans_r: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    caps = {fd: limits.output_bytes + (fd == ans_r) for fd in fds}  # + the "=" marker
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
            if len(chunk) > room:
                truncated, reason = True, "output_limit"
    sel.close()
    if reason is None:  # all pipes closed, but a program may close them and keep running
        try:
            proc.wait(timeout=max(0.0, start + limits.wall_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            reason = "wall_time"
    if reason is not None:
        _kill(proc)
    return [bytes(b).decode("utf-8", "replace") for b in fds.values()], truncated, reason


def _execute(code: str, limits: Limits) -> ExecResult:
    jobdir = tempfile.mkdtemp(prefix="retrace-code-")
    ans_r = ans_w = -1
    try:
        os.chmod(jobdir, 0o755)  # readable by uid 65534, writable only by us; mounted ro
        for name, text in (("program.py", code), ("launcher.py", _LAUNCHER)):
            with open(os.path.join(jobdir, name), "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(os.path.join(jobdir, name), 0o644)
        ans_r, ans_w = os.pipe()
        start = time.monotonic()
        proc = subprocess.Popen(_bwrap_command(jobdir, limits, ans_w), env={},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(ans_w,),
                                start_new_session=True, cwd=jobdir)
        os.close(ans_w)
        ans_w = -1
        with proc:
            (out, err, ans), truncated, reason = _collect(proc, ans_r, limits, start)
            status = proc.wait(timeout=30)
        wall = time.monotonic() - start
    finally:
        for fd in (ans_r, ans_w):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(jobdir, ignore_errors=True)
    return _result(status, reason, truncated, out, err, ans, wall)


def _result(status: int, reason: str | None, truncated: bool, out: str, err: str,
            ans: str, wall: float) -> ExecResult:
    sig = -status if status < 0 else (status - 128 if status > 128 else None)
    if reason is None and sig is not None:
        reason = "cpu_time" if sig == signal.SIGXCPU else "signal"
    exit_code = None if sig is not None else status
    ok = exit_code == 0 and reason is None
    return ExecResult(ok=ok, ans=ans[1:] if ok and ans else None, stdout=out, stderr=err,
                      exit_code=exit_code, signal=sig,
                      timed_out=reason in ("wall_time", "cpu_time"),
                      killed_reason=reason, truncated=truncated, wall_s=round(wall, 3))


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why the sandbox cannot run here (None if it can); the probe runs once per process."""
    if os.geteuid() != 0:
        return "the code sandbox needs root (to drop to uid 65534 inside bubblewrap)"
    for tool, package in (("bwrap", "bubblewrap"), ("setpriv", "util-linux")):
        if shutil.which(tool) is None:
            return f"{tool} not found; install it: apt-get install -y {package}"
    try:
        # The probe must see only its own loopback: proof the network namespace holds.
        r = _execute("import socket, os\nans = (os.getuid(), socket.if_nameindex())",
                     Limits(wall_s=20))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap failed to start: {exc}"
    if r.ans != f"({SANDBOX_UID}, [(1, 'lo')])":
        return f"sandbox probe failed (ans={r.ans!r}): {r.stderr.strip()[-500:]}"
    return None


def run_code(code: str, limits: Limits = Limits()) -> ExecResult:
    """Run `code` in the sandbox; raise SandboxUnavailable rather than run it unisolated."""
    problem = sandbox_problem()
    if problem is not None:
        raise SandboxUnavailable(f"refusing to run generated code: {problem}")
    return _execute(code, limits)
