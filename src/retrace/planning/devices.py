"""GPUs an engine spans, from its backend config (retrace.planning.cluster sizes jobs with it, and
retrace.planning.estimate prices a job on GPUs or on CPUs by it; here, below both, so neither imports
the other for it).

    gpus(compose({"model": "smollm2-135m", "backend": "vllm"}))   # tensor_parallel_size (1)
"""

from __future__ import annotations


def gpus(cfg: dict) -> int:
    backend = cfg["backend"]
    engine = backend.get("engine") or {}
    if backend["name"] == "vllm":
        return int(engine.get("tensor_parallel_size") or 1) + reward_gpus(cfg)
    if backend["name"] == "hf" and engine.get("device") == "cuda":
        return 1
    return 0


def reward_gpus(cfg: dict) -> int:
    """GPUs a hub reward model takes beside the policy's (`method.scorer.gpus`; 0: it shares them)."""
    return int(((cfg.get("method") or {}).get("scorer") or {}).get("gpus") or 0)
