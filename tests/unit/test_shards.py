"""Data-parallel shards (retrace.store.shards): stable assignment, deterministic merge, summed usage."""

from __future__ import annotations

import pytest

from retrace.store.shards import merge_rows, select, shard_of, sum_usage
from retrace.util.records import Problem

PROBLEMS = [Problem(id=f"p{i}", question=f"q{i}", gold=str(i)) for i in range(30)]


def test_every_problem_lands_in_exactly_one_shard_whatever_the_order():
    parts = [select(PROBLEMS, s, 3) for s in range(3)]
    assert sorted(p.id for part in parts for p in part) == sorted(p.id for p in PROBLEMS)
    assert all(parts), "a shard of 30 problems came out empty"
    shuffled = list(reversed(PROBLEMS))
    assert [{p.id for p in select(shuffled, s, 3)} for s in range(3)] == [
        {p.id for p in part} for part in parts
    ]


def test_assignment_is_a_fixed_function_of_the_id():
    # sha256-based: the same on every host and Python process (unlike the salted built-in hash).
    assert [shard_of(f"p{i}", 4) for i in range(8)] == [shard_of(f"p{i}", 4) for i in range(8)]
    assert shard_of("p0", 1) == 0
    with pytest.raises(ValueError, match="outside"):
        select(PROBLEMS, 3, 3)


def _rows(shards: int) -> dict[str, list[dict]]:
    return {
        f"s{s}.jsonl": [{"problem_id": p.id, "text": p.gold} for p in select(PROBLEMS, s, shards)]
        for s in range(shards)
    }


def test_merge_restores_the_order_of_the_problems_file():
    merged = merge_rows(PROBLEMS, _rows(3))
    assert [r["problem_id"] for r in merged] == [p.id for p in PROBLEMS]


def test_merge_refuses_missing_duplicated_or_misplaced_rows():
    rows = _rows(2)
    first = next(iter(rows))
    with pytest.raises(ValueError, match="missing"):
        merge_rows(PROBLEMS, {**rows, first: rows[first][1:]})
    dup = dict(rows)
    dup[first] = rows[first] + rows[first][:1]
    with pytest.raises(ValueError, match="two shards"):
        merge_rows(PROBLEMS, dup)
    swapped = dict(zip(rows, reversed(list(rows.values()))))
    with pytest.raises(ValueError, match="belongs to shard"):
        merge_rows(PROBLEMS, swapped)


def test_usage_adds_up():
    a = {"requests": 3, "cache_hits": 1, "engine_seconds": 0.5, "extra": {"x": 1}}
    b = {"requests": 2, "cache_hits": 0, "engine_seconds": 0.25, "extra": {"y": 2}}
    assert sum_usage([a, b]) == {
        "requests": 5,
        "cache_hits": 1,
        "engine_seconds": 0.75,
        "extra": {"x": 1, "y": 2},
    }
