"""Cell parts: a cell's labels cut into generation jobs that each fit the partition's limit.

    retrace plan --experiment paper --estimate          # the parts, their attempts, engine loads
    retrace plan --experiment paper --estimate --json - # one entry per part and shard job
    retrace plan --experiment paper --check             # a label too long for any part fails

A cell job (retrace.planning.cells) runs its labels one after another on one engine, so it needs the
sum of their runtimes (retrace.planning.sizing's bounds). A job may run `Limit.minutes` at a time and
`Limit.attempts` times (the SLURM profile's retries + 1), each attempt loading its engines
again and resuming from the request cache. `split` cuts a cell's labels, in run order
(retrace.planning.cells.run_order: equal-compute labels after their partners), into consecutive parts
that each need at most `Limit.per_part()` attempts (one retry kept for faults) at the stated
rates (a probe result prices the parts, never moves a label: the DAG stays one), labels that need
different numbers of GPUs in different parts (`by_gpus`); a label too
long for that is a part by itself, and `retrace plan --check` fails naming it (give it
`shards:`). Without a limit a cell is one part. Each part is one job (rules generate_cell_<i>,
workflow/rules/generate.smk; `generate-cell --labels`): a Maj@N' label whose partners are in an
earlier part reads their generations as inputs.

`sized` prices what the workflow runs: each part as a unit (its labels' bounds summed, its
engines loaded once an attempt), each sharded label's shard jobs (retrace.planning.sizing), and
`engine_loads` counts the loads as sized: Σ engines × attempts over the parts and shard jobs,
against the least any design needs at this limit (its engine-hours of work over the limit).
A label's work is its bound's runtime less the per-attempt overhead (retrace.planning.sizing.SAFETY
included); a label of unknown size (no mirror) counts as the default runtime.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from retrace.planning.cells import Cell, cell_of, engine_identity, generation_cells, judge_models
from retrace.planning.cluster import DEFAULT_RUNTIME_MIN, Limit
from retrace.planning.plan import Job
from retrace.planning.sizing import ENGINE_LOAD_S, RUNTIME_OVERHEAD_MIN, Bound, JobBound, job_bounds


def capacity(limit: Limit) -> int | None:
    """Work minutes one part may hold: its attempts × what each has after loading (None: no
    limit, or one no attempt gets past loading at, where parts cannot help: `--check` fails
    every job, "raise max_runtime", and cells stay whole)."""
    if not limit.minutes or limit.minutes <= RUNTIME_OVERHEAD_MIN:
        return None
    return limit.per_part() * max(1, limit.minutes - RUNTIME_OVERHEAD_MIN)


def split(work: list[int], limit: Limit) -> list[range]:
    """Consecutive ranges of `work` (minutes per label, in run order), each within `capacity`;
    an item over it is a range by itself."""
    cap = capacity(limit)
    if cap is None or not work:
        return [range(len(work))] if work else []
    out, start, used = [], 0, 0
    for i, minutes in enumerate(work):
        if i > start and used + minutes > cap:
            out.append(range(start, i))
            start, used = i, 0
        used += minutes
    return out + [range(start, len(work))]


def attempts(work_min: int, limit: Limit) -> int:
    """Attempts of at most `limit.minutes` a job of `work_min` minutes' work needs (as JobBound)."""
    if not limit.minutes or work_min + RUNTIME_OVERHEAD_MIN <= limit.minutes:
        return 1
    return math.ceil(work_min / max(1, limit.minutes - RUNTIME_OVERHEAD_MIN))


def work_minutes(b: JobBound) -> int:
    """A label's runtime less the per-attempt overhead (unknown size: the default runtime's)."""
    minutes = b.minutes()
    return (minutes if minutes is not None else DEFAULT_RUNTIME_MIN) - RUNTIME_OVERHEAD_MIN


