"""Red team round 4 (issue 54): the kill switch, kernel keyrings, per-uid counters, the sweep.

Run: `python -m pytest tests/unit/test_code_exec_round4.py -q`, as root and as an ordinary
user (CI: `make test` as retrace-ci, rootless bwrap; the `root` block as root). Every `ex` test
runs on both executors (sandbox_suite.py); the attacks need ctypes, which WASI CPython lacks,
so under wasm they show only that the program ends within its limits. Each got through on
1a7685b (main before issue 54), in the mode named:
- rootless bwrap: a program ptrace'd the sandbox's init (pid 1, its own uid), cleared its
  parent-death signal and outlived both its wall limit and its SIGKILLed caller;
- bwrap: add_key/request_key/keyctl were allowed (a caller's session keyring readable, keys
  left in the kernel after the run); /proc/keys listed them;
- bwrap: inotify instances (128 per uid: a host process of the user could make none) and ptys
  (root mode: a devpts of its own, ~460 per run) were unbounded;
- the WASM folder sweep removed a live run's folder when its owner was in another PID
  namespace (or on another host sharing TMPDIR);
- bwrap refused a caller started through a link outside its venv (execvp: No such file);
- os.cpu_count() was the host's under bwrap, 1 under WASM.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sandbox_suite import REPO, bwrap_ex, ex, gone  # noqa: F401  (the fixtures)

from retrace.tools import _jobdirs
from retrace.tools.code_exec import Limits

# System call numbers (each architecture's unistd.h), independent of tools/_seccomp.py's table.
NR = {
    "x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311}
    | {"add_key": 248, "request_key": 249, "keyctl": 250},
    "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271}
    | {"add_key": 217, "request_key": 218, "keyctl": 219},
}

# --- the sandbox's init: out of reach, killed by handle ----------------------------------------

# Clears the parent-death signal of pid 1 (bwrap's init) by running prctl(PR_SET_PDEATHSIG, 0)
# in it through ptrace (x86_64: a `syscall` instruction poked at its pc, single-stepped, then
# everything restored), then names itself TAG (visible in the host's /proc) and sleeps.
DISARM = """
import os, time
def attack():
    try:
        import ctypes
    except ImportError:
        return "no ctypes"
    if os.uname().machine != "x86_64":
        return "not x86_64"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    names = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
    Regs = type("Regs", (ctypes.Structure,), {"_fields_": [(n, ctypes.c_ulonglong) for n in names.split()]})
    if libc.ptrace(16, 1, None, None) != 0:  # PTRACE_ATTACH
        return "ptrace refused: errno %d" % ctypes.get_errno()
    os.waitpid(1, 0x40000000)  # __WALL
    saved, regs = Regs(), Regs()
    libc.ptrace(12, 1, None, ctypes.byref(saved))  # PTRACE_GETREGS
    ctypes.memmove(ctypes.byref(regs), ctypes.byref(saved), ctypes.sizeof(Regs))
    word = libc.ptrace(1, 1, ctypes.c_void_p(saved.rip), None) & (2**64 - 1)  # PEEKTEXT
    libc.ptrace(4, 1, ctypes.c_void_p(saved.rip), ctypes.c_void_p((word & ~0xFFFF) | 0x050F))
    regs.rax, regs.rdi, regs.rsi, regs.orig_rax = 157, 1, 0, 2**64 - 1  # prctl(PDEATHSIG, 0)
    libc.ptrace(13, 1, None, ctypes.byref(regs))  # PTRACE_SETREGS
    libc.ptrace(9, 1, None, None)  # PTRACE_SINGLESTEP
    os.waitpid(1, 0x40000000)
    done = Regs()
    libc.ptrace(12, 1, None, ctypes.byref(done))
    libc.ptrace(4, 1, ctypes.c_void_p(saved.rip), ctypes.c_void_p(word))
    libc.ptrace(13, 1, None, ctypes.byref(saved))
    libc.ptrace(17, 1, None, None)  # PTRACE_DETACH
    return "disarmed" if done.rax == 0 else "prctl failed: %d" % done.rax
print(attack(), flush=True)
try:
    import ctypes
    ctypes.CDLL(None).prctl(15, TAG, 0, 0, 0)  # PR_SET_NAME: seen by the host
except ImportError:
    pass
