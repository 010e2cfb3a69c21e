"""Escapes through what a program leaves behind, its neighbours, and the module cache (issue 27).

Run: `python -m pytest tests/unit/test_code_exec_escapes.py -q`. Every `ex` test runs on both
executors (fixture in sandbox_suite.py, which also fails a test that leaves a process alive).
Each class here got through on b169b78 (main before issue 27):
- planted links: WASI creates relative symlinks whose `..` leave the sandbox; the host then
  read the answer file through one (a host file's content became `ans`, a directory raised
  IsADirectoryError, a FIFO or a terminal blocked `run_code` forever);
- pathological trees: ~1,100 nested directories made the WASM watchdog's recursive walk
  raise, leaving the worker running with no limit, and the cleanup failed on the same tree;
- a watchdog that raises: the worker (wasm) or bwrap's whole group must still be killed;
- concurrent neighbours: as root, a fork bomb at its task limit in one bwrap run made a
  concurrent run's fork fail (one shared uid, one NPROC count);
- a tampered module cache: a module planted under the cache's file name ran instead of CPython,
  while provenance still named the pinned runtime.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
import time

import pytest
from sandbox_suite import ex, gone, job_dirs  # noqa: F401  (the fixtures)

from retrace.tools import TOOLS, bwrap_exec, wasm_exec
from retrace.tools.code_exec import Limits, SandboxUnavailable, run_code

ANS = "/scratch/.retrace-ans"  # where the WASM launcher writes `ans` (bwrap: a pipe instead)
# Generous wall: these programs end at once, but a loaded machine can take seconds to start one.
ROOMY = Limits(wall_s=30, cpu_s=2, memory_bytes=256 << 20)


def _plant(target: str) -> str:
    """A program that leaves a relative link to host path `target` where `ans` is read."""
    up = "../" * 64 + target.lstrip("/")
    return f"import os\nos.symlink({up!r}, {ANS!r})\nprint('planted')"


def _run_guarded(ex, src: str, unblock, limits: Limits = ROOMY):
    """(result, whether run_code blocked): a run still going 60 s past its wall limit blocked
    (on b169b78 it blocked forever); `unblock()` then releases it so the test can fail cleanly."""
    box: dict = {}

    def target():
        try:
            box["result"] = ex.run(src, limits)
        except BaseException as exc:  # re-raised below, in the test's own thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limits.wall_s + 60)
    blocked = worker.is_alive()
    if blocked:
        unblock()
        worker.join(60)
    if "error" in box:
        raise box["error"]
    return box.get("result"), blocked


# --- planted links ---------------------------------------------------------------------


def test_link_to_a_host_file_does_not_become_the_answer(ex, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(f"=host-secret-{os.getpid()}\n")  # "=" is the answer file's marker
    r = ex.run(_plant(str(secret)), ROOMY)
    assert r.ok and r.ans is None and r.stdout == "planted\n", r
    assert "host-secret" not in r.stdout + r.stderr


def test_link_to_a_directory_is_no_answer_not_an_exception(ex, tmp_path):
    r = ex.run(_plant(str(tmp_path)), ROOMY)
    assert r.ok and r.ans is None, r


def test_link_to_a_fifo_does_not_block_the_caller(ex, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def unblock():  # the blocked reader gets a writer, and an answer
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"=fifo-secret")
        os.close(fd)

    r, blocked = _run_guarded(ex, _plant(str(fifo)), unblock)
    assert not blocked, f"run_code blocked on a FIFO planted at the answer file: {r}"
    assert r.ok and r.ans is None, r


def test_link_to_a_terminal_or_device_does_not_block_or_answer(ex):
    master, slave = os.openpty()
    try:
        r, blocked = _run_guarded(ex, _plant(os.ttyname(slave)), lambda: os.write(master, b"=tty-secret\n"))
        assert not blocked, f"run_code blocked on a terminal planted at the answer file: {r}"
        assert r.ok and r.ans is None, r
    finally:
        os.close(master)
        os.close(slave)
    r = ex.run(_plant("/dev/zero"), ROOMY)
    assert r.ok and r.ans is None, r


# --- pathological trees ------------------------------------------------------------------

DEEP = """
import os
fd = os.open(".", os.O_RDONLY)
for i in range(1100):  # relative to a descriptor: no path grows with the depth
    os.mkdir("d", dir_fd=fd)
    child = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = child
