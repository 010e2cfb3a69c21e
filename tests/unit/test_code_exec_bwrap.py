"""The bwrap executor's set-up: its seccomp filter and its refusals (no executor run needed).

Run: `python -m pytest tests/unit/test_code_exec_bwrap.py -q`. The hostile programs it must
contain are in test_code_exec.py / test_code_exec_limits.py, run against both executors.
"""

from __future__ import annotations

import struct

import pytest

from retrace.tools import _seccomp, bwrap_exec
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