time.sleep(10**6)
"""


def _tag() -> bytes:
    return f"rt4-{os.getpid() % 100000}-{time.monotonic_ns() % 1000}".encode()[:15]


def _tagged(tag: bytes) -> list[int]:
    """Live host processes whose name is `tag`."""
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if (p / "comm").read_bytes().strip() == tag and (p / "stat").read_text().rsplit(")", 1)[
                1
            ].split()[0] != "Z":
                found.append(int(p.name))
        except (OSError, IndexError):
            continue
    return found


def _gone_within(tag: bytes, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _tagged(tag):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_disarmed_init_still_ends_at_the_wall_limit(ex):
    tag = _tag()
    r = ex.run(f"TAG = {tag!r}\n" + DISARM, Limits(wall_s=4, cpu_s=2))
    assert r.killed_reason == "wall_time" and not r.ok, r
    assert _gone_within(tag, 2.0), f"{r.stdout!r}: the sandbox outlived its wall limit by 2 s"
    if ex.name == "bwrap" and platform.machine() == "x86_64":
        assert r.stdout.startswith("ptrace refused: errno 1"), r  # seccomp: EPERM


CALLER = """
import sys
from retrace.tools.code_exec import Limits, run_code
run_code(sys.argv[3], Limits(wall_s=120, cpu_s=2), sandbox=sys.argv[1], **eval(sys.argv[2]))
"""


def test_a_disarmed_init_dies_with_its_sigkilled_caller(bwrap_ex):
    """bwrap only: WASM has no ctypes, so no attack (a killed caller: test_code_exec_harm.py)."""
    ex = bwrap_ex
    tag = _tag()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    code = f"TAG = {tag!r}\n" + DISARM
    caller = subprocess.Popen([sys.executable, "-c", CALLER, ex.name, repr(ex.options), code], env=env)
    deadline = time.monotonic() + 60
    while not _tagged(tag) and time.monotonic() < deadline and caller.poll() is None:
        time.sleep(0.05)
    assert caller.poll() is None, "the caller ended before its program had run"
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    assert _gone_within(tag, 2.0), "the sandbox outlived its SIGKILLed caller by 2 s"


def test_the_init_is_out_of_reach(ex):
    nr = NR.get(platform.machine(), {})
    r = ex.run(f"""
        import os
        out = [os.path.exists("/proc/1/mem"), os.path.exists("/proc/1/task")]
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            for name in ("ptrace", "process_vm_readv", "process_vm_writev"):
                out.append((name, libc.syscall({nr!r}[name], 16, 1, 0, 0, 0, 0), ctypes.get_errno()))
        except ImportError:
            pass
        ans = out
    """)
    assert r.ok, r
    refused = [(n, -1, 1) for n in ("ptrace", "process_vm_readv", "process_vm_writev")]
    assert ast.literal_eval(r.ans) == [False, False, *ex.pick(bwrap=refused, wasm=[])], r


# --- kernel keyrings -----------------------------------------------------------------------------

KEYS = """
import os
out = {}
try:
    out["/proc/keys"] = open("/proc/keys").read()
except OSError as e:
    out["/proc/keys"] = type(e).__name__
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    nr = NR
    def call(name, *args):
        rc = libc.syscall(nr[name], *args)
        return (rc, ctypes.get_errno()) if rc < 0 else (rc, 0)
    buf = ctypes.create_string_buffer(4096)
    # the session keyring's key ids (KEYCTL_READ of KEY_SPEC_SESSION_KEYRING), a search for
    # the caller's secret, keys planted in the session (-3) and user (-4) keyrings
    out["read"] = call("keyctl", 11, -3, buf, 4096)
    out["search"] = call("keyctl", 10, -3, b"user", b"retrace-secret", 0)
    out["request"] = call("request_key", b"user", b"retrace-secret", None, 0)
    out["add_session"] = call("add_key", b"user", b"planted", b"x", 1, -3)
    out["add_user"] = call("add_key", b"user", b"planted", b"x", 1, -4)
except ImportError:
    pass
