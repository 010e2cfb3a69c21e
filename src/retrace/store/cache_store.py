"""The files behind the request cache (retrace.store.cache): per-writer segments; the index is
retrace.store.cache_index, its locks retrace.store.cache_lock.

    segments/<writer>-<n>.seg   entries (one JSON line each), appended by one handle only
    index/                      where each key's entry is (retrace.store.cache_index)
    logs/<writer>.jsonl         the handle's hits and duplicates, appended by it only

A batch is committed in two steps: its entries are appended to the writer's open segment (and
the file closed, which on NFS publishes the bytes), then their index lines are appended under
each shard's lock. An entry is served only once its index line exists, so a writer killed
mid-batch loses that batch (the segment's unindexed tail, never read), and every entry indexed
before stays served. The first index line of a key wins (a later writer of the same key finds
it while holding the lock and logs a duplicate instead). A segment is rolled over at
SEGMENT_BYTES, so the cache holds a few files per job rather than one per request.
"""

from __future__ import annotations

import os
from pathlib import Path

SEGMENT_BYTES = 64 * 2**20


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
        # 0o666: the umask decides, as for every artifact (retrace.util.atomic), so a group sharing
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