os.symlink("../" * 1200, "up", dir_fd=fd)  # a link to the host's / at the bottom: never followed
ans = "built"
"""


def test_deep_tree_then_a_flood_is_stopped_and_removed(ex, job_dirs):
    flood = "import time\nwhile True:\n    open(str(time.time()), 'wb').write(b'x' * 100000)\n"
    r = ex.run(DEEP + flood, Limits(wall_s=30))
    assert not r.ok and r.ans is None, r
    if ex.name == "wasm":  # deeper than SCRATCH_DEPTH is over the scratch limit
        assert r.killed_reason == "scratch_limit" and r.wall_s < 25, r
    assert gone(job_dirs), job_dirs


def test_deep_tree_left_behind_is_removed(ex, job_dirs, monkeypatch):
    # The WASM watchdog would stop the tree at SCRATCH_DEPTH; a blind one lets it be built, so
    # the cleanup meets all 1,100 levels (bwrap's lives in the sandbox's tmpfs, gone with it).
    from retrace.tools import _hostfs  # here, not at the top: the other tests ran on b169b78 too

    monkeypatch.setattr(_hostfs, "tree_usage", lambda *args: (0, 0))
    r = ex.run(DEEP, Limits(wall_s=120, cpu_s=60))
    assert r.ok and r.ans == "built", r
    assert gone(job_dirs), job_dirs


def test_a_watchdog_that_raises_still_kills_the_run(ex, monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("the watchdog failed")

    if ex.name == "wasm":
        from retrace.tools import _hostfs

        monkeypatch.setattr(_hostfs, "tree_usage", broken)
    else:
        monkeypatch.setattr(bwrap_exec, "_collect", broken)
    start = time.monotonic()
    with pytest.raises(RecursionError):
        ex.run("import time\ntime.sleep(40)", Limits(wall_s=60))
    # killed at once, not waited for (the fixture then checks that nothing of it is left)
    assert time.monotonic() - start < 30


def test_hostfs_measures_and_removes_any_tree_without_following_links(tmp_path):
    from retrace.tools import _hostfs

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("host data")
    root = tmp_path / "job"
    deep = root
    root.mkdir()
    for _ in range(1100):  # os.makedirs recurses
        deep = deep / "d"
        deep.mkdir()
    os.symlink(outside, deep / "link")
    os.symlink(outside, root / "link")
    os.mkfifo(deep / "fifo")
    (deep / "file").write_bytes(b"x" * 10)
    (root / "closed").mkdir()
    (root / "closed" / "inner").mkdir()
    os.chmod(root / "closed", 0)  # an ordinary user cannot list it until it is opened up
    assert _hostfs.tree_usage(root, max_entries=10**6, max_depth=64) is None
    assert _hostfs.tree_usage(deep.parent, max_entries=3, max_depth=10) is None
    assert _hostfs.read_capped(deep / "fifo", 10) == (b"", False)
    assert _hostfs.read_capped(root / "link", 10) == (b"", False)
    assert _hostfs.read_capped(deep / "file", 4) == (b"xxxx", True)
    _hostfs.remove_tree(root)
    assert not os.path.lexists(root)
    assert (outside / "keep").read_text() == "host data"


# --- concurrent neighbours -----------------------------------------------------------------

BOMB = """
import os, time
kids = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(12)
            os._exit(0)
        kids += 1
    except OSError:  # its task limit: held for 12 s
        break
