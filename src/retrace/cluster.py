"""Cluster resources of a generation job, sized from its model, backend and workload.

The rules that load an LLM ask for these (workflow/rules/generate.smk); Snakemake's SLURM
executor (profiles/slurm) turns them into `sbatch --gpus N --mem M -t T`. Local runs ignore
`gpu` and `runtime`. Everything here is an upper-bound guess from configuration; a
cluster's own limits win through `set-resources` in the profile.

    gpu      vLLM: the engine's tensor_parallel_size (one engine spans that many GPUs);
             hf on cuda: 1; CPU engines (llama.cpp, hf on cpu, openai clients): 0
    mem_mb   host memory: the weights as loaded (bf16 on GPU engines, ~4.5-bit GGUF on
             llama.cpp) × 1.5, plus 2 GB for the runtime; never below 4000 MB
    runtime  minutes: upper-bound generated tokens at the backend's stated throughput
             (per GPU, so divided by the GPUs of a tensor-parallel engine) × 1.5 + 30 min for
             loading; 60 min when the throughput or the problem count is unknown
"""

from __future__ import annotations

import math

from retrace.plan import Job

BYTES_PER_PARAM = {"gpu": 2.0, "gguf": 0.6}  # bf16; Q4_K_M/Q4_1 average ~4.5-5 bits
MIN_MEM_MB, RUNTIME_OVERHEAD_MIN, DEFAULT_RUNTIME_MIN = 4000, 30, 60


def gpus(cfg: dict) -> int:
    backend = cfg["backend"]
    engine = backend.get("engine") or {}
    if backend["name"] == "vllm":
        return int(engine.get("tensor_parallel_size") or 1)
    if backend["name"] == "hf" and engine.get("device") == "cuda":
        return 1
    return 0


def mem_mb(cfg: dict) -> int:
    per_param = BYTES_PER_PARAM["gpu" if gpus(cfg) else "gguf"]
    weights_mb = float(cfg["model"]["params"]) * per_param / 1e6
    return max(MIN_MEM_MB, math.ceil(weights_mb * 1.5) + 2000)


def runtime_min(cfg: dict, tokens: int | None) -> int:
    throughput = (cfg["backend"].get("engine") or {}).get("throughput_tok_s")
    if not tokens or not throughput:
        return DEFAULT_RUNTIME_MIN
    seconds = tokens / (float(throughput) * max(1, gpus(cfg)))
    return math.ceil(seconds * 1.5 / 60) + RUNTIME_OVERHEAD_MIN


def job_resources(job: Job, mirror: str | None, dataset_overrides: tuple = ()) -> dict:
    """{gpu, mem_mb, runtime} of one generation job (see the module docstring)."""
    from retrace.estimate import job_tokens

    cfg = job.config()
    return {
        "gpu": gpus(cfg),
        "mem_mb": mem_mb(cfg),
        "runtime": runtime_min(cfg, job_tokens(job, cfg, mirror, dataset_overrides)),
    }
