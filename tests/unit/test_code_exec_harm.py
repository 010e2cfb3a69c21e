"""No harm to the host, and the same output on every run (issue 43: red team round 3).

Run: `python -m pytest tests/unit/test_code_exec_harm.py -q`. Every `ex` test runs on both
executors (fixture in sandbox_suite.py). Each class got through on 5b8765e (main before
issue 43) in the executor named:
- unlinked-but-open files (wasm): 1.5 GiB of host disk under a 64 MiB scratch cap; no open-file limit;
- a killed caller (wasm): its worker ran on with no limit and its job folder stayed (bwrap: 0755);
- cleanup (wasm): 16,000 empty folders took 161 s to remove, quadratic in their number;
- SysV IPC (bwrap): message queues grew kernel memory outside every limit;
- odd code text: a lone surrogate made bwrap's run_code raise; a NUL byte truncated the program
  under wasm, a worker failure showed a host path;
- run-to-run differences (both): str hashing was seeded at random, so set order changed.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sandbox_suite import REPO, ex, gone, job_dirs  # noqa: F401  (the fixtures)

from retrace.tools import _hostfs
from retrace.tools.code_exec import Limits

_MiB = 1 << 20

# --- what the program holds ----------------------------------------------------------------

HOLD_UNLINKED = """
import os, time
held = []
for i in range(40):  # 40 MiB held, no name left in scratch
    f = open("f%d" % i, "wb")
    f.write(b"x" * (1 << 20))
    f.flush()
    os.unlink("f%d" % i)
    held.append(f)