ans = out
"""

KEY_CALLER = """
import ctypes, json, sys
from retrace.tools.code_exec import Limits, run_code
libc = ctypes.CDLL(None, use_errno=True)
nr = json.loads(sys.argv[3])
# a fresh session keyring of this caller (as pam_keyinit gives a login), holding a secret
assert libc.syscall(nr["keyctl"], 1, b"retrace-test-session") > 0, ctypes.get_errno()
assert libc.syscall(nr["add_key"], b"user", b"retrace-secret", b"hunter2", 7, -3) > 0
r = run_code(sys.argv[4], Limits(wall_s=60), sandbox=sys.argv[1], **eval(sys.argv[2]))
ids = ctypes.create_string_buffer(4096)
n = libc.syscall(nr["keyctl"], 11, -3, ids, 4096)  # the session keyring's keys afterwards
print(json.dumps({"ok": r.ok, "ans": r.ans, "stderr": r.stderr, "keys_after": n // 4}))
"""


@pytest.mark.skipif(platform.machine() not in NR, reason="[SANDBOX] no system call numbers for this machine")
def test_keyrings_are_refused_and_the_callers_secret_stays_hidden(ex):
    nr = NR[platform.machine()]
    code = KEYS.replace("NR", repr(nr))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    args = [ex.name, repr(ex.options), json.dumps(nr), code]
    done = subprocess.run([sys.executable, "-c", KEY_CALLER, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["ok"] and "hunter2" not in done.stdout, report
    assert report["keys_after"] == 1, report  # the caller's secret alone: nothing planted
    seen = ast.literal_eval(report["ans"])
    eperm = (-1, 1)
    assert seen == ex.pick(
        bwrap={
            "/proc/keys": "",
            **{k: eperm for k in ("read", "search", "request", "add_session", "add_user")},
        },
        wasm={"/proc/keys": "FileNotFoundError"},
    ), report


# --- per-uid and host-wide kernel counters -------------------------------------------------------


def test_inotify_instances_and_ptys_are_capped(ex):
    r = ex.run("""
        import os
        made = {"inotify": 0, "pty": 0}
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            while made["inotify"] < 200 and libc.inotify_init1(0) >= 0:
                made["inotify"] += 1
        except ImportError:
            pass
        try:
            while made["pty"] < 100:
                os.openpty()
                made["pty"] += 1
        except (OSError, AttributeError) as e:
            made["why"] = type(e).__name__
        ans = made
    """)
    assert r.ok, r
    made = ast.literal_eval(r.ans)
    assert made["inotify"] == 0 and made["pty"] == 0, made  # none at all: no count to starve


# --- what the program sees ----------------------------------------------------------------------


def test_the_cpu_count_is_one_and_the_uid_is_stable(ex):
    """The same on every run, as root too (bwrap: 65534 whatever the run's host uid;
    test_code_exec_uid.py checks that host uid)."""
    runs = [
        ex.run("import os\nans = (os.cpu_count(), getattr(os, 'getuid', lambda: None)())") for _ in range(2)
    ]
    assert all(r.ok for r in runs), runs
    counts_and_uids = [ast.literal_eval(r.ans) for r in runs]
    assert [c for c, _ in counts_and_uids] == [1, 1], counts_and_uids
    assert counts_and_uids[0][1] == counts_and_uids[1][1] == ex.pick(bwrap=65534, wasm=counts_and_uids[0][1])


def test_bwrap_runs_for_a_caller_started_through_a_link_outside_its_venv(bwrap_ex, tmp_path):
    """bwrap only: WASM runs no host interpreter in its sandbox (and Python started through such
    a link does not see its venv's wasmtime)."""
    ex = bwrap_ex
    link = tmp_path / "bin" / "python"
    link.parent.mkdir()
    link.symlink_to(sys.executable)
    code = "import sys\nfrom retrace.tools.code_exec import run_code\n"
    code += f"r = run_code('ans = 6 * 7', sandbox={ex.name!r}, **{ex.options!r})\nprint(r.ans, r.stderr)"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([str(link), "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.startswith("42 "), done.stderr[-2000:]


# --- the WASM job-folder sweep -------------------------------------------------------------------

OWNER_ELSEWHERE = """
import sys, time
from retrace.tools import _jobdirs
print(_jobdirs.make("retrace-wasm-"), flush=True)
time.sleep(600)
"""


def _in_new_pid_namespace() -> list[str]:
    """`unshare` arguments for a process in a PID namespace of its own (as an ordinary user,
    in a user namespace too); a skip where that cannot be made."""
    tool = shutil.which("unshare")
    if tool is None:
        pytest.skip("[SANDBOX] util-linux unshare not found")
    args = [tool, "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        args[1:1] = ["--user", "--map-current-user"]
    if subprocess.run([*args, "true"], capture_output=True).returncode != 0:
        pytest.skip("[SANDBOX] cannot make a PID namespace here")
    return args


def test_sweep_leaves_a_live_callers_folder_in_another_pid_namespace(tmp_path, monkeypatch):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    other = subprocess.Popen(
        [*_in_new_pid_namespace(), sys.executable, "-c", OWNER_ELSEWHERE],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        job = other.stdout.readline().strip()
        assert job.startswith(str(tmp_path)), job
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert _jobdirs.sweep("retrace-wasm-") == []
        time.sleep(0.5)  # a sweep removes in the background
        assert os.path.isdir(job)
    finally:
        other.kill()
        other.wait()


def test_sweep_leaves_a_folder_of_another_boot_and_takes_one_of_a_dead_caller_here(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = subprocess.run(
        [sys.executable, "-c", "from retrace.tools import _jobdirs\nprint(_jobdirs.make('retrace-wasm-'))"],
        env={**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=True,
    )
    dead_here = made.stdout.strip()  # its maker exited: its lock is free, its pid gone
    elsewhere = tmp_path / "retrace-wasm-elsewhere"
    shutil.copytree(dead_here, elsewhere)
    owner = (elsewhere / "owner").read_text().split()
    # a live caller on another host sharing TMPDIR: its pid runs nothing here, its boot id differs
    record = ["999999999", owner[1], *(["another-boot", *owner[3:]] if len(owner) > 2 else [])]
    (elsewhere / "owner").write_text(" ".join(record) + "\n")
    assert _jobdirs.sweep("retrace-wasm-") == [dead_here]
    assert gone([dead_here]) and elsewhere.is_dir()
