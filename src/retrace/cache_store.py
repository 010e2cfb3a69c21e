"""The files behind the request cache (retrace.cache): per-writer segments and a sharded index.

    segments/<writer>-<n>.seg   entries (one JSON line each), appended by one handle only
    index/<0-f>.idx             `key TAB segment TAB offset TAB length` lines, appended under
                                index/.lock; `key TAB - TAB 0 TAB 0` revokes a damaged entry
    logs/<writer>.jsonl         the handle's hits and duplicates, appended by it only

A batch is committed in two steps: its entries are appended to the writer's open segment (and
the file closed, which on NFS publishes the bytes), then their index lines are appended under
the lock. An entry is served only once its index line exists, so a writer killed mid-batch
loses that batch (the segment's unindexed tail, never read), and every entry indexed before
stays served. The first index line of a key wins (a later writer of the same key finds it
while holding the lock and logs a duplicate instead). A segment is rolled over at
SEGMENT_BYTES, so the cache holds a few files per job rather than one per request.

The lock is a directory (mkdir is atomic on local filesystems and NFS); a lock older than
STALE_LOCK_S is taken to be a killed holder's and broken. What this does not cover: a holder
stalled longer than that (e.g. a hung NFS mount) may append beside the next holder; each
index line is then still written whole by one write(), and a torn last line (a holder
killed mid-write) is cut by the next holder before it appends.
"""

from __future__ import annotations

import os
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

SHARDS = 16
SEGMENT_BYTES = 64 * 2**20
STALE_LOCK_S = 60.0
TOMBSTONE = "-"


def shard_of(key: str) -> str:
    return f"{zlib.crc32(key.encode()) % SHARDS:x}"


class Index:
    """The index as this handle last read it: key -> (segment, offset, length), refreshed by
    reading only what was appended to each shard since."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._read_to = dict.fromkeys((f"{i:x}" for i in range(SHARDS)), 0)
        self.entries: dict[str, tuple[str, int, int]] = {}

    def shard(self, name: str) -> Path:
        return self.root / f"{name}.idx"

    def refresh(self, shards) -> None:
        for name in set(shards):
            self._read_new(name)

    def _read_new(self, name: str) -> None:
        try:
            with open(self.shard(name), "rb") as f:
                f.seek(self._read_to[name])
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a torn last line is read once it is whole (or cut)
        for line in data[:end].decode("utf-8", "replace").splitlines():
            self._apply(line)
        self._read_to[name] += end

    def _apply(self, line: str) -> None:
        parts = line.split("\t")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            return  # not an index line (a torn write cut short): never a source of entries
        key, segment, offset, length = parts
        if segment == TOMBSTONE:
            self.entries.pop(key, None)
        else:
            self.entries.setdefault(key, (segment, int(offset), int(length)))

    @contextmanager
    def locked(self):
        lock = self.root / ".lock"
        while True:
            try:
                lock.mkdir()
                break
            except FileExistsError:
                try:
                    if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
                        lock.rmdir()  # its holder was killed: break it
                        continue
                except FileNotFoundError:
                    continue
                time.sleep(0.005)
        try:
            yield
        finally:
            try:
                lock.rmdir()
            except FileNotFoundError:  # broken as stale meanwhile
                pass

    def append(self, lines_by_shard: dict[str, list[str]]) -> None:
        """Append index lines (caller holds the lock), cutting a torn last line first."""
        for name, lines in lines_by_shard.items():
            path = self.shard(name)
            with open(path, "ab+") as f:
                size = f.seek(0, os.SEEK_END)
                if size:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        f.seek(0)
                        keep = f.read().rfind(b"\n") + 1
                        f.truncate(keep)
                        self._read_to[name] = min(self._read_to[name], keep)
                f.write("".join(line + "\n" for line in lines).encode())


class Segments:
    """This handle's own segment files (appended) and anyone's (read by offset)."""

    def __init__(self, root: Path, writer: str):
        self.root, self.writer, self._n = root, writer, 0
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def current(self) -> str:
        return f"{self.writer}-{self._n}.seg"

    def append(self, blobs: list[bytes]) -> list[tuple[str, int, int]]:
        """Append entries to the open segment; (segment, offset, length) of each. A failed
        write is cut back off, so the segment holds only whole batches."""
        path = self.root / self.current
        if path.exists() and path.stat().st_size >= SEGMENT_BYTES:
            self._n += 1
            path = self.root / self.current
        data = b"".join(blobs)
        # 0o666: the umask decides, as for every artifact (retrace.atomic), so a group sharing
        # the cache can read what each member wrote
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            start = os.fstat(fd).st_size  # this handle is the segment's only writer
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:  # e.g. a full disk: cut the partial batch back off
                os.ftruncate(fd, start)
                raise
        finally:
            os.close(fd)  # on NFS, close publishes the bytes before the index names them
        out, offset = [], start
        for blob in blobs:
            out.append((self.current, offset, len(blob)))
            offset += len(blob)
        return out

    def read(self, segment: str, offset: int, length: int) -> bytes:
        with open(self.root / segment, "rb") as f:
            f.seek(offset)
            return f.read(length)
