"""retrace.planning.parts: cells cut into jobs that fit the partition limit, sized as units, and the
engine loads they cost (pure planning: bounds from configuration, no engine runs)."""

from __future__ import annotations

import math

import pytest

from retrace.planning import cluster, parts, rule_groups
from retrace.planning.cells import engine_identity, generation_cells, shared_memory
from retrace.planning.cluster import Limit
from retrace.planning.plan import Job, jobs
from retrace.planning.sizing import ENGINE_LOAD_S, RUNTIME_OVERHEAD_MIN, SAFETY, Bound, JobBound
from tests import prerequisites

DAY = Limit(1440, 4)  # the shipped config's max_runtime and profiles/slurm's retries: 3
USEFUL = 1440 - RUNTIME_OVERHEAD_MIN  # what an attempt has after loading its engine


def test_parts_keep_the_order_and_each_fits_its_attempts_less_one():
    # three attempts a part (one of the four kept for faults) of USEFUL minutes each
    work = [USEFUL, USEFUL, USEFUL, 10, USEFUL * 2, 5]
    found = [list(r) for r in parts.split(work, DAY)]
    assert found == [[0, 1, 2], [3, 4, 5]]
    assert all(sum(work[i] for i in r) <= 3 * USEFUL for r in found)
    assert [i for r in found for i in r] == list(range(len(work)))  # run order kept


def test_a_label_too_long_for_any_part_is_a_part_alone():
    work = [100, 4 * USEFUL, 100]
    assert [list(r) for r in parts.split(work, DAY)] == [[0], [1], [2]]
    assert parts.attempts(4 * USEFUL, DAY) == 4 > DAY.per_part()


