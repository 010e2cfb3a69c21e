"""ART's cluster resources (art/resources.py): token bounds per method, GPUs from the backend."""

from __future__ import annotations

import pytest

from retrace.art import plan, resources
from retrace.config.compose import load_experiment


def art_paper() -> dict:
    return plan.check(load_experiment("art_paper")["art"])


def test_token_bounds_follow_each_methods_budgets():
    cfg = art_paper()
    s = cfg["settings"]  # max_steps 8, segment 160, program 768, sc_k 15, code_generate 384
    pause = (2 * 8 + 2) * 160 + 8 * 384
    assert resources.question_tokens(cfg, "fewshot") == s["answer_tokens"] == 24
    assert resources.question_tokens(cfg, "art") == pause
    assert resources.question_tokens(cfg, "art_sc") == 15 * pause
    assert resources.question_tokens(cfg, "art_regenerate") == 18 * 768 + 8 * 384
    assert resources.job_tokens(cfg, "autocot") == 100 * 384 + 3 * 384
    assert resources.select_tokens(cfg) == 8 * 5 * pause  # 8 library tasks x cluster_examples
    with pytest.raises(ValueError, match="no token bound for method 'beam'"):
        resources.question_tokens(cfg, "beam")


def test_a_vllm_block_asks_for_its_gpu_and_a_runtime_from_its_tokens():
    cfg = {**art_paper(), "backend": "vllm", "overrides": ["backend.engine.tensor_parallel_size=2"]}
    sc, few = (resources.resources(cfg, "qwen2.5-coder-1.5b-q4km", label) for label in ("art_sc", "fewshot"))
    assert sc["gpu"] == 2 and few["gpu"] == 2  # the engine spans two GPUs
    assert sc["runtime"] > few["runtime"] >= 30  # sized from tokens at the stated throughput
    cpu = resources.resources(art_paper(), "qwen2.5-coder-1.5b-q4km", "art@feedback")
    assert cpu["gpu"] == 0 and cpu["mem_mb"] >= 4000


def test_threads_are_the_engines_so_simulated_jobs_take_one_core():
    """A job asks for its engine's CPU threads (as the spine's generate jobs do): llama.cpp's
    n_threads, or 1 on the simulated engine, whose rehearsal jobs then run two at a time on
    2 cores instead of one (art_paper's rehearsal: ~6.5 jobs a minute, one at a time)."""
    cfg = art_paper()
    assert resources.resources(cfg, "qwen2.5-coder-1.5b-q4km", "art_sc")["threads"] == 2
    more = {**cfg, "overrides": [*cfg.get("overrides", []), "backend.engine.n_threads=6"]}
    assert resources.resources(more, "qwen2.5-coder-1.5b-q4km", "art")["threads"] == 6
    assert resources.resources(more, "qwen2.5-coder-1.5b-q4km")["threads"] == 6  # a selection job
    simulated = {**cfg, "backend": "simulated", "overrides": []}
    assert resources.resources(simulated, "qwen2.5-coder-1.5b-q4km", "art_sc")["threads"] == 1


def test_drr_reasoner_jobs_ask_for_their_engines_threads():
    from retrace.drr.settings import reasoner_resources

    assert reasoner_resources({"backend": "llamacpp"}, "smollm2-135m-q41")["threads"] == 2
    assert reasoner_resources({"backend": "simulated"}, "smollm2-135m-q41")["threads"] == 1