time.sleep(12)
"""


def test_a_hostile_neighbour_does_not_starve_a_concurrent_run(ex):
    # bwrap: a fork bomb at its task limit; wasm (no processes): a deep tree and a file flood
    hostile = ex.pick(bwrap=BOMB, wasm=DEEP + "while True:\n    open('f', 'ab').write(b'x' * 100000)\n")
    box: dict = {}
    neighbour = threading.Thread(target=lambda: box.update(r=ex.run(hostile, Limits(wall_s=30))))
    neighbour.start()
    time.sleep(4)  # the neighbour is at its limit by now
    r = ex.run(
        "import subprocess, sys\n"
        "ans = [subprocess.run([sys.executable, '-c', 'pass']).returncode for _ in range(3)]"
        if ex.name == "bwrap"
        else "ans = sum(range(1000))",
        Limits(wall_s=30),
    )
    neighbour.join()
    assert r.ok and r.ans == ex.pick(bwrap="[0, 0, 0]", wasm="499500"), r
    assert box["r"].killed_reason == ex.pick(bwrap=None, wasm="scratch_limit"), box["r"]


# --- the compiled module cache (wasm) -------------------------------------------------------


@pytest.fixture
def private_cache(tmp_path):
    """A private copy of the compiled runtime's cache (so tampering with it harms no other test)."""
    problem = wasm_exec.sandbox_problem()
    if problem is not None:
        if os.environ.get("RETRACE_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"sandbox wasm required but unavailable: {problem}")
        pytest.skip(f"[SANDBOX] {problem}")
    module = wasm_exec.compiled_module()
    cache = tmp_path / "wasm"
    cache.mkdir(mode=0o700)
    for f in [module, *module.parent.glob("*.json")]:  # the module and its record
        shutil.copy2(f, cache / f.name)
    yield cache
    wasm_exec.sandbox_problem.cache_clear()


def _foreign_module() -> bytes:
    """A compiled module that is not CPython (what an attacker would plant)."""
    import wasmtime

    wat = '(module (memory (export "memory") 1) (func (export "_start")))'
    return bytes(wasmtime.Module(wasm_exec._engine(), wasmtime.wat2wasm(wat)).serialize())


def test_a_tampered_compiled_module_is_refused(private_cache):
    cache = str(private_cache)
    assert run_code("ans = 6 * 7", ROOMY, sandbox="wasm", cache_dir=cache).ans == "42"
    module = wasm_exec.compiled_module(cache)
    module.write_bytes(_foreign_module())  # changed after compilation, in place
    with pytest.raises(SandboxUnavailable, match=r"was changed afterwards, refusing to run it. Delete"):
        run_code("ans = 6 * 7", ROOMY, sandbox="wasm", cache_dir=cache)
    wasm_exec.sandbox_problem.cache_clear()
    assert "recorded when it was compiled" in wasm_exec.sandbox_problem(cache)


def test_a_cache_others_can_write_is_refused(private_cache):
    os.chmod(private_cache, 0o777)
    with pytest.raises(SandboxUnavailable, match=r"writable by others .*whoever can write it can run code"):
        run_code("ans = 1", ROOMY, sandbox="wasm", cache_dir=str(private_cache))
    os.chmod(private_cache, 0o700)
    wasm_exec.sandbox_problem.cache_clear()
    module = wasm_exec.compiled_module(str(private_cache))
    os.chmod(module, 0o666)
    with pytest.raises(SandboxUnavailable, match=r"\.cwasm: refusing the compiled WASM module cache"):
        run_code("ans = 1", ROOMY, sandbox="wasm", cache_dir=str(private_cache))


def test_provenance_names_the_digest_of_the_module_that_runs(private_cache):
    cache = str(private_cache)
    module = wasm_exec.compiled_module(cache)
    digest = hashlib.sha256(module.read_bytes()).hexdigest()
    tool = TOOLS.get("code_execute")({"cache_dir": cache})
    described = tool.describe()
    assert described["module_sha256"] == digest and described["runtime_sha256"] == wasm_exec.RUNTIME_SHA256
    assert stat.S_IMODE(os.stat(module).st_mode) & 0o022 == 0
