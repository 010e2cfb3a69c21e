"""Request-level cache: content-addressed files, safe on a shared filesystem (NFS, Lustre).

Key = sha256 over (model fingerprint, backend identity incl. chat template, messages or
prompt, sampling params incl. seed, sample index). A run killed mid-generation loses at
most the batch in flight; the rerun finds the finished requests here.

Layout under the cache directory (`results/cache/requests/`):

    objects/<key[:2]>/<key>.json     one immutable file per finished request
    hits/<sha256(job)[:16]>/<writer>.jsonl   the hit log, one append-only file per handle
    duplicates/<writer>.jsonl        requests this handle generated although an entry existed

Why files and not SQLite: SQLite's WAL needs shared memory and its locks rely on fcntl,
neither of which is reliable when jobs on several nodes write over NFS. Here nothing is
ever locked or rewritten: an entry is written to a private temporary file and published
with `link()` (atomic on POSIX filesystems and NFS; it fails if the name exists, so the
first writer of a key wins and readers never see a half-written entry), and every hit log
has exactly one writer. Jobs on different nodes therefore never write the same file.

What this does not cover: NFS clients cache directory lookups for a few seconds, so an
entry another node published moments ago may be missed and generated again (a duplicate,
never a wrong answer). One file per request means many small files (the paper grid writes
a few million); put `results/cache` on a filesystem without a tight inode quota. Entries
are not fsynced: a killed process loses nothing, a machine that loses power may leave an
empty entry, which is set aside (renamed `*.corrupt`) and regenerated.

An entry is served only if it parses, is an object whose `key` is the key asked for (a file
copied or renamed under another key is refused) and holds a well-typed completion; anything
else (truncated, empty, garbage bytes, wrong key) is set aside, never returned, never deleted.
A request whose entry appeared while it was being generated (the first write won) is logged
under `duplicates/`: that is how many requests were generated twice (`duplicates()`), and
`started` < the entry's `created` tells a race from a lookup that missed an existing entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from retrace.atomic import publish_once
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
        self.objects = self.path / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)
        self._writer = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._hits_file = self._hit_dir(job) / f"{self._writer}.jsonl"

    def _hit_dir(self, job: str) -> Path:
        return self.path / "hits" / hashlib.sha256(job.encode()).hexdigest()[:16]

    def _entry(self, key: str) -> Path:
        return self.objects / key[:2] / f"{key}.json"

    def _read(self, key: str) -> Completion | None:
        path = self._entry(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return _parse_entry(raw, key)
        except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
            self._set_aside(path, e)
            return None

    def _set_aside(self, path: Path, why: Exception) -> None:
        log.warning("request cache entry %s is unusable (%s): set aside, will regenerate", path, why)
        try:
            os.replace(path, path.with_name(f"{path.name}.{self._writer}.corrupt"))
        except FileNotFoundError:  # another reader set it aside first
            pass

    def set_aside(self) -> list[Path]:
        """Entries found unusable and renamed `*.corrupt` (kept for inspection)."""
        return sorted(self.objects.glob("*/*.corrupt"))

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        found: dict[str, Completion] = {}
        for key in dict.fromkeys(keys):
            c = self._read(_check_key(key))
            if c is not None:
                found[key] = c
        return found

    def put_many(
        self, items: Iterable[tuple[str, Request, Completion]], looked_up: float | None = None
    ) -> None:
        """Publish a batch. It is validated and serialised before anything is written, so a
        batch that fails while being produced writes nothing; each entry lands whole or not at all.
        `looked_up`: when the batch's keys were last looked up (recorded with any duplicate)."""
        now = time.time()
        blobs = [
            (
                _check_key(k),
                c,
                json.dumps(
                    {"key": k, "completion": c.to_dict(), "request": r.key_material(), "created": now}
                ),
            )
            for k, r, c in items
        ]
        for key, c, blob in blobs:
            if not self._publish(self._entry(key), blob):
                self._log_duplicate(key, looked_up if looked_up is not None else now - c.latency_s)

    def _publish(self, final: Path, blob: str) -> bool:
        """Publish `blob` as `final` unless it exists; whether this call published it."""
        final.parent.mkdir(exist_ok=True)
        return publish_once(final, blob, final.parent / f".tmp-{self._writer}-{final.name}")

    def _log_duplicate(self, key: str, started: float) -> None:
        # `started` (the batch's last cache lookup, else publish time less generation time)
        # against the winner's `created` tells a race (both generating at once) from a
        # request generated although its entry existed when it was looked up.
        path = self.path / "duplicates" / f"{self._writer}.jsonl"
        path.parent.mkdir(exist_ok=True)
        now = time.time()
        with open(path, "a") as f:  # this handle is the file's only writer
            f.write(json.dumps({"key": key, "job": self.job, "at": now, "started": started}) + "\n")

    def duplicates(self, since: float = 0.0) -> list[dict]:
        """Requests generated although their entry already existed, by any writer:
        {key, job, at (refused publish), started (its last lookup; see put_many)}."""
        return [
            r
            for p in sorted((self.path / "duplicates").glob("*.jsonl"))
            for r in _records(p)
            if r.get("at", 0) >= since
        ]

    def record_hits(self, keys: Iterable[str]) -> None:
        now = time.time()
        lines = "".join(json.dumps({"key": k, "job": self.job, "at": now}) + "\n" for k in keys)
        if not lines:
            return
        self._hits_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._hits_file, "a") as f:  # this handle is the file's only writer
            f.write(lines)

    def hits(self, job: str | None = None, since: float = 0.0) -> list[dict]:
        """Hit records ({key, job, at}) of one job (all jobs if None) logged at or after `since`."""
        dirs = [self._hit_dir(job)] if job is not None else sorted((self.path / "hits").glob("*"))
        out = []
        for path in (p for d in dirs for p in sorted(d.glob("*.jsonl"))):
            out.extend(r for r in _records(path) if (job is None or r["job"] == job) and r["at"] >= since)
        return out

    def keys(self) -> set[str]:
        return {p.name[: -len(".json")] for p in self.objects.glob("*/*.json")}

    def count(self) -> int:
        return len(self.keys())

    def hits_for(self, job: str) -> int:
        return len(self.hits(job))

    def close(self) -> None:
        """Nothing to release (no connection is held); kept for callers that close handles."""


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