@dataclass(frozen=True)
class Part:
    """Consecutive labels of one cell, run by one job: `index` of `count` parts."""

    cell: Cell
    index: int
    count: int
    labels: tuple[Job, ...]

    @property
    def suffix(self) -> str:
        """What tells the cell's parts apart in log and benchmark paths ("" for a whole cell)."""
        return f".part{self.index}" if self.count > 1 else ""

    @property
    def path(self) -> str:
        model, backend, dataset, seed = self.cell
        return f"{model}/{backend}/{dataset}/seed{seed}{self.suffix}"

    def engines(self) -> int:
        return engines(self.labels)


@functools.cache
def engines(labels: tuple[Job, ...]) -> int:
    """Engines a job running `labels` loads each attempt: its policy engines (one per engine
    identity) and its LLM judges on another model."""
    return len({engine_identity(j) for j in labels}) + len(judge_models(labels))


@dataclass
class PartBound:
    """A part's bound: its labels' bounds summed, run on one job's GPUs."""

    part: Part
    labels: list[JobBound]

    @property
    def gpus(self) -> int:
        return max(b.gpus for b in self.labels)

    @property
    def known(self) -> bool:
        return all(b.known and b.work_s is not None for b in self.labels)

    @property
    def work_s(self) -> float:
        return sum(b.work_s or 0.0 for b in self.labels)

    def work_min(self) -> int:
        return sum(work_minutes(b) for b in self.labels)

    def minutes(self) -> int:
        """The runtime the part asks for in one attempt with no limit."""
        return self.work_min() + RUNTIME_OVERHEAD_MIN

    def attempts(self, limit: Limit) -> int:
        return attempts(self.work_min(), limit)

    def loads(self, limit: Limit) -> int:
        return self.part.engines() * self.attempts(limit)

    def wall_seconds(self, limit: Limit) -> float:
        load = ENGINE_LOAD_S if self.gpus else 0.0
        return self.work_s + load * self.loads(limit)

    def gpu_seconds(self, limit: Limit) -> float:
        return self.wall_seconds(limit) * self.gpus

    def tokens(self) -> Bound:
        out = Bound()
        for b in self.labels:
            for k, v in vars(b.tokens).items():
                setattr(out, k, getattr(out, k) + v)
        return out

    def as_dict(self, limit: Limit) -> dict:
        return {
            "job": self.part.path,
            "rule": "generate_cell",
            "labels": [j.label for j in self.part.labels],
            "gpus": self.gpus,
            **{f"{k}_tokens": v for k, v in vars(self.tokens()).items() if k != "calls"},
            "calls": self.tokens().calls,
            "size_known": self.known,
            "gpu_seconds": self.gpu_seconds(limit),
            "wall_seconds": self.wall_seconds(limit),
            "runtime_min": self.minutes(),
            "attempts": self.attempts(limit),
            "engines": self.part.engines(),
            "rates": sorted({b.rates for b in self.labels}),
        }


@dataclass
class Sized:
    """An experiment's generation as the workflow runs it, at `limit`."""

    limit: Limit
    labels: list[JobBound]  # every label's own bound (retrace.planning.sizing), in plan order
    parts: list[PartBound]  # the cells' parts, in plan order
    shards: list[tuple[Job, JobBound]]  # each sharded label: its shard jobs' bound
    probe_dir: Path | None = None  # where the rates were read (retrace.planning.sizing.rates)


def sized(
    jobs: list[Job],
    mirror: str | None,
    dso: tuple = (),
    probe_dir: Path | None = None,
    limit: Limit | None = None,
) -> Sized:
    """The cells' parts and the shard jobs of `jobs`, with their bounds, at `limit` (None: none)."""
    limit = limit or Limit()
    bounds = job_bounds(jobs, mirror, dso, probe_dir)
    by_path = {b.path: b for b in bounds}
    # the cut at the stated rates, whatever the probe (or a pilot) measured: the probe stage writes
    # its result during a run, and a job's own Snakemake (on a SLURM node) must find the DAG it
    # was given; a pilot's rates price the parts as the probe's do (retrace.planning.rates)
    measured = any(b.rates.startswith("measured") for b in bounds)  # else: the stated ones already
    stated = {b.path: b for b in job_bounds(jobs, mirror, dso, None)} if measured else by_path
    parts = []
    for cell, labels in generation_cells(jobs).items():
        mine = [by_path[j.path] for j in labels]
        ranges = by_gpus([stated[j.path] for j in labels], limit)
        for k, r in enumerate(ranges):
            part = Part(cell, k, len(ranges), tuple(labels[i] for i in r))
            parts.append(PartBound(part, [mine[i] for i in r]))
    shards = [(j, b) for j, b in zip(jobs, bounds, strict=True) if j.shards > 1]
    return Sized(limit, bounds, parts, shards, probe_dir)


