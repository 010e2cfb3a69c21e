"""profiles/slurm without a cluster: dry-runs list the jobs, their sized resources and the
estimate before anything is submitted (sbatch is never called by a dry-run)."""

from __future__ import annotations

import re
import subprocess

from tests import prerequisites
from tests.workflow.conftest import MIRROR, SNAKEMAKE, copy_repo, env_for, write_config


def dry_run(root, experiment: str, *args: str) -> str:
    write_config(root, experiment=experiment, probe=True)  # the probe jobs are sized too
    proc = subprocess.run(
        [SNAKEMAKE, "--profile", "profiles/slurm", "-n", *args],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def jobs(out: str) -> list[tuple[str, dict]]:
    """(rule, resources) of every job block of a dry-run."""
    found = []
    for m in re.finditer(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", out, re.M | re.S):
        res = re.search(r"^\s+resources: (.+)$", m.group(2), re.M)
        pairs = dict(kv.split("=", 1) for kv in res.group(1).split(", ")) if res else {}
        found.append((m.group(1), pairs))
    return found


def gpu_jobs_go_to_the_gpu_partition(planned: list[tuple[str, dict]]) -> set[str]:
    """Asserts that each job whose `gpu` > 0 asks for the partition the dry-run configured
    (gpu_partition=gpux), the GPU type (gpu_model=h100: sbatch --gpus=h100:N) and cpus_per_gpu=6,
    and no job without a GPU for that partition or type; the rules of the GPU jobs. Derived from
    the jobs, not from a list of rules."""
    on_gpu = [(rule, r) for rule, r in planned if int(r.get("gpu", "0")) > 0]
    assert all(r.get("slurm_partition") == "gpux" and r.get("cpus_per_gpu") == "6" for _, r in on_gpu)
    assert all(r.get("gpu_model") == "h100" for _, r in on_gpu)
    cpu = [r for _, r in planned if int(r.get("gpu", "0")) == 0]
    assert not [r for r in cpu if "slurm_partition" in r or "gpu_model" in r]
    return {rule for rule, _ in on_gpu}


GPUX = ("--config", "gpu_partition=gpux", "gpu_model=h100", "cpus_per_gpu=6")


def test_paper_grid_plans_sized_gpu_jobs_and_prints_the_estimate(tmp_path):
    prerequisites.mirror()  # the paper's datasets (and their sizes) are the mirror's
    out = dry_run(copy_repo(tmp_path), "paper", *GPUX)
    # the workflow cuts cells into the parts `retrace plan` prices: the same limit and profile
    from retrace.planning import parts, plan
    from retrace.planning.cluster import Limit

    sized = parts.sized(plan.jobs({"experiment": "paper"}), MIRROR, limit=Limit(1440, 4))
    n = len(sized.parts)
    assert re.search(
        rf"estimate: 675 labels in {n + 135} generation jobs \({n} cell jobs, 135 shard jobs, 0 merges\), .* GPU-hours",
        out,
    )
    assert re.search(
        r"^engine loads: [\d,]+ as sized \(.*\); least possible at this limit: [\d,]+ ", out, re.M
    )
    planned = jobs(out)
    cells = [r for rule, r in planned if rule.startswith("generate_cell_")]
    merges = [r for rule, r in planned if rule == "generate"]
    shard = [r for rule, r in planned if rule.startswith("generate_shard_")]
    # generation is one job per model × dataset × seed (60: every label of the cell on one
    # engine, retrace.stages.generate_cell), as scoring is, or per part of one where its labels
    # need more than 3 attempts of 24 h (retrace.planning.parts); the 32k models' Maj@N' at nominal
    # compute (45 label jobs) runs as 3 shards each, merged by its cell's score job (no merge job:
    # it is no Maj@N' label's partner)
    assert len(cells) == n > 60 and not merges and len(shard) == 135
    merged = r"^\s+output: results/scores/.*, results/generations/\S+/majority_eq_nominal/seed\d\.jsonl,"
    assert len(re.findall(merged, out, re.M)) == 45
    # and the two reward models RM@N loads, materialised by the local rule hub_artifact
    assert len([r for rule, r in planned if rule == "hub_artifact"]) == 2
    assert re.search(rf"^total\s+{632 - 315 - 60 - 45 + n + 2}$", out, re.M)
    assert re.search(r"seed0\.part1\.log", out) and re.search(r"--labels \S+,\S+ ", out)
    on_gpu = [r for r in cells + shard if r["gpu"] != "0"]
    assert all(int(r["mem_mb"]) >= 4000 and int(r["runtime"]) > 30 for r in on_gpu)
    # a part asks for the most GPUs any label needs (Qwen2.5-Math-7B's RM@N also needs its
    # reward model's 2 GPUs) and its labels' summed runtime, capped
    assert sorted(int(r["gpu"]) for r in cells) == sorted(p.gpus for p in sized.parts)
    assert sorted(int(r["runtime"]) for r in cells) == sorted(min(p.minutes(), 1440) for p in sized.parts)
    assert {r["gpu"] for r in cells} == {"1", "3"}
    assert all(r["gpu"] == "1" and int(r["runtime"]) <= 1440 for r in shard)
    probes = [r for rule, r in planned if rule == "probe"]  # one per model, on its GPU
    assert len(probes) == 4 and all(r["gpu"] == "1" and int(r["mem_mb"]) >= 4000 for r in probes)
    # a 7.6B model needs more host memory than a 1.5B one; nothing is capped by profiles/default
    assert len({r["mem_mb"] for r in cells}) >= 2 and max(int(r["mem_mb"]) for r in cells) > 20000
    cpu = [r for rule, r in planned if rule in ("data", "claims", "report") or rule.startswith("score_")]
    assert cpu and all(r.get("gpu", "0") == "0" for r in cpu)
    # The longest refinements are estimated beyond a day: they ask for the partition's limit
    # (max_runtime, 1440 min by default) and no job asks for more.
    runtimes = [int(r["runtime"]) for _, r in planned if "runtime" in r]
    assert len(runtimes) == len(planned) and max(runtimes) == 1440
    gpu_rules = gpu_jobs_go_to_the_gpu_partition(planned)
    assert {r.rstrip("0123456789") for r in gpu_rules if not r.startswith("generate_cell_")} == {
        "generate_shard_",
        "probe",
    }
    assert len(gpu_rules) > 2  # and the cell rules


def test_no_job_asks_for_more_than_max_runtime_and_drr_gpu_jobs_are_sized(tmp_path):
    prerequisites.mirror()  # drr_paper's datasets are the mirror's
    planned = jobs(dry_run(copy_repo(tmp_path), "drr_paper", *GPUX, "max_runtime=100"))
    assert {"drr_distil", "drr_generate"} <= gpu_jobs_go_to_the_gpu_partition(planned)
    asked = {rule: [int(r["runtime"]) for rr, r in planned if rr == rule] for rule, _ in planned}
    assert max(max(v) for v in asked.values() if v) == 100
    # The reasoner's jobs are sized from their tokens (not the 30-minute default), the DM's
    # from the DRR block's runtime (240 min for training, capped here at 100).
    assert all(t > 30 for t in asked["drr_distil"] + asked["drr_generate"])
    assert set(asked["drr_train"]) == {100} and set(asked["drr_infer"]) == {60}


def test_shards_plan_one_engine_job_per_shard_merged_by_the_score_job(tmp_path):
    out = dry_run(copy_repo(tmp_path), "cluster_smoke")
    planned = jobs(out)
    shards = [r for rule, r in planned if rule.startswith("generate_shard_")]
    assert len(shards) == 2 and all(r["engine"] == "1" for r in shards)
    # no merge job: the cell's score job (a local rule) merges the shards and declares the result
    assert not [r for rule, r in planned if rule == "generate"]
    score = re.search(r"^(?:local)?rule score_0:\n(.*?)(?=^\S)", out, re.M | re.S).group(1)
    path = "smollm2-135m-q40/llamacpp/smoke_math_mini/majority/seed0"
    assert re.search(
        rf"^\s+input: .*results/shards/{path}/0of2\.jsonl, results/shards/{path}/1of2\.jsonl", score, re.M
    )
    assert re.search(
        rf"^\s+output: .*results/generations/{path}\.jsonl, results/generations/{path}\.jsonl\.prov\.json",
        score,
        re.M,
    )


def test_models_are_materialised_in_the_controller_before_the_gpu_jobs(tmp_path):
    """A compute node often has no network: the model rules are localrules (they run in the
    controller, on the login node), and every engine job reads a manifest they write."""
    root = copy_repo(tmp_path)
    write_config(root, experiment="paper", probe=True)
    (root / "localrules.smk").write_text(
        'include: "Snakefile"\n\n\nprint("LOCALRULES", " ".join(sorted(workflow._localrules)))\n'
    )
    proc = subprocess.run(
        [SNAKEMAKE, "-s", "localrules.smk", "--profile", "profiles/slurm", "-n"],
        cwd=root,
        env=env_for(root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    local = set(re.search(r"^LOCALRULES (.*)$", proc.stdout, re.M).group(1).split())
    assert {"model", "model_gguf", "hub_artifact"} <= local  # the reward models too
    assert not {"generate", "probe"} & local
    assert not [r for r in local if r.startswith(("generate_cell_", "generate_shard_"))]
