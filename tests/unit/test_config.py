"""Config composition and checks (retrace.config.compose) and the job plan with rerun keys (retrace.planning.plan)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from retrace.config.compose import CONFIG_DIR, ConfigError, check_global, compose
from retrace.planning import plan
from retrace.util import templates

SMOKE = {"model": "smollm2-135m-q41", "dataset": "smoke_math", "method": "majority", "backend": "llamacpp"}


def job_cfg(*overrides: str, seed: int = 0, **selections: str) -> dict:
    cfg = compose({**SMOKE, **selections}, overrides)
    cfg["seed"] = seed
    return cfg


def group_file(group: str, name: str) -> dict:
    return yaml.safe_load((CONFIG_DIR / group / f"{name}.yaml").read_text())


def test_compose_returns_the_selected_group_files():
    cfg = compose(SMOKE)
    assert set(cfg) == {"model", "dataset", "method", "backend"}
    for group, name in SMOKE.items():
        assert cfg[group] == group_file(group, name)


def test_override_changes_only_its_key():
    base, changed = compose(SMOKE), compose(SMOKE, ["method.sampling.temperature=0.3"])
    assert changed["method"]["sampling"]["temperature"] == 0.3
    changed["method"]["sampling"]["temperature"] = base["method"]["sampling"]["temperature"]
    assert changed == base


def test_unknown_override_key_names_it_and_lists_valid_keys():
    with pytest.raises(ConfigError) as err:
        compose(SMOKE, ["method.sampling.temprature=0.5"])
    msg = str(err.value)
    assert "method.sampling.temprature" in msg
    assert "temperature" in msg.split("valid keys")[1] and "max_tokens" in msg


def test_unknown_top_level_override_lists_groups():
    with pytest.raises(
        ConfigError, match="'methd.n'.*valid keys under <top level>: backend, dataset, method, model"
    ):
        compose(SMOKE, ["methd.n=3"])


def test_unknown_middle_key_lists_the_keys_where_it_failed():
    with pytest.raises(
        ConfigError,
        match=r"valid keys under method \(method 'majority', config/method/majority.yaml\): n, name, sampling",
    ):
        compose(SMOKE, ["method.samplin.temperature=0.5"])


def test_override_without_value_is_refused():
    with pytest.raises(ConfigError, match="key=value"):
        compose(SMOKE, ["method.n"])


def test_unknown_group_option_lists_valid_options():
    with pytest.raises(ConfigError) as err:
        compose({**SMOKE, "model": "nope"})
    msg = str(err.value)
    assert "'nope'" in msg and "smollm2-135m-q41" in msg and "qwen2.5-coder-0.5b-q4km" in msg


def test_unknown_group_is_refused():
    with pytest.raises(ConfigError, match="unknown config group 'optimizer'"):
        compose({**SMOKE, "optimizer": "adam"})


def test_check_global_refuses_unknown_key_and_names_valid_ones():
    with pytest.raises(ConfigError) as err:
        check_global({"experiment": "smoke", "mirorr": "/data"})
    assert "'mirorr'" in str(
        err.value
    ) and "estimate, experiment, gpu_model, gpu_partition, max_runtime, mirror, overrides" in str(err.value)


def test_check_global_fills_defaults():
    assert check_global({"experiment": "paper"}) == {
        "experiment": "paper",
        "mirror": None,
        "overrides": [],
        "estimate": True,
        "probe": True,
        "request_cache": "results/cache/requests",
        "max_runtime": 1440,  # minutes: no job may ask a partition for more (profiles/slurm)
        "gpu_partition": None,  # GPU jobs' SLURM partition (null: the default one)
        "gpu_model": None,  # GPU jobs' GPU type (null: any; --check assumes gpu_memory_gb)
        "cpus_per_gpu": 8,
    }


def test_smoke_experiment_expands_to_the_cross_product():
    exp = yaml.safe_load((CONFIG_DIR / "experiment" / "smoke.yaml").read_text())
    jobs = plan.jobs({"experiment": "smoke"})
    label = lambda m: m if isinstance(m, str) else m["label"]
    expected = {
        (m, r["backend"], d, label(meth), s)
        for r in exp["runs"]
        for m in r["models"]
        for d in r["datasets"]
        for meth in r["methods"]
        for s in r.get("seeds", [0])
    }
    assert {(j.model, j.backend, j.dataset, j.label, j.seed) for j in jobs} == expected
    # the spine (2 sets x greedy, Maj@N) and the refinement suite (10 labels on one set)
    assert len(jobs) == len(expected) == 4 + 10
    assert len({j.path for j in jobs}) == len(jobs)


def fake_experiment(monkeypatch, runs: list[dict]) -> None:
    monkeypatch.setattr(plan, "load_experiment", lambda name: {"runs": runs})


def test_jobs_cover_models_datasets_methods_and_seeds(monkeypatch):
    fake_experiment(
        monkeypatch,
        [
            {
                "models": ["a", "b"],
                "backend": "llamacpp",
                "datasets": ["x", "y", "z"],
                "methods": ["greedy", {"label": "maj8", "method": "majority", "overrides": ["method.n=8"]}],
                "seeds": [0, 1],
            }
        ],
    )
    jobs = plan.jobs({"experiment": "fake", "overrides": ["method.sampling.max_tokens=64"]})
    assert len(jobs) == 2 * 3 * 2 * 2
    maj8 = plan.find(jobs, model="b", dataset="z", label="maj8", seed=1)
    assert maj8.method == "majority"
    assert maj8.overrides == ("method.sampling.max_tokens=64", "method.n=8")
    assert maj8.path == "b/llamacpp/z/maj8/seed1"


@pytest.mark.parametrize("override", ["dataset.limit=5", "model.params=7", "+dataset.extra=1"])
def test_run_level_dataset_or_model_override_is_refused(monkeypatch, override):
    fake_experiment(
        monkeypatch,
        [
            {
                "models": ["a"],
                "backend": "llamacpp",
                "datasets": ["x"],
                "methods": ["greedy"],
                "overrides": [override],
            }
        ],
    )
    with pytest.raises(ValueError, match="shared dataset/model"):
        plan.jobs({"experiment": "fake"})


def test_one_label_for_two_method_configurations_is_refused(monkeypatch):
    fake_experiment(
        monkeypatch,
        [
            {
                "models": ["a"],
                "backend": "llamacpp",
                "datasets": ["x"],
                "methods": [
                    {"label": "maj", "method": "majority", "overrides": ["method.n=4"]},
                    {"label": "maj", "method": "majority", "overrides": ["method.n=8"]},
                ],
            }
        ],
    )
    with pytest.raises(ValueError, match="label 'maj'"):
        plan.jobs({"experiment": "fake"})


def test_generate_key_follows_sampling_and_seed_but_not_engine_settings():
    base = plan.rerun_key("generate", job_cfg())
    assert plan.rerun_key("generate", job_cfg()) == base
    assert plan.rerun_key("generate", job_cfg("method.sampling.temperature=0.3")) != base
    assert plan.rerun_key("generate", job_cfg("method.n=8")) != base
    assert plan.rerun_key("generate", job_cfg(seed=1)) != base
    assert plan.rerun_key("generate", job_cfg("backend.engine.n_threads=7")) == base
    assert plan.rerun_key("generate", job_cfg("backend.engine.batch_size=3")) == base
    # ...except the deterministic mode, which changes the cache identity of every request.
    assert plan.rerun_key("generate", job_cfg("backend.engine.deterministic=true")) != base
    assert plan.rerun_key("generate", job_cfg("backend.engine.deterministic=false")) == base


def test_a_simulated_jobs_key_follows_its_planted_effects_by_content(tmp_path):
    """The simulated engine's effects decide its answers: new effects (even rewritten in the
    same file) rerun its generation jobs, so a rehearsal never checks old answers against new
    truth; a llama.cpp job's key is as before (no engine settings in it)."""
    effects = tmp_path / "effects.yaml"

    def key(text: str, *more: str) -> str:
        effects.write_text(text)
        return plan.rerun_key(
            "generate", job_cfg("backend.engine.effects=" + str(effects), *more, backend="simulated")
        )

    base = key("effects:\n  - {label: refine, points: 10}\n")
    assert key("effects:\n  - {label: refine, points: 10}\n") == base
    assert key("effects:\n  - {label: refine, points: 20}\n") != base  # the same path, new content
    assert key("effects:\n  - {label: refine, points: 10}\n", "backend.engine.base_accuracy=0.7") != base
    assert key("effects:\n  - {label: refine, points: 10}\n", "backend.engine.n_threads=2") == base
    assert plan.config_slice("generate", job_cfg()).keys() == {
        "model",
        "dataset",
        "method",
        "backend",
        "seed",
    }


