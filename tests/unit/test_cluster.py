"""Cluster sizing of generation jobs (retrace.planning.cluster) and data-parallel shards in the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrace.planning import cluster
from retrace.planning.plan import Job
from tests import prerequisites

# The benchmark mirror: the paper's problem counts, hence its runtimes, come from it.
MIRROR = prerequisites.MIRROR or str(Path(__file__).resolve().parent / "no-mirror")


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

    from retrace.planning.estimate import job_tokens

    assert job_tokens(replace(job, shards=4), job.config(), None) * 4 >= job_tokens(job, job.config(), None)


def test_shards_in_an_experiment_expand_to_sharded_jobs(tmp_path, monkeypatch):
    from retrace.planning import plan

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


def test_a_runtime_is_capped_at_the_partition_limit():
    assert cluster.capped(2000, 1440) == 1440 and cluster.capped(90, 1440) == 90
    assert cluster.capped(2000, None) == 2000


def _profile(tmp_path, text):
    (tmp_path / "config.yaml").write_text(text)
    return tmp_path


def test_plan_check_names_jobs_over_max_runtime_and_counts_their_attempts(tmp_path):
    # the runtimes are estimated from the mirror's question counts
    cfg = {"experiment": "paper", "mirror": str(prerequisites.mirror()), "overrides": [], "max_runtime": 1440}
    lines = cluster.runtime_check(cfg, _profile(tmp_path, "retries: 0\n"))
    # one attempt a job: cells are cut into parts of one run each, and a label longer than a day
    # on its own (refinement on OlympiadBench's long questions, retrace.planning.sizing) fails alone; the
    # Maj@N' at nominal compute is split in 3 shards, sized to 3 attempts: with no retry, the
    # longest shards fail too (profiles/slurm allows 4 attempts)
    assert lines and all(fails for _, fails in lines)
    assert any(
        line.startswith("generate_cell qwen2.5-1.5b-instruct/vllm/olympiadbench/seed0.part")
        and "(refine_full)" in line
        for line, _ in lines
    )
    assert any(
        line.startswith("generate_shard ") and "3 attempts, the profile allows 1" in line for line, _ in lines
    )
    # a part keeps one attempt for faults: a label that needs A attempts alone passes with A retries
    most = max(int(line.split(" attempts")[0].rsplit(" ", 1)[1]) for line, _ in lines if " attempts" in line)
    assert not any(fails for _, fails in cluster.runtime_check(cfg, _profile(tmp_path, f"retries: {most}\n")))
    assert any(fails for _, fails in cluster.runtime_check(cfg, _profile(tmp_path, f"retries: {most - 1}\n")))
    # a limit no job reaches names none
    assert cluster.runtime_check({**cfg, "max_runtime": 10**6}, tmp_path) == []


def test_plan_check_fails_a_profile_default_over_max_runtime_and_dm_training_over_it(tmp_path):
    cfg = {"experiment": "drr_paper", "mirror": MIRROR, "overrides": [], "max_runtime": 20}
    lines = cluster.runtime_check(cfg, _profile(tmp_path, "retries: 50\ndefault-resources: {runtime: 30}\n"))
    failing = [line for line, fails in lines if fails]
    # DM training cannot resume, so a limit below its runtime fails whatever the retries
    assert any(line.startswith("drr_train") for line in failing)
    assert any("default-resources runtime 30 min > max_runtime 20" in line for line in failing)
    # the reasoner's jobs resume from the request cache: with retries enough, only notes
    assert not any(line.startswith(("drr_distil", "drr_generate")) for line in failing)
    assert any(line.startswith("drr_generate") for line, _ in lines)


def test_a_partition_limit_shorter_than_an_engine_load_fails_every_job_in_one_clear_line(tmp_path):
    # the shard jobs are sized from the paper's problem counts, which only the mirror holds
    cfg = {"experiment": "paper", "mirror": str(prerequisites.mirror()), "overrides": [], "max_runtime": 25}
    lines = cluster.runtime_check(cfg, _profile(tmp_path, "retries: 1000\n"))
    generate = [
        (line, fails) for line, fails in lines if line.startswith(("generate_cell ", "generate_shard "))
    ]
    # every cell's parts and every sharded label's shard jobs: retries cannot help
    cells = {line.split()[1].split(".part")[0] for line, _ in generate if line.startswith("generate_cell ")}
    assert len(cells) == 60 and sum(line.startswith("generate_shard ") for line, _ in generate) == 45
    assert all(fails for _, fails in generate)
    assert all(
        "each attempt spends 30 min loading its engine: raise max_runtime" in line and "\n" not in line
        for line, _ in generate
    )


def test_plan_check_fails_naming_each_job_a_short_partition_cannot_fit(tmp_path, capsys):
    """Bad input: a partition limit (max_runtime) too short for the paper's longest jobs, in a
    config file kept outside the checkout: `retrace plan --check` exits 1 with one line per job
    whose label needs more attempts alone than a part may take (the shipped profile's retries: 3,
    so 4 attempts, one kept for faults)."""
    from retrace.cli import main
    from retrace.config.compose import CONFIG_DIR

    text = (CONFIG_DIR / "config.yaml").read_text()
    text = text.replace("max_runtime: 1440", "max_runtime: 600").replace(
        "mirror: null", f"mirror: {prerequisites.mirror()}"
    )
    (tmp_path / "config.yaml").write_text(text)
    assert (
        main(["plan", "--configfile", str(tmp_path / "config.yaml"), "--experiment", "paper", "--check"]) == 1
    )
    out = capsys.readouterr().out.splitlines()
    failing = [line for line in out if line.startswith("check: FAIL ")]
    # a label too long for a part (3 attempts: one of the 4 is kept for faults) is a part alone
    # (and a shard job, sized for 3 attempts of 24 h, needs more shards)
    assert failing and all(
        line.startswith(("check: FAIL generate_cell ", "check: FAIL generate_shard "))
        and "> max_runtime 600 min" in line
        and "the profile allows 4 (1 kept for faults); give " in line
        and line.endswith(" `shards:` in the experiment")
        and int(line.rsplit(" attempts", 1)[0].rsplit(" ", 1)[1]) > 3
        for line in failing
    ), failing[:3]
    # each part that needs 3 attempts or fewer is a note, not a failure
    assert any(
        line.startswith("check: note generate_cell ") and "the profile allows 4" in line for line in out
    )
    assert out[-1] == f"check: paper: {len(cluster_jobs())} jobs, {len(failing)} problems"


def cluster_jobs():
    from retrace.planning.plan import jobs

    return jobs({"experiment": "paper", "mirror": MIRROR, "overrides": []})


def test_the_workflow_reads_each_jobs_resources_from_the_one_sizing_as_sizing_it_alone_would():
    """The rules ask for every job's resources from the experiment's one sizing (common.smk
    BOUNDS) instead of sizing each job against the whole plan (quadratic at paper scale); a
    Maj@N' job's runtime still comes from its refinement partner's bound."""
    from retrace.planning import parts, plan

    jobs = plan.jobs({"experiment": "refine_smoke"})
    bounds = {b.path: b for b in parts.sized(jobs, None).labels}
    paired = [j for j in jobs if j.equal_compute]
    assert paired and bounds[paired[0].path].n_prime  # priced from its partner, not as Maj@N
    for job in jobs:
        assert cluster.bound_resources(job, bounds[job.path]) == cluster.job_resources(job, None, (), jobs)
