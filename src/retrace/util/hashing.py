"""Content hashes: files, canonical JSON, and the source code of a stage."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal data hashes equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def hash_sources(paths: Iterable[str | Path]) -> str:
    """One hash over several source files, by name and content (mtime and folder do not count).

    Files are ordered by (name, content hash), so a checkout in another directory, or a
    copy of the tree, gives the same hash."""
    h = hashlib.sha256()
    for name, digest in sorted({(Path(p).name, sha256_file(p)) for p in paths}):
        h.update(name.encode())
        h.update(digest.encode())
    return h.hexdigest()
