"""Request-level cache: packed, append-only segments and an index, safe on a shared filesystem.

Key = sha256 over (model fingerprint, backend identity incl. chat template, messages or
prompt, sampling params incl. seed, sample index). A run killed mid-generation loses at
most the batch in flight; the rerun finds the finished requests here.

Layout under the cache directory (`results/cache/requests/`; retrace.store.cache_store):

    segments/<writer>-<n>.seg    finished requests, one JSON line each, appended by one handle
    index/                       where each key's entry is: 16 shards, each a sorted base and a
                                 log appended under the shard's own lock (retrace.store.cache_index)
    logs/<writer>.jsonl          one handle's hits and duplicates (one writer per file)
    aside/<key>.<writer>.corrupt damaged entries, copied out for inspection
    objects/<key[:2]>/<key>.json the earlier one-file-per-request layout: still read, never written

Why packed: one file per request made millions of files at paper scale (inode quotas, the
metadata servers of Lustre/NFS); this keeps a few files per job. Why not SQLite: its WAL needs
shared memory, which NFS does not share between nodes, and without WAL one lock covers the
whole database for every write. Here each file has one appending writer, except the index,
whose short appends (one batch's lines of one shard) hold that shard's lock, which dies with
its holder (retrace.store.cache_lock: a record lock, or a lease where the filesystem's record locks
are missing or node-local).

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
loses power may leave a damaged entry, which is set aside and regenerated. A handle holds in
memory only each shard's log since its last compaction and bisects the sorted bases on disk.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from retrace.store.cache_index import TOMBSTONE, Index, shard_of
from retrace.store.cache_store import Segments
from retrace.util.hashing import sha256_json
from retrace.util.records import Completion, Request

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
            place = self._index.get(key)
            c = self._read_packed(key, place) if place else self._read_legacy(key)
            if c is not None:
                found[key] = c
        return found

    def _read_packed(self, key: str, place: tuple[str, int, int]) -> Completion | None:
        try:
            return _parse_entry(self._segments.read(*place), key)
        except (OSError, ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
            if isinstance(e, OSError) and not isinstance(e, FileNotFoundError):
                raise  # an I/O error is no verdict on the entry
            return self._revoke(key, place, e)

    def _revoke(self, key: str, place: tuple[str, int, int], why: Exception) -> Completion | None:
        """Read the entry again under its shard's lock (a short read on NFS is transient: then it
        is served); if still unusable, keep its bytes under aside/ and drop it from the index
        (once: a reader that finds it already revoked or replaced does nothing)."""
        name = shard_of(key)
        with self._index.locked(name):
            self._index.refresh([name])
            if self._index.get(key) != place:
                return None
            try:
                raw = self._segments.read(*place)
                return _parse_entry(raw, key)
            except FileNotFoundError as e:  # a segment removed by hand
                raw, why = b"", e
            except (ValueError, KeyError, TypeError) as e:
                why = e
            log.warning("request cache entry %s is unusable (%s): set aside, will regenerate", key, why)
            aside = self.path / "aside"
            aside.mkdir(exist_ok=True)
            (aside / f"{key}.{self._writer}.corrupt").write_bytes(raw)
            self._index.append(name, [f"{key}\t{TOMBSTONE}\t0\t0"])
        return None

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
        batch that fails while being produced writes nothing; each shard's part of it is indexed
        whole or not at all (a writer killed between shards leaves the earlier shards' entries
        served). `looked_up`: when the batch's keys were last looked up (recorded with any
        duplicate). A read-only or full cache folder raises OSError saying so in one line."""
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
        try:
            refused = self._publish(batch, self._segments.append([blob for _, _, blob in batch]))
        except OSError as e:
            raise _unwritable(self.path, e) from e
        self._log(
            [
                {
                    "kind": "duplicate",
                    "key": k,
                    "job": self.job,
                    "at": time.time(),
                    "started": looked_up if looked_up is not None else now - c.latency_s,
                }
                for k, c in refused
            ]
        )

    def _publish(self, batch: list, places: list) -> list[tuple[str, Completion]]:
        """Index a batch already in the segment, shard by shard under each shard's lock; the
        (key, completion) of each entry that someone indexed first (a duplicate)."""
        by_shard: dict[str, list] = {}
        for (key, c, _), place in zip(batch, places, strict=True):
            by_shard.setdefault(shard_of(key), []).append((key, c, place))
        duplicates, seen = [], set()
        for name, items in sorted(by_shard.items()):
            with self._index.locked(name):
                self._index.refresh([name])
                lines = []
                for key, c, (segment, offset, length) in items:
                    if key in seen or self._index.get(key) is not None or self._legacy_has(key):
                        duplicates.append((key, c))
                        continue
                    seen.add(key)
                    lines.append(f"{key}\t{segment}\t{offset}\t{length}")
                if lines:
                    self._index.append(name, lines)
        return duplicates

    def _legacy_has(self, key: str) -> bool:
        return self._legacy and self._entry(key).is_file()

    # ---------------------------------------------------------------- logs
    def _log(self, records: list[dict]) -> None:
        """Append hit/duplicate records to this handle's log. Bookkeeping, not results: on a
        full or read-only cache folder they are left out with a warning, so a job whose
        requests are all finished still runs there."""
        if not records:
            return
        try:
            self._hits_file.parent.mkdir(exist_ok=True)
            with open(self._hits_file, "a") as f:  # this handle is the file's only writer
                f.write("".join(json.dumps(r) + "\n" for r in records))
        except OSError as e:
            if e.errno not in _FULL_OR_READ_ONLY:
                raise
            log.warning(
                "request cache %s: %d hit/duplicate records not logged (%s)", self.path, len(records), e
            )

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
        legacy = {p.name[: -len(".json")] for p in self.objects.glob("*/*.json")} if self._legacy else set()
        return set(self._index.keys()) | legacy

    def count(self) -> int:
        return len(self.keys())

    def hits_for(self, job: str) -> int:
        return len(self.hits(job))

    def compact(self) -> int:
        """Fold every index shard's log into its sorted base (`python -m retrace cache compact`);
        the number of live entries."""
        try:
            return self._index.compact()
        except OSError as e:
            raise _unwritable(self.path, e) from e

    def close(self) -> None:
        """Nothing to release: every batch is written and indexed before put_many returns."""


_FULL_OR_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


def _unwritable(path: Path, e: OSError) -> OSError:
    """A full or read-only cache folder as one line saying what is kept and what to do."""
    if e.errno not in _FULL_OR_READ_ONLY:
        return e
    return OSError(
        e.errno,
        f"request cache {path} cannot be written ({e.strerror}: {e.filename or path}); requests "
        "finished before are kept and served, this batch is lost: free space or make the folder "
        "writable (or set request_cache elsewhere), then rerun",
    )


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
