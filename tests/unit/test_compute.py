"""FLOP accounting and the equal-compute N' (retrace.scoring.compute) on constructed numbers."""

from __future__ import annotations

import pytest

from retrace.scoring.compute import (
    compute_normalised_gain,
    depth_tokens,
    equal_compute_n,
    flops,
    flops_summary,
    structural_usage,
    token_counts,
)

PARAMS = 1000


def usage(prompt, generated, cached=0):
    return {"prompt": prompt, "cached_prompt": cached, "generated": generated}


def test_nominal_counts_all_tokens_and_effective_drops_cached_prompt():
    u = usage(prompt=600, generated=400, cached=200)
    assert flops(u, PARAMS, "nominal") == 2 * PARAMS * 1000
    assert flops(u, PARAMS, "effective") == 2 * PARAMS * 800
    s = flops_summary(u, PARAMS)
    assert s["nominal_tflops"] == pytest.approx(2e6 / 1e12)


def test_provenance_usage_form_is_read_too():
    u = {"prompt_tokens_all": 10, "cached_prompt_tokens_all": 3, "generated_tokens_all": 5}
    assert token_counts(u) == (10, 3, 5)
    with pytest.raises(ValueError, match="no token counts"):
        token_counts({"tokens": 3})


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown FLOP kind"):
        flops(usage(1, 1), PARAMS, "peak")
    with pytest.raises(ValueError, match="cached prompt"):
        flops(usage(5, 1, cached=6), PARAMS)
    with pytest.raises(ValueError, match="zero"):
        equal_compute_n(usage(10, 10), usage(0, 0), 4, PARAMS)


def test_n_prime_from_constructed_costs():
    # Maj@4 costs 4000 tokens (1000 per rollout); refinement costs 10500: 6500 extra
    # tokens buy floor(6.5) = 6 more rollouts, so N' = 10.
    out = equal_compute_n(usage(6000, 4500), usage(2000, 2000), n=4, params=PARAMS, kind="nominal")
    assert out["n_prime"] == 10 and out["extra_rollouts"] == 6
    assert out["per_rollout"] == pytest.approx(2 * PARAMS * 1000)
    assert out["ratio"] == pytest.approx(10500 / 4000)


def test_exact_multiple_is_not_lost_to_rounding():
    # 3x the Maj@N cost is exactly 2N more rollouts.
    out = equal_compute_n(usage(3 * 700, 3 * 300), usage(700, 300), n=8, params=PARAMS, kind="nominal")
    assert out["n_prime"] == 24


def test_effective_and_nominal_can_give_different_n_prime():
    # Refinement reuses most of its prompt KV; Maj@N reuses none.
    refine, majority = usage(9000, 3000, cached=8000), usage(2000, 2000)
    assert equal_compute_n(refine, majority, 4, PARAMS, "nominal")["n_prime"] == 12
    assert equal_compute_n(refine, majority, 4, PARAMS, "effective")["n_prime"] == 4


@pytest.mark.parametrize("refine_tokens", [(100, 100), (2000, 2000), (2000, 2999)])
def test_refinement_no_dearer_than_one_more_rollout_gives_n(refine_tokens):
    out = equal_compute_n(usage(*refine_tokens), usage(2000, 2000), n=4, params=PARAMS)
    assert out["n_prime"] == 4 and out["extra_rollouts"] == 0


def test_compute_normalised_gain_in_points_per_1e3_tflops():
    # +10 points for 2e15 extra FLOPs = 5 points per 10^3 TFLOPs.
    assert compute_normalised_gain(0.6, 0.5, 3e15, 1e15) == pytest.approx(5.0)
    assert compute_normalised_gain(0.6, 0.5, 1e15, 1e15) is None
    # the paper's units are per problem: the same totals over 20 problems are 20x the gain
    assert compute_normalised_gain(0.6, 0.5, 3e15, 1e15, n_problems=20) == pytest.approx(100.0)


def sample(p, g):
    return {"prompt_tokens": p, "cached_prompt_tokens": 0, "generated_tokens": g}


def test_structural_usage_of_samples_sharing_one_prompt():
    rows = [{"samples": [sample(10, 5)] * 4, "extra": {}}]
    # the prompt is computed once, each sample's tokens once: 10 + 4 x 5 = 30 of 60
    assert structural_usage(rows) == {"prompt": 40, "cached_prompt": 30, "generated": 20}


def test_structural_usage_of_append_only_refinement_ignores_engine_cache_state():
    rec = lambda p, g, ctx: {
        "prompt_tokens": p,
        "cached_prompt_tokens": 0,
        "generated_tokens": g,
        "context_tokens": ctx,
    }
    # two rollouts, question prompt 10; each final history is 60 tokens long
    row = {
        "samples": [sample(100, 40), sample(100, 40)],
        "extra": {"depths": [[rec(10, 5, 15), rec(10, 5, 15)], [rec(100, 40, 60), rec(100, 40, 60)]]},
    }
    out = structural_usage([row])
    assert out["prompt"] - out["cached_prompt"] + out["generated"] == 10 + 2 * 50
    engine_cold = {**row, "samples": [{**s, "cached_prompt_tokens": 0} for s in row["samples"]]}
    engine_warm = {**row, "samples": [{**s, "cached_prompt_tokens": 90} for s in row["samples"]]}
    assert structural_usage([engine_cold]) == structural_usage([engine_warm])
    assert structural_usage([{"samples": [sample(1, 1)], "extra": {"compute": {}}}]) is None


def test_structural_usage_of_latest_history_refinement_counts_every_round_as_a_chain():
    """history: latest (methods/refine.py): each round after the first restarts from the
    question, so its chain shares only the question prompt P0 = 10 with the others; the
    previous trace is recomputed. Two rollouts, D = 2: round 1's chain (sample included) is
    60 tokens, round 2's 55 (question 10 + trace 20 + round 25), so each rollout computes
    (60 - 10) + (55 - 10) = 95 tokens beyond the shared question: 10 + 2 x 95 = 200."""
    rec = lambda p, g, ctx: {
        "prompt_tokens": p,
        "cached_prompt_tokens": 0,
        "generated_tokens": g,
        "context_tokens": ctx,
    }
    depths = [[rec(10, 5, 15)] * 2, [rec(100, 40, 60)] * 2, [rec(150, 60, 55)] * 2]
    row = {"samples": [sample(250, 100), sample(250, 100)], "extra": {"depths": depths, "history": "latest"}}
    out = structural_usage([row])
    assert out["prompt"] - out["cached_prompt"] + out["generated"] == 200
    full = structural_usage([{**row, "extra": {"depths": depths}}])  # one chain: the last depth
    assert full["prompt"] - full["cached_prompt"] + full["generated"] == 10 + 2 * 45


def test_depth_tokens_sum_rollouts_per_depth():
    rec = lambda p, c, g: {"prompt_tokens": p, "cached_prompt_tokens": c, "generated_tokens": g}
    rows = [
        {"extra": {"depths": [[rec(10, 0, 5), rec(10, 5, 6)], [rec(40, 20, 15), rec(41, 25, 16)]]}},
        {"extra": {"depths": [[rec(1, 0, 1)], [rec(2, 1, 2)]]}},
    ]
    assert depth_tokens(rows) == [
        {"depth": 0, "prompt": 21, "cached_prompt": 5, "generated": 12},
        {"depth": 1, "prompt": 83, "cached_prompt": 46, "generated": 33},
    ]
