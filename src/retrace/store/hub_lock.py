"""Locked revisions for hub datasets and models, like a package lock (`config/hub.lock`).

A config names a hub repo and a `revision`: a commit sha (pinned: used as is), or null / a
branch such as "main" (unpinned). An unpinned repo is fetched at the commit recorded for it
in the lock file; with no entry the fetch is refused, unless the caller asks to lock it
(`RETRACE_HUB_LOCK=write`, or `write=True`): then the branch's current commit is resolved on
the hub, written to the lock file (commit it with the repository) and used. Later runs,
anywhere, fetch that same commit. A pinned revision that disagrees with the lock is refused
too (one of the two is stale), unless the lock is being rewritten.

    commit = resolve("dataset", "HuggingFaceH4/MATH-500", "main")   # -> 40-hex sha from the lock
    RETRACE_HUB_LOCK=write snakemake ...                            # first run on a hub box

Not covered: a repo whose history is rewritten (the locked commit then no longer exists;
the fetch fails with the hub's own error). The lock records which commit, not its bytes:
the data and model stages hash what they fetched into provenance.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

LOCK_FILE = Path(__file__).resolve().parents[3] / "config" / "hub.lock"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
KINDS = ("dataset", "model")


class UnlockedRevision(ValueError):
    """An unpinned hub repo with no lock entry, or a pin that disagrees with the lock."""


def lock_path() -> Path:
    """config/hub.lock of this checkout, or $RETRACE_HUB_LOCK_FILE."""
    return Path(os.environ.get("RETRACE_HUB_LOCK_FILE") or LOCK_FILE)


def read_lock(path: Path | None = None) -> dict:
    path = path or lock_path()
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not a valid lock file ({e}); restore it from git") from e


def _write_lock(entries: dict, path: Path) -> None:
    from retrace.util.atomic import atomic_open

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as f:
        f.write(json.dumps(entries, indent=2, sort_keys=True) + "\n")


def hub_commit(kind: str, repo: str, revision: str) -> str:
    """The commit a branch or tag of a hub repo points at now (needs the hub)."""
    from huggingface_hub import HfApi  # lazy: only a locking run reaches the hub

    info = (
        HfApi().dataset_info(repo, revision=revision)
        if kind == "dataset"
        else HfApi().model_info(repo, revision=revision)
    )
    return info.sha


def writing(write: bool | None = None) -> bool:
    return bool(write) if write is not None else os.environ.get("RETRACE_HUB_LOCK") == "write"


def resolve(
    kind: str,
    repo: str,
    revision: str | None,
    *,
    write: bool | None = None,
    path: Path | None = None,
    lookup: Callable[[str, str, str], str] = hub_commit,
) -> str:
    """The commit to fetch `repo` at (see the module docstring); errors say what to do."""
    if kind not in KINDS:
        raise ValueError(f"unknown hub kind {kind!r}; expected one of {KINDS}")
    path = path or lock_path()
    entries, key = read_lock(path), f"{kind}:{repo}"
    locked = (entries.get(key) or {}).get("commit")
    pinned = revision if revision and COMMIT.match(revision) else None
    if not writing(write):
        if pinned and locked and pinned != locked:
            raise UnlockedRevision(
                f"{key}: the config pins {pinned} but {path} locks {locked}; "
                "update one of them (RETRACE_HUB_LOCK=write rewrites the lock)"
            )
        if pinned or locked:
            return str(pinned or locked)
        raise UnlockedRevision(
            f"{key}: revision {revision!r} is not a commit and {path} has no entry for it, so the "
            "fetch could differ from run to run. Pin the revision in the config, or run once on a "
            "box that reaches the hub with RETRACE_HUB_LOCK=write to record the commit, and commit "
            "the lock file."
        )
    commit = pinned or lookup(kind, repo, revision or "main")
    if not COMMIT.match(str(commit)):
        raise UnlockedRevision(f"{key}: the hub answered {commit!r}, not a commit sha")
    entries[key] = {
        "commit": commit,
        "requested": revision or "main",
        "locked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_lock(entries, path)
    return commit
