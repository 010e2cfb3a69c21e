"""retrace.planning.rule_groups: generation jobs grouped into rules whose wildcard values are
exactly their jobs and whose resources are constants every job of the rule asks for."""

from __future__ import annotations

import dataclasses

from retrace.planning import parts, rule_groups
from retrace.planning.cluster import rule_resources
from retrace.planning.plan import Job
from retrace.planning.sizing import SAFETY, Bound, JobBound

DAY = parts.Limit(1440, 4)


def job(label: str, dataset: str, seed: int, shards: int = 1) -> Job:
    return Job(
        "qwen2.5-1.5b-instruct",
        "vllm",
        dataset,
        label,
        "greedy",
        seed,
        ("method.sampling.max_tokens=64",),
        (),
        shards,
    )


def bound(j: Job, work_min: int) -> JobBound:
    rule = "generate_shard" if j.shards > 1 else "generate"
    return JobBound(
        j.path, rule, 1, Bound(generated=work_min), work_s=work_min * 60 / SAFETY, shards=j.shards
    )


def part(labels: list[Job], minutes: list[int]) -> parts.PartBound:
    first = labels[0]
    cell = (first.model, first.backend, first.dataset, first.seed)
    return parts.PartBound(
        parts.Part(cell, 0, 1, tuple(labels)), [bound(j, m) for j, m in zip(labels, minutes)]
    )


def covered(groups: list) -> list[tuple[str, int]]:
    return sorted((d, s) for g in groups for d in g.datasets for s in g.seeds)


def test_parts_that_ask_for_other_runtimes_get_rules_of_their_own_and_each_job_one_rule():
    # math500, amc23 and gsm8k ask alike (100 + 50 min of work); aime24's labels are longer
    ps = [
        part([job("a", d, s), job("b", d, s)], [100, 50])
        for d in ("math500", "amc23", "gsm8k")
        for s in (0, 1)
    ]
    ps += [part([job("a", "aime24", s), job("b", "aime24", s)], [400, 200]) for s in (0, 1)]
    ps.append(part([job("a", "gsm8k", 2), job("b", "gsm8k", 2)], [100, 50]))  # a seed only gsm8k has
    groups = rule_groups.part_groups(ps, 1440)
    # every (dataset, seed) in exactly one group: datasets x seeds is exactly the group's parts
    assert covered(groups) == sorted(p.part.cell[2:] for p in ps)
    by_cell = {(d, s): g for g in groups for d in g.datasets for s in g.seeds}
    for p in ps:
        g = by_cell[p.part.cell[2:]]
        assert dict(g.resources) == rule_groups.part_resources(p, 1440)
    # alike datasets with the same seeds share a rule; gsm8k's third seed gives it its own
    assert sorted(g.datasets for g in groups) == [("aime24",), ("gsm8k",), ("math500", "amc23")]
    # the runtime is the labels' summed work plus one attempt's overhead, capped at the limit
    assert (
        by_cell[("aime24", 0)].resource("runtime")
        == ps[6].minutes()
        > by_cell[("math500", 0)].resource("runtime")
    )
    assert rule_groups.part_resources(ps[6], 300)["runtime"] == 300 < ps[6].minutes()


def test_a_part_asks_for_the_most_any_label_asks():
    small, big = job("a", "math500", 0), job("b", "math500", 0)
    big = dataclasses.replace(big, overrides=("backend.engine.n_threads=6",))
    p = part([small, big], [10, 10])
    res = rule_groups.part_resources(p, None)
    assert (
        res["threads"]
        == 6
        == max(rule_resources(j, b, None)["threads"] for j, b in zip(p.part.labels, p.labels))
    )
    assert res["runtime"] == p.minutes()


def test_shard_jobs_are_grouped_by_label_and_resources_and_cover_each_job_once():
    sharded = [job("maj", d, s, shards=3) for d in ("math500", "aime24") for s in (0, 1)]
    minutes = {"math500": 300, "aime24": 900}
    s = parts.Sized(DAY, [], [], [(j, bound(j, minutes[j.dataset])) for j in sharded])
    groups = rule_groups.shard_groups(s, 1440)
    assert len(groups) == 2 and all(g.shards == 3 and g.label == "maj" for g in groups)
    assert covered(groups) == sorted((j.dataset, j.seed) for j in sharded)
    # a shard asks for its share of the label's work (a third), not the whole label's
    runtime = {g.datasets: g.resource("runtime") for g in groups}
    assert runtime[("aime24",)] == bound(sharded[2], 900).minutes() < 900
