"""The request cache's index (retrace.store.cache): key -> (segment, offset, length), in 16 shards,
each a sorted base searched on disk plus a short log of what was appended since.

    index/<s>.idx              generation 0's log (the layout before sorted bases)
    index/<s>.g<N>.sorted      generation N's base: `key TAB segment TAB offset TAB length`
                               lines sorted by key, searched by bisection over a memory map
    index/<s>.g<N>.idx         generation N's log, appended under index/<s>.lock;
                               `key TAB - TAB 0 TAB 0` revokes a damaged entry
    index/<s>.lock             the shard's lock (retrace.store.cache_lock)

Why: a job used to read every shard whole into a dict (~500 bytes a key: ~5 GB at the paper's
10M requests). Now it holds only the logs' lines (at most COMPACT_LINES a shard before a writer
folds them into a new base) and pages of the bases it touched (page cache, shared by the jobs of
a node). `python -m retrace cache compact` folds every shard at once.

Compaction (under the shard's lock) writes base N+1 (base N merged with log N: first write of a
key wins, revoked keys dropped), creates log N+1, then appends `#sealed TAB N+1` to log N. A
reader follows the seal, or, if log N is gone, finds the newest base by listing; the bases and
logs of generations before N-1 are deleted (a reader between a refresh and its lookup keeps a
generation it mapped; two compactions in that window would be needed to pull it away).
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import uuid
import zlib
from pathlib import Path

from retrace.store.cache_lock import shard_lock

SHARDS = 16
COMPACT_LINES = 16384  # log lines a shard may hold before a writer folds them into its base
TOMBSTONE = "-"
SEAL = "#sealed"
_GONE = {errno.ENOENT, errno.ESTALE}
_MISSING = object()


def shard_of(key: str) -> str:
    return f"{zlib.crc32(key.encode()) % SHARDS:x}"


Place = tuple[str, int, int]


def _parse(line: str) -> tuple[str, str, int, int] | None:
    parts = line.split("\t")
    if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit() or not parts[0].isascii():
        return None  # not an index line (a torn write cut short): never a source of entries
    return parts[0], parts[1], int(parts[2]), int(parts[3])


class Base:
    """One generation's sorted base, searched in place (a missing or empty file: no entries)."""

    def __init__(self, path: Path | None):
        self.map = None
        if path is None:
            return
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size:
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def get(self, key: str) -> Place | None:
        mm, want = self.map, key.encode()
        if mm is None:
            return None
        lo, hi = 0, len(mm)  # both on line starts
        while lo < hi:
            start = mm.rfind(b"\n", 0, (lo + hi) // 2) + 1
            start = max(start, lo)
            end = mm.find(b"\n", start)
            tab = mm.find(b"\t", start, end)
            got = mm[start:tab]
            if got == want:
                parsed = _parse(mm[start:end].decode())
                return None if parsed is None else parsed[1:]
            lo, hi = (end + 1, hi) if got < want else (lo, start)
        return None

    def lines(self):
        """(key, place) of every line, in key order."""
        if self.map is None:
            return
        for raw in iter(self.map.readline, b""):
            parsed = _parse(raw.decode().rstrip("\n"))
            if parsed:
                yield parsed[0], parsed[1:]

    def close(self) -> None:
        if self.map is not None:
            self.map.close()


class Shard:
    """A shard as this handle last read it: its generation's base and the log lines since."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = root, name
        self._load(self._newest())

    def path(self, gen: int, kind: str) -> Path:
        return self.root / (
            f"{self.name}.idx" if gen == 0 and kind == "idx" else f"{self.name}.g{gen}.{kind}"
        )

    def _newest(self) -> int:
        gens = [int(p.name.split(".")[1][1:]) for p in self.root.glob(f"{self.name}.g*.sorted")]
        return max(gens, default=0)

    def _load(self, gen: int) -> None:
        self.gen, self.read_to, self.log_lines = gen, 0, 0
        # log state relative to the base: None = revoked; (segment, offset, length, unless_base)
        self.log: dict[str, tuple[str, int, int, bool] | None] = {}
        self.base = Base(self.path(gen, "sorted") if gen else None)

    def refresh(self) -> None:
        """Read what was appended to the log since; follow a seal or a deleted log."""
        try:
            with open(self.path(self.gen, "idx"), "rb") as f:
                f.seek(self.read_to)
                data = f.read()
        except OSError as e:
            if e.errno not in _GONE:
                raise
            if self.gen != self._newest():  # compacted and deleted: start from the newest base
                self._reload(self._newest())
            return
        end = data.rfind(b"\n") + 1  # a torn last line is read once it is whole (or cut)
        self.read_to += end
        for line in data[:end].decode("utf-8", "replace").splitlines():
            if line.startswith(SEAL):
                self._reload(int(line.split("\t")[1]))
                return
            self.apply(line)

    def _reload(self, gen: int) -> None:
        self.base.close()
        try:
            self._load(gen)
        except FileNotFoundError:  # compacted again meanwhile
            self._load(self._newest())
        self.refresh()

    def apply(self, line: str) -> None:
        parsed = _parse(line)
        if parsed is None:
            return
        key, segment, offset, length = parsed
        self.log_lines += 1
        now = self.log.get(key, _MISSING)
        segment = sys.intern(segment)  # a segment holds thousands of entries: one string
        if segment == TOMBSTONE:
            self.log[key] = None
        elif now is _MISSING:
            self.log[key] = (segment, offset, length, True)
        elif now is None:
            self.log[key] = (segment, offset, length, False)

    def get(self, key: str) -> Place | None:
        if key not in self.log:
            return self.base.get(key)
        now = self.log[key]
        if now is None:
            return None
        place = now[:3]
        return (self.base.get(key) or place) if now[3] else place

    def append(self, lines: list[str]) -> None:
        """Append index lines (caller holds the lock and refreshed), cutting a torn last line."""
        with open(self.path(self.gen, "idx"), "ab+") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    f.seek(0)
                    keep = f.read().rfind(b"\n") + 1
                    f.truncate(keep)
                    self.read_to = min(self.read_to, keep)
            f.write("".join(line + "\n" for line in lines).encode())
        for line in lines:
            self.apply(line)
        self.read_to = os.path.getsize(self.path(self.gen, "idx"))

    def items(self):
        """(key, place) of every live entry, in key order (base and log merged)."""
        pending = sorted(self.log, key=str.encode)
        i = 0
        for key, place in self.base.lines():
            while i < len(pending) and pending[i].encode() < key.encode():
                if (got := self.get(pending[i])) is not None:
                    yield pending[i], got
                i += 1
            if i < len(pending) and pending[i] == key:
                i += 1
                got = self.get(key)
                if got is not None:
                    yield key, got
            else:
                yield key, place
        for key in pending[i:]:
            if (got := self.get(key)) is not None:
                yield key, got

    def compact(self) -> int:
        """Fold the log into a new base (caller holds the lock and refreshed); live entries."""
        gen, n = self.gen + 1, 0
        tmp = self.root / f".{self.name}.g{gen}.sorted.{uuid.uuid4().hex[:8]}"
        with open(tmp, "w") as f:
            for key, (segment, offset, length) in self.items():
                f.write(f"{key}\t{segment}\t{offset}\t{length}\n")
                n += 1
        self.path(gen, "idx").touch()
        os.replace(tmp, self.path(gen, "sorted"))
        with open(self.path(self.gen, "idx"), "a") as f:
            f.write(f"{SEAL}\t{gen}\n")
        for old in range(max(0, self.gen - 1)):
            for kind in ("idx", "sorted"):
                self.path(old, kind).unlink(missing_ok=True)
        self._reload(gen)
        return n


class Index:
    """The 16 shards, each opened (its base mapped, its log read) when first needed."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.shards: dict[str, Shard] = {}
        self.local: dict[str, Place] = {}  # entries this handle indexed (a key twice in a batch)

    def shard(self, name: str) -> Shard:
        if name not in self.shards:
            self.shards[name] = Shard(self.root, name)
        return self.shards[name]

    def refresh(self, names) -> None:
        for name in set(names):
            self.shard(name).refresh()

    def get(self, key: str) -> Place | None:
        return self.shard(shard_of(key)).get(key)

    def locked(self, name: str):
        return shard_lock(self.root / f"{name}.lock")

    def append(self, name: str, lines: list[str]) -> None:
        """Append to shard `name` (caller holds its lock); fold its log once it is long."""
        shard = self.shard(name)
        shard.append(lines)
        if shard.log_lines > COMPACT_LINES:
            shard.compact()

    def compact(self) -> int:
        """Fold every shard's log into its base, shard by shard under its lock; live entries."""
        n = 0
        for i in range(SHARDS):
            name = f"{i:x}"
            with self.locked(name):
                self.shard(name).refresh()
                n += self.shard(name).compact()
        return n

    def keys(self):
        for i in range(SHARDS):
            shard = self.shard(f"{i:x}")
            shard.refresh()
            yield from (key for key, _ in shard.items())
