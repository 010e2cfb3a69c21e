"""What the data stage of a dataset reads, by content: the rule `data`'s `source` parameter.

    data_source("smoke_math", None)                 # "sha256:…" of the bundled file's bytes
    data_source("gsm8k", "../shared/data")          # "sha256:…" of gsm8k/test.jsonl in the mirror
    data_source("gsm8k", None)                      # MirrorMissing: one line naming the dataset

A finished data job is stale when the files it read changed, and only then: the value is a
digest of each file the dataset's task reads (Task.source_files, the files Task.load opens),
named relative to the folder they are in, so where the mirror lives, whether one exists beside
a bundled run, or a copy of the run opened elsewhere changes nothing. A `source: mirror` dataset
reruns when its own mirror file changes, not when another dataset's does. A mirror that lacks
or cannot read a file the dataset needs fails the plan with one line naming the dataset and the
file, before anything runs (a stale data job would first delete its finished output).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from retrace.util.hashing import sha256_file, sha256_json


def data_source(dataset: str, mirror: str | None, dataset_overrides: tuple = ()) -> str:
    """A digest of the files `dataset` reads ("hub": a hub download, pinned by its config)."""
    from retrace.config.compose import compose
    from retrace.config.mirror import MirrorMissing, require
    from retrace.tasks.base import BUNDLED_DIR
    from retrace.util.registry import TASKS

    cfg = compose({"dataset": dataset}, dataset_overrides)["dataset"]
    source = cfg["source"]  # every dataset config states it (config/dataset/*.yaml)
    if source == "hub":
        return "hub"
    root = require(mirror, dataset) if source == "mirror" else BUNDLED_DIR
    try:
        files = TASKS.get(cfg["task"]).source_files(cfg, root, source)
        digests = {str(f.relative_to(root)): file_digest(f) for f in files}
    except OSError as e:
        raise MirrorMissing(f"dataset {dataset!r} cannot read a file it needs: {_reason(e)}") from None
    return source + ":" + sha256_json(digests)


def _reason(e: OSError) -> str:
    """One line: the file and what is wrong with it."""
    return f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, once per process and version of the file (size, mtime)."""
    st = os.stat(path)
    return _digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@functools.cache
def _digest(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)
