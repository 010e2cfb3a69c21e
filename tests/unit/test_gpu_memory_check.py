"""`retrace plan --check`'s GPU memory per GPU and GPU type (retrace.planning.preflight,
spine/checks.py): the models a job keeps resident at once on its policy GPU, and the GPU type
it assumed, which `gpu_model` (config/config.yaml, asked by every GPU job) constrains."""

from __future__ import annotations

from retrace.config.compose import check_global
from retrace.planning import plan, preflight

REFINE = ["method.sampling.max_tokens=1024", "method.n=2", "method.depth=1"]


def fake(monkeypatch, methods: list[dict]):
    runs = [
        {
            "models": ["qwen2.5-1.5b-instruct"],
            "backend": "vllm",
            "datasets": ["smoke_math"],
            "methods": methods,
        }
    ]
    monkeypatch.setattr(plan, "load_experiment", lambda name: {"runs": runs})


def test_two_engines_kept_loaded_in_one_job_must_fit_one_gpu_together(monkeypatch):
    # two engine settings (max_model_len) in one cell: two vLLM engines on the same GPU at once
    fake(
        monkeypatch,
        [
            {"label": "greedy", "overrides": ["method.sampling.max_tokens=1024"]},
            {"label": "refine", "overrides": [*REFINE, "backend.engine.max_model_len=16384"]},
        ],
    )
    failures = preflight.check(check_global({"experiment": "x"}))
    [(where, why)] = [f for f in failures if "vLLM engines at once" in f[1]]
    assert where == "qwen2.5-1.5b-instruct/vllm/smoke_math/seed0 (1 GPUs)"
    assert "2 vLLM engines at once (engine 1 0.9, engine 2 0.9 of 80 GiB) reserve 144.0 GiB > 80 GiB" in why


def test_one_engine_with_a_reward_model_beside_it_passes():
    assert preflight.coresident_problem({"engine 1": 0.6}, 15.0, 80.0) is None
    assert "+ a reward model's 40.0 GiB > 80 GiB" in preflight.coresident_problem(
        {"engine 1": 0.6}, 40.0, 80.0
    )


def test_the_check_names_the_gpu_type_it_assumed(monkeypatch, capsys):
    fake(monkeypatch, [{"label": "greedy", "overrides": ["method.sampling.max_tokens=1024"]}])
    notes: list[str] = []
    assert preflight.check(check_global({"experiment": "x"}), notes) == []
    assert any(
        n.startswith("GPU memory sized for 80 GiB GPUs (backend.engine.gpu_memory_gb, assumed)")
        for n in notes
    )
    notes = []
    assert preflight.check(check_global({"experiment": "x", "gpu_model": "h100"}), notes) == []
    assert (
        "GPU type h100 (80 GiB; config gpu_model, asked by every GPU job): memory sized for 80 GiB" in notes
    )


def test_a_gpu_type_smaller_than_the_sizing_fails(monkeypatch):
    fake(monkeypatch, [{"label": "greedy", "overrides": ["method.sampling.max_tokens=1024"]}])
    failures = preflight.check(check_global({"experiment": "x", "gpu_model": "l4"}))
    assert failures == [
        (
            "gpu_model",
            "GPU type l4 has 24 GiB but the jobs were sized for 80 GiB (backend.engine.gpu_memory_gb): "
            "set it to 24 or ask for a larger GPU type",
        )
    ]


def test_the_check_says_when_no_pilot_has_run(monkeypatch, tmp_path):
    fake(monkeypatch, [{"label": "greedy", "overrides": ["method.sampling.max_tokens=1024"]}])
    monkeypatch.chdir(tmp_path)
    notes: list[str] = []
    preflight.check(check_global({"experiment": "x"}), notes)
    [line] = [n for n in notes if n.startswith("no pilot has run")]
    assert "1 of 1 GPU models (qwen2.5-1.5b-instruct/vllm;" in line and "retrace pilot --experiment x" in line
    (tmp_path / "results/pilot/qwen2.5-1.5b-instruct").mkdir(parents=True)
    (tmp_path / "results/pilot/qwen2.5-1.5b-instruct/vllm.json").write_text("{}")
    notes = []
    preflight.check(check_global({"experiment": "x"}), notes)
    assert not [n for n in notes if n.startswith("no pilot has run")]
