"""Both code executors contain hostile programs: what works, refusal, network, filesystem.

Run: `python -m pytest tests/unit/test_code_exec.py tests/unit/test_code_exec_limits.py -q`.
Every test runs once per executor (`wasm`, `bwrap`; fixture in sandbox_suite.py). Each
asserts the limit or error that contained the program and that nothing of it leaked onto
the host; where the two executors contain a program by different means (no socket module
call vs a seccomp refusal), `ex.pick` names the expected outcome of each.
"""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path

import pytest
from sandbox_suite import REPO, ex  # noqa: F401  (ex: the fixture)

from retrace.tools import TOOLS, _bwrap_args, bwrap_exec, code_exec, wasm_exec
from retrace.tools.code_exec import Limits, SandboxUnavailable, run_code
from tests import prerequisites

MIRROR = Path(prerequisites.MIRROR or REPO / "no-mirror")


# --- programs that must work -------------------------------------------------------


def test_program_returns_ans(ex):
    r = ex.run("""
        import fractions, math
        ans = [fractions.Fraction(3, 6), math.comb(5, 2)]
        print(ans)
    """)
    assert r.ok and r.ans == "[Fraction(1, 2), 10]" and r.stdout == r.ans + "\n", r


def test_sympy_only_in_the_native_executor(ex):
    r = ex.run("import sympy\nans = sympy.factorint(360)", Limits())
    if ex.name == "bwrap":
        assert r.ok and r.ans == "{2: 3, 3: 2, 5: 1}", r
    else:  # documented: the WASM executor has the standard library only
        assert r.exit_code == 1 and "ModuleNotFoundError: No module named 'sympy'" in r.stderr


def test_plain_program_and_its_failures_are_reported(ex):
    r = ex.run("ans = sum(range(10))\nprint(ans)")
    assert (r.ok, r.ans, r.stdout, r.exit_code, r.killed_reason) == (True, "45", "45\n", 0, None)
    assert (ex.run("ans = ''").ans, ex.run("x = 1").ans) == ("", None)
    r = ex.run("ans = 1\nraise SystemExit(3)")
    assert (r.ok, r.ans, r.exit_code) == (False, None, 3)
    r = ex.run("1/0")
    assert not r.ok and "ZeroDivisionError" in r.stderr and r.exit_code == 1


def test_registered_as_tool_with_wasm_by_default():
    tool = TOOLS.get("code_execute")
    assert tool.executor is run_code and code_exec.DEFAULT_SANDBOX == "wasm"
    with pytest.raises(ValueError, match=r"sandbox: unknown executor 'docker'.*'bwrap', 'wasm'"):
        tool({"sandbox": "docker"})


def test_bwrap_refuses_rather_than_run_unisolated(monkeypatch):
    monkeypatch.setattr(bwrap_exec.shutil, "which", lambda name: None)
    bwrap_exec.sandbox_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="bwrap not found"):
            run_code("ans = 1", sandbox="bwrap")
        with pytest.raises(SandboxUnavailable, match="bwrap not found"):
            TOOLS.get("code_execute")({"sandbox": "bwrap"})
    finally:
        monkeypatch.undo()
        bwrap_exec.sandbox_problem.cache_clear()


def test_wasm_refuses_a_runtime_with_another_hash(monkeypatch, tmp_path):
    monkeypatch.setattr(wasm_exec, "RUNTIME_SHA256", "0" * 64)
    wasm_exec.sandbox_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="sha256 is not the pinned 000000000000"):
            run_code("ans = 1", cache_dir=str(tmp_path))
        assert list(tmp_path.iterdir()) == []  # nothing compiled from an unverified file
    finally:
        monkeypatch.undo()
        wasm_exec.sandbox_problem.cache_clear()


