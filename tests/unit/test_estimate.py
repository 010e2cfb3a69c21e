"""Cost estimates from configuration: problems × calls per problem × max_tokens."""

from __future__ import annotations

from retrace.config.compose import check_global
from retrace.planning.estimate import estimate
from retrace.planning.plan import jobs
from retrace.util.registry import METHODS


def test_smoke_estimate_counts_every_call():
    # the spine part of the default: 2 datasets × 6 problems × (greedy 1 + Maj@4 4 calls) × 256 tokens
    planned = [j for j in jobs(check_global({"experiment": "smoke"})) if j.dataset != "smoke_math_mini"]
    est = estimate(planned, None)
    assert est.jobs == 4 and est.unknown == 0
    assert est.generated_tokens == 2 * 6 * (1 + 4) * 256
    # prompts are counted (each call reads its dataset's longest question), not left out of a "≤"
    from retrace.planning.preflight import question_tokens

    assert est.prompt_tokens == sum(
        6 * (1 + 4) * question_tokens(d, None) for d in {j.dataset for j in planned}
    )
    assert est.flops == 2 * 494032768 * (est.generated_tokens + est.prompt_tokens)
    assert "prompt tokens" in est.line() and "prompts included" in est.line()
    assert est.gpu_hours == 0  # llama.cpp states no GPU throughput


def test_refinement_calls_follow_the_critic_variant():
    calls = METHODS.get("refine").calls_per_problem
    assert calls({"n": 8, "depth": 4, "critic": "model"}) == 8 * (1 + 4 * 3)
    assert calls({"n": 8, "depth": 4, "critic": "affirm"}) == 8 * (1 + 4 * 2)


def test_paper_grid_has_gpu_hours_at_the_stated_throughput():
    est = estimate(jobs(check_global({"experiment": "paper"})), "/nonexistent-mirror")
    # 4 models x 5 datasets x 3 seeds x 11 labels, + refine_full on one model (5 x 3)
    # without a mirror every label is sized from its dataset config's stated question count
    assert est.jobs == 675 and est.unknown == 0 and est.stated == 675 and est.gpu_hours > 1000
    assert "675 labels sized from their dataset configs' stated question counts" in est.line()
    # no limit, so a cell is cut by GPU count only: one job per cell, two in Qwen2.5-Math-7B's 15
    # (its RM@N needs 3 GPUs, its other labels 1): 75; 3 shard jobs per sharded label, merged by
    # its cell's score job (no Maj@N' label reads it: no merge job)
    assert "675 labels in 210 generation jobs (75 cell jobs, 135 shard jobs, 0 merges)" in est.line()


def test_drr_and_art_stages_are_estimated_apart_from_the_spine():
    """DRR's reasoner jobs: questions x calls x max_tokens per stage and seed; ART's: each job's
    method bound (art/resources.py) plus its selection jobs; CPU jobs priced at the assumed rate."""
    from retrace.art import plan as art_plan
    from retrace.art import resources
    from retrace.config.compose import load_experiment
    from retrace.drr import settings
    from retrace.planning.estimate import DEFAULT_CPU_TOK_S, family_lines

    drr_line, art_line = family_lines(
        {**load_experiment("drr_plumbing"), **load_experiment("art_plumbing")}, None
    )
    cfg = settings.load(load_experiment("drr_plumbing")["drr"])
    per_stage = [
        settings.reasoner_tokens(cfg, s, e["name"], None)
        for e in settings.entries(cfg)
        for s in ("distil", "generate")
    ]
    seeds = len(cfg.get("seeds") or [0])
    assert drr_line.startswith(f"estimate (DRR reasoner): {len(per_stage) * seeds} engine jobs, ")
    assert f"≤ {seeds * sum(per_stage):,} generated tokens" in drr_line and sum(per_stage) > 0
    art = art_plan.check(load_experiment("art_plumbing")["art"])
    runs = art_plan.jobs(art)
    # one selection job per (model, unseen task, library version) that a library-using run reads
    selections = {
        (j.model, j.task, art_plan.job_version(art, j))
        for j in runs
        if art_plan.uses_library(j) and art_plan.needs_selection(j.task)
    }
    tokens = sum(resources.job_tokens(art, j.method) for j in runs) + len(
        selections
    ) * resources.select_tokens(art)
    assert art_line.startswith(f"estimate (ART): {len(runs) + len(selections)} engine jobs, ")
    assert f"≤ {tokens:,} generated tokens" in art_line
    assert f"{DEFAULT_CPU_TOK_S:,.0f} tok/s assumed" in art_line
    assert family_lines(load_experiment("plumbing"), None) == []  # the spine alone: no family line
