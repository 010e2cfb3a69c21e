"""The hostile-program suite's fixture: every test runs once per code executor (wasm, bwrap).

    from sandbox_suite import ex  # noqa: F401  (the fixture)
    def test_x(ex): r = ex.run("ans = 1"); assert r.ok

An executor that cannot run here skips with the reason, or fails when
RETRACE_REQUIRE_SANDBOX=1 (CI sets it: there, a suite that cannot run is a failure).
The bwrap binary is found on PATH, or given by RETRACE_TEST_BWRAP (CI keeps bwrap off the
test user's PATH so that nothing in the default configuration can find it; only these
tests get its path). After each test, no process of the run may be left alive. Tests using
these fixtures run one at a time across pytest-xdist workers (a per-user lock file): rootless,
a sandboxed process another worker's test left for a moment (an orphan of its killed caller,
still being torn down on a loaded machine) runs as the same uid, in a PID namespace of its
own, with no ancestry left to tell whose it is, so it was counted against this test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from retrace.tools import _uid_slots, code_exec
from retrace.tools.code_exec import Limits

REPO = Path(__file__).resolve().parents[2]
FAST = Limits(wall_s=5, cpu_s=2, memory_bytes=256 << 20)
BWRAP = os.environ.get("RETRACE_TEST_BWRAP") or shutil.which("bwrap")


@dataclass
class Executor:
    name: str
    options: dict = field(default_factory=dict)

    def run(self, src: str, limits: Limits = FAST):
        return code_exec.run_code(textwrap.dedent(src), limits, sandbox=self.name, **self.options)

    def pick(self, **by_name):
        """The expectation for this executor (the mechanism differs, the containment not)."""
        return by_name[self.name]


def executor_options(name: str) -> dict:
    return {"bwrap": BWRAP} if name == "bwrap" and BWRAP else {}


@pytest.fixture(params=["wasm", "bwrap"])
def ex(request, monkeypatch):
    yield from _executor(request.param, monkeypatch)


@pytest.fixture
def bwrap_ex(monkeypatch):
    """The bubblewrap executor alone, for attacks that need a host interpreter (ctypes)."""
    yield from _executor("bwrap", monkeypatch)


def _executor(name: str, monkeypatch):
    lock = Path(tempfile.gettempdir(), f"retrace-sandbox-tests-{os.geteuid()}.lock").open("a")
    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the leak check below is done (see the docstring)
    try:
        yield from _checked_executor(name, monkeypatch)
    finally:
        lock.close()


def _checked_executor(name: str, monkeypatch):
    options = executor_options(name)
    problem = code_exec.sandbox_problem(name, **options)
    if problem is not None:
        if os.environ.get("RETRACE_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"sandbox {name} required but unavailable: {problem}")
        pytest.skip(f"[SANDBOX] sandbox {name}: {problem}")
    # as root, only the uids this test's runs drew: another test run beside this one (another
    # checkout's, as root) has sandboxed processes of its own, of other uids of UID_SLOTS
    drawn: set[int] = set()
    acquire = _uid_slots.acquire

    def recording() -> tuple[int, int]:
        uid, lock = acquire()
        drawn.add(uid)
        return uid, lock

    monkeypatch.setattr(_uid_slots, "acquire", recording)
    before = set(_sandbox_processes(0, drawn))
    yield Executor(name, options)
    left = [p for p in _sandbox_processes(10.0, drawn) if p not in before]
    assert left == [], f"processes of a {name} run outlived it: {left}"


def _own_pid_ns() -> str:
    return os.readlink("/proc/self/ns/pid")


def _sandbox_processes(grace_s: float, drawn: set[int]) -> list[int]:
    """Host pids of sandboxed programs or WASM workers still running. PID-namespace teardown
    is asynchronous and slow on a loaded machine, hence the grace period (it ends as soon as
    none is left). Sandboxed: in another PID namespace and running as a sandbox's host uid
    (as root, one of the per-run uids this test drew, `drawn`; else our own uid, and not a
    descendant of a sibling process: another xdist worker runs sandboxes as that uid too)."""
    uids = drawn if os.geteuid() == 0 else {os.geteuid()}
    deadline = time.monotonic() + grace_s
    while True:
        pids = [int(p.name) for p in Path("/proc").glob("[0-9]*") if _is_sandboxed(p, uids)]
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.05)


def _is_sandboxed(proc: Path, uids: set[int]) -> bool:
    try:
        status = dict(l.split(":", 1) for l in (proc / "status").read_text().splitlines() if ":" in l)
        if status["State"].split()[0] == "Z":
            return False
        if b"wasm_exec.py" in (proc / "cmdline").read_bytes():  # a WASM worker of ours
            return int(status["PPid"]) == os.getpid()
        if int(status["Uid"].split()[0]) not in uids or os.readlink(proc / "ns/pid") == _own_pid_ns():
            return False
        return os.geteuid() == 0 or not _a_siblings(int(status["PPid"]))
    except (OSError, KeyError, ValueError):
        return False


def _a_siblings(pid: int) -> bool:
    """Whether `pid` descends from a sibling of this process (another pytest-xdist worker, whose
    sandboxes run as the same uid when not root) rather than from this one or from init (an
    orphan, which this test may have left and so counts)."""
    parent = os.getppid()
    while pid > 1:
        if pid == os.getpid():
            return False
        try:
            status = (Path("/proc") / str(pid) / "status").read_text()
        except OSError:
            return False
        ppid = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")))
        if ppid == parent and pid != os.getpid():
            return True  # a child of our own parent: another worker
        pid = ppid
    return False


@pytest.fixture
def job_dirs(monkeypatch):
    """The temporary job folders the executors create during the test (bwrap makes none: the
    program reaches its sandbox as a descriptor)."""
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recording(*args, **kwargs):
        path = mkdtemp(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    return made


def gone(paths: list[str], grace_s: float = 60.0) -> bool:
    """Whether every path is gone within `grace_s` (what a run leaves beyond its cleanup
    budget is removed in the background, tools/_jobdirs.py)."""
    deadline = time.monotonic() + grace_s
    while any(os.path.lexists(p) for p in paths):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
