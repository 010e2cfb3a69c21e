"""Both code executors contain hostile programs: processes, namespaces, time, memory, output.

Run: `python -m pytest tests/unit/test_code_exec_limits.py -q` (see test_code_exec.py).
No test asserts how long a run took beyond what the limits guarantee (a killed run lasted
at least its wall limit): on a loaded machine a second of CPU can take several of wall.
"""

from __future__ import annotations

import ast
import os
import socket  # noqa: F401  (programs below are strings)

from sandbox_suite import REPO, ex  # noqa: F401  (ex: the fixture)

from retrace.tools.code_exec import Limits

# --- processes -----------------------------------------------------------------------


def test_fork_bomb_is_stopped_by_nproc(ex):
    r = ex.run(
        """
        import errno, os, time
        n = 0
        while True:
            try:
                pid = os.fork()
            except OSError as e:
                print("fork failed:", errno.errorcode[e.errno])
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            n += 1
        ans = n
    """,
        Limits(wall_s=10, max_tasks=8),
    )
    if ex.name == "bwrap":  # the sleeping children die with the PID namespace (fixture)
        assert r.ok and "fork failed: EAGAIN" in r.stdout and int(r.ans) < 8, r
    else:  # WASI has no processes
        assert r.exit_code == 1 and "has no attribute 'fork'" in r.stderr, r


def test_spinning_fork_bomb_ends_at_the_wall_limit(ex):
    r = ex.run(
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
        Limits(wall_s=2, cpu_s=10, max_tasks=8),
    )
    if ex.name == "bwrap":
        assert r.timed_out and r.killed_reason == "wall_time" and r.signal == 9, r
        assert r.wall_s >= 2
    else:
        assert r.exit_code == 1 and "has no attribute 'fork'" in r.stderr, r


def test_daemonising_does_not_outlive_the_run(ex):
    r = ex.run("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for fd in (0, 1, 2):
                    os.close(fd)
                time.sleep(300)
            os._exit(0)
        ans = "parent done"
    """)
    # the fixture asserts that no process of the run is left once run_code returned
    assert r.ans == ex.pick(bwrap="parent done", wasm=None), r


def test_shell_is_contained(ex):
    tag = f"retrace-shell-{os.getpid()}"
    r = ex.run(f"""
        import os, subprocess
        rc = os.system("echo pwned > {REPO}/{tag}; (sleep 300 &) ; exit 7")
        who = subprocess.run(["sh", "-c", "id -u; echo $RETRACE_TEST_SECRET"],
                             capture_output=True, text=True).stdout.split()
        ans = os.waitstatus_to_exitcode(rc), who
    """)
    assert not (REPO / tag).exists()
    if ex.name == "bwrap":  # the shell ran, as the sandbox's uid, without the caller's environment
        rc, who = ast.literal_eval(r.ans)
        assert rc == 7 and who == ["65534"], r  # as root too (its host uid is the run's own)
    else:
        assert r.exit_code == 1 and "has no attribute 'system'" in r.stderr, r


def test_cannot_kill_anything_outside(ex):
    me = os.getpid()
    r = ex.run(f"""
        import os, signal
        out = []
        for target in (1, {me}):
            try:
                os.kill(target, signal.SIGKILL)
                out.append("SENT")
            except Exception as e:
                out.append(type(e).__name__)
        ans = out
    """)
    # bwrap: pid 1 is the namespace's init (the program's own uid, immune to signals from
    # inside), our pid does not exist in there; wasm: no signals at all
    assert r.ok and r.ans == ex.pick(
        bwrap="['SENT', 'ProcessLookupError']", wasm="['AttributeError', 'AttributeError']"
    ), r
    r = ex.run("import os, signal\nos.killpg(0, signal.SIGKILL)")
    assert not r.ok and r.killed_reason == ex.pick(bwrap="signal", wasm=None), r
    r = ex.run("import os, signal\nos.kill(-1, signal.SIGKILL)\nans = 'survived'")
    assert r.ans in (None, "survived") and os.getpid() == me  # we are alive


def test_environment_secrets_do_not_leak(ex, monkeypatch):
    monkeypatch.setenv("RETRACE_TEST_SECRET", "hunter2")
    r = ex.run("import os\nans = sorted(os.environ)")
    assert "hunter2" not in r.stdout + r.stderr + (r.ans or "")
    assert eval(r.ans) == ex.pick(
        bwrap=[
            "HOME",
            "LANG",
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "PATH",
            "PWD",
            "PYTHONHASHSEED",
            "TMPDIR",
        ],
        wasm=["HOME", "LANG", "PYTHONHASHSEED", "TMPDIR"],
    ), r


# --- namespaces and memory outside the caps (red-team findings) ----------------------


def test_no_nested_user_namespace_so_no_own_tmpfs(ex):
    r = ex.run(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        out = []
        for flags in (0x10000000, 0x10020000):   # CLONE_NEWUSER, + CLONE_NEWNS
            out.append(os.strerror(ctypes.get_errno()) if libc.unshare(flags) else "UNSHARED")
        if libc.mount(b"none", b"/scratch", b"tmpfs", 0, b"size=200m") == 0:
            open("/scratch/big", "wb").write(b"0" * (180 << 20))
            out.append("MOUNTED")
        ans = out
    """,
        Limits(wall_s=10, memory_bytes=512 << 20),
    )
    if ex.name == "bwrap":
        assert r.ans == "['Operation not permitted', 'Operation not permitted']", r
    else:  # no ctypes (no dynamic loading) in WASI CPython
        assert r.exit_code == 1 and "ModuleNotFoundError" in r.stderr, r


