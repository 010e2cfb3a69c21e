"""The program under bwrap sees a stable uid, 65534, in both modes (issue 54, item 6).

Run: `python -m pytest tests/unit/test_code_exec_uid.py -q`, as root and as an ordinary user
(CI: `make test` as retrace-ci; the `root` block, and this file, as root). Before, as root, the
program ran as its run's slot uid (tools/_uid_slots.py) and os.getuid() differed from run to
run. Now setpriv drops to the slot before bwrap starts and bwrap maps the slot to 65534 in a
user namespace; a Python installation behind a folder closed to others (pyenv under /root) is
reached through a mount point of the run's own mount namespace (tools/_way_in.py).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sandbox_suite import REPO, bwrap_ex  # noqa: F401  (the fixture)

from retrace.tools import _uid_slots, _way_in, bwrap_exec
from retrace.tools._bwrap_args import bwrap_command
from retrace.tools.code_exec import Limits, SandboxUnavailable, run_code


@pytest.fixture
def open_dir():
    """A fresh folder others may traverse (pytest's tmp_path is under a 0700 one as root)."""
    path = Path(tempfile.mkdtemp(prefix="retrace-uid-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="[ROOT] bwrap's root mode needs root")

# names itself TAG (seen in the host's /proc), stays a moment, then says who it is
WHO = """
import ctypes, os, time
ctypes.CDLL(None).prctl(15, TAG, 0, 0, 0)  # PR_SET_NAME
time.sleep(0.5)
ans = (os.getuid(), os.getgid(), os.getgroups(), open("/proc/self/uid_map").read().split())
"""


def _host_uids(tag: bytes, seen: list[int], stop: threading.Event) -> None:
    """Append to `seen` the host uid of the first live process named `tag`."""
    while not stop.is_set() and not seen:
        for p in Path("/proc").glob("[0-9]*"):
            try:
                if (p / "comm").read_bytes().strip() == tag:
                    status = (p / "status").read_text().split("\nUid:")[1]
                    seen.append(int(status.split()[0]))
                    return
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(0.01)


def _run_watched(ex, tag: bytes) -> tuple[object, list[int]]:
    seen: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_host_uids, args=(tag, seen, stop))
    watcher.start()
    try:
        r = ex.run(f"TAG = {tag!r}\n" + WHO, Limits(wall_s=30))
    finally:
        stop.set()
        watcher.join()
    return r, seen


def test_the_program_is_65534_on_every_run_and_its_host_uid_is_the_runs_own(bwrap_ex, monkeypatch):
    drawn: list[int] = []
    acquire = _uid_slots.acquire  # the fixture's recorder

    def recording() -> tuple[int, int]:
        uid, lock = acquire()
        drawn.append(uid)
        return uid, lock

    monkeypatch.setattr(_uid_slots, "acquire", recording)
    runs = [_run_watched(bwrap_ex, f"rt-uid-{os.getpid() % 10**6}-{i}".encode()) for i in range(2)]
    assert all(r.ok for r, _ in runs), runs
    # what it sees: the same on every run, in both modes (the map names no host uid either);
    # groups: none as root (setpriv --clear-groups), an ordinary caller's own shown unmapped
    groups = [] if os.geteuid() == 0 else [65534] * len(os.getgroups())
    seen = [ast.literal_eval(r.ans) for r, _ in runs]
    assert seen == [(65534, 65534, groups, ["65534", "0", "1"])] * 2, seen
    # what it is on the host: the caller's own uid, or as root the run's own slot
    hosts = [uids for _, uids in runs]
    assert hosts == ([[u] for u in drawn[-2:]] if os.geteuid() == 0 else [[os.geteuid()]] * 2), (hosts, drawn)
    assert os.geteuid() != 0 or all(u in _uid_slots.UID_SLOTS for [u] in hosts), hosts


def test_a_root_behind_a_closed_folder_is_bound_from_a_mount_point_of_the_runs_own(monkeypatch, tmp_path):
    """The command line alone: an open root is bound from itself, a closed one (0700 above it)
    from `MOUNT_DIR/<i>`, which util-linux binds in a private mount namespace before setpriv."""
    closed, open_ = tmp_path / "closed", tmp_path / "open"
    for folder, mode in ((closed, 0o700), (open_, 0o755)):
        (folder / "py").mkdir(parents=True)
        folder.chmod(mode)
    assert _way_in.blocked(str(closed / "py")) and not _way_in.blocked("/usr/lib")
    # only `closed` in question (tmp_path's own parents may be closed too, e.g. as root)
    monkeypatch.setattr(_way_in, "blocked", lambda path: str(path).startswith(f"{closed}/"))
    roots = [str(closed / "py"), str(open_ / "py")]
    monkeypatch.setattr("retrace.tools._bwrap_args._python_roots", lambda: roots)
    monkeypatch.setattr(_way_in, "_mount_point", lambda i: f"/run/retrace-bwrap-roots/{i}")
    monkeypatch.setattr("retrace.tools._bwrap_args._has_option", lambda bwrap, option: True)
    argv = bwrap_command("/usr/bin/bwrap", Limits(), tuple(range(3, 11)), host_uid=1_800_000_007)
    setpriv = next(i for i, a in enumerate(argv) if a.endswith("setpriv"))
    assert argv[1:4] == ["--mount", "--propagation", "private"], argv[:setpriv]
    assert argv[setpriv - 3 : setpriv] == [roots[0], "/run/retrace-bwrap-roots/0", "--"], argv
    assert "--reuid=1800000007" in argv and argv.index("/usr/bin/bwrap") > setpriv
    binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert ["/run/retrace-bwrap-roots/0", roots[0]] in binds and [roots[1], roots[1]] in binds, binds
    rootless = bwrap_command("/usr/bin/bwrap", Limits(), tuple(range(3, 11)), host_uid=None)
    assert rootless[0] == "/usr/bin/bwrap" and "--unshare-user" in rootless
    assert [roots[0], roots[0]] in [
        rootless[i + 1 : i + 3] for i, a in enumerate(rootless) if a == "--ro-bind"
    ]


CALLER = """
import json, sys
from retrace.tools.code_exec import run_code
r = run_code(sys.argv[2], sandbox="bwrap", bwrap=sys.argv[1] or None)
print(json.dumps({"ok": r.ok, "ans": r.ans, "stderr": r.stderr[-2000:]}))
"""


@pytest.mark.root
@AS_ROOT
def test_as_root_a_venv_behind_a_closed_folder_runs_and_its_neighbours_stay_hidden(bwrap_ex, tmp_path):
    """A real venv in a 0700 folder of root's: bwrap, running as the run's slot uid, could not
    reach it ("Can't find source path"); the program sees the venv and not the folder's other
    files."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "secret.txt").write_text("hunter2")
    venv = closed / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code = textwrap.dedent(f"""
        import os, sys
        ans = (os.getuid(), sys.prefix, os.path.exists({str(closed / "secret.txt")!r}),
               sorted(os.listdir({str(closed)!r})))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CALLER, bwrap_ex.options.get("bwrap", ""), code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["ok"], report
    assert ast.literal_eval(report["ans"]) == (65534, str(venv), False, ["venv"]), report
    assert "hunter2" not in done.stdout


@pytest.mark.root
@AS_ROOT
def test_as_root_a_slot_uid_without_user_namespaces_is_refused_in_one_line(open_dir):
    """Where the slot uid may not create a user namespace, the sandbox refuses with the reason
    (it does not fall back to running bwrap as root)."""
    fake = open_dir / "bwrap"  # answers as bwrap does where unprivileged userns are off
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    bwrap_exec.sandbox_problem.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable) as e:
            run_code("ans = 1", sandbox="bwrap", bwrap=str(fake))
    finally:
        bwrap_exec.sandbox_problem.cache_clear()
    message = str(e.value)
    assert "\n" not in message and "cannot create a user namespace" in message, message
    assert "as root too" in message and "use sandbox: wasm" in message, message
