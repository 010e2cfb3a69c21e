"""ART's cluster resources (art/resources.py): token bounds per method, GPUs from the backend."""

from __future__ import annotations

import pytest

from retrace.art import plan, resources
from retrace.config import load_experiment


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