def test_memfd_cannot_hold_memory_outside_the_caps(ex):
    r = ex.run("""
        import os
        fd = os.memfd_create("x")
        for _ in range(200):
            os.write(fd, b"0" * (1 << 20))
        ans = "made"
    """)
    assert r.ans is None and r.exit_code == 1, r
    assert ex.pick(bwrap="PermissionError", wasm="AttributeError") in r.stderr, r


def test_sysv_shared_memory_is_refused(ex):
    r = ex.run("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        ans = libc.shmget(0, 200 << 20, 0o1600), ctypes.get_errno()
    """)
    assert r.ans == ex.pick(bwrap="(-1, 1)", wasm=None), r  # EPERM from the filter


# --- time, memory, output ------------------------------------------------------------


def test_infinite_loop_hits_cpu_limit(ex):
    r = ex.run("while True: pass", Limits(wall_s=30, cpu_s=1))
    assert r.timed_out and r.killed_reason == "cpu_time", r
    assert r.signal == ex.pick(bwrap=24, wasm=None), r  # SIGXCPU; wasm: out of fuel


def test_cpu_burning_threads_share_one_cpu_budget(ex):
    r = ex.run(
        """
        import threading
        def burn():
            while True:
                pass
        for _ in range(4):
            threading.Thread(target=burn, daemon=True).start()
        burn()
    """,
        Limits(wall_s=30, cpu_s=1),
    )
    if ex.name == "bwrap":  # RLIMIT_CPU counts every thread of the process
        assert r.killed_reason == "cpu_time" and r.timed_out, r
    else:  # no threads in WASI
        assert r.exit_code == 1 and "thread" in r.stderr, r


def test_ignored_signals_do_not_prevent_the_cpu_kill(ex):
    r = ex.run(
        """
        import signal
        for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGXCPU"):
            try:
                signal.signal(getattr(signal, name), signal.SIG_IGN)
            except (AttributeError, OSError, ValueError):
                pass
        while True:
            pass
    """,
        Limits(wall_s=30, cpu_s=1),
    )
    # SIGXCPU ignored: the kernel's SIGKILL at the hard CPU limit ends it, and it is
    # reported as the CPU limit (it was "signal" before), not as a crash
    assert r.timed_out and r.killed_reason == "cpu_time", r
    assert r.signal == ex.pick(bwrap=9, wasm=None), r
    r = ex.run(
        """
        import signal, time
        try:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        except (AttributeError, OSError, ValueError):
            pass
        while True: time.sleep(0.01)
    """,
        Limits(wall_s=1),
    )
    assert r.killed_reason == "wall_time" and r.timed_out and r.wall_s >= 1, r


def test_sleeping_forever_hits_the_wall_limit(ex):
    r = ex.run("import time\ntime.sleep(10**6)", Limits(wall_s=1))
    assert r.timed_out and r.killed_reason == "wall_time" and r.wall_s >= 1, r


def test_closing_its_output_does_not_dodge_the_wall_limit(ex):
    r = ex.run(
        """
        import os, time
        for fd in range(1024):
            try:
                os.close(fd)
            except OSError:
                pass
        time.sleep(10**6)
    """,
        Limits(wall_s=1),
    )
    assert r.killed_reason == "wall_time" and r.wall_s >= 1, r


def test_memory_bombs_hit_the_memory_limit(ex):
    r = ex.run("ans = len(bytearray(10**9))  # 1 GB > the 256 MiB limit (10**10 overflows wasm32)")
    assert r.exit_code == 1 and r.stderr.rstrip().endswith("MemoryError"), r
    r = ex.run("""
        x = []
        while True:
            x.append(bytearray(10**6))
    """)
    assert r.exit_code == 1 and "MemoryError" in r.stderr, r


def test_output_flood_is_truncated_and_killed(ex):
    cap = 4096
    r = ex.run("while True: print('x' * 1000)", Limits(wall_s=10, output_bytes=cap))
    assert r.truncated and r.killed_reason == "output_limit" and len(r.stdout) == cap, r
    r = ex.run("import sys\nwhile True: sys.stderr.write('e' * 1000)", Limits(wall_s=10, output_bytes=cap))
    assert r.truncated and r.killed_reason == "output_limit" and len(r.stderr) == cap, r
    assert ex.run(f"ans = 'a' * {cap}", Limits(output_bytes=cap)).ans == "a" * cap
    r = ex.run(f"ans = 'a' * {cap + 1}", Limits(output_bytes=cap))
    assert r.truncated and r.killed_reason == "output_limit" and r.ans is None, r
