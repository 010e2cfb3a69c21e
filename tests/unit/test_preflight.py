"""`retrace plan --check` (retrace.planning.preflight) on every shipped experiment and on broken ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from retrace.config.compose import CONFIG_DIR, check_global
from retrace.planning import plan, preflight

EXPERIMENTS = sorted(p.stem for p in (CONFIG_DIR / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_shipped_experiment_passes(name):
    assert preflight.check(check_global({"experiment": name})) == []


def test_an_unpinned_hub_model_fails_the_check(monkeypatch):
    real = plan.compose

    def unpinned(selections, overrides=(), config_dir=CONFIG_DIR):
        cfg = real(selections, overrides, config_dir)
        if cfg["model"]["name"] == "qwen2.5-math-7b":
            cfg["model"]["hub"]["revision"] = None
        return cfg

    monkeypatch.setattr(plan, "compose", unpinned)
    failures = preflight.check(check_global({"experiment": "paper"}))
    assert failures and all(
        "qwen2.5-math-7b: hub.revision null is not a pinned commit" in why for _, why in failures
    )


def fake(monkeypatch, runs):
    monkeypatch.setattr(plan, "load_experiment", lambda name: {"runs": runs})


def test_old_paper_settings_fail_naming_the_job(monkeypatch):
    # 4096 tokens per refinement role on vLLM's max_model_len 8192, beam at 4 x 96 tokens
    fake(
        monkeypatch,
        [
            {
                "models": ["qwen2.5-1.5b-instruct"],
                "backend": "vllm",
                "datasets": ["math500"],
                "methods": [
                    {
                        "label": "refine",
                        "overrides": ["method.sampling.max_tokens=4096", "method.n=8", "method.depth=4"],
                    },
                    {"label": "beam", "overrides": ["method.width=4"]},
                ],
            }
        ],
    )
    failures = preflight.check(check_global({"experiment": "x"}))
    refine = [why for where, why in failures if where.endswith("/refine/seed0")]
    assert any("engine context 8192" in why for why in refine)
    assert any(
        where.endswith("/beam/seed0") and "< refinement's final-answer budget 4096" in why
        for where, why in failures
    )


def test_engine_context_beyond_the_model_and_gguf_on_vllm_fail(monkeypatch):
    fake(
        monkeypatch,
        [
            {
                "models": ["qwen2.5-math-7b-instruct"],
                "backend": "vllm",
                "datasets": ["math500"],
                "overrides": ["backend.engine.max_model_len=8192"],
                "methods": ["greedy"],
            },
            {
                "models": ["smollm2-135m-q41"],
                "backend": "vllm",
                "datasets": ["smoke_math"],
                "methods": ["greedy"],
            },
        ],
    )
    whys = [why for _, why in preflight.check(check_global({"experiment": "x"}))]
    assert "engine context 8192 > model context 4096" in whys
    assert any("vLLM cannot load a GGUF" in why for why in whys)


def test_gpu_memory_is_sized_from_weights_and_kv(monkeypatch):
    fake(
        monkeypatch,
        [
            {
                "models": ["llama-3.1-8b-instruct"],
                "backend": "vllm",
                "datasets": ["math500"],
                "overrides": ["backend.engine.gpu_memory_gb=16"],
                "methods": ["greedy"],
            }
        ],
    )
    whys = [why for _, why in preflight.check(check_global({"experiment": "x"}))]
    assert any(why.startswith("GPU memory: 15.0 GiB weights") for why in whys)


def test_cli_exits_non_zero_and_names_the_job(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("experiment: smoke\noverrides: [method.sampling.max_tokens=4000]\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "retrace", "plan", "--check", "--configfile", str(cfg)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert out.returncode == 1
    assert re.search(
        r"check: FAIL qwen2\.5-coder-0\.5b-q4km/llamacpp/\w+/greedy/seed0: worst-case request "
        r"~\d+ tokens \(prompt ~\d+ \+ 4000 generated\) > engine context 2048",
        out.stdout,
    ), out.stdout
    cfg.write_text("experiment: paper\n")
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrace",
            "plan",
            "--check",
            "--experiment",
            "smoke",
            "--configfile",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert ok.returncode == 0 and "0 problems" in ok.stdout


def test_a_reward_model_beside_vllm_needs_room(monkeypatch):
    fake(
        monkeypatch,
        [
            {
                "models": ["qwen2.5-1.5b-instruct"],
                "backend": "vllm",
                "datasets": ["math500"],
                "methods": [
                    {
                        "label": "best_of_n",
                        "method": "best_of_n_prm",
                        "overrides": ["backend.engine.gpu_memory_utilization=0.9"],
                    }
                ],
            }
        ],
    )
    whys = [why for _, why in preflight.check(check_global({"experiment": "x"}))]
    assert any("lower backend.engine.gpu_memory_utilization" in why for why in whys)


def test_random_critique_estimate_covers_its_real_token_count():
    """The random critique is read back as words / 0.75 tokens: check that against SmolLM2's
    tokenizer on critiques drawn at the default (critique-length) word count."""
    transformers = pytest.importorskip("transformers")
    import os
    from types import SimpleNamespace

    from conftest import smollm2_gguf_path

    from retrace.config.compose import compose
    from retrace.methods.base import MethodContext
    from retrace.methods.refine import random_critique

    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("[MODEL] SmolLM2 GGUF not installed")
    vocab = transformers.AutoTokenizer.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path)
    )
    m = compose({"method": "refine"}, ["method.critic=random", "method.roles.critique.max_tokens=1024"])[
        "method"
    ]
    estimate = preflight._random_critique_tokens(m) - preflight.CHAT_OVERHEAD
    for seed in range(3):
        rollout = SimpleNamespace(problem=SimpleNamespace(id=f"q{seed}"), index=seed)
        text = random_critique(rollout, 1, m, MethodContext(seed=seed, task=None, template=""))
        assert len(vocab(text, add_special_tokens=False)["input_ids"]) <= estimate


def test_latest_history_context_is_one_round_on_the_previous_trace_whatever_the_depth():
    """history: full grows by a round per depth; latest holds the longest trace it may start
    from (sample 512 or correction 384) and one round, at any depth."""
    from retrace.config.compose import compose

    roles = [
        "method.sampling.max_tokens=512",
        "method.roles.continue.max_tokens=128",
        "method.roles.critique.max_tokens=128",
        "method.roles.correct.max_tokens=384",
    ]
    m = lambda *o: compose({"method": "refine"}, [*roles, *o])["method"]
    one_round = preflight.refine_tokens(m("method.depth=1")) - 512
    assert preflight.refine_tokens(m("method.depth=4")) == 512 + 4 * one_round
    for depth in (1, 2, 4, 8):
        assert preflight.refine_tokens(m(f"method.depth={depth}", "method.history=latest")) == 512 + one_round
    longer = m("method.depth=4", "method.history=latest", "method.roles.correct.max_tokens=900")
    assert preflight.refine_tokens(longer) == 900 + one_round + (
        900 - 384
    )  # the correction is the longest trace


def test_a_reward_model_on_gpus_of_its_own_is_sized_against_them():
    """Qwen2.5-Math-RM-72B (~143 GB bf16) on 2 x 80 GB GPUs of its own fits 90 % of them, on 1
    it does not; SLURM is asked for its GPUs beside the policy's."""
    from retrace.planning.cluster import gpus

    scorer = {"name": "hf_reward", "params": 71.5e9, "gpus": 2}
    assert preflight.reward_gpus_problem(scorer, 2 * 71.5e9, 80) is None
    assert "raise method.scorer.gpus" in preflight.reward_gpus_problem({**scorer, "gpus": 1}, 2 * 71.5e9, 80)
    cfg = {"backend": {"name": "vllm", "engine": {"tensor_parallel_size": 1}}, "method": {"scorer": scorer}}
    assert gpus(cfg) == 3 and gpus({**cfg, "method": {}}) == 1


def test_a_templates_measured_length_follows_an_edit_of_the_file(tmp_path, monkeypatch):
    """preflight keeps each template's rendered length per file version (sizing asks for the
    same templates tens of thousands of times): an edited template is measured anew."""
    import os

    from retrace.util import templates

    monkeypatch.setattr(templates, "PROMPTS_DIR", tmp_path)
    templates._env.cache_clear()
    try:
        path = tmp_path / "probe.j2"
        path.write_text("short")
        first = preflight._template_tokens("probe.j2")
        assert preflight._template_tokens("probe.j2") == first
        path.write_text("a much longer prompt than before " * 20)
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        assert preflight._template_tokens("probe.j2") > first
    finally:
        templates._env.cache_clear()
