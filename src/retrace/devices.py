"""GPUs an engine spans, from its backend config (retrace.cluster sizes jobs with it, and
retrace.estimate prices a job on GPUs or on CPUs by it; here, below both, so neither imports
the other for it).

    gpus(compose({"model": "smollm2-135m", "backend": "vllm"}))   # tensor_parallel_size (1)
"""

from __future__ import annotations


def gpus(cfg: dict) -> int:
    backend = cfg["backend"]
    engine = backend.get("engine") or {}
    if backend["name"] == "vllm":
        return int(engine.get("tensor_parallel_size") or 1)
    if backend["name"] == "hf" and engine.get("device") == "cuda":
        return 1
    return 0
