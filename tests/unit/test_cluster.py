"""Cluster sizing of generation jobs (retrace.cluster) and data-parallel shards in the plan."""

from __future__ import annotations

import pytest

from retrace import cluster
from retrace.plan import Job


def cfg(model="qwen2.5-math-7b-instruct", backend="vllm", *overrides):
    return Job(model, backend, "smoke_math", "greedy", "greedy", 0, tuple(overrides)).config()


def test_gpu_engines_ask_for_their_tensor_parallel_gpus_and_cpu_engines_for_none():
    assert cluster.gpus(cfg()) == 1
    assert cluster.gpus(cfg("qwen2.5-math-7b-instruct", "vllm", "backend.engine.tensor_parallel_size=4")) == 4
    assert cluster.gpus(cfg("qwen2.5-coder-0.5b-q4km", "llamacpp")) == 0
    assert cluster.gpus(cfg("qwen2.5-coder-0.5b-q4km", "hf", "backend.engine.device=cuda")) == 1


def test_memory_grows_with_the_model_and_keeps_a_floor():
    big, small = cluster.mem_mb(cfg()), cluster.mem_mb(cfg("smollm2-135m-q41", "llamacpp"))
    assert big > 2 * 7.6e9 / 1e6  # bf16 weights of a 7.6B model fit, with room
    assert small == cluster.MIN_MEM_MB


def test_runtime_follows_tokens_over_throughput_and_tensor_parallel_gpus():
    one = cluster.runtime_min(cfg(), 2500 * 3600)  # one hour of generation at the stated rate
    four = cluster.runtime_min(
        cfg("qwen2.5-math-7b-instruct", "vllm", "backend.engine.tensor_parallel_size=4"), 2500 * 3600
    )
    assert one == 90 + cluster.RUNTIME_OVERHEAD_MIN and four < one
    assert cluster.runtime_min(cfg("smollm2-135m-q41", "llamacpp"), 10**6) == cluster.DEFAULT_RUNTIME_MIN


def test_job_resources_of_a_shard_cover_its_share(tmp_path):
    job = Job("smollm2-135m-q41", "vllm", "smoke_math", "greedy", "greedy", 0)
    whole = cluster.job_resources(job, None)
    assert whole["gpu"] == 1 and whole["runtime"] >= cluster.RUNTIME_OVERHEAD_MIN
    from dataclasses import replace

    from retrace.estimate import job_tokens

    assert job_tokens(replace(job, shards=4), job.config(), None) * 4 >= job_tokens(job, job.config(), None)


def test_shards_in_an_experiment_expand_to_sharded_jobs(tmp_path, monkeypatch):
    from retrace import plan

    exp = {
        "runs": [
            {
                "models": ["smollm2-135m-q41"],
                "backend": "llamacpp",
                "datasets": ["smoke_math"],
                "methods": ["greedy"],
                "shards": 3,
            }
        ]
    }
    monkeypatch.setattr(plan, "load_experiment", lambda name: exp)
    assert [j.shards for j in plan.jobs({"experiment": "x"})] == [3]
    for bad in (0, "2", True):
        exp["runs"][0]["shards"] = bad
        with pytest.raises(ValueError, match="shards must be a positive integer"):
            plan.jobs({"experiment": "x"})