def test_score_key_ignores_sampling_but_follows_scoring():
    base = plan.rerun_key("score", job_cfg())
    assert plan.rerun_key("score", job_cfg("method.sampling.temperature=0.3")) == base
    assert plan.rerun_key("score", job_cfg(seed=1)) == base
    assert plan.rerun_key("score", job_cfg("method.scoring.n_boot=10")) != base
    assert plan.rerun_key("score", job_cfg(dataset="smoke_mc")) != base


def test_generate_key_follows_the_prompt_template_file(tmp_path, monkeypatch):
    cfg = job_cfg()
    assert [p.name for p in plan.templates(cfg)] == ["math_cot.j2"]
    original = templates.PROMPTS_DIR

    def key_with_prompts(name: str, edit: dict[str, str]) -> str:
        # A fresh directory per call: plan caches source hashes per file list in a process.
        prompts = tmp_path / name
        shutil.copytree(original, prompts)
        for file, extra in edit.items():
            (prompts / file).write_text((prompts / file).read_text() + extra)
        monkeypatch.setattr(templates, "PROMPTS_DIR", prompts)
        assert plan.templates(cfg) == [prompts / "math_cot.j2"]
        return plan.rerun_key("generate", cfg)

    base = key_with_prompts("copy1", {})
    assert key_with_prompts("copy2", {}) == base
    assert key_with_prompts("copy3", {"math_cot.j2": "\nThink hard."}) != base
    assert key_with_prompts("copy4", {"mc_cot.j2": "\nunused here"}) == base


