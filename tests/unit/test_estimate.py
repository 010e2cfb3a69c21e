"""Cost estimates from configuration: problems × calls per problem × max_tokens."""

from __future__ import annotations

from retrace.config import check_global
from retrace.estimate import estimate
from retrace.plan import jobs
from retrace.registry import METHODS


def test_smoke_estimate_counts_every_call():
    # the spine part of the default: 2 datasets × 6 problems × (greedy 1 + Maj@4 4 calls) × 256 tokens
    planned = [j for j in jobs(check_global({"experiment": "smoke"})) if j.dataset != "smoke_math_mini"]
    est = estimate(planned, None)
    assert est.jobs == 4 and est.unknown == 0
    assert est.generated_tokens == 2 * 6 * (1 + 4) * 256
    # prompts are counted (each call's at most the worst-case context), not left out of a "≤"
    assert est.prompt_tokens > 2 * 6 * (1 + 4) * 256
    assert est.flops == 2 * 494032768 * (est.generated_tokens + est.prompt_tokens)
    assert "prompt tokens" in est.line() and "prompts included" in est.line()
    assert est.gpu_hours == 0  # llama.cpp states no GPU throughput


def test_refinement_calls_follow_the_critic_variant():
    calls = METHODS.get("refine").calls_per_problem
    assert calls({"n": 8, "depth": 4, "critic": "model"}) == 8 * (1 + 4 * 3)
    assert calls({"n": 8, "depth": 4, "critic": "affirm"}) == 8 * (1 + 4 * 2)


def test_paper_grid_has_gpu_hours_at_the_stated_throughput():
    est = estimate(jobs(check_global({"experiment": "paper"})), "/nonexistent-mirror")
    assert est.jobs == 660 and est.unknown == 660  # without a mirror the sizes are unknown
    assert "660 generation jobs" in est.line()
