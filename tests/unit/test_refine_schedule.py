"""Refinement's per-rollout schedule against the turn-barrier one, on the scripted backend.

The fast twin of test_refine.py's real-model check (slow tier): with an async engine each
rollout's next call is submitted as soon as its previous one is back, finished out of
submission order; with synchronous waves every ready rollout's turn goes in one call. The
requests (tag and cache key) and the rows must be the same."""

from __future__ import annotations

from fake_backend import engine_requests, method_cfg, scripted_llm, smoke_math_problems
from test_refine import SCRIPT, ctx

from retrace.util.registry import METHODS


def _strip(rows):
    """Rows without the wall-clock field, which no schedule can make equal."""
    return [
        {**r, "samples": [{k: v for k, v in s.items() if k != "latency_s"} for s in r["samples"]]}
        for r in rows
    ]


def test_per_rollout_and_turn_barrier_schedules_send_the_same_requests_and_give_the_same_rows(tmp_path):
    cfg = method_cfg("refine", n=2, depth=2)
    seen = {}
    for mode, engine in (("waves", {"batch_size": 3}), ("async", {"async": True})):
        llm, engines = scripted_llm(tmp_path / mode, {**SCRIPT, **engine})
        rows = METHODS.get("refine")(smoke_math_problems(2), cfg, llm, ctx(3))
        requests = engine_requests(engines)
        seen[mode] = (sorted((r.tag, llm.key(r)) for r in requests), _strip(rows))
    assert seen["async"] == seen["waves"]
    trace, rows = seen["waves"]
    # 2 problems x 2 rollouts x (the depth-0 sample + 2 depths of continue, critique, correct)
    assert len(trace) == 2 * 2 * (1 + 2 * 3) and len(rows) == 2
    assert len({s["text"] for r in rows for s in r["samples"]}) > 1  # the script really varied
