"""A scripted ART run that walks every path of the runner and the baselines, for the
scheduling tests (tests/unit/test_art_schedule.py): tool steps (a plain tool, the LLM's
`code generate`, a code executor, a failing tool), skill steps, the step limit, max tokens,
parse errors, the round limit (regenerate mode), self-consistency and AutoCoT.

    rows, keys = run_all(tmp_path, {"async": True}, monkeypatch)  # rows per method, (tag, key) sent

The script answers by what the prompt holds, never by turn, so any schedule gives the same
text (a script keyed by turn would depend on the order requests reach the engine).
"""

from __future__ import annotations

import re

from fake_backend import engine_requests, scripted_llm

from retrace.art import plan
from retrace.art.baselines import METHOD_FNS, Context
from retrace.tools import TOOLS
from retrace.tools._interface import Tool, ToolOutput
from retrace.util.records import Problem

DEMO = "Input: 2 plus 2\nQ1: [EOQ]\nAns: 4"
# First key found in the prompt wins: later stages of a program come before earlier ones.
SCRIPT = {
    "what now": " the skill's own output\nQ5: [EOQ]\nAns: alpha-ans",
    "EXEC<alpha>": " [subquestion] what now\n#4: made up",
    "CODE<alpha>": " [code execute] Run #2.\n#3: made up",
    "make alpha code": "Sure:\n```python\nans = 'CODE<alpha>'\nprint(ans)\n```",
    "FACT<alpha fact>": " [code generate] make alpha code\n#2: made up",
    "Input: alpha": " [search] alpha fact\n#1: made up",
    "#2: Error": " [EOQ]\nAns: beta-ans",
    "FACT<beta fact>": " [lookup] beta word\n#2: made up",
    "Input: beta": " [search] beta fact\n#1: made up",
    "Input: gamma": " what\nnonsense line\nQ7 [x]\n#",
    "Input: delta": " " + " ".join(["word"] * 40),
    "Input: epsilon": " [search] epsilon again\n#9: made up",
    "Input: q1": " " + "\n".join(f"step {i}" for i in range(7)) + "\nAns: 1",
    "Input: q2": " q2 is two.\nAns: 2",
    "Input: q4": " q4 is four.\nAns: 4",
    "": " [EOQ]\nAns: none",
}
ART_ITEMS = ["alpha", "beta", "gamma", "delta", "epsilon"]
POOL = {"q0": (1, 0.45), "q1": (1, 0.2), "q2": (1, 0.05), "q3": (0.3, 1), "q4": (0.1, 1), "q5": (-0.15, 1)}


class Search(Tool):
    def __call__(self, call):
        return ToolOutput(f"FACT<{call.instruction}>", meta={"collection": "fake"})


class Execute(Tool):
    """Stands in for the sandbox: 'runs' the latest generated code by naming what it holds."""

    def __call__(self, call):
        found = re.findall(r"CODE<(\w+)>", " ".join(s.output or "" for s in call.steps))
        return ToolOutput(f"EXEC<{found[-1]}>" if found else "Error: no code", ok=bool(found))


class Broken(Tool):
    def __call__(self, call):
        raise RuntimeError(f"broken on {call.instruction}")


def tools(llm) -> dict:
    return {
        "search": Search(),
        "code_generate": TOOLS.get("code_generate")({"max_tokens": 64}, llm=llm),
        "code_execute": Execute(),
        "lookup": Broken(),
    }


def embed(texts):
    import numpy as np

    vecs = np.array([POOL[t] for t in texts], dtype=float)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def context(llm, problems, pool=(), **settings) -> Context:
    return Context(
        llm,
        None,
        list(problems),
        list(pool),
        "Do the thing.",
        {
            **plan.SETTINGS,
            "max_steps": 4,
            "segment_tokens": 30,
            "program_tokens": 60,
            "sc_k": 2,
            "autocot_k": 2,
            **settings,
        },
        seed=7,
        demos=[DEMO],
        tools=tools(llm),
    )


def run_all(path, engine: dict, monkeypatch) -> tuple[dict, list]:
    """Rows of every ART method on the scenario, and (tag, cache key) of every request the
    engine got, sorted."""
    from retrace.art import autocot

    monkeypatch.setattr(autocot, "embed", embed)
    llm, engines = scripted_llm(path, {"script": SCRIPT, **engine})
    items = [Problem(q, q, "x") for q in ART_ITEMS]
    pool = [Problem(q, q, "x") for q in POOL]
    rows = {
        m: METHOD_FNS[m](context(llm, items, pool))
        for m in ("art", "art_regenerate", "art_notools", "art_sc")
    }
    rows["autocot"] = METHOD_FNS["autocot"](context(llm, [Problem("t1", "t1", "4")], pool))
    return rows, sorted((r.tag, llm.key(r)) for r in engine_requests(engines))


def without_latency(x):
    """`x` with every `latency_s` dropped (wall-clock times differ between any two runs)."""
    if isinstance(x, dict):
        return {k: without_latency(v) for k, v in x.items() if k != "latency_s"}
    if isinstance(x, list):
        return [without_latency(v) for v in x]
    return x
