"""Replay every `code execute` call of finished ART runs under two checkouts' sandboxes.

    .venv/bin/python benchmarks/art_sandbox_replay.py RUN_DIR [RUN_DIR ...] --before OLD/src
    .venv/bin/python benchmarks/art_sandbox_replay.py results --before /tmp/old/src --sandbox wasm bwrap

Issue 54 changed the sandboxes (bubblewrap's kill by pidfd, seccomp rules, masks, a stable uid;
the WASM folder sweep). Its promise: ART's runs give the same claims before and after, as no
tool output changed. An ART claim depends on a sandbox only through `code execute` outputs,
which are written into the program the model continues: the same outputs give the same
prompts, hence (request cache, temperature 0 or seeded) the same generations, answers and
claims. So this replays each recorded call: the code the call ran (tools.code.code_for over the
trace's earlier tool outputs) runs once in this checkout and once in the checkout whose `src/`
is `--before` (each in its own interpreter, through that checkout's own CodeExecute with the
run's limits and output cap), per executor in `--sandbox`. Prints

    replay: C code runs from T traces; SANDBOX: identical I, differing D (recorded = before = after: R)

and, per differing call, the trace, step, and the two outputs. "Recorded" is what the run wrote
(made by whichever checkout ran it). A program that reads clocks or randomness from the OS
(or hits its wall limit on a loaded machine) may differ between any two runs; such calls are
listed, not hidden. Exit 1 when any call differs between before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Runs inside the interpreter of one checkout: (code, settings) pairs on stdin, outputs on stdout.
WORKER = """
import json, sys
from retrace.tools.code import CodeExecute
from retrace.tools._interface import ToolCall
from retrace.art.program import Step
out, tools = [], {}
for code, settings in json.load(sys.stdin):
    key = json.dumps(settings, sort_keys=True)
    tool = tools.get(key) or tools.setdefault(key, CodeExecute(settings))
    step = Step(1, "code generate", "replay", code)
    r = tool(ToolCall("code execute", "Execute #1.", "", (step,)))
    out.append([r.text, r.ok])
json.dump(out, sys.stdout)
"""


def calls(run_dirs: list[Path]) -> tuple[list[dict], int]:
    """(each recorded code execute call: trace, step, code, recorded output, output cap;
    the number of traces read) from results/art/**/seed*.jsonl under each run folder."""
    found, traces = [], 0
    for run in run_dirs:
        for path in sorted(run.glob("**/art/**/seed*.jsonl")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                row = json.loads(line)
                for trace in row.get("traces") or [row.get("trace") or {}]:  # self-consistency: several
                    traces += 1
                    found += _trace_calls(trace, f"{path}:{n}")
    return found, traces


def _trace_calls(trace: dict, where: str) -> list[dict]:
    """The code execute calls of one trace, each with the code it ran (see calls)."""
    from retrace.art.program import Step
    from retrace.tools._interface import ToolCall
    from retrace.tools.code import code_for

    found: list[dict] = []
    steps: list = []
    for tc in trace.get("tool_calls") or []:
        tag = tc["tool"].replace("_", " ")
        if tc["tool"] == "code_execute":
            code = code_for(ToolCall(tag, tc["input"], "", tuple(steps)))
            cap = (tc.get("meta") or {}).get("output_cap", 1000)
            found.append(
                {"where": f"{where} step {tc['step']}", "code": code, "recorded": tc["output"], "cap": cap}
            )
        steps.append(Step(tc["step"], tag, tc["input"], tc["output"]))
    return found


def replay(src: Path, items: list[dict], sandbox: str) -> list[str]:
    """The outputs of `items`' code run by the checkout whose package folder is `src`."""
    todo = [[c["code"] or "", {"sandbox": sandbox, "output_chars": c["cap"]}] for c in items]
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run(
        [sys.executable, "-c", WORKER], input=json.dumps(todo), env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"replay under {src} failed: {proc.stderr[-2000:]}")
    return [text for text, _ in json.loads(proc.stdout)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (their results/art traces)")
    ap.add_argument("--before", type=Path, required=True, help="the other checkout's src/ folder")
    ap.add_argument("--sandbox", nargs="+", default=["wasm"], choices=["wasm", "bwrap"])
    a = ap.parse_args(argv)
    items, traces = calls(a.runs)
    items = [c for c in items if c["code"]]
    print(f"replay: {len(items)} code runs from {traces} traces", flush=True)
    bad = 0
    for sandbox in a.sandbox:
        before, after = replay(a.before, items, sandbox), replay(REPO / "src", items, sandbox)
        differ = [(c, b, x) for c, b, x in zip(items, before, after) if b != x]
        same_all = sum(c["recorded"] == b == x for c, b, x in zip(items, before, after))
        print(
            f"{sandbox}: identical {len(items) - len(differ)}, differing {len(differ)} "
            f"(recorded = before = after: {same_all})"
        )
        for c, b, x in differ[:20]:
            print(f"  {c['where']}: before {b[:120]!r} after {x[:120]!r}")
        bad += len(differ)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
