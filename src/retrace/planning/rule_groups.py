"""The generation jobs grouped into the workflow's rules, each with constant resources.

workflow/rules/generate.smk makes one rule per group: `generate_cell_<i>` for the cells' parts
(retrace.planning.parts) that run the same labels, `generate_shard_<i>` for the shard jobs of one
sharded label. A group's wildcard values (`datasets` × `seeds`) are exactly its jobs, and every
job of a group asks for the same threads and resources (GPUs, memory, runtime), so the rule
states them as constants: Snakemake evaluates a function resource once per job and resource,
a tenth of planning a paper-scale grid (benchmarks/planner_scale.py, issue 57). Jobs of one
label set that ask for different resources (a dataset of longer problems) fall in different
groups. The dataset stays a wildcard, not a constant of the paths: the cell rules' shell line
names it (`{wildcards.dataset}`), and a changed shell line reruns every finished job
(Snakemake's `code` rerun trigger).

    python -c "from retrace.planning import rule_groups; help(rule_groups)"
"""

from __future__ import annotations

from dataclasses import dataclass

from retrace.planning.cluster import capped, rule_resources
from retrace.planning.parts import PartBound, Sized
from retrace.planning.plan import by_seeds

Resources = tuple[tuple[str, int], ...]  # (name, value), sorted by name: hashable


class _Asks:
    """A group's `resources` by name."""

    resources: Resources

    def resource(self, name: str) -> int:
        return dict(self.resources)[name]


@dataclass(frozen=True)
class PartGroup(_Asks):
    """Parts that run the same labels: every (dataset, seed) of `datasets` × `seeds` on `model`
    and `backend` with the same `suffix` and `resources`, and no other, so one rule with exactly
    these wildcard values makes their generations, as retrace.planning.plan.ScoreGroup does."""

    model: str
    backend: str
    labels: tuple[str, ...]
    suffix: str
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    resources: Resources = ()


@dataclass(frozen=True)
class ShardGroup(_Asks):
    """The shard jobs of one sharded label on `model` and `backend`: `shards` each for every
    (dataset, seed) of `datasets` × `seeds`, all asking for `resources`."""

    model: str
    backend: str
    label: str
    shards: int
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    resources: Resources = ()


def part_resources(p: PartBound, max_runtime: int | None) -> dict[str, int]:
    """A part's job: the most any of its labels asks (threads, GPUs, memory); its runtime its
    labels' summed (PartBound.minutes), capped at the partition's limit."""
    each = [rule_resources(j, b, max_runtime) for j, b in zip(p.part.labels, p.labels, strict=True)]
    out = {k: max(r[k] for r in each) for k in ("threads", "gpu", "mem_mb")}
    return {**out, "runtime": capped(p.minutes(), max_runtime)}


def part_groups(parts: list[PartBound], max_runtime: int | None) -> list[PartGroup]:
    """The parts grouped for the workflow's rules (in plan order)."""
    items = []
    for p in parts:
        model, backend, dataset, seed = p.part.cell
        labels = tuple(j.label for j in p.part.labels)
        res = tuple(sorted(part_resources(p, max_runtime).items()))
        items.append(((model, backend, labels, p.part.suffix, res), dataset, seed))
    return [PartGroup(m, b, ls, x, ds, ss, r) for (m, b, ls, x, r), ds, ss in by_seeds(items)]


def shard_groups(s: Sized, max_runtime: int | None) -> list[ShardGroup]:
    """The sharded labels' shard jobs grouped for the workflow's rules (in plan order); a shard
    job asks for its label's bound over its share of the problems (JobBound.minutes)."""
    items = []
    for job, bound in s.shards:
        res = tuple(sorted(rule_resources(job, bound, max_runtime).items()))
        items.append(((job.model, job.backend, job.label, job.shards, res), job.dataset, job.seed))
    return [ShardGroup(m, b, label, k, ds, ss, r) for (m, b, label, k, r), ds, ss in by_seeds(items)]
