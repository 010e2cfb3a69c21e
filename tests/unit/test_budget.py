"""Per-solution generation budgets from method configs (retrace.methods.budget)."""

from __future__ import annotations

from retrace.config.compose import compose
from retrace.methods.budget import solution_budget


def method(name, *over):
    return compose({"method": name}, list(over))["method"]


def test_each_method_family_budget():
    assert solution_budget(method("majority", "method.n=8", "method.sampling.max_tokens=4096")) == {
        "solutions": 8,
        "tokens_per_solution": 4096,
        "text": "N=8 x 4096 tok",
    }
    assert solution_budget(method("greedy"))["solutions"] == 1
    refine = solution_budget(method("refine", "method.roles.correct.max_tokens=96", "method.n=2"))
    assert (refine["solutions"], refine["tokens_per_solution"]) == (2, 96)
    beam = solution_budget(method("beam", "method.max_steps=8", "method.sampling.max_tokens=512"))
    assert beam["tokens_per_solution"] == 4096 and "8 steps x 512" in beam["text"]


def test_n_as_run_overrides_the_config():
    assert solution_budget(method("majority"), n_solutions=38)["text"].startswith("N=38 ")
