"""Generation cells: which labels of a model × backend × dataset × seed share one engine.

A cell's generation jobs (retrace.stages.generate_cell) run every label of the cell that is
not split into data-parallel shards, one after another, on one policy engine (labels that
differ only in speed or memory settings share it: `engine_identity`, `shared_memory`) and one
engine per LLM judge on another model, so depth-0 samples the labels share are generated once
(the request cache serves them to every later label) and the model is loaded once a job. A
cell whose labels together need more attempts than a job may take at the partition limit is
cut into consecutive parts, one job each (retrace.planning.parts). A label with `shards: K` keeps its K
shard jobs (rules generate_shard_<i>), each with its own engine: its equal-compute N' needs its
partners' complete outputs, so it cannot be split across the cell.
"""

from __future__ import annotations

import functools

from retrace.planning.plan import Job, job_config, job_rerun_key, merged_in_score
from retrace.util.hashing import sha256_json

Cell = tuple[str, str, str, int]  # model, backend, dataset, seed


def cell_of(job: Job) -> Cell:
    return (job.model, job.backend, job.dataset, job.seed)


def generation_cells(jobs: list[Job]) -> dict[Cell, tuple[Job, ...]]:
    """Each cell's labels run by its cell job (every unsharded label), in plan order; a cell
    whose labels are all sharded has none."""
    out: dict[Cell, list[Job]] = {}
    for j in jobs:
        if j.shards == 1:
            out.setdefault(cell_of(j), []).append(j)
    return {c: run_order(tuple(js)) for c, js in out.items()}


def run_order(cell: tuple[Job, ...]) -> tuple[Job, ...]:
    """The labels in the order a cell job runs them: equal-compute labels after the rest
    (their N' is priced from their partners' outputs), otherwise in plan order."""
    return tuple(j for j in cell if not j.equal_compute) + tuple(j for j in cell if j.equal_compute)


def engine_identity(job: Job) -> str:
    """What one engine must have to serve a label: the composed backend config less the
    settings that only change speed or memory (the backend's `capacity_settings`: a label that
    asks for a smaller memory share runs on the shared engine, which takes the smallest:
    `shared_memory`) and, for the simulated engine, the label (its answers are planted per label)."""
    from retrace.util.registry import BACKENDS

    backend = dict(job_config(job)["backend"])
    speed = BACKENDS.get(backend["name"]).capacity_settings
    backend["engine"] = {k: v for k, v in (backend.get("engine") or {}).items() if k not in speed}
    extra = job.label if backend["name"] == "simulated" else ""
    return sha256_json({"backend": backend, "label": extra})


def shared_memory(labels: tuple[Job, ...]) -> dict:
    """The memory share of one engine that serves `labels` (one engine identity): the smallest
    each of the backend's `memory_settings` any label asks, so a label that keeps memory free
    for a co-resident model (best-of-N's reward model) still finds it free."""
    from retrace.util.registry import BACKENDS

    engines = [job_config(j)["backend"].get("engine") or {} for j in labels]
    out = {}
    for key in BACKENDS.get(job_config(labels[0])["backend"]["name"]).memory_settings:
        asked = [e[key] for e in engines if e.get(key) is not None]
        if asked:
            out[key] = min(asked)
    return out


def scorer_model(cfg: dict) -> str | None:
    """The judge model of a method whose scorer runs on another model than the job's, else None."""
    scorer = cfg["method"].get("scorer") or {}
    wanted = scorer.get("model")
    if scorer.get("name") != "llm_judge" or wanted in (None, cfg["model"]["name"]):  # no block: no model
        return None
    return wanted


def judge_models(cell: tuple[Job, ...]) -> list[str]:
    """LLM judges on another model than the policy that the cell's labels use (one engine each)."""
    return list(dict.fromkeys(m for j in cell if (m := scorer_model(job_config(j)))))


def cell_generate_key(cell: tuple[Job, ...]) -> str:
    """Rerun key of a cell job (or part): its labels' generate keys in run order, and the
    driver's code; a changed label reruns its job, whose unchanged labels the request cache serves."""
    return sha256_json(
        {"generate": [(j.label, job_rerun_key("generate", j)) for j in cell], "driver": _driver_hash()}
    )


@functools.cache
def _driver_hash() -> str:
    from retrace.planning import closure
    from retrace.util.hashing import hash_sources

    files = [closure.module_file(m) for m in ("retrace.stages.generate_cell", "retrace.planning.cells")]
    return hash_sources([f for f in files if f is not None])


def score_merged(jobs: list[Job]) -> list[Job]:
    """The sharded jobs whose shards their cell's score job merges (retrace.planning.plan.merged_in_score)."""
    cells: dict[Cell, list[Job]] = {}
    for j in jobs:
        cells.setdefault(cell_of(j), []).append(j)
    merged = {j for cell in cells.values() for j in merged_in_score(cell)}
    return [j for j in jobs if j in merged]


def merge_jobs(jobs: list[Job]) -> list[Job]:
    """The sharded jobs whose shards rule generate merges: Maj@N' partners, whose merged
    generations another job of their cell reads; the score job merges every other's."""
    by_score = set(score_merged(jobs))
    return [j for j in jobs if j.shards > 1 and j not in by_score]


def merged_labels(jobs: list[Job]) -> tuple[str, ...]:
    """Labels of merge_jobs (rule generate's); where such a label is not split, or its score job
    merges it, the cell's job or score job makes its generations (the workflow's ruleorder)."""
    return tuple(dict.fromkeys(j.label for j in merge_jobs(jobs)))
