"""Request-level cache: content-addressed, durable, written batch by batch.

Key = sha256 over (model fingerprint, backend identity incl. chat template, messages or
prompt, sampling params incl. seed, sample index). A run killed mid-generation loses at
most the batch in flight; the rerun finds the finished requests here.

Storage is SQLite in WAL mode with a busy timeout, which is safe for several processes
on one machine. It is NOT safe over NFS (WAL needs shared memory); cluster runs need a
different store (see the cluster issue).
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Iterable

from retrace.hashing import sha256_json
from retrace.records import Completion, Request

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
  key TEXT PRIMARY KEY,
  completion TEXT NOT NULL,
  request TEXT NOT NULL,
  created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS hits (
  key TEXT NOT NULL,
  job TEXT NOT NULL,
  at REAL NOT NULL
);
"""


def request_key(model_fingerprint: str, identity: dict, request: Request) -> str:
    return sha256_json({"model": model_fingerprint, "engine": identity, **request.key_material()})


class RequestCache:
    """A SQLite-backed map key → Completion, with a log of which job hit which key."""

    def __init__(self, path: str | Path, job: str = ""):
        self.path, self.job = Path(path), job
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def get_many(self, keys: Iterable[str]) -> dict[str, Completion]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Completion] = {}
        for i in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._db.execute(
                    f"SELECT key, completion FROM completions WHERE key IN ({marks})", chunk):
                found[key] = Completion.from_dict(json.loads(blob))
        return found

    def put_many(self, items: Iterable[tuple[str, Request, Completion]]) -> None:
        now = time.time()
        rows = [(k, json.dumps(c.to_dict()), json.dumps(r.key_material()), now) for k, r, c in items]
        with self._db:  # one transaction per batch: all of it lands, or none
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO completions VALUES (?,?,?,?)", rows)

    def record_hits(self, keys: Iterable[str]) -> None:
        now = time.time()
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO hits VALUES (?,?,?)", [(k, self.job, now) for k in keys])

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def hits_for(self, job: str) -> int:
        return self._db.execute("SELECT COUNT(*) FROM hits WHERE job=?", (job,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()