def test_wasm_probe_waits_out_load_and_says_why_it_stopped(monkeypatch, tmp_path):
    """The probe's CPU is bounded by fuel, so its wall limit only catches hangs: it must not
    turn a loaded machine into "sandbox unavailable", and a stopped probe says why."""
    seen = []

    def slow_probe(code, limits, cache_dir):
        seen.append(limits.wall_s)
        return code_exec.ExecResult(False, None, "", "", None, None, True, "wall_time", False, limits.wall_s)

    monkeypatch.setattr(wasm_exec, "_execute", slow_probe)
    wasm_exec.sandbox_problem.cache_clear()
    try:
        problem = wasm_exec.sandbox_problem()
    finally:
        monkeypatch.undo()
        wasm_exec.sandbox_problem.cache_clear()
    assert seen == [code_exec.PROBE_WALL_S] and code_exec.PROBE_WALL_S >= 120
    assert "stopped: wall_time after 300 s" in problem, problem


# --- network -------------------------------------------------------------------------


def test_cannot_reach_a_port_the_host_listens_on(ex):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.3)
        port = server.getsockname()[1]
        r = ex.run(f"""
            import socket
            try:
                socket.socket().connect(("127.0.0.1", {port}))
                ans = "connected"
            except Exception as e:
                ans = e.strerror
        """)
        # bwrap: seccomp refuses AF_INET sockets; wasm: WASI has no socket creation
        assert r.ans == ex.pick(bwrap="Address family not supported by protocol", wasm="Not supported"), r
        with pytest.raises(socket.timeout):
            server.accept()


@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_VSOCK", "AF_NETLINK", "AF_PACKET"])
def test_no_socket_family_but_unix(ex, family):
    r = ex.run(f"""
        import socket
        try:
            socket.socket(socket.{family}, socket.SOCK_RAW if "{family}" == "AF_PACKET" else socket.SOCK_STREAM)
            ans = "made"
        except Exception as e:
            ans = type(e).__name__ + ": " + str(getattr(e, "strerror", None) or e)
    """)
    assert r.ok and r.ans != "made", r
    if ex.name == "bwrap":  # the seccomp filter's answer
        assert r.ans == "OSError: Address family not supported by protocol", r


def test_no_dns_and_no_route_out(ex):
    r = ex.run("""
        import socket
        out = []
        try:
            socket.getaddrinfo("example.com", 80)
            out.append("resolved")
        except Exception as e:
            out.append(type(e).__name__)
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=1)
            out.append("connected")
        except Exception as e:
            out.append(type(e).__name__)
        ans = out
    """)
    assert r.ans == ex.pick(bwrap="['gaierror', 'OSError']", wasm="['AttributeError', 'AttributeError']"), r


# --- filesystem ----------------------------------------------------------------------


def _problem_files() -> list[str]:
    bundled = sorted((REPO / "src/retrace/tasks/bundled").glob("*"))[:2]
    mirror = sorted(p for p in MIRROR.rglob("*") if p.is_file())[:2] if MIRROR.is_dir() else []
    return [str(p) for p in bundled + mirror] + [str(MIRROR)]


def test_cannot_read_host_files_problems_or_the_data_mirror(ex):
    secret = Path("/tmp") / f"retrace-secret-{os.getpid()}"
    secret.write_text("s3cret")
    secret.chmod(0o644)  # world-readable on the host, still invisible in the sandbox
    try:
        paths = [
            "/root/.bashrc",
            str(REPO / "pyproject.toml"),
            str(Path(__file__)),
            str(secret),
            "/etc/shadow",
            "/etc/hostname",
            *_problem_files(),
        ]
        r = ex.run(f"""
            import os
            ans = {{}}
            for p in {paths!r}:
                try:
                    open(p).read() if not os.path.isdir(p) else os.listdir(p)
                    ans[p] = "READ"
                except OSError as e:
                    ans[p] = type(e).__name__
            ans = sorted(set(ans.values()))
            try:
                print(sorted(os.listdir("/home")))
            except OSError as e:
                print(type(e).__name__)
        """)
    finally:
        secret.unlink()
    assert r.ans == "['FileNotFoundError']", r  # not mounted / not preopened at all
    # /home holds at most the (empty) parents bwrap made for a Python installation there
    made = sorted({Path(p).parts[2] for p in _bwrap_args._python_roots() if p.startswith("/home/")})
    assert r.stdout.strip() == ex.pick(
        bwrap=str(made) if made else "FileNotFoundError", wasm="FileNotFoundError"
    ), r
    if ex.name == "bwrap":  # documented allowance: world-readable files under /usr
        assert ex.run("ans = 'ID=' in open('/usr/lib/os-release').read()").ans == "True"


