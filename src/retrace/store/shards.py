"""Data-parallel shards of one generation job, and their deterministic merge.

An experiment run with `shards: K` splits each generation job's problems into K shards by a
stable hash of the problem id (not by position, so adding a problem moves no other), runs
each shard as its own cluster job (one engine load each), and merges the K outputs back into
the job's generations file in the order of the problems file. Per-request seeds derive from
(run seed, problem id, sample index) (methods/base.py), so the requests — and the cache keys —
are the same with or without sharding: the merged file equals an unsharded run's wherever
the engine is deterministic.

    python -m retrace generate … --shard 1 --shards 4 --out results/shards/…/1of4.jsonl
    python -m retrace merge-shards --data D.jsonl --out results/generations/….jsonl SHARD…
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from retrace.util.records import Problem


def shard_of(problem_id: str, shards: int) -> int:
    """The shard (0 … shards-1) of a problem: sha256 of its id, not Python's salted hash."""
    return int.from_bytes(hashlib.sha256(problem_id.encode()).digest()[:8], "big") % shards


def select(problems: list[Problem], shard: int, shards: int) -> list[Problem]:
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is outside 0..{shards - 1}")
    return [p for p in problems if shard_of(p.id, shards) == shard]


def merge_rows(problems: list[Problem], shard_rows: dict[str, list[dict]]) -> list[dict]:
    """Rows of all shards in problem order; every problem exactly once, in its own shard."""
    shards = len(shard_rows)
    by_id: dict[str, dict] = {}
    for index, (path, rows) in enumerate(shard_rows.items()):
        for row in rows:
            pid = row["problem_id"]
            if pid in by_id:
                raise ValueError(f"{path}: problem {pid!r} appears in two shards")
            if shard_of(pid, shards) != index:
                raise ValueError(
                    f"{path}: problem {pid!r} belongs to shard {shard_of(pid, shards)}, "
                    f"not {index} (shards given out of order?)"
                )
            by_id[pid] = row
    missing = [p.id for p in problems if p.id not in by_id]
    extra = sorted(set(by_id) - {p.id for p in problems})
    if missing or extra:
        raise ValueError(f"shards do not cover the problems: missing {missing[:5]}, unknown {extra[:5]}")
    return [by_id[p.id] for p in problems]


def sum_usage(usages: list[dict]) -> dict:
    """Token accounting of the whole job: numeric fields add up, `extra` dicts merge."""
    out: dict = {}
    for u in usages:
        for k, v in u.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
            elif isinstance(v, dict):
                out.setdefault(k, {}).update(v)
    if "engine_seconds" in out:
        out["engine_seconds"] = round(out["engine_seconds"], 6)
    return out


def load_shard(path: Path) -> tuple[list[dict], dict]:
    from retrace.store.provenance import prov_path
    from retrace.util.atomic import read_jsonl

    return read_jsonl(path), json.loads(prov_path(path).read_text())
