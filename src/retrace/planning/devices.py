"""GPUs an engine spans, from its backend config (retrace.planning.cluster sizes jobs with it, and
retrace.planning.estimate prices a job on GPUs or on CPUs by it; here, below both, so neither imports
the other for it).

    gpus(compose({"model": "smollm2-135m", "backend": "vllm"}))   # tensor_parallel_size (1)
    priced_gpus(cfg)   # the same, or a vLLM server's for its `served` client (which asks none)
"""

from __future__ import annotations


def gpus(cfg: dict) -> int:
    backend = cfg["backend"]
    engine = backend.get("engine") or {}
    if backend["name"] == "vllm":
        return int(engine.get("tensor_parallel_size") or 1) + reward_gpus(cfg)
    if backend["name"] == "hf" and engine.get("device") == "cuda":
        return 1
    if backend["name"] == "served":  # a client: no engine, but a hub reward model loads in it
        return max(reward_gpus(cfg), int(hub_reward(cfg)))  # sharing the policy's GPU: it has none
    return 0


def hub_reward(cfg: dict) -> bool:
    """Whether the job's method scores with a hub reward model (scorer hf_reward) of its own."""
    return (((cfg.get("method") or {}).get("scorer") or {}).get("name") or "llm_judge") == "hf_reward"


def priced_gpus(cfg: dict) -> int:
    """GPUs whose time a job's work is priced in: its own (`gpus`), or for a client of `retrace
    serve` on vLLM (backend `served`, `server: vllm`), which asks for none itself, its server's
    (`tensor_parallel_size`; the server's hours are what the work costs)."""
    backend = cfg["backend"]
    engine = backend.get("engine") or {}
    if backend["name"] == "served" and engine.get("server") == "vllm":
        return int(engine.get("tensor_parallel_size") or 1) + gpus(cfg)
    return gpus(cfg)


def policy_gpus(cfg: dict) -> int:
    """GPUs the policy's decoding spreads over (its engine's, or a served client's server's,
    tensor parallelism); a reward model's own GPUs are not among them."""
    return max(1, int((cfg["backend"].get("engine") or {}).get("tensor_parallel_size") or 1))


def reward_gpus(cfg: dict) -> int:
    """GPUs a hub reward model takes beside the policy's (`method.scorer.gpus`; 0: it shares them)."""
    return int(((cfg.get("method") or {}).get("scorer") or {}).get("gpus") or 0)