def test_job_config_carries_overrides_and_seed():
    job = plan.Job("smollm2-135m-q41", "llamacpp", "smoke_math", "maj8", "majority", 3, ("method.n=8",))
    cfg = job.config()
    assert cfg["seed"] == 3 and cfg["method"]["n"] == 8
    assert "--label maj8" in job.cli_args() and "--override 'method.n=8'" in job.cli_args()


def test_a_later_override_into_an_earlier_ones_value_leaves_that_override_as_written():
    """Each override is parsed once per process (compose._parsed_override) and its value shared:
    a later override that changes a key inside it must change this composition's copy only."""
    whole = "method.sampling={temperature:0.5,top_p:1.0,top_k:-1,max_tokens:64}"
    assert (
        compose(SMOKE, [whole, "method.sampling.temperature=0.7"])["method"]["sampling"]["temperature"] == 0.7
    )
    assert compose(SMOKE, [whole, "method.sampling.top_k=5"])["method"]["sampling"]["temperature"] == 0.5


def test_job_configs_of_one_composition_share_it_but_keep_their_own_seed():
    """plan.job_config composes and freezes each composition once for the jobs that share it
    (seeds, labels); each job's config is still its own composition and seed, read-only."""
    jobs = [
        plan.Job("smollm2-135m-q41", "llamacpp", "smoke_math", "maj8", "majority", s, ("method.n=8",))
        for s in (0, 1)
    ]
    first, second = (plan.job_config(j) for j in jobs)
    assert (first["seed"], second["seed"]) == (0, 1)
    assert first["method"] is second["method"] and first == {**jobs[0].config()}
    with pytest.raises(TypeError):
        second["seed"] = 0


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "method.sampling.temperature=hot",
            r"method.sampling.temperature takes a number .*got a string 'hot'",
        ),
        ("method.n=four", r"method.n takes an integer .*got a string 'four'"),
        ("method.n=2.5", r"method.n takes an integer .*got a number 2.5"),
        ("backend.engine.deterministic=1", r"backend.engine.deterministic takes a boolean"),
    ],
    ids=["string-for-number", "string-for-int", "float-for-int", "int-for-bool"],
)
def test_an_override_of_the_wrong_type_names_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        compose({"method": "majority"}, [override])


@pytest.mark.parametrize(
    "override, message",
    [
        ("method.n=0", r"method.n = 0 is out of range: must be >= 1 \(override 'method.n=0'\)"),
        (
            "method.sampling.temperature=-0.5",
            r"method.sampling.temperature = -0.5 is out of range: must be >= 0",
        ),
        ("method.sampling.top_p=1.5", r"method.sampling.top_p = 1.5 is out of range: must be in \[0, 1\]"),
        ("method.sampling.max_tokens=0", r"method.sampling.max_tokens = 0 is out of range"),
    ],
    ids=["n", "temperature", "top_p", "max_tokens"],
)
def test_an_out_of_range_value_names_the_key_and_the_bound(override, message):
    with pytest.raises(ConfigError, match=message):
        compose({"method": "majority"}, [override])


def test_depth_out_of_range_and_accepted_kinds():
    with pytest.raises(ConfigError, match=r"method.depth = -1 is out of range: must be >= 0"):
        compose({"method": "refine"}, ["method.depth=-1"])
    cfg = compose(
        {"method": "majority", "dataset": "gsm8k"}, ["method.sampling.temperature=1", "dataset.limit=4"]
    )
    assert cfg["method"]["sampling"]["temperature"] == 1 and cfg["dataset"]["limit"] == 4
