"""The bwrap executor's set-up: its seccomp filter and its refusals (no executor run needed).

Run: `python -m pytest tests/unit/test_code_exec_bwrap.py -q`. The hostile programs it must
contain are in test_code_exec.py / test_code_exec_limits.py, run against both executors.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from retrace.tools import _sandbox_init, _seccomp, bwrap_exec
from retrace.tools.code_exec import SandboxUnavailable, run_code


def _instructions(data: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("<HBBI", data[i : i + 8]) for i in range(0, len(data), 8)]


@pytest.mark.parametrize("machine, socket_nr", [("x86_64", 41), ("aarch64", 198)])
def test_filter_checks_the_architecture_and_the_socket_family(machine, socket_nr):
    prog = _instructions(_seccomp.filter_bytes(machine))
    arch = _seccomp._TABLES[machine][0]
    assert prog[0] == (0x20, 0, 0, 4) and prog[1][3] == arch  # load arch, compare
    assert prog[2] == (0x06, 0, 0, 0x80000000)  # other ABI: kill
    i = prog.index((0x15, 0, 4, socket_nr))  # socket(): family == AF_UNIX?
    assert prog[i + 2] == (0x15, 0, 1, 1) and prog[i + 4] == (0x06, 0, 0, 0x50000 | 97)
    assert prog[-1] == (0x06, 0, 0, 0x7FFF0000)  # everything else: allowed
    assert _seccomp.filter_bytes("riscv64") is None


def test_refuses_with_the_reason_where_user_namespaces_are_off(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"  # answers as bwrap does where unprivileged userns are off
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap_exec.os, "geteuid", lambda: 1000)
    bwrap_exec.sandbox_problem.cache_clear()
    try:
        with pytest.raises(
            SandboxUnavailable, match="cannot create a user namespace as an ordinary user.*use sandbox: wasm"
        ):
            run_code("ans = 1", sandbox="bwrap", bwrap=str(fake))
    finally:
        monkeypatch.undo()
        bwrap_exec.sandbox_problem.cache_clear()


def _info_pipe(text: bytes) -> int:
    r, w = os.pipe()
    os.write(w, text)
    os.close(w)
    return r


def test_the_init_is_held_by_a_pidfd_only_when_it_is_bwraps_own_child():
    """The kill switch (tools/_sandbox_init.py): bwrap's --info-fd names the init; a pid that is
    not the outer bwrap's child (recycled before pidfd_open) is refused, never signalled."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        info = json.dumps({"child-pid": child.pid, "cgroup-namespace": 1}).encode()
        stranger = SimpleNamespace(pid=os.getppid())  # not the child's parent
        fd = _info_pipe(info)
        assert _sandbox_init.open_init(stranger, fd, time.monotonic() + 5) is None
        os.close(fd)
        fd = _info_pipe(info)
        pidfd = _sandbox_init.open_init(SimpleNamespace(pid=os.getpid()), fd, time.monotonic() + 5)
        os.close(fd)
        assert pidfd is not None
        _sandbox_init.kill_init(pidfd)
        assert child.wait(timeout=30) == -signal.SIGKILL
        _sandbox_init.kill_init(pidfd)  # a dead init: nothing happens
        os.close(pidfd)
    finally:
        child.kill()
        child.wait()
    for garbage in (b"", b"not json", b"[1]", b'{"child-pid": 1}', b'{"child-pid": "7"}'):
        fd = _info_pipe(garbage)
        assert _sandbox_init.open_init(SimpleNamespace(pid=os.getpid()), fd, time.monotonic() + 5) is None
        os.close(fd)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_filter_refuses_reaching_other_processes_keyrings_and_per_uid_counters(machine):
    prog = _instructions(_seccomp.filter_bytes(machine))
    numbers = _seccomp._TABLES[machine][1]
    names = [*_seccomp.OTHER_PROCESSES, *_seccomp.KEYRINGS, *_seccomp.PER_UID_COUNTERS]
    for name in names:
        nr = numbers.get(name, _seccomp._COMMON.get(name))
        if nr is None:  # aarch64 has no inotify_init (only inotify_init1)
            assert machine == "aarch64" and name == "inotify_init"
            continue
        i = prog.index((0x15, 0, 1, nr))  # syscall == nr?
        assert prog[i + 1] == (0x06, 0, 0, 0x50000 | 1), name  # EPERM
