"""Request-level cache: packed, append-only segments and an index, safe on a shared filesystem.

Key = sha256 over (model fingerprint, backend identity incl. chat template, messages or
prompt, sampling params incl. seed, sample index). A run killed mid-generation loses at
most the batch in flight; the rerun finds the finished requests here.

Layout under the cache directory (`results/cache/requests/`; retrace.cache_store):

    segments/<writer>-<n>.seg    finished requests, one JSON line each, appended by one handle
    index/<0-f>.idx              where each key's entry is (16 shards, appended under a lock)
    logs/<writer>.jsonl          one handle's hits and duplicates (one writer per file)
    aside/<key>.<writer>.corrupt damaged entries, copied out for inspection
    objects/<key[:2]>/<key>.json the earlier one-file-per-request layout: still read, never written

Why packed: one file per request made millions of files at paper scale (inode quotas, the
metadata servers of Lustre/NFS); this keeps a few files per job. Why not SQLite: its WAL needs
shared memory and its locks rely on fcntl, neither reliable when jobs on several nodes write
over NFS. Here each file has one appending writer, except the index, whose short appends
(one batch's lines) hold a mkdir lock.

A batch is published in two steps (cache_store): its entries go to the writer's segment, then
their index lines. An entry is served only through the index, so a writer killed mid-batch
loses that batch and nothing else; the first indexed write of a key wins, and a later writer of
it logs a duplicate (`duplicates()`: `started` < the entry's `created` tells a race from a
lookup that missed an existing entry).

An entry is served only if it parses, is an object whose `key` is the key asked for, and
holds a well-typed completion; anything else (truncated, garbage bytes, wrong key) is copied
under `aside/`, revoked in the index (so a new write of the key is served), never returned,
never deleted. What this does not cover: NFS clients cache attributes for a few seconds, so an
entry another node indexed moments ago may be missed and generated again (a duplicate, never a
wrong answer). Entries are not fsynced: a killed process loses nothing indexed, a machine that
loses power may leave a damaged entry, which is set aside and regenerated. Each handle reads
the index shards it needs in full once, then only what was appended: ~100 bytes per entry.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from retrace.cache_store import SHARDS, TOMBSTONE, Index, Segments, shard_of
from retrace.hashing import sha256_json
from retrace.records import Completion, Request

log = logging.getLogger(__name__)
_KEY = re.compile(r"^[A-Za-z0-9_-]{1,128}$")  # keys become file names: no '/', no '.'


def request_key(model_fingerprint: str, identity: dict, request: Request) -> str:
    return sha256_json({"model": model_fingerprint, "engine": identity, **request.key_material()})


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"invalid request-cache key {key!r}: expected 1-128 letters, digits, '-' or '_'")
    return key


class RequestCache:
    """A directory-backed map key → Completion, with a log of which job hit which key."""

    def __init__(self, path: str | Path, job: str = ""):
        self.path, self.job = Path(path), job
        if self.path.is_file():  # a cache file from the SQLite era, or a typo
            raise ValueError(
                f"request cache {self.path} is a file; the cache is now a directory "
                "(move the file away: its requests will be generated again)"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        self.objects = self.path / "objects"  # the earlier layout, read where it exists
        self._legacy = self.objects.is_dir()
        self._writer = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._index = Index(self.path / "index")
        self._segments = Segments(self.path / "segments", self._writer)
        self._hits_file = self.path / "logs" / f"{self._writer}.jsonl"

    # ---------------------------------------------------------------- reading
    def _entry(self, key: str) -> Path:
        """The file of `key` in the earlier one-file-per-request layout."""
        return self.objects / key[:2] / f"{key}.json"

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        keys = [_check_key(k) for k in dict.fromkeys(keys)]
        self._index.refresh(shard_of(k) for k in keys)
        found: dict[str, Completion] = {}
        for key in keys:
            c = self._read_packed(key) if key in self._index.entries else self._read_legacy(key)
            if c is not None:
                found[key] = c
        return found

    def _read_packed(self, key: str) -> Completion | None:
        segment, offset, length = self._index.entries[key]
        try:
            raw = self._segments.read(segment, offset, length)
        except FileNotFoundError as e:  # a segment removed by hand
            self._revoke(key, b"", e)
            return None
        try:
            return _parse_entry(raw, key)
        except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
            self._revoke(key, raw, e)
            return None

    def _revoke(self, key: str, raw: bytes, why: Exception) -> None:
        """Keep a damaged entry's bytes under aside/ and drop it from the index (once: a reader
        that finds it already revoked does nothing)."""
        log.warning("request cache entry %s is unusable (%s): set aside, will regenerate", key, why)
        place = self._index.entries.get(key)
        with self._index.locked():
            self._index.refresh([shard_of(key)])
            if self._index.entries.get(key) != place:
                return
            aside = self.path / "aside"
            aside.mkdir(exist_ok=True)
            (aside / f"{key}.{self._writer}.corrupt").write_bytes(raw)
            self._index.append({shard_of(key): [f"{key}\t{TOMBSTONE}\t0\t0"]})
            self._index.entries.pop(key, None)

    def _read_legacy(self, key: str) -> Completion | None:
        if not self._legacy:
            return None
        path = self._entry(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return _parse_entry(raw, key)
        except (ValueError, KeyError, TypeError) as e:
            self._set_aside(path, e)
            return None

    def _set_aside(self, path: Path, why: Exception) -> None:
        log.warning("request cache entry %s is unusable (%s): set aside, will regenerate", path, why)
        try:
            os.replace(path, path.with_name(f"{path.name}.{self._writer}.corrupt"))
        except FileNotFoundError:  # another reader set it aside first
            pass

    def set_aside(self) -> list[Path]:
        """Entries found unusable, kept for inspection (aside/, and `*.corrupt` of objects/)."""
        legacy = sorted(self.objects.glob("*/*.corrupt")) if self._legacy else []
        return sorted((self.path / "aside").glob("*.corrupt")) + legacy

    # ---------------------------------------------------------------- writing
    def put_many(
        self, items: Iterable[tuple[str, Request, Completion]], looked_up: float | None = None
    ) -> None:
        """Publish a batch. It is validated and serialised before anything is written, so a
        batch that fails while being produced writes nothing; a batch is served whole or not at
        all. `looked_up`: when the batch's keys were last looked up (recorded with any duplicate)."""
        now = time.time()
        batch = [
            (
                _check_key(k),
                c,
                (
                    json.dumps(
                        {"key": k, "completion": c.to_dict(), "request": r.key_material(), "created": now}
                    )
                    + "\n"
                ).encode(),
            )
            for k, r, c in items
        ]
        if not batch:
            return
        places = self._segments.append([blob for _, _, blob in batch])
        lines: dict[str, list[str]] = {}
        duplicates = []
        with self._index.locked():
            self._index.refresh({shard_of(k) for k, _, _ in batch})
            for (key, c, _), (segment, offset, length) in zip(batch, places, strict=True):
                if key in self._index.entries or self._legacy_has(key):
                    duplicates.append((key, looked_up if looked_up is not None else now - c.latency_s))
                    continue
                self._index.entries[key] = (segment, offset, length)  # a key twice in one batch
                lines.setdefault(shard_of(key), []).append(f"{key}\t{segment}\t{offset}\t{length}")
            self._index.append(lines)
        self._log(
            [
                {"kind": "duplicate", "key": k, "job": self.job, "at": time.time(), "started": s}
                for k, s in duplicates
            ]
        )

    def _legacy_has(self, key: str) -> bool:
        return self._legacy and self._entry(key).is_file()

    # ---------------------------------------------------------------- logs
    def _log(self, records: list[dict]) -> None:
        if not records:
            return
        self._hits_file.parent.mkdir(exist_ok=True)
        with open(self._hits_file, "a") as f:  # this handle is the file's only writer
            f.write("".join(json.dumps(r) + "\n" for r in records))

    def _logged(self, kind: str) -> list[dict]:
        files = sorted((self.path / "logs").glob("*.jsonl"))
        out = [r for p in files for r in _records(p) if r.get("kind") == kind]
        if kind == "hit":  # the earlier layout's hit logs
            out += [r for p in sorted((self.path / "hits").glob("*/*.jsonl")) for r in _records(p)]
        elif kind == "duplicate":
            out += [r for p in sorted((self.path / "duplicates").glob("*.jsonl")) for r in _records(p)]
        return out

    def duplicates(self, since: float = 0.0) -> list[dict]:
        """Requests generated although their entry already existed, by any writer:
        {key, job, at (refused publish), started (its last lookup; see put_many)}."""
        return [r for r in self._logged("duplicate") if r.get("at", 0) >= since]

    def record_hits(self, keys: Iterable[str]) -> None:
        now = time.time()
        self._log([{"kind": "hit", "key": k, "job": self.job, "at": now} for k in keys])

    def hits(self, job: str | None = None, since: float = 0.0) -> list[dict]:
        """Hit records ({key, job, at}) of one job (all jobs if None) logged at or after `since`."""
        return [
            r
            for r in self._logged("hit")
            if (job is None or r.get("job") == job) and r.get("at", 0) >= since and "key" in r
        ]

    def keys(self) -> set[str]:
        self._index.refresh(f"{i:x}" for i in range(SHARDS))
        legacy = {p.name[: -len(".json")] for p in self.objects.glob("*/*.json")} if self._legacy else set()
        return set(self._index.entries) | legacy

    def count(self) -> int:
        return len(self.keys())

    def hits_for(self, job: str) -> int:
        return len(self.hits(job))

    def close(self) -> None:
        """Nothing to release: every batch is written and indexed before put_many returns."""


def _records(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # the last line of a log whose writer was killed mid-write
            continue
    return out


_TYPES = {"text": str, "finish_reason": str, "prompt_tokens": int, "generated_tokens": int}


def _parse_entry(raw: bytes, key: str) -> Completion:
    """The completion of an entry file, or ValueError/TypeError/KeyError saying why not."""
    entry = json.loads(raw.decode("utf-8"))
    if not isinstance(entry, dict):
        raise TypeError(f"entry is a JSON {type(entry).__name__}, not an object")
    if entry.get("key") != key:
        raise KeyError(f"entry holds key {str(entry.get('key'))[:16]!r}…, not {key[:16]!r}…")
    body = entry["completion"]
    if not isinstance(body, dict):
        raise TypeError("completion is not an object")
    for name, kind in _TYPES.items():
        if not isinstance(body.get(name), kind):
            raise TypeError(f"completion field {name!r} is not a {kind.__name__}")
    return Completion.from_dict(body)