def test_cannot_write_outside_scratch(ex):
    tag = f"retrace-pwned-{os.getpid()}"
    targets = [
        f"/root/{tag}",
        f"{REPO}/{tag}",
        f"/usr/{tag}",
        f"/{tag}",
        f"/job/{tag}",
        f"/dev/{tag}",
        f"/dev/shm/{tag}",
        f"/proc/{tag}",
        f"/etc/{tag}",
    ]
    r = ex.run(f"""
        ans = {{}}
        for p in {targets!r}:
            try:
                open(p, "w").write("x")
                ans[p] = "WROTE"
            except OSError as e:
                ans[p] = type(e).__name__
        print(ans)
        ans = sorted(p for p, v in ans.items() if v == "WROTE")
    """)
    # Under bwrap with the venv under /tmp (a CI clone there), /tmp is the sandbox's own
    # size-capped tmpfs holding the venv's parents: a write below them stays in that tmpfs.
    under_tmp = ex.name == "bwrap" and any(
        r == "/tmp" or r.startswith("/tmp/") for r in _bwrap_args._python_roots()
    )
    assert r.ok and all(under_tmp and p.startswith("/tmp/") for p in ast.literal_eval(r.ans)), r
    assert not any(os.path.exists(p) for p in targets)  # on the host: nothing written anywhere
    # $HOME (and under bwrap /tmp) is the scratch directory: writes never reach the host
    r = ex.run(
        f"import os\nopen(os.environ['HOME'] + '/{tag}', 'w').write('x')\n"
        f"ans = os.environ['HOME'], os.path.exists('/scratch/{tag}')"
    )
    assert r.ans == "('/scratch', True)" and not Path(f"/tmp/{tag}").exists(), r
    if ex.name == "bwrap":
        r = ex.run(f"import os\nopen('/tmp/{tag}', 'w').write('x')\nans = os.path.realpath('/tmp/{tag}')")
        inside = "/tmp" if under_tmp else "/scratch"  # a venv under /tmp is bound inside /tmp
        assert r.ans == f"{inside}/{tag}" and not Path(f"/tmp/{tag}").exists()


def test_chdir_root_and_deleting_the_sandbox_fail(ex):
    r = ex.run("""
        import os, shutil
        out = []
        for action in (lambda: shutil.rmtree("/job"), lambda: os.rmdir("/scratch"),
                       lambda: shutil.rmtree("/usr/lib")):
            try:
                action()
                out.append("DONE")
            except OSError as e:
                out.append(type(e).__name__)
        try:
            os.chdir("/")
            open("escape.txt", "w")
            out.append("DONE")
        except OSError as e:
            out.append(type(e).__name__)
        ans = out
    """)
    assert r.ok and "DONE" not in r.ans, r
    assert Path("/usr/lib").exists() and not Path("/escape.txt").exists()


def test_huge_file_hits_fsize_and_many_files_fill_scratch(ex):
    r = ex.run("open('big', 'wb').write(b'0' * (32 << 20))", Limits(wall_s=5, file_bytes=16 << 20))
    assert r.exit_code == 1 and "File too large" in r.stderr, r  # RLIMIT_FSIZE (EFBIG)
    r = ex.run(
        """
        for i in range(100):
            open(f"f{i}", "wb").write(b"0" * (2 << 20))
    """,
        Limits(wall_s=10, scratch_bytes=8 << 20),
    )
    # bwrap: the tmpfs is full; wasm: the caller's poll of the scratch directory kills it
    if ex.name == "bwrap":
        assert r.exit_code == 1 and "No space left on device" in r.stderr, r
    else:
        assert r.killed_reason == "scratch_limit" and not r.ok, r