print("held", len(held), flush=True)
time.sleep(10**6)
"""


def test_unlinked_files_it_holds_open_count_against_the_scratch_cap(ex):
    r = ex.run(HOLD_UNLINKED, Limits(wall_s=60, scratch_bytes=8 * _MiB, file_bytes=2 * _MiB))
    assert not r.ok and r.ans is None, r
    if ex.name == "wasm":  # killed by the watchdog, long before the wall limit
        assert r.killed_reason == "scratch_limit" and not r.timed_out, r
    else:  # the capped tmpfs keeps unlinked files' blocks until they are closed
        assert r.exit_code == 1 and "No space left on device" in r.stderr, r


def test_open_files_are_limited(ex):
    r = ex.run(
        """
        files = []
        try:
            for i in range(500):
                files.append(open("f%d" % i, "wb"))
        except OSError as e:
            print("refused:", e)
        n = len(files)
        for f in files:
            f.close()
        ans = n
    """,
        Limits(wall_s=30, max_open_files=64),
    )
    assert r.ok and 0 < int(r.ans) <= 64 and "refused:" in r.stdout, r


# --- a killed caller -------------------------------------------------------------------------

CALLER = """
import sys
from retrace.tools.code_exec import Limits, run_code
code = "import time\\nopen('started', 'w').close()\\ntime.sleep(600)"
run_code(code, Limits(wall_s=600), sandbox=sys.argv[1], **eval(sys.argv[2]))
"""


def _descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of the live processes below `pid`."""
    parent, cmd = {}, {}
    for p in Path("/proc").glob("[0-9]*"):
        try:
            status = (p / "status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields["State"].split()[0] != "Z":
                # both read before either is kept: a process that ends between the two reads
                # (its cmdline gone) is left out whole, not half recorded (a KeyError under load)
                line = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                parent[int(p.name)], cmd[int(p.name)] = int(fields["PPid"]), line
        except (OSError, KeyError, ValueError):
            continue
    found, frontier = {}, {pid}
    while frontier:
        frontier = {c for c, pp in parent.items() if pp in frontier and c not in found}
        found.update({c: cmd[c] for c in frontier})
    return found


def _alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            out.append(pid)
    return out


def _in_sandbox(kids: dict[int, str]) -> bool:
    """Whether one of `kids` runs in a PID namespace of its own (bwrap's program)."""
    mine = os.readlink("/proc/self/ns/pid")
    for pid in kids:
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") != mine:
                return True
        except OSError:
            continue
    return False


def _kill_caller_while_it_runs(ex, tmp_path) -> dict[int, str]:
    """Start a caller of run_code, SIGKILL it alone (not its group) once the program runs;
    the processes it had started."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    caller = subprocess.Popen([sys.executable, "-c", CALLER, ex.name, repr(ex.options)], env=env)
    deadline = time.monotonic() + 300
    try:
        while True:
            kids = _descendants(caller.pid)
            # the program runs: it wrote `started` in its scratch (wasm: a host folder), or its
            # launcher is up in the sandbox's PID namespace (bwrap: the scratch is its own tmpfs)
            if ex.pick(wasm=any(tmp_path.glob("retrace-wasm-*/scratch/started")), bwrap=_in_sandbox(kids)):
                break
            assert caller.poll() is None and time.monotonic() < deadline, "the program never started"
            time.sleep(0.1)
    finally:  # the caller dies here whatever happened above (the test is its death)
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait()
    return kids


def test_the_run_dies_with_its_caller_and_its_folder_is_swept(ex, tmp_path, monkeypatch):
    kids = _kill_caller_while_it_runs(ex, tmp_path)
    deadline = time.monotonic() + 60
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(kids), (
        f"processes of a run outlived its killed caller: {[kids[p] for p in _alive(kids)]}"
    )
    left = [p for p in tmp_path.iterdir() if p.name.startswith("retrace-")]
    for p in left:  # readable by nobody else meanwhile
        assert p.stat().st_mode & 0o077 == 0, f"{p.name}: mode {p.stat().st_mode & 0o777:o}"
    # the next run of this user sweeps what the killed caller left
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert ex.run("ans = 1", Limits(wall_s=60)).ans == "1"
    assert gone([str(p) for p in left]), [p.name for p in left]


def test_sweep_leaves_folders_of_live_callers_and_of_others(tmp_path, monkeypatch):
    from retrace.tools import _jobdirs  # here, not at the top: the other tests ran on 5b8765e too

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = _jobdirs.make("retrace-wasm-")
    dead = _jobdirs.make("retrace-wasm-")
    record = Path(dead, "owner").read_text().split()
    Path(dead, "owner").write_text(" ".join(["999999999", *record[1:]]) + "\n")  # no such process
    os.close(_jobdirs._HELD.pop(dead))  # as if its maker had died: the lock goes with it
    unowned = tmp_path / "retrace-wasm-unowned"  # maybe being made right now: left alone
    unowned.mkdir()
    older = tmp_path / "retrace-wasm-older"  # an owner record of the old format: cannot judge
    older.mkdir()
    (older / "owner").write_text("999999999 1\n")
    assert _jobdirs.sweep("retrace-wasm-") == [dead]
    assert gone([dead]) and os.path.isdir(mine) and unowned.is_dir() and older.is_dir()


# --- cleanup -------------------------------------------------------------------------------


@pytest.mark.slow  # ~60 s here: removing 16,000 folders on this disk takes ~45 s, even with rm -rf
def test_many_empty_folders_do_not_delay_the_result(ex, job_dirs):
    limits = Limits(wall_s=60, cpu_s=20)
    start = time.monotonic()
    r = ex.run("import os\nfor i in range(16000):\n    os.mkdir(str(i))\nans = 'made'", limits)
    elapsed = time.monotonic() - start
    assert r.ok and r.ans == "made", r
    assert elapsed < limits.wall_s + 30, f"run_code returned {elapsed:.0f} s after its start"
    # what is left goes in the background (on this ext4 with discard: ~3 ms a folder, rm -rf too)
    assert gone(job_dirs, grace_s=600), job_dirs


def test_remove_tree_lists_each_entry_once_and_stops_at_its_deadline(tmp_path, monkeypatch):
    root = tmp_path / "job"
    root.mkdir()
    for i in range(500):
        (root / str(i)).mkdir()
    (root / "0" / "f").write_text("x")
    seen = []
    scandir = os.scandir

    class Counting:  # os.scandir, counting the entries it hands out
        def __init__(self, fd):
            self.it = scandir(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()

        def __iter__(self):
            for entry in self.it:
                seen.append(entry.name)
                yield entry

    monkeypatch.setattr(_hostfs.os, "scandir", Counting)
    assert not _hostfs.remove_tree(root, deadline=time.monotonic() - 1) and root.is_dir()
    seen.clear()
    assert _hostfs.remove_tree(root) and not root.exists()
    assert len(seen) <= 501 + 1, len(seen)  # linear: 501 entries (quadratic: ~125,000)


# --- kernel memory outside the limits -------------------------------------------------------


def test_sysv_ipc_is_refused(ex):
    r = ex.run("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        out = []
        for name, args in (("msgget", (0, 0o1600)), ("semget", (0, 1, 0o1600)), ("shmget", (0, 4096, 0o1600))):
            out.append((name, getattr(libc, name)(*args), ctypes.get_errno()))
        if out[0][1] >= 0:  # a queue was made: fill it (kernel memory, no rlimit)
            buf = ctypes.create_string_buffer(b"x" * 8200)
            out.append(("msgsnd", libc.msgsnd(out[0][1], buf, 8192, 0o4000)))
        ans = out
    """)
    if ex.name == "bwrap":  # EPERM from the filter for each
        assert ast.literal_eval(r.ans) == [("msgget", -1, 1), ("semget", -1, 1), ("shmget", -1, 1)], r
    else:  # no ctypes (no dynamic loading) in WASI CPython
        assert r.exit_code == 1 and "ModuleNotFoundError" in r.stderr, r


