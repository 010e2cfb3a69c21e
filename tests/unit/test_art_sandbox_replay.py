"""benchmarks/art_sandbox_replay.py: which code each recorded `code execute` call ran, and a
replay that tells a changed output from an unchanged one (issue 54's before/after check)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from retrace.tools.code_exec import sandbox_problem

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "art_sandbox_replay.py"
SRC = Path(__file__).resolve().parents[2] / "src"


def load():
    spec = importlib.util.spec_from_file_location("art_sandbox_replay", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def call(step, tool, instruction, output):
    return {"step": step, "tool": tool, "input": instruction, "output": output, "meta": {"output_cap": 1000}}


def write_run(root: Path, recorded: str) -> Path:
    """A run folder with one single-trace row and one self-consistency row."""
    first = [
        call(1, "code_generate", "Add 2 and 3.", "ans = 2 + 3\nprint(ans)"),
        call(2, "code_generate", "Multiply.", "ans = 6 * 7"),
        call(3, "code_execute", "Execute the code in #1.", recorded),
    ]
    second = [
        call(1, "code_generate", "Say hi.", "```python\nans = 'hi'\n```"),
        call(2, "code_execute", "Run it.", "hi"),
    ]
    path = root / "results" / "art" / "m" / "task" / "art" / "seed0.jsonl"
    path.parent.mkdir(parents=True)
    rows = [{"trace": {"tool_calls": first}}, {"traces": [{"tool_calls": second}, {"tool_calls": []}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_each_code_execute_call_gets_the_code_it_ran(tmp_path):
    items, traces = load().calls([write_run(tmp_path, "5")])
    assert traces == 3  # one single trace and a vote of two
    # "#1" names the first program, not the latest; without a reference the latest is run
    assert [i["code"] for i in items] == ["ans = 2 + 3\nprint(ans)", "ans = 'hi'"]
    assert [i["recorded"] for i in items] == ["5", "hi"]


@pytest.mark.skipif(sandbox_problem("wasm") is not None, reason="[SANDBOX] no wasm sandbox here")
def test_a_replay_under_the_same_checkout_matches_and_a_changed_record_is_told_apart(tmp_path, capsys):
    mod = load()
    run = write_run(tmp_path, "4")  # the first call's record is wrong on purpose: 2 + 3 is 5
    assert mod.main([str(run), "--before", str(SRC), "--sandbox", "wasm"]) == 0  # before = after
    out = capsys.readouterr().out
    assert "replay: 2 code runs from 3 traces" in out
    assert "wasm: identical 2, differing 0 (recorded = before = after: 1)" in out
