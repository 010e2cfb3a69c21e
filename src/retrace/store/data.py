"""Prepare a dataset: load it through its task plugin, check it, subset it, save it.

    from retrace.store.data import prepare, write_problems
    problems, files = prepare({"task": "gsm8k", "source": "mirror", "mirror_path": "gsm8k/test.jsonl",
                               "limit": 50, "subset_seed": 0}, "../shared/data")
    write_problems("results/problems.jsonl", problems)

`cfg` is one `config/dataset/<name>.yaml` mapping (the data stage passes its typed
retrace.config.settings.DatasetSettings, checked against the YAML's keys); `mirror` is the mirror directory
(config key `mirror`), needed only for `source: mirror`. `source: hub` rows come from
`load_hub_rows` (`datasets.load_dataset` at the commit retrace.store.hub_lock resolves).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path

from retrace.util.atomic import read_jsonl, write_jsonl
from retrace.util.hashing import sha256_json
from retrace.util.records import Problem
from retrace.util.registry import TASKS

HUB_KEYS = ("path", "split")


def prepare(cfg: Mapping, mirror: str | Path | None) -> tuple[list[Problem], list[Path]]:
    """The configured problems (subset by `limit`/`subset_seed`) and the files read."""
    task = TASKS.get(cfg["task"])
    if cfg.get("skip_lines") and not task.skips_lines:
        raise ValueError(f"dataset {cfg.get('name', cfg['task'])!r}: task {cfg['task']!r} cannot skip_lines")
    problems, files = task.load(cfg, Path(mirror) if mirror else None)
    check_unique_ids(problems, cfg)
    return subset(problems, cfg["limit"], cfg["subset_seed"]), files


def check_unique_ids(problems: list[Problem], cfg: Mapping) -> None:
    seen: dict[str, Problem] = {}
    for p in problems:
        if p.id in seen:
            raise ValueError(
                f"{_where(p)}: duplicate problem id {p.id!r} (first at {_where(seen[p.id])}; "
                f"dataset {cfg.get('name', cfg['task'])!r})"
            )
        seen[p.id] = p


def _where(p: Problem) -> str:
    """ "source:line" of a problem read from a file (its metadata), else its id."""
    meta = p.metadata or {}
    if "line" in meta:
        return f"{meta.get('source', '?')}:{meta['line']}"
    return f"{meta.get('source', '?')}#{meta.get('index', p.id)}"


def subset(problems: list[Problem], limit: int | None, seed: int = 0) -> list[Problem]:
    """`limit` problems drawn at random with `seed`, kept in their original order.

    A random draw rather than the first `limit` rows, because files are often sorted
    (by subject or difficulty) and a prefix would be a biased sample.
    """
    if limit is None or limit >= len(problems):
        return list(problems)
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    keep = sorted(random.Random(seed).sample(range(len(problems)), limit))
    return [problems[i] for i in keep]


def fingerprint(problems: list[Problem]) -> str:
    """sha256 of the problems' canonical JSON: equal problem sets hash equally."""
    return sha256_json([p.to_dict() for p in problems])


def write_problems(path: str | Path, problems: list[Problem]) -> None:
    write_jsonl(path, (p.to_dict() for p in problems))


def read_problems(path: str | Path) -> list[Problem]:
    return [Problem.from_dict(d) for d in read_jsonl(path)]


def load_hub_rows(hub: dict) -> tuple[object, str]:
    """(rows, commit): `datasets.load_dataset(path, name, split=, revision=commit)`, the
    commit being the pinned one or the one locked in config/hub.lock (retrace.store.hub_lock;
    unlocked and unpinned is refused). `datasets` is imported only here (heavy).

    `path` may also be a local directory in the hub layout (`data/<split>-*.parquet`), which
    is how the offline test exercises this code path."""
    from retrace.store import hub_lock

    for key in HUB_KEYS:
        if not hub.get(key):
            raise ValueError(f"hub source needs hub.{key} (see config/dataset/*.yaml)")
    commit = hub_lock.resolve("dataset", hub["path"], hub.get("revision"))
    try:
        import datasets
    except ImportError as e:
        raise ImportError("source: hub needs the `datasets` package (pip install -r envs/cpu.txt)") from e
    rows = datasets.load_dataset(hub["path"], hub.get("name"), split=hub["split"], revision=commit)
    return rows, commit
