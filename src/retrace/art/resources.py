"""Cluster resources of ART's engine jobs (`art run`, `art select`), sized like the spine's.

    resources(cfg, "arithmetic", "art_sc")     # {"gpu": 0, "mem_mb": 4000, "runtime": 90, "threads": 2}

GPUs and memory come from the model on the ART block's backend (retrace.planning.cluster: vLLM's
tensor_parallel_size, hf on cuda 1, llama.cpp 0); the runtime from an upper bound of the tokens
the job generates, at the backend's stated throughput (retrace.planning.cluster.runtime_min: x 1.5 + 30
min; 60 min when the backend states none, as llama.cpp's configs do), so an ART experiment on
vLLM asks SLURM for its GPU and no job falls back to the profile's 30-minute default. The
workflow caps the runtime at the partition's (`capped`); a longer job resumes from the request
cache on retry. Threads are the engine's CPU threads (`n_threads`, as the spine's generate
jobs ask; 2 when the backend states none), so a job on the simulated engine (one Python
thread) leaves the other core to a second job.

Tokens per question (art/runner.py, art/baselines.py; the block's `settings`):
    fewshot          answer_tokens
    autocot          cot_tokens, plus autocot_k zero-shot chains of cot_tokens once per job
    art, art@v       a program in pause mode: max_rounds segments of segment_tokens, plus a
                     code_generate call of its max_tokens at each of max_steps steps
    art_regenerate   max_rounds programs of program_tokens, plus the code_generate calls
    art_notools      one program of program_tokens
    art_sc           sc_k programs in pause mode
A run job is `examples` questions (a task with fewer has fewer: an upper bound); a selection
job runs ART on cluster_examples questions of each library task.
"""

from __future__ import annotations

# The code_generate tool's default budget (tools/code.py), when the block sets none.
CODE_GENERATE_TOKENS = 192


def _rounds(s: dict) -> int:
    return 2 * int(s["max_steps"]) + 2  # ProgramRunner's default max_rounds


def _code_tokens(cfg: dict) -> int:
    tools = cfg.get("tools") or {}
    per_call = int((tools.get("code_generate") or {}).get("max_tokens", CODE_GENERATE_TOKENS))
    return int(cfg["settings"]["max_steps"]) * per_call


def question_tokens(cfg: dict, method: str) -> int:
    """Upper bound of the tokens one question of `method` generates (the table above)."""
    s = cfg["settings"]
    pause = _rounds(s) * int(s["segment_tokens"]) + _code_tokens(cfg)
    per = {
        "fewshot": int(s["answer_tokens"]),
        "autocot": int(s["cot_tokens"]),
        "art": pause,
        "art_regenerate": _rounds(s) * int(s["program_tokens"]) + _code_tokens(cfg),
        "art_notools": int(s["program_tokens"]),
        "art_sc": int(s["sc_k"]) * pause,
    }
    if method not in per:
        raise ValueError(f"art: no token bound for method {method!r}; known: {', '.join(per)}")
    return per[method]


def job_tokens(cfg: dict, method: str) -> int:
    """Upper bound of an `art run` job's generated tokens."""
    fixed = (
        int(cfg["settings"]["autocot_k"]) * int(cfg["settings"]["cot_tokens"]) if method == "autocot" else 0
    )
    return int(cfg["examples"]) * question_tokens(cfg, method) + fixed


def select_tokens(cfg: dict) -> int:
    """Upper bound of an `art select` job's: ART in pause mode on cluster_examples questions of
    every library task."""
    tasks = len((cfg.get("tasks") or {}).get("library") or [])
    return tasks * int(cfg["settings"]["cluster_examples"]) * question_tokens(cfg, "art")


def resources(cfg: dict, model: str, label: str | None = None) -> dict:
    """{gpu, mem_mb, runtime, threads} of an `art run` job of `label` (a method, or method@version), or of
    an `art select` job when `label` is None, for `model` on the block's backend."""
    from retrace.config.compose import compose
    from retrace.planning import cluster

    engine = [o for o in cfg.get("overrides") or () if o.startswith(("backend.", "model."))]
    job = compose({"model": model, "backend": cfg["backend"]}, engine)
    tokens = select_tokens(cfg) if label is None else job_tokens(cfg, label.split("@")[0])
    return {
        "gpu": cluster.gpus(job),
        "mem_mb": cluster.mem_mb(job),
        "runtime": cluster.runtime_min(job, tokens),
        "threads": cluster.threads(job),
    }
