"""Generation cells: which labels of a model × backend × dataset × seed share one engine.

A cell's generation job (retrace.stages.generate_cell) runs every label of the cell that is
not split into data-parallel shards, one after another, on one engine per distinct engine
configuration (most cells: one), so depth-0 samples the labels share are generated once (the
request cache serves them to every later label) and the model is loaded once. A label with
`shards: K` keeps its K shard jobs (rule generate_shard), each with its own engine: its
equal-compute N' needs its partners' complete outputs, so it cannot be split across the cell.

`engine_loads(jobs)` counts the engines a plan loads as configured (`retrace plan` prints it):
cell engines, LLM judges on another model, shard jobs; a `served` cell loads none (its
engines are the servers started for it, one per GPU: docs/guides/slurm.md). Each retry of a
job after a time limit or a preemption loads its engine again: this is the least.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from retrace.hashing import sha256_json
from retrace.plan import Job, job_config, job_rerun_key

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
    """What one engine must have to serve a label: the composed backend config (engine
    settings included: a label that asks for another memory share gets its own engine) and,
    for the simulated engine, the label (its answers are planted per label)."""
    backend = dict(job_config(job)["backend"])
    extra = job.label if backend["name"] == "simulated" else ""
    return sha256_json({"backend": backend, "label": extra})


def judge_models(cell: tuple[Job, ...]) -> list[str]:
    """LLM judges on another model than the policy that the cell's labels use (one engine each)."""
    from retrace.stages.generate import scorer_model

    return list(dict.fromkeys(m for j in cell if (m := scorer_model(job_config(j)))))


@dataclass(frozen=True)
class EngineLoads:
    """Engines a plan loads as configured (each retry loads again: this is the least)."""

    cell_jobs: int  # generation jobs that run cells
    cell_engines: int  # policy engines of those (one per distinct engine configuration)
    judges: int  # LLM judges on another model, one per cell job that uses each
    shard_jobs: int  # data-parallel shard jobs, an engine each
    served_cells: int  # cells of `served` runs: their engines are the servers

    @property
    def total(self) -> int:
        return self.cell_engines + self.judges + self.shard_jobs

    def line(self) -> str:
        served = (
            f"; {self.served_cells} cells on `served` engines load none (one load per server you start)"
            if self.served_cells
            else ""
        )
        return (
            f"engine loads: {self.total} ({self.cell_jobs} cell jobs with {self.cell_engines} engines, "
            f"{self.judges} judge engines, {self.shard_jobs} shard jobs{served}; each retry loads again)"
        )


def engine_loads(jobs: list[Job]) -> EngineLoads:
    cells = generation_cells(jobs)
    served = {c for c in cells if c[1] == "served"} | {cell_of(j) for j in jobs if j.backend == "served"}
    engines = judges = 0
    for c, cell in cells.items():
        if c in served:
            continue
        engines += len({engine_identity(j) for j in cell})
        judges += len(judge_models(cell))
    shard_jobs = sum(j.shards for j in jobs if j.shards > 1 and j.backend != "served")
    return EngineLoads(len(cells) - len(served & set(cells)), engines, judges, shard_jobs, len(served))


def cell_generate_key(cell: tuple[Job, ...]) -> str:
    """Rerun key of a cell job: its labels' generate keys in run order, and the driver's code;
    a changed label reruns the cell job, whose unchanged labels the request cache serves."""
    return sha256_json(
        {"generate": [(j.label, job_rerun_key("generate", j)) for j in cell], "driver": _driver_hash()}
    )


@functools.cache
def _driver_hash() -> str:
    from retrace import closure
    from retrace.hashing import hash_sources

    files = [closure.module_file(m) for m in ("retrace.stages.generate_cell", "retrace.cells")]
    return hash_sources([f for f in files if f is not None])


@dataclass(frozen=True)
class GenerateGroup:
    """Cells whose cell jobs run the same labels: every (dataset, seed) of `datasets` × `seeds`
    on `model` and `backend`, and no other cell, so one rule with exactly these wildcard values
    makes their generations (workflow/rules/generate.smk), as retrace.plan.ScoreGroup does."""

    model: str
    backend: str
    labels: tuple[str, ...]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]


def generation_groups(jobs: list[Job]) -> list[GenerateGroup]:
    """The plan's cell jobs grouped for the workflow's rules (in plan order)."""
    seeds: dict[tuple, list[int]] = {}
    for (model, backend, dataset, seed), cell in generation_cells(jobs).items():
        seeds.setdefault((model, backend, dataset, tuple(j.label for j in cell)), []).append(seed)
    groups: dict[tuple, list[str]] = {}
    for (model, backend, dataset, labels), found in seeds.items():
        groups.setdefault((model, backend, labels, tuple(found)), []).append(dataset)
    return [GenerateGroup(m, b, labels, tuple(ds), ss) for (m, b, labels, ss), ds in groups.items()]


def sharded_labels(jobs: list[Job]) -> tuple[str, ...]:
    """Labels whose generations are merged from shard jobs (rule generate) in some cell; in a cell
    where such a label is not split, its cell job makes it (the workflow's ruleorder)."""
    return tuple(dict.fromkeys(j.label for j in jobs if j.shards > 1))
