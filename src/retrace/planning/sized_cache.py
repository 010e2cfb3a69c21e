"""The experiment's sizing (retrace.planning.parts.sized), computed once per experiment and inputs.

    sized = cached_sized(jobs, mirror, dso, Path("results/probe"), limit, Path(".snakemake/retrace"))

Every parse of the workflow needs it: the cut of cells into parts is the DAG, and each job's
resources come from it. Sizing composes every job's config and reads every dataset, seconds at
paper scale, and every job's own Snakemake (a SLURM job's) parses the workflow again. So the
result is kept in `folder` as a pickle named by the hash of all it is computed from: the jobs,
the config groups (config/), the code and prompt templates of the package, the files each dataset
reads (retrace.planning.sources), the probe's results and the limit. Any change to one of these
is another name, so a stale sizing is never read; a pickle that cannot be read is computed again.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from retrace.planning.cluster import Limit
from retrace.planning.parts import Sized, sized
from retrace.planning.plan import Job
from retrace.util.atomic import atomic_open
from retrace.util.hashing import hash_sources, sha256_json

PACKAGE = Path(__file__).resolve().parents[1]  # src/retrace: its code, templates and bundled data


def cached_sized(
    jobs: list[Job], mirror: str | None, dso: tuple, probe_dir: Path, limit: Limit, folder: Path
) -> Sized:
    """parts.sized(jobs, mirror, dso, probe_dir, limit), read from `folder` when computed before."""
    path = Path(folder) / f"sized-{sizing_key(jobs, mirror, dso, probe_dir, limit)[:32]}.pickle"
    try:
        with open(path, "rb") as f:
            found = pickle.load(f)
        if isinstance(found, Sized):
            return found
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass  # not computed yet, or written by other code: compute it
    out = sized(jobs, mirror, dso, probe_dir, limit)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as f:
        pickle.dump(out, f)
    _prune(path.parent)
    return out


KEEP = 4  # sizings kept (each a few MB at paper scale): a run's jobs share one at a time


def _prune(folder: Path) -> None:
    """Remove all but the KEEP newest sizings (a removed one is computed again if asked for)."""
    kept = sorted(folder.glob("sized-*.pickle"), key=_mtime, reverse=True)
    for old in kept[KEEP:]:
        old.unlink(missing_ok=True)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # another job's parse pruned it first
        return 0


def sizing_key(jobs: list[Job], mirror: str | None, dso: tuple, probe_dir: Path, limit: Limit) -> str:
    """sha256 of everything sizing reads (see the module docstring)."""
    from retrace.config.compose import CONFIG_DIR

    return sha256_json(
        {
            "jobs": [repr(j) for j in jobs],
            "dataset_overrides": list(dso),
            "config": _tree_hash(CONFIG_DIR),
            "code": _tree_hash(PACKAGE),
            "data": {d: _data(d, mirror, dso) for d in sorted({j.dataset for j in jobs})},
            "probe": _tree_hash(probe_dir) if Path(probe_dir).is_dir() else None,
            "limit": [limit.minutes, limit.attempts],
        }
    )


def _data(dataset: str, mirror: str | None, dso: tuple) -> str:
    """What a dataset's size is read from, or why it is unknown (sizing then counts it so)."""
    from retrace.config.mirror import MirrorMissing
    from retrace.planning.sources import data_source

    try:
        return data_source(dataset, mirror, dso)
    except (MirrorMissing, OSError, ValueError) as e:
        return f"unknown: {e}"


def _tree_hash(root: Path) -> str:
    """The files under `root` (not caches), by path and content."""
    files = sorted(
        Path(d) / f
        for d, dirs, names in os.walk(root)
        if "__pycache__" not in d
        for f in names
        if not f.endswith((".pyc", ".pickle"))
    )
    return sha256_json([str(f.relative_to(root)) for f in files]) + hash_sources(files)