def by_gpus(bounds: list[JobBound], limit: Limit) -> list[list[int]]:
    """A cell's labels (indices, run order kept within each) cut into parts: first by the GPUs
    each label needs, then by `split`. A job holds its GPUs for its whole run, so a 3-GPU label
    (a policy beside a reward model on two GPUs) in a part with 1-GPU labels would idle two GPUs
    through theirs; one more engine load costs minutes, that costs hours."""
    out = []
    for gpus in dict.fromkeys(b.gpus for b in bounds):  # in order of first appearance
        mine = [i for i, b in enumerate(bounds) if b.gpus == gpus]
        out += [[mine[k] for k in r] for r in split([work_minutes(bounds[i]) for i in mine], limit)]
    return out


def shard_loads(job: Job, b: JobBound, limit: Limit) -> int:
    """Loads of a sharded label's shard jobs: each loads its engine (and judges) every attempt."""
    return job.shards * b.attempts(limit.minutes) * engines((job,))


@dataclass(frozen=True)
class EngineLoads:
    """Engines a plan loads as sized (every attempt loads again) and the least any design needs."""

    parts: int  # cell parts (jobs)
    part_loads: int  # their engines × attempts
    shard_jobs: int
    shard_loads: int
    served_cells: int  # cells of `served` runs: their engines are the servers
    engine_hours: float  # work of the loading jobs (bound, loads left out)
    limit: int | None  # minutes a load may run
    per_label: int = 0  # the loads of one job per unsharded label instead (the design before cells)

    @property
    def total(self) -> int:
        return self.part_loads + self.shard_loads

    @property
    def floor(self) -> int | None:
        """The fewest loads that hold `engine_hours` when none runs past the limit."""
        return math.ceil(self.engine_hours * 60 / self.limit) if self.limit else None

    def line(self) -> str:
        served = (
            f"; {self.served_cells} cells on `served` engines load none (one load per server you start)"
            if self.served_cells
            else ""
        )
        at = f"at the {self.limit:,}-min limit " if self.limit else ""
        floor = ""
        if self.limit and self.floor is not None:
            floor = (
                f"; least possible at this limit: {self.floor:,} ({self.engine_hours:,.0f} engine-hours of "
                f"work / {self.limit / 60:g} h)"
            )
        return (
            f"engine loads: {self.total:,} as sized ({self.parts} cell jobs load {self.part_loads:,} times, "
            f"{self.shard_jobs} shard jobs {self.shard_loads:,} times; every attempt {at}loads again{served})"
            + floor
        )

    def per_label_line(self) -> str:
        return f"engine loads with one job per label: {self.per_label + self.shard_loads:,}"


def engine_loads(s: Sized) -> EngineLoads:
    """Σ engines × attempts over the parts and shard jobs of `s`; `served` cells load none."""
    served = {cell_of(j) for j, _ in s.shards if j.backend == "served"}
    served |= {p.part.cell for p in s.parts if p.part.cell[1] == "served"}
    parts = [p for p in s.parts if p.part.cell not in served]
    shards = [(j, b) for j, b in s.shards if j.backend != "served"]
    hours = (sum(p.work_s for p in parts) + sum(b.work_s or 0.0 for _, b in shards)) / 3600
    return EngineLoads(
        len(parts),
        sum(p.loads(s.limit) for p in parts),
        sum(j.shards for j, _ in shards),
        sum(shard_loads(j, b, s.limit) for j, b in shards),
        len(served),
        hours,
        s.limit.minutes,
        sum(
            attempts(work_minutes(b), s.limit) * engines((j,))
            for p in parts
            for j, b in zip(p.part.labels, p.labels)
        ),
    )