def test_without_a_limit_a_cell_is_one_part_and_a_single_attempt_allows_one():
    assert [list(r) for r in parts.split([10**6, 10**6], Limit())] == [[0, 1]]
    # a limit no attempt gets past loading at: parts cannot help (--check fails every job)
    assert [list(r) for r in parts.split([10, 10], Limit(RUNTIME_OVERHEAD_MIN, 4))] == [[0, 1]]
    assert parts.split([], DAY) == []
    once = Limit(1440, 1)  # retries: 0: nothing to keep for faults, a part takes one attempt
    assert once.per_part() == 1
    assert [list(r) for r in parts.split([USEFUL // 2, USEFUL // 2, 1], once)] == [[0, 1], [2]]


def test_the_limit_comes_from_max_runtime_and_the_profiles_retries(tmp_path):
    (tmp_path / "config.yaml").write_text("retries: 3\n")
    assert cluster.limit({"max_runtime": 1440}, tmp_path) == DAY
    # max_runtime: null (local runs): no limit, so one part a cell and nothing over it
    assert cluster.limit({"max_runtime": None}, tmp_path) == Limit(None, 4)
    assert cluster.runtime_check({"experiment": "paper", "max_runtime": None}, tmp_path) == []


def vllm(label: str, method: str = "greedy", *over: str, eq: tuple = ()) -> Job:
    return Job(
        "qwen2.5-1.5b-instruct",
        "vllm",
        "math500",
        label,
        method,
        0,
        ("method.sampling.max_tokens=64", *over),
        eq,
    )


def bound(job: Job, work_min: int) -> JobBound:
    """A label whose runtime is `work_min` minutes of work plus the attempt's overhead."""
    return JobBound(job.path, "generate", 1, Bound(generated=work_min), work_s=work_min * 60 / SAFETY)


def test_labels_that_need_other_gpu_counts_run_in_parts_of_their_own():
    # a 3-GPU label among 1-GPU ones: the job would hold 3 GPUs through every label's run
    labels = [vllm(x) for x in ("greedy", "majority", "best_of_n", "beam")]
    bounds = [bound(j, 60) for j in labels]
    bounds[2] = JobBound(labels[2].path, "generate", 3, Bound(generated=60), work_s=3600 / SAFETY)
    assert parts.by_gpus(bounds, DAY) == [[0, 1, 3], [2]]  # run order kept within each
    assert parts.by_gpus(bounds, Limit()) == [[0, 1, 3], [2]]  # with no limit too
    # and each GPU count's labels are then cut by time as any cell's
    long = [bound(j, USEFUL * 2) for j in labels]
    assert parts.by_gpus(long, DAY) == [[0], [1], [2], [3]]


def test_a_cell_job_is_bounded_by_the_sum_of_its_labels():
    a, b = vllm("a"), vllm("b")
    part = parts.PartBound(parts.Part(("m", "vllm", "d", 0), 0, 1, (a, b)), [bound(a, 2000), bound(b, 3000)])
    assert part.minutes() == 2000 + 3000 + RUNTIME_OVERHEAD_MIN
    assert part.attempts(DAY) == math.ceil(5000 / USEFUL) == 4  # each label alone needs 2, 3
    assert part.tokens().generated == 5000
    assert part.loads(DAY) == 4  # one engine, loaded every attempt
    assert part.wall_seconds(DAY) == pytest.approx(5000 * 60 / SAFETY + 4 * ENGINE_LOAD_S)


def test_labels_that_differ_in_memory_share_only_share_one_engine_at_the_smallest():
    greedy = vllm("greedy")
    rm = vllm("best_of_n", "greedy", "backend.engine.gpu_memory_utilization=0.6")
    longer = vllm("long", "greedy", "backend.engine.max_model_len=32768")
    assert engine_identity(greedy) == engine_identity(rm) != engine_identity(longer)
    assert shared_memory((greedy, rm)) == shared_memory((rm, greedy)) == {"gpu_memory_utilization": 0.6}
    assert parts.engines((greedy, rm)) == 1 and parts.engines((greedy, rm, longer)) == 2


def test_engine_loads_count_every_attempt_and_the_floor_at_the_limit():
    a, b, c = vllm("a"), vllm("b"), vllm("c")
    cell = ("qwen2.5-1.5b-instruct", "vllm", "math500", 0)
    two = parts.PartBound(parts.Part(cell, 0, 2, (a, b)), [bound(a, 2000), bound(b, 2000)])
    one = parts.PartBound(parts.Part(cell, 1, 2, (c,)), [bound(c, 100)])
    shard_job = Job(*cell[:3], "d", "greedy", 0, (), (), 5)
    shard = JobBound(shard_job.path, "generate_shard", 1, Bound(), work_s=5 * 2000 * 60 / SAFETY, shards=5)
    s = parts.Sized(DAY, [], [two, one], [(shard_job, shard)])
    loads = parts.engine_loads(s)
    assert (two.attempts(DAY), one.attempts(DAY), shard.attempts(1440)) == (3, 1, 2)
    assert loads.total == 3 + 1 + 5 * 2
    hours = (4100 + 10_000) * 60 / SAFETY / 3600
    assert loads.engine_hours == pytest.approx(hours) and loads.floor == math.ceil(hours / 24)
    assert loads.line().startswith(
        "engine loads: 14 as sized (2 cell jobs load 4 times, 5 shard jobs 10 times"
    )
    assert loads.line().endswith(
        f"least possible at this limit: {loads.floor} ({hours:,.0f} engine-hours of work / 24 h)"
    )


def test_paper_cells_are_cut_in_run_order_with_partners_first_and_one_engine_a_part():
    mirror = str(prerequisites.mirror())  # the paper's question counts and prompt lengths
    planned = jobs({"experiment": "paper"})
    s = parts.sized(planned, mirror, limit=DAY)
    by_cell: dict = {}
    for p in s.parts:
        by_cell.setdefault(p.part.cell, []).append(p)
    cells = generation_cells(planned)
    assert set(by_cell) == set(cells) and any(len(ps) > 1 for ps in by_cell.values())
    for cell, ps in by_cell.items():
        order = list(cells[cell])
        # every label once; run order within each part; one GPU count a part (by_gpus)
        assert sorted(order.index(j) for p in ps for j in p.part.labels) == list(range(len(order)))
        assert all(
            [order.index(j) for j in p.part.labels] == sorted(order.index(j) for j in p.part.labels)
            for p in ps
        )
        assert all(len({b.gpus for b in p.labels}) == 1 for p in ps)
        assert [p.part.index for p in ps] == list(range(len(ps)))
        where = {j.label: p.part.index for p in ps for j in p.part.labels}
        for j in cells[cell]:
            assert all(where.get(x, -1) <= where[j.label] for x in j.equal_compute[:2])
        # every part fits 3 attempts of 24 h, one engine each (best_of_n's smaller memory share too)
        assert all(p.attempts(DAY) <= 3 and p.part.engines() == 1 for p in ps)
    # one workflow rule per group of parts with the same labels: every part in exactly one
    groups = rule_groups.part_groups(s.parts, 1440)
    assert sum(len(g.datasets) * len(g.seeds) for g in groups) == len(s.parts)
    assert {g.suffix for g in groups} >= {"", ".part0", ".part1"}
    assert parts.engine_loads(s).total == sum(p.attempts(DAY) for p in s.parts) + sum(
        j.shards * b.attempts(1440) for j, b in s.shards
    )


def test_plan_check_fails_a_label_too_long_for_any_part_and_suggests_shards(tmp_path):
    """At a 10-hour limit the longest labels need more than 3 attempts on their own: each is a
    part alone, and the check fails naming it and suggesting shards; the rest are notes."""
    (tmp_path / "config.yaml").write_text("retries: 3\n")
    cfg = {"experiment": "paper", "mirror": str(prerequisites.mirror()), "overrides": [], "max_runtime": 600}
    lines = cluster.runtime_check(cfg, tmp_path)
    failing = [line for line, fails in lines if fails and line.startswith("generate_cell ")]
    assert failing
    for line in failing:
        label = line.split(" (", 1)[1].split(")", 1)[0]
        assert "," not in label  # alone in its part
        assert line.endswith(
            f"the profile allows 4 (1 kept for faults); give {label} `shards:` in the experiment"
        )
        assert int(line.rsplit(" attempts", 1)[0].rsplit(" ", 1)[1]) > 3
    assert any(not fails and line.startswith("generate_cell ") for line, fails in lines)


def test_plan_check_sizes_each_label_at_the_memory_share_of_the_engine_it_shares():
    from retrace.spine.checks import job_problems

    mirror = str(prerequisites.mirror())
    greedy = vllm("greedy")
    assert not [p for p in job_problems(greedy, mirror) if p.startswith("GPU memory")]
    tiny = job_problems(greedy, mirror, (), {"gpu_memory_utilization": 0.02})  # a label beside it asks this
    assert any(p.startswith("GPU memory: ") for p in tiny)


def test_a_probe_result_prices_the_parts_but_never_moves_a_label(tmp_path):
    # the probe stage writes its rates during a run: a job's own Snakemake on a node re-plans
    # with them, and must find the parts (rules, outputs) the run was submitted with
    mirror = str(prerequisites.mirror())
    planned = jobs({"experiment": "paper"})
    for model in {j.model for j in planned}:  # ten times slower than stated: every part longer
        (tmp_path / model).mkdir()
        (tmp_path / model / "vllm.json").write_text('{"tok_s": 10.0}')
    stated, probed = parts.sized(planned, mirror, limit=DAY), parts.sized(planned, mirror, (), tmp_path, DAY)
    assert [p.part for p in probed.parts] == [p.part for p in stated.parts]
    # the probe's rates price only the roles whose prompts stay short (retrace.planning.rates)
    assert sum(p.work_s for p in probed.parts) > 3 * sum(p.work_s for p in stated.parts)
    assert max(p.attempts(DAY) for p in probed.parts) > 3  # so --check fails, naming the part