# --- odd code text ----------------------------------------------------------------------------


def _no_host_path(r) -> bool:
    text = json.dumps([r.stdout, r.stderr, r.ans])
    return not any(p in text for p in (str(REPO), sys.prefix, tempfile.gettempdir() + "/"))


def test_nul_bytes_and_lone_surrogates_are_refused_not_raised(ex):
    for code, why in (
        ("print('head')\x00print('tail')\nans = 'ran'", "NUL byte (character 13)"),
        ("ans = '\udc80'", "lone surrogate (U+DC80, character 7)"),
    ):
        r = ex.run(code)
        assert not r.ok and r.killed_reason == "refused" and r.ans is None and r.stdout == "", r
        assert why in r.stderr and _no_host_path(r), r


def test_worker_messages_name_no_host_path():
    from retrace.tools import wasm_exec

    text = 'File "/work/x/src/retrace/tools/wasm_exec.py", line 3 in /tmp/retrace-wasm-1/stdout; /scratch/a'
    assert wasm_exec.scrub(text) == 'File "<host path>", line 3 in <host path>; /scratch/a'


# --- the same program, the same output --------------------------------------------------------

SET_ORDER = """
import random
print(list({"apple", "pear", "fig", "plum", "kiwi", "lime", "date", "yuzu"}))
print(list({b"a", b"b", b"c", b"d"}), random.random())
"""


def test_the_same_program_prints_the_same_on_every_run(ex):
    runs = [ex.run(SET_ORDER, Limits(wall_s=60)) for _ in range(3)]
    assert all(r.ok for r in runs), runs
    assert len({r.stdout for r in runs}) == 1, [r.stdout for r in runs]


def test_the_determinism_settings_are_in_the_tool_using_art_jobs_keys(monkeypatch):
    from test_art_plan import CFG

    from retrace.art import plan
    from retrace.planning import closure
    from retrace.tools import code_exec

    art, notools = plan.ArtJob("m", "arithmetic", "art", 0), plan.ArtJob("m", "arithmetic", "art_notools", 0)
    closure.sandbox_versions.cache_clear()
    before = {j: plan.run_key(CFG, j, []) for j in (art, notools)}
    monkeypatch.setitem(code_exec.DETERMINISM, "PYTHONHASHSEED", "1")  # another hash seed
    closure.sandbox_versions.cache_clear()
    try:
        assert json.loads(closure.sandbox_versions("wasm")["determinism"])["PYTHONHASHSEED"] == "1"
        assert plan.run_key(CFG, art, []) != before[art]
        assert plan.run_key(CFG, notools, []) == before[notools]
    finally:
        monkeypatch.undo()
        closure.sandbox_versions.cache_clear()
