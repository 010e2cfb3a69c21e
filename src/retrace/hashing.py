"""Content hashes: files, canonical JSON, and the source code of a stage."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

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
    """One hash over several source files, by content only (mtime and location do not count)."""
    h = hashlib.sha256()
    for p in sorted({Path(p).resolve() for p in paths}):
        h.update(p.name.encode())
        h.update(sha256_file(p).encode())
    return h.hexdigest()
